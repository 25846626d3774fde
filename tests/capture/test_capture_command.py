"""`tracekit capture -- COMMAND`: a user's own program under torch.profiler and under nsys, on the CPU."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers.paths import ROOT

from tracekit.activation_formula import activation_terms
from tracekit.sources import open_trace

pytest.importorskip("torch", reason="the example program needs torch (pip install torch)")
EXAMPLE = ROOT / "examples" / "train_mlp.py"
MARKED = ("step", "forward", "backward", "optimizer")  # the example's tracekit.annotate ranges


def capture(cli, tmp_path: Path, profiler: str, program: Path = EXAMPLE, name: str = "run"):
    return cli(
        "capture", "--profiler", profiler, "--out", tmp_path / "traces", "--name", name, "--", sys.executable, program
    )


def marked_ranges(folder: Path) -> dict[str, tuple[int, int]]:
    """Per range the example marks: (instances, depth)."""
    ranges = open_trace(folder).ranges
    mine = ranges.loc[ranges["name"].astype(str).isin(MARKED)]
    return {name: (len(group), int(group["depth"].max())) for name, group in mine.groupby(mine["name"].astype(str))}


def test_torch_profiler_capture_of_the_example(cli, tmp_path):
    result = capture(cli, tmp_path, "torch")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "traces" / "run"
    manifest = json.loads((folder / "run.json").read_text())
    assert manifest["status"] == "complete" and manifest["profiler"] == "torch" and manifest["name"] == "run"
    assert (folder / "trace.pt.trace.json.gz").is_file()
    # 8 batches, 3 of them warm-up: every marked range once per measured step, nested as written
    # inside the capture window (depth 0), as under nsys.
    assert marked_ranges(folder) == {"step": (5, 1), "forward": (5, 2), "backward": (5, 2), "optimizer": (5, 2)}
    rows = json.loads(cli("ranges", folder, "--format", "json").stdout)
    assert {row["Range"]: row["Instances"] for row in rows}["step"] == 5
    # What the program said of itself: the steps it marked, torch's version, its device.
    assert manifest["config"] == {"steps": 5, "warmup": 3}
    assert manifest["versions_program"]["torch"] and manifest["device"]["type"] == "cpu"
    assert not (folder / "facts.json").exists()  # merged into run.json
    assert cli("report", folder, "-o", tmp_path / "report").exit_code == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "None" not in report and "| steps (after warm-up) | 5 (after 3) |" in report
    assert "train_mlp.py" in report and "torch " in report
    kernels = cli("kernels", folder)
    assert kernels.exit_code == 1 and "has no CUDA kernels" in kernels.stderr  # a CPU run, said as such


def test_nsys_and_torch_see_the_same_ranges(cli, tmp_path, nsys):
    assert capture(cli, tmp_path, "torch", name="torch").exit_code == 0
    result = capture(cli, tmp_path, "nsys", name="nsys")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "traces" / "nsys"
    assert json.loads((folder / "run.json").read_text())["profiler"] == "nsys"
    assert (folder / "trace.sqlite").is_file()
    assert marked_ranges(folder) == marked_ranges(tmp_path / "traces" / "torch")
    for run in ("nsys", "torch"):  # every command reads both run folders (a CPU run: no kernel tables)
        for command in (["ranges"], ["ranges", "--tree"], ["report", "-o", str(tmp_path / f"report-{run}")]):
            result = cli(command[0], tmp_path / "traces" / run, *command[1:])
            assert result.exit_code == 0, (run, command, result.output)
        assert cli("export", tmp_path / "traces" / run, "--parquet", tmp_path / f"parquet-{run}").exit_code == 0


def test_a_program_without_steps_is_profiled_whole_and_said(cli, tmp_path):
    program = tmp_path / "plain.py"
    program.write_text(
        "import torch\nfrom tracekit import annotate\nwith annotate.range('work'):\n"
        "    torch.ones(8, 8) @ torch.ones(8, 8)\n"
    )
    result = capture(cli, tmp_path, "torch", program)
    assert result.exit_code == 0, result.output
    assert "profiled whole, warm-up included" in result.output
    ranges = open_trace(tmp_path / "traces" / "run").ranges
    assert "work" in set(ranges["name"].astype(str))


def test_errors_name_the_real_cause(cli, tmp_path):
    missing = cli("capture", "--out", tmp_path, "--", "no-such-program-here")
    assert missing.exit_code == 1 and "command not found: no-such-program-here" in missing.stderr
    failing = tmp_path / "fails.py"
    failing.write_text("import sys\nprint('loading data')\nsys.exit('bad config: lr must be positive')\n")
    result = capture(cli, tmp_path, "torch", failing)
    assert result.exit_code == 1
    assert "exited with status 1" in result.stderr and "bad config: lr must be positive" in result.stderr
    assert json.loads((tmp_path / "traces" / "run" / "run.json").read_text())["status"] == "failed"
    mixed = cli("capture", "tiny", "--", "--sample=cpu")
    assert mixed.exit_code == 2 and "--nsys-args" in mixed.stderr


def test_the_tiny_workload_gives_the_same_ranges_under_both_profilers(cli, tmp_path, nsys):
    """The built-in workload under nsys (its own capture) and under torch.profiler: every range nsys
    records, with the same count and depth (torch adds its own, like Optimizer.step#AdamW.step)."""
    common = ["tiny", "--ctx", "32", "--batch", "2", "--warmup", "2", "--steps", "3", "--out", tmp_path / "traces"]
    assert cli("capture", *common, "--name", "nsys").exit_code == 0
    result = cli("capture", *common, "--name", "torch", "--profiler", "torch")
    assert result.exit_code == 0, result.output

    def shape(folder: Path) -> dict[str, tuple[int, int]]:
        ranges = open_trace(folder).ranges
        mine = ranges.loc[ranges["domain"] == ""]
        return {name: (len(group), int(group["depth"].max())) for name, group in mine.groupby(mine["name"].astype(str))}

    under_nsys, under_torch = shape(tmp_path / "traces" / "nsys"), shape(tmp_path / "traces" / "torch")
    assert under_nsys["step"] == (3, 1) and under_nsys["attention"] == (6, 4)  # 3 measured steps, 2 layers
    assert {name: under_torch.get(name) for name in under_nsys} == under_nsys


def test_a_workload_under_torch_profiler_records_what_ran(cli, tmp_path):
    """`capture MODEL --profiler torch` keeps in run.json what the nsys capture keeps: the configuration,
    the device, torch's version and the harness's step timings (one sample per measured step)."""
    result = cli(
        "capture",
        "tiny",
        "--ctx",
        "16",
        "--batch",
        "1",
        "--warmup",
        "1",
        "--steps",
        "2",
        "--device",
        "cpu",
        "--profiler",
        "torch",
        "--out",
        tmp_path / "traces",
    )
    assert result.exit_code == 0, result.output
    folder = tmp_path / "traces" / "latest"
    manifest = json.loads((folder / "run.json").read_text())
    assert folder.resolve().name.startswith("tiny-ctx16-train-fp32-")  # named by what ran, as under nsys
    assert {key: manifest["config"][key] for key in ("model", "context", "batch", "warmup", "steps")} == {
        "model": "tiny",
        "context": 16,
        "batch": 1,
        "warmup": 1,
        "steps": 2,
    }
    assert manifest["device"]["type"] == "cpu" and manifest["versions_program"]["torch"]
    assert len(manifest["samples_ms"]["step"]) == 2 and manifest["timings_ms"]["step"]["mean"] > 0
    assert manifest["program"]["status"] == "ok" and not (folder / "result.json").exists()  # merged, then removed
    # operators' input shapes recorded (what efficiency counts FLOPs from): the LM head's matmul among them
    trace = open_trace(folder)
    shapes, ranges = trace.optional("op_shapes"), trace.ranges
    assert shapes is not None and len(shapes)
    named = ranges.set_index("range_id").loc[shapes["range_id"], "name"].astype(str).to_numpy()
    matmuls = shapes.loc[[name in ("cpu_op:aten::mm", "cpu_op:aten::addmm", "cpu_op:aten::linear") for name in named]]
    assert len(matmuls) and all(json.loads(str(dims))[0] for dims in matmuls["dims"])
    formula = sum(size for _, size, _ in activation_terms("tiny", 16, 1)) / 2**20  # what `memory --by role` shows
    assert f"--ctx 16 --batch 1`) gives {formula:,.1f} MiB saved" in manifest["activation_note"]


def test_a_missing_profiler_is_named(cli, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "torch" else real(name))
    result = cli("capture", "--profiler", "torch", "--out", tmp_path, "--", sys.executable, EXAMPLE)
    assert result.exit_code == 1 and "--profiler torch needs torch" in result.stderr
    result = cli(
        "capture",
        "--profiler",
        "nsys",
        "--nsys",
        tmp_path / "no-nsys",
        "--out",
        tmp_path,
        "--",
        sys.executable,
        EXAMPLE,
    )
    assert result.exit_code == 1 and "no such executable" in result.stderr


@pytest.mark.parametrize("profiler", ["torch", "nsys"])
def test_a_module_with_arguments_that_leaves_its_loop_early(cli, tmp_path, monkeypatch, profiler):
    if profiler == "nsys" and shutil.which("nsys") is None:
        pytest.skip("Nsight Systems (nsys) is not installed")
    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "main.py").write_text(
        "import sys\nimport torch\nfrom tracekit import annotate\nassert sys.argv[1:] == ['--lr', '3'], sys.argv\n"
        "for index in annotate.steps(range(10), warmup=2):\n    with annotate.range('work'):\n"
        "        torch.ones(8, 8) @ torch.ones(8, 8)\n    if index == 5:\n        break\n"
    )
    monkeypatch.chdir(tmp_path)  # `python -m` finds the module from the current folder
    result = cli(
        "capture",
        "--profiler",
        profiler,
        "--out",
        tmp_path / "traces",
        "--name",
        "run",
        "--",
        sys.executable,
        "-m",
        "trainer.main",
        "--lr",
        "3",
    )
    assert result.exit_code == 0, result.output
    assert "profiled whole" not in result.output  # its steps were found
    ranges = open_trace(tmp_path / "traces" / "run").ranges
    names = Counter(ranges.loc[ranges["domain"] == "", "name"].astype(str))
    assert names["work"] == 4 and names["step"] == 4  # items 2..5: the warm-up out, the window closed at break


def test_a_failed_program_names_its_run_and_its_own_output(cli, tmp_path, fake_nsys):
    """A failed run's run.json said "name": ".NAME.partial-XXXX"; for a program outside the launcher
    (not python) under nsys, the error quoted nsys's own lines instead of the program's."""
    script = tmp_path / "fails.sh"
    script.write_text("#!/bin/sh\necho 'loading data'\necho 'disk quota exceeded' >&2\nexit 3\n")
    script.chmod(0o755)
    out = tmp_path / "traces"
    result = cli("capture", "--profiler", "nsys", "--nsys", fake_nsys, "--out", out, "--name", "bad", "--", str(script))
    assert result.exit_code == 1 and "exited with status 3" in result.output
    assert "disk quota exceeded" in result.output and "Generating" not in result.output
    assert json.loads((out / "bad" / "run.json").read_text())["name"] == "bad"
    torch_run = cli("capture", "--profiler", "torch", "--out", out, "--name", "bad2", "--", str(script))
    assert torch_run.exit_code == 1 and json.loads((out / "bad2" / "run.json").read_text())["name"] == "bad2"


@pytest.mark.parametrize("name", ["", " "])
def test_a_blank_name_is_refused(cli, tmp_path, name):
    """--name '' was ignored (a default name) and --name ' ' made a folder named " "."""
    result = cli("capture", "--profiler", "torch", "--out", tmp_path, "--name", name, "--", sys.executable, EXAMPLE)
    assert result.exit_code == 1 and "run name" in result.output and not any(tmp_path.iterdir())
