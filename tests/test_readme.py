"""README.md tried literally, as a newcomer does after ``make demo``: the setup lines it documents (the
``source .venv/bin/activate`` and ``cd`` of its "After make demo" block), then each ``$ tracekit ...``
line of its tour, run by bash in a fresh environment from the project's folder; each exits 0 and prints
the lines the README shows (``...`` marks what it leaves out). Its Python section runs from the same
place. Skipped where ``make demo`` has not made ``.venv`` or ``../shared`` is absent."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers.paths import ROOT, SHARED

README = ROOT / "README.md"


def section(title: str) -> str:
    """The text of README's ``## title`` section, up to the next ``## `` heading."""
    text = README.read_text()
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found is not None, f"README.md has no section {title!r}"
    return found.group(1)


def fenced(text: str, language: str = "") -> list[str]:
    """The fenced blocks of ``text`` whose opening fence names ``language`` ("": none)."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


def setup_lines() -> list[str]:
    """The shell lines README says to run before the tour (activate .venv, go where the data is)."""
    (block,) = fenced(section("After `make demo`"), "bash")
    return [line for line in block.splitlines() if line.strip()]


def tour() -> list[tuple[str, list[str]]]:
    """Each ``$ tracekit ...`` command of the tour and the output lines shown under it."""
    commands = []
    for block in fenced(section("A tour in six commands")):
        lines = block.splitlines()
        assert lines and lines[0].startswith("$ tracekit "), block
        commands.append((lines[0][2:], lines[1:]))
    return commands


# What the README leaves out of a line: "..." (rows, columns, the rest of a line), and under a header's
# "..." the "---" of that left-out column.
ELISION = re.compile(r"\s*(?:\.\.\.|(?<= )---(?= ))\s*")


def shows(shown: str, printed: str) -> bool:
    """Whether README's line ``shown`` is ``printed`` with the parts it elides left out: its pieces in
    order, the first at the start unless the line begins with an elision. A line of "..." alone shows
    any line."""
    pieces = ELISION.split(shown)
    if len(pieces) == 1:
        return shown == printed
    at = 0
    for index, piece in enumerate(pieces):
        if not piece:
            continue
        found = printed.find(piece, at)
        if found < 0 or (index == 0 and found != 0):
            return False
        at = found + len(piece)
    return True


def fresh_bash(script: str, home: Path) -> subprocess.CompletedProcess:
    """``script`` run by bash from the project's folder in an environment of nothing but a PATH, a HOME
    and a locale: no virtualenv active, no PYTHONPATH of the test run, no TRACEKIT_* settings. One
    addition: PYTHONPATH names this checkout, so that .venv's editable install (made in whichever
    checkout ran `make demo`) runs this checkout's code."""
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-e", "-c", script],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def after_demo(tmp_path) -> Path:
    """A fresh HOME; skips where ``make demo`` has not set up .venv here, or ../shared is absent."""
    if not (ROOT / ".venv" / "bin" / "activate").is_file():
        pytest.skip(f"no {ROOT / '.venv'}: `make demo` has not been run in this checkout")
    if not (SHARED / "traces").is_dir() or not (SHARED / "memory").is_dir():
        pytest.skip(f"the tour reads the real files in {SHARED}, which is absent")
    return tmp_path


def test_the_readme_documents_a_place_to_run_the_tour_from():
    """No test environment needed: the setup is activate-then-cd, and every tour command is tracekit's."""
    assert setup_lines() == ["source .venv/bin/activate", "cd ../shared/traces"]
    commands = [command for command, _ in tour()]
    assert len(commands) == 6 and all(command.startswith("tracekit ") for command in commands)


@pytest.mark.slow
@pytest.mark.shared
def test_the_tour_runs_as_written(after_demo):
    setup = "\n".join(setup_lines())
    for command, shown in tour():
        ran = fresh_bash(f"{setup}\n{command}", after_demo)
        assert ran.returncode == 0, (command, ran.stderr[-2000:])
        printed = [line.rstrip() for line in ran.stdout.splitlines()]
        position = 0  # every line the README shows is printed, in the README's order
        for line in (line.rstrip() for line in shown if line.strip()):
            found = next((index for index in range(position, len(printed)) if shows(line, printed[index])), None)
            assert found is not None, (command, line, ran.stdout[:3000])
            position = found + 1


# A line of the Python section whose comment shows its value: "expr  # 75714553: ..." (an integer) or
# "expr  # forward 76.024709...: ..." (the entry ``forward`` of a Series, its digits as shown).
SHOWN_VALUE = re.compile(
    r"^(?P<expr>[^#=]+?)\s+#\s+(?:(?P<key>[A-Za-z_]\w*) )?(?P<value>-?\d+(?:\.\d+)?)(?P<more>\.\.\.)?:"
)


def checked(code: str) -> str:
    """The Python section with an assertion after each line whose comment shows its value."""
    lines = []
    for line in code.splitlines():
        lines.append(line)
        shown = SHOWN_VALUE.match(line)
        if not shown:
            continue
        value = f"({shown['expr']})" + (f"[{shown['key']!r}]" if shown["key"] else "")
        if shown["more"]:  # its leading digits, unrounded
            lines.append(f"assert repr(float({value})).startswith({shown['value']!r}), {value}")
        else:
            lines.append(f"assert {value} == {shown['value']}, {value}")
    return "\n".join(lines) + "\n"


def test_the_readme_python_values_are_checked():
    """Each commented value of the section becomes an assertion (a wrong number in README fails)."""
    (code,) = fenced(section("In Python"), "python")
    assert checked(code).count("assert ") >= 2


@pytest.mark.slow
@pytest.mark.shared
def test_the_python_section_runs_from_the_same_place(after_demo):
    (code,) = fenced(section("In Python"), "python")
    script = after_demo / "readme.py"
    script.write_text(checked(code))
    ran = fresh_bash("\n".join([*setup_lines(), f"python {script}"]), after_demo)
    assert ran.returncode == 0, ran.stderr[-2000:]


def test_the_run_folder_is_described_with_every_file_an_nsys_capture_writes():
    """README's "After make demo" and traces/README.md name each file of ``make demo``'s run folder
    (program.log was named by neither, nsys.log only by the README)."""
    from tracekit import runs

    written = [runs.REPORT, runs.EXPORT, runs.MANIFEST, runs.LOG, runs.PROGRAM_LOG]
    for text in (section("After `make demo`"), (ROOT / "traces" / "README.md").read_text()):
        assert [name for name in written if f"`{name}`" not in text] == []
