"""A command is one module: a toy command declared in one new module of another package (installed as an
entry point of ``tracekit.commands``) is a command of ``tracekit --help``, the API function ``toy``,
a many-input command on the process pool, and a section of ``tracekit report``, with no file of
tracekit changed. The checks run in fresh interpreters, which find the package on their path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import ROOT

TOY = '''
"""``toy``: GPU ops per device, a command of another package."""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model.command import Command, Picture
from tracekit.model.options import Options, whole


@dataclass(frozen=True)
class ToyOptions(Options):
    top: int = whole(5, "devices listed")


def run(trace, options):
    import pandas as pd

    from tracekit.model.result import Chart, Result, Table

    counts = trace.gpu_ops.groupby("device").size()
    frame = pd.DataFrame({"Device": counts.index, "Ops": counts.to_numpy()}).head(options.top)
    chart = Chart(f"{__name__}:bars", "GPU ops per device", {"frame": frame})
    return Result([Table("toy", frame, "GPU ops per device")], ["counted by the toy"], {"toy": chart})


def bars(title, data):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(4, 3))
    axes = figure.subplots()
    axes.bar(data["frame"]["Device"].astype(str), data["frame"]["Ops"])
    axes.set_title(title)
    return figure


def part(trace, part, options, limit):
    part.tables = run(trace, options).tables
    part.pieces = {"ops": len(trace.gpu_ops)}
    return part


class Merger:
    def __init__(self, options, limit):
        self.total = 0

    def add(self, index, pieces):
        self.total += pieces["ops"]

    def tables(self, labels, column):
        import pandas as pd

        from tracekit.model.result import Table

        return [Table("toy", pd.DataFrame({"Ops": [self.total]}), "GPU ops")], []


COMMAND = Command(
    "toy",
    "GPU ops per device of TRACES, at most {top} devices.",
    ToyOptions,
    "traces",
    run=f"{__name__}:run",
    part=f"{__name__}:part",
    merger=f"{__name__}:Merger",
    title="toy",
    picture=Picture("picture", "also draw the bars (PNG)", ("toy",), "nothing to draw"),
    report="GPU ops per device",
    doc="GPU ops per device (table \\"toy\\").",
    examples=('tracekit.toy("trace.sqlite")["toy"]',),
)
'''

CHECKS = """
import inspect, json, sys
import tracekit
a, b = sys.argv[1:3]
one = tracekit.toy(a, top=1)
many = tracekit.toy([a, b], workers=2)
signature = inspect.signature(tracekit.toy)
print(json.dumps({
    "one": one["toy"].to_dict("list"),
    "notes": one.notes,
    "many": many["toy"].to_dict("list"),
    "per_input": many["toy_by_run"].to_dict("list"),
    "keywords": {name: p.default for name, p in signature.parameters.items() if p.kind == p.KEYWORD_ONLY},
    "doc": tracekit.toy.__doc__,
}))
"""


def exports(folder: Path) -> tuple[Path, Path]:
    """a: three GPU ops on device 0 and one on device 1; b: two on device 0."""
    a, b = ExportBuilder("2026.2"), ExportBuilder("2026.2")
    for start in (100, 300, 500):
        a.kernel(start, start + 100, "gemm", launch_at=start - 50)
    a.kernel(200, 400, "gemm", device=1, launch_at=150)
    for start in (100, 300):
        b.kernel(start, start + 100, "gemm", launch_at=start - 50)
    return a.write(folder / "a.sqlite"), b.write(folder / "b.sqlite")


def install_toy(site: Path) -> None:
    """The package ``toy_commands`` and its distribution's entry point, as pip would leave them."""
    (site / "toy_commands").mkdir(parents=True)
    (site / "toy_commands" / "__init__.py").write_text("")
    (site / "toy_commands" / "toy_command.py").write_text(textwrap.dedent(TOY))
    info = site / "toy_commands-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-commands\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tracekit.commands]\ntoy = toy_commands.toy_command\n")


def tracekit_files() -> dict[str, int]:
    return {str(path): path.stat().st_mtime_ns for path in (ROOT / "tracekit").rglob("*.py")}


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toy")
    install_toy(folder / "site")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder / "site"), str(ROOT)])}

    def run(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, *arguments], capture_output=True, text=True, cwd=folder, env=environment, timeout=300
        )

    return folder, exports(folder), run


def test_a_new_module_is_a_command_everywhere(toy):
    before = tracekit_files()
    folder, (a, b), run = toy

    listed = run("-m", "tracekit.cli", "--help")
    assert listed.returncode == 0, listed.stderr
    assert "toy" in listed.stdout and "GPU ops per device of TRACES, at most --top devices." in listed.stdout

    printed = run("-m", "tracekit.cli", "toy", str(a), "--format", "csv")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines() == ["Device,Ops", "0,3", "1,1"]
    drawn = run("-m", "tracekit.cli", "toy", str(a), "--picture", str(folder / "toy.png"))
    assert drawn.returncode == 0, drawn.stderr
    assert (folder / "toy.png").read_bytes().startswith(b"\x89PNG")
    refused = run("-m", "tracekit.cli", "toy", str(a), "--top", "0")
    assert refused.returncode == 2 and "--top" in refused.stderr and "Traceback" not in refused.stderr

    checked = run("-c", CHECKS, str(a), str(b))
    assert checked.returncode == 0, checked.stderr
    found = json.loads(checked.stdout)
    assert found["one"] == {"Device": [0], "Ops": [3]} and found["notes"] == ["counted by the toy"]
    assert found["many"] == {"Ops": [6]}  # 4 + 2, folded from parts read on two pool workers
    assert found["per_input"] == {"Run": ["a", "a", "b"], "Device": [0, 1, 0], "Ops": [3, 1, 2]}
    assert found["keywords"] == {
        "top": 5,
        "workers": None,
        "use_dask": False,
        "scheduler": None,
        "strict": False,
        "exact_median_limit": 10_000,
    }
    assert (
        found["doc"].startswith('GPU ops per device (table "toy").')
        and '>>> tracekit.toy("trace.sqlite")' in found["doc"]
    )

    reported = run("-m", "tracekit.cli", "report", str(a), "-o", str(folder / "report"))
    assert reported.returncode == 0, reported.stderr
    text = (folder / "report" / "report.md").read_text()
    assert "### GPU ops per device" in text and f"tracekit toy {a}" in text
    section = text.split("### GPU ops per device", 1)[1]
    assert "| 0 | 3 |" in section.replace("  ", " ") and "counted by the toy" in section
    assert "toy_toy.png" in section and (folder / "report" / "toy_toy.png").is_file()

    assert tracekit_files() == before


def test_a_command_named_twice_is_refused(toy):
    """A package declaring a command tracekit already has: one line naming the entry point."""
    folder, (a, _), run = toy
    site = folder / "clash"
    (site / "clash_commands").mkdir(parents=True)
    (site / "clash_commands" / "__init__.py").write_text("from tracekit.analysis.waits.idle_command import COMMAND\n")
    info = site / "clash_commands-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-commands\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tracekit.commands]\nidle = clash_commands:COMMAND\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    ran = subprocess.run(
        [sys.executable, "-m", "tracekit.cli", "--help"],
        capture_output=True,
        text=True,
        env=environment,
        cwd=folder,
        timeout=120,
    )
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert "entry point clash_commands:COMMAND: a command 'idle' is already declared" in ran.stderr
