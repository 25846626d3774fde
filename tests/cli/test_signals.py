"""SIGTERM is Ctrl-C for every command that writes: the file or folder being written is removed, the
previous output is kept byte for byte, the command exits 1 with one line. SIGTERM used to end the
process at once: `timeline -o big.json` left a hidden `.big.json.*.partial` as large as the output, an
interrupted `report` a folder mixing its new report.md and pictures with the previous report.html.

Each command runs in a child process (the CLI installs its handlers in the main thread of the program);
a test-only wrapper around one of the writing steps sends the process SIGTERM once that step has run
the n-th time, so the signal arrives mid-write at a known point. One test interrupts a real long write
(a timeline of 60k kernels) with no wrapper at all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.nsys_builder import ExportBuilder

from tracekit.files import replace_folder
from tracekit.report.document import not_a_report

MESSAGE = "Error: interrupted (SIGTERM): nothing half-written is left, and earlier output is as it was"

# argv: the step to wrap ("module:attribute.path"), after how many runs of it to send SIGTERM, tracekit's arguments
INTERRUPTING = textwrap.dedent("""
    import importlib, os, signal, sys, time
    where, nth = sys.argv[1], int(sys.argv[2])
    module, _, attributes = where.partition(":")
    owner = importlib.import_module(module)
    *path, name = attributes.split(".")
    for part in path:
        owner = getattr(owner, part)
    original, runs = getattr(owner, name), []
    def interrupting(*args, **kwargs):
        result = original(*args, **kwargs)
        runs.append(1)
        if len(runs) == nth:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(60)  # the handler raises here; without one, the process has ended
        return result
    setattr(owner, name, interrupting)
    sys.argv = ["tracekit", *sys.argv[3:]]
    from tracekit.cli import run
    run()
""")


def trace(path: Path, kernels: int = 3, name: str = "gemm") -> Path:
    b = ExportBuilder("2026.2")
    b.push_pop(0, 10_000 * kernels, "forward")
    for index in range(kernels):
        b.kernel(
            10_000 * index + 100,
            10_000 * index + 4_000,
            f"void {name}_{index % 7}<float>(float*)",
            launch_at=10_000 * index,
            stream=7 + index % 3,
        )
    return b.write(path)


def interrupted(step: str, nth: int, *args: object, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", INTERRUPTING, step, str(nth), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TRACEKIT_CACHE": "0"},
    )


def contents(folder: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``folder`` (hidden ones too), with the files' bytes."""
    return {
        str(path.relative_to(folder)): (path.read_bytes() if path.is_file() else None)
        for path in sorted(folder.rglob("*"))
    }


WRITES = {
    # the cases: a timeline cut after its first input's events (the file's end not written yet)
    "timeline json": (["timeline", "{new}", "-o", "out.json"], ["timeline", "{old}", "-o", "out.json"],
                      "tracekit.trace_events.writer:_write_input", 1),
    "timeline gz": (["timeline", "{new}", "-o", "out.json.gz"], ["timeline", "{old}", "-o", "out.json.gz"],
                    "tracekit.trace_events.writer:_write_input", 1),
    # report.md and the pictures written, report.html not yet: the folder was a mix of two reports
    "report html": (["report", "{new}", "-o", "rep", "--html"], ["report", "{old}", "-o", "rep", "--html"],
                    "pathlib:Path.write_text", 1),
    "report picture": (["report", "{new}", "-o", "rep"], ["report", "{old}", "-o", "rep"],
                       "matplotlib.figure:Figure.savefig", 1),
    "report first": (["report", "{new}", "-o", "rep"], None, "matplotlib.figure:Figure.savefig", 1),
    # gpu_ops.parquet written, launches.parquet being written
    "export": (["export", "{new}", "--parquet", "tables"], ["export", "{old}", "--parquet", "tables"],
               "pyarrow.parquet:ParquetWriter.write_table", 2),
    # -o tables: one file, or a file per table (idle: three) all kept or all replaced
    "json": (["kernels", "{new}", "-o", "k.json"], ["kernels", "{old}", "-o", "k.json"], "pathlib:Path.write_text", 1),
    "md": (["kernels", "{new}", "-o", "k.md"], ["kernels", "{old}", "-o", "k.md"], "pathlib:Path.write_text", 1),
    "parquet": (["kernels", "{new}", "-o", "k.parquet"], ["kernels", "{old}", "-o", "k.parquet"],
                "pandas:DataFrame.to_parquet", 1),
    "csv per table": (["idle", "{new}", "-o", "i.csv"], ["idle", "{old}", "-o", "i.csv"], "pathlib:Path.write_text", 2),
}  # fmt: skip


@pytest.mark.parametrize("case", WRITES, ids=str)
def test_sigterm_mid_write_keeps_the_previous_output_and_leaves_nothing(cli, tmp_path, monkeypatch, case):
    args, previous, step, nth = WRITES[case]
    old, new = trace(tmp_path / "old.sqlite", name="old"), trace(tmp_path / "new.sqlite", kernels=5, name="new")
    fill = {"{old}": old.name, "{new}": new.name}
    if previous is not None:  # the previous output, written in this process (only the interrupted run needs one)
        with monkeypatch.context() as here:
            here.chdir(tmp_path)
            here.setenv("TRACEKIT_CACHE", "0")
            assert cli(*[fill.get(arg, arg) for arg in previous]).exit_code == 0
    before = contents(tmp_path)
    result = interrupted(step, nth, *[fill.get(arg, arg) for arg in args], cwd=tmp_path)
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert result.stderr.strip().splitlines()[-1] == MESSAGE and "Traceback" not in result.stderr
    assert contents(tmp_path) == before  # no .partial file or folder, the previous output byte-identical


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory) -> Path:
    return trace(tmp_path_factory.mktemp("long") / "long.sqlite", kernels=60_000)


def long_timeline(long_trace: Path, folder: Path, hangup: signal.Handlers = signal.SIG_DFL) -> subprocess.Popen:
    """``timeline`` of the long trace into folder/big.json, started with SIGHUP's disposition ``hangup``
    (SIG_IGN: as under nohup) and SIGINT's the default, whatever this test process has; returned once the
    hidden .partial file exists."""

    def dispositions() -> None:
        signal.signal(signal.SIGHUP, hangup)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    process = subprocess.Popen(
        [sys.executable, "-m", "tracekit.cli", "timeline", str(long_trace), "-o", "big.json"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TRACEKIT_CACHE": "0"},
        preexec_fn=dispositions,
    )
    deadline = time.monotonic() + 120
    while not list(folder.glob(".big.json.*.partial")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert process.poll() is None, "the timeline was written before it could be interrupted"
    return process


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda sig: sig.name)
def test_a_long_timeline_interrupted_while_writing(long_trace, tmp_path, sig):
    """The issue's case itself, no wrapper: the signal arrives once the hidden .partial file exists. SIGHUP
    (the terminal closed, an ssh session dropped) left the .partial file behind as SIGTERM once did."""
    (tmp_path / "big.json").write_text("the previous timeline\n")
    before = contents(tmp_path)
    process = long_timeline(long_trace, tmp_path)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    name = "Ctrl-C" if sig == signal.SIGINT else sig.name
    assert process.returncode == 1 and stderr.strip().splitlines()[-1] == MESSAGE.replace("SIGTERM", name)
    assert contents(tmp_path) == before


def test_a_hangup_ignored_from_the_start_stays_ignored(long_trace, tmp_path):
    """Under nohup (SIGHUP ignored when the program starts) a hangup does not stop the command."""
    process = long_timeline(long_trace, tmp_path, hangup=signal.SIG_IGN)
    process.send_signal(signal.SIGHUP)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert json.loads((tmp_path / "big.json").read_text())["traceEvents"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["big.json"]


def test_a_report_folder_holding_other_files_is_refused_untouched(cli, tmp_path):
    """Replacing a folder whole deletes the previous one: only a previous report of tracekit's may go."""
    source = trace(tmp_path / "t.sqlite")
    cases = {
        "notes.txt": "holds files that are not a tracekit report's (notes.txt)",
        "report.md": "holds files that are not a tracekit report's (report.md)",  # someone's own report.md
        "figure.png": "holds files that are not a tracekit report's (figure.png)",  # pictures, no report
    }
    for name, message in cases.items():
        folder = tmp_path / f"folder-{name}"
        folder.mkdir()
        (folder / name).write_text("mine\n")
        result = cli("report", source, "-o", folder)
        assert result.exit_code == 1 and message in result.output, result.output
        assert [path.name for path in folder.iterdir()] == [name] and (folder / name).read_text() == "mine\n"
        assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []
    folder = tmp_path / "folder-sub"
    (folder / "report.html").mkdir(parents=True)  # a report's name on a folder is not a report's file
    assert "(report.html)" in cli("report", source, "-o", folder).output and (folder / "report.html").is_dir()


def test_a_previous_report_is_replaced_whole(cli, tmp_path):
    """A report without --html over one with it: the old report.html and pictures go with the old report."""
    folder = tmp_path / "rep"
    assert cli("report", trace(tmp_path / "a.sqlite"), "-o", folder, "--html").exit_code == 0
    (folder / "old-only.png").write_bytes((folder / "categories.png").read_bytes())  # a picture it no longer draws
    assert cli("report", trace(tmp_path / "b.sqlite", kernels=4), "-o", folder).exit_code == 0
    assert sorted(path.name for path in folder.iterdir()) == ["categories.png", "report.md"]
    assert "b.sqlite" in (folder / "report.md").read_text()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.sqlite", "b.sqlite", "rep"]  # nothing hidden left


def test_replace_folder_keeps_the_previous_folder_when_writing_fails(tmp_path):
    folder = tmp_path / "rep"
    folder.mkdir(mode=0o750)
    (folder / "report.md").write_text("# tracekit report: before\n")

    def fail(staging: Path) -> None:
        (staging / "report.md").write_text("# tracekit report: after\n")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        replace_folder(folder, fail, not_a_report, "a tracekit report's")
    assert contents(tmp_path) == {"rep": None, "rep/report.md": b"# tracekit report: before\n"}
    replace_folder(
        folder,
        lambda staging: (staging / "report.md").write_text("# tracekit report: after\n"),
        not_a_report,
        "a tracekit report's",
    )
    assert contents(tmp_path) == {"rep": None, "rep/report.md": b"# tracekit report: after\n"}
    assert folder.stat().st_mode & 0o777 == 0o750  # the folder's mode is kept


def test_a_signal_while_a_folder_is_swapped_waits_for_the_swap():
    """The old folder moved aside, the new one not yet in place: a signal there would leave neither."""
    from tracekit.signals import Interrupted, raising_interrupted, signals_held

    steps = []
    with pytest.raises(Interrupted, match="SIGTERM"), raising_interrupted():
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # a handler would have run by now
            steps.append("swapped")
        steps.append("not reached")
    assert steps == ["swapped"]
