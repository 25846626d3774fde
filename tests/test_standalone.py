"""The library stands alone: ``import tracekit`` and every analysis command run with torch and ``workloads``
absent (both blocked in a fresh interpreter), on real files from ../shared and on a built run folder; the
commands that run torch (``bench``, capturing a built-in model) say in one line which extra to install."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import ROOT, SHARED
from helpers.snapshot_builder import two_snapshots
from helpers.steps import build_step

from tracekit.activation_formula import activation_terms

KINETO = SHARED / "kineto" / "h100_qwen0.5b_inference.json.gz"  # every command exits 0 on it
EXPORT = SHARED / "traces" / "cuda_matmul_nsys2022.4.sqlite"
SNAPSHOT = SHARED / "memory" / "cs336_medium_ctx512_forward.pickle"
NOT_ANALYSES = {"bench", "capture"}  # they run torch: tested below

# A fresh interpreter where importing torch or workloads fails (as where neither is installed): runs each
# command line given (JSON on argv) through click, in this process, and prints what each ended with.
DRIVER = """
import json, sys
sys.modules["torch"] = None
sys.modules["workloads"] = None
import tracekit
from click.testing import CliRunner
from tracekit.cli import main

results = []
for argv in json.loads(sys.argv[1]):
    result = CliRunner().invoke(main, argv)
    failure = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback
        failure = "".join(traceback.format_exception(result.exception))
    results.append({"argv": argv, "exit": result.exit_code, "output": result.output, "failure": failure})
print(json.dumps({"results": results, "commands": sorted(main.list_commands(None))}))
"""


def run_blocked(argvs: list[list[str]]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(argvs)], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def run_folder(tmp_path) -> Path:
    """A run of the tiny model as capture writes one before it wrote the activation note: run.json's config
    (its context under ``context``), an export and a memory snapshot."""
    run = tmp_path / "tiny-run"
    run.mkdir()
    builder = ExportBuilder("2026.2")
    build_step(builder, 0)
    builder.write(run / "trace.sqlite")
    small, _ = two_snapshots(tmp_path)
    small.rename(run / "memory.pickle")
    config = {"model": "tiny", "context": 64, "batch": 4, "mode": "train", "dtype": "fp32", "compile": False}
    (run / "run.json").write_text(json.dumps({"status": "complete", "config": config}))
    return run


def test_every_analysis_command_runs_without_torch_or_workloads(run_folder, tmp_path):
    if not (KINETO.is_file() and EXPORT.is_file() and SNAPSHOT.is_file()):
        pytest.skip(f"real files not available under {SHARED}")
    trace, export, out = str(KINETO), str(EXPORT), tmp_path / "out"
    argvs = [
        [name, trace]
        for name in (
            "advise",
            "bandwidth",
            "breakdown",
            "critical-path",
            "efficiency",
            "idle",
            "kernels",
            "launches",
            "ops",
            "overlap",
            "queues",
            "ranges",
            "sequences",
            "steps",
            "syncs",
        )
    ]
    argvs += [
        ["kernels", export],
        ["ranks", trace, export],
        ["collectives", str(SHARED / "kineto" / "a100_ddp_rank0of2_nccl.json.gz")],
        ["compare", trace, str(run_folder)],
        ["diff", export, str(run_folder)],
        ["memory", str(SNAPSHOT)],
        ["memory", str(SNAPSHOT), "--by", "role"],
        ["memory", str(run_folder), "--by", "role"],
        ["timeline", trace, "-o", str(tmp_path / "timeline.json")],
        ["timeline", trace, "-o", str(tmp_path / "timeline.pftrace")],
        ["advise", str(SNAPSHOT)],
        ["mcp", "--help"],
        ["export", export, "--parquet", str(out / "parquet")],
        ["report", str(run_folder), "-o", str(out / "report")],
    ]
    seen = run_blocked(argvs)
    assert set(seen["commands"]) - NOT_ANALYSES == {argv[0] for argv in argvs}  # every command, none left out
    for result in seen["results"]:
        assert result["failure"] is None, result["failure"]
        assert result["exit"] == 0, (result["argv"], result["output"])
        assert not any(sign in result["output"] for sign in ("Traceback", "halted; None in sys.modules", "No module"))
    role = next(
        result for result in seen["results"] if result["argv"][1] == str(run_folder) and "--by" in result["argv"]
    )
    formula = sum(size for _, size, _ in activation_terms("tiny", 64, 4)) / 2**20
    assert f"gives {formula:,.1f} MiB saved for backward" in role["output"]  # from run.json's config, no torch


def test_the_commands_that_run_torch_name_the_extra():
    seen = run_blocked([["bench", "tiny"], ["bench", "attention", "--ctx", "64"], ["capture", "tiny"]])
    for result in seen["results"]:
        assert result["failure"] is None, result["failure"]
        assert result["exit"] == 1
        lines = result["output"].strip().splitlines()
        assert len(lines) == 1 and lines[0].endswith("pip install 'tracekit[workloads]'"), result["output"]


def test_import_tracekit_and_the_api_without_torch():
    if not EXPORT.is_file():
        pytest.skip(f"real files not available under {SHARED}")
    probe = (
        "import sys; sys.modules['torch'] = None; sys.modules['workloads'] = None; import tracekit; "
        f"print(tracekit.kernels({str(EXPORT)!r})['kernels']['Instances'].sum())"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "128"  # the matmul kernel's instances
