"""Every trace and snapshot in ../shared (and tracekit's own H100 capture) through every command and
`report`: no traceback, a failure is one error line, no "None" printed, no table row that carries no
information (an empty category, the sum/mean/any rows of one GPU) and no note said twice."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from helpers.parsed_once import kineto_decoded_once
from helpers.paths import ROOT, SHARED

TRACES = sorted((SHARED / "traces").glob("*.sqlite")) + sorted((SHARED / "kineto").glob("*.json.gz"))
TRACES += sorted((SHARED / "kineto" / "v100_dlrm_8ranks").glob("rank[01].pt.trace.json"))
SNAPSHOTS = sorted((SHARED / "memory").glob("*.pickle"))
GPU_DATA = ROOT / "tests" / "data" / "gpu"
TRACE_COMMANDS = [
    ["kernels"],
    ["kernels", "--by", "category"],
    ["kernels", "--by", "type", "--drop-last-step"],
    ["ranges"],
    ["breakdown"],
    ["steps"],
    ["idle"],
    ["idle", "--per-stream", "--drop-last-step"],
    ["launches"],
    ["syncs"],
    ["overlap", "--per-step"],
    ["critical-path"],
    ["queues"],
    ["ops"],
    ["bandwidth"],
    ["ranks"],
    ["advise"],
    ["sequences"],
    ["compare"],
    ["efficiency"],
    ["efficiency", "--by", "op"],
    ["efficiency", "--by", "step"],
    ["collectives"],
]
# "None" printed where a value is missing: a table or markdown cell, a value after ": " or in parentheses.
# (Names may hold "None" inside them, as Python dict reprs in emit_nvtx ranges do: those are not flagged.)
NONE = re.compile(r"(?:(?<=^)|(?<=  )|(?<=\| )|(?<=: )|(?<=\())None(?=\s|$|\||\)|,)", re.MULTILINE)


@pytest.fixture(scope="module", autouse=True)
def decoded_once():
    """Each torch.profiler file decoded once for all its commands (each command still opens and builds its
    tables itself): the decode is most of a command's time on these files."""
    with kineto_decoded_once():
        yield


def test_every_command_over_traces_is_swept():
    """Each registry command that reads traces runs on every real trace here (diff, a pair, runs in
    tests/cli/test_degenerate_inputs.py; memory reads snapshots, below)."""
    from tracekit.commands.registry import COMMANDS

    swept = {command[0] for command in TRACE_COMMANDS}
    assert {name for name, spec in COMMANDS.items() if spec.inputs not in ("pair", "snapshots")} == swept


def check(result, command) -> None:
    """The rules every command's output keeps (see the module docstring)."""
    output = result.stdout + result.stderr
    assert "Traceback" not in output, (command, output[-2000:])
    if result.exit_code:
        errors = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code in (1, 2) and len(errors) == 1 and errors[0].startswith("Error:"), (command, output)
        return
    if result.stdout.lstrip().startswith(("[", "{")):  # JSON: a missing value is null, never the text "None"
        assert '"None"' not in result.stdout, command
        output = result.stderr
    assert not NONE.search(output), (command, [line for line in output.splitlines() if NONE.search(line)][:3])
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == len(set(notes)), (command, notes)


def json_tables(result) -> dict[str, list[dict]]:
    data = json.loads(result.stdout)
    return data if isinstance(data, dict) else {"table": data}


@pytest.mark.skipif(not TRACES, reason=f"real traces not available: {SHARED}")
@pytest.mark.parametrize("path", TRACES, ids=lambda path: path.name)
def test_every_command_on_every_real_trace(cli, path, tmp_path):
    for command in TRACE_COMMANDS:
        check(cli(*command, path), command)
        # the tables' JSON where a rule reads it (a "None" in a cell shows in the text above already)
        if command[1:3] != ["--by", "category"] and command[0] != "breakdown":
            continue
        result = cli(*command, path, "--format", "json")
        check(result, command)
        if result.exit_code:
            continue
        for name, rows in json_tables(result).items():
            if command[1:3] == ["--by", "category"]:
                assert all(row["Instances"] > 0 for row in rows), (command, name)  # no empty category
            gpus = {row.get("GPU") for row in rows if str(row.get("GPU", "")).startswith("cuda:")}
            if len(gpus) == 1 and name in ("gpus", "table") and command[0] == "breakdown":
                assert not {row["GPU"] for row in rows} & {"sum of GPUs", "mean per GPU", "any GPU busy"}
    result = cli("report", path, "-o", tmp_path / "report")
    check(result, ["report"])
    if result.exit_code == 0:
        assert not NONE.search((tmp_path / "report" / "report.md").read_text())


@pytest.mark.skipif(not SNAPSHOTS, reason=f"real snapshots not available: {SHARED}")
@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda path: path.name)
def test_every_memory_view_of_every_real_snapshot(cli, path):
    for view in ("allocation", "frame", "role"):
        result = cli("memory", path, "--by", view, "--top", "5")
        check(result, ["memory", view])
        assert result.exit_code == 0
        if view == "role":
            roles = json.loads(cli("memory", path, "--by", "role", "--format", "json").stdout)["roles"]
            assert all(row["Size (MiB)"] > 0 for row in roles)  # no role without bytes


def test_the_h100_run_folder_reports_without_none(cli, tmp_path):
    """tracekit's own capture (a run folder with run.json, trace and snapshot): every command and the report."""
    folder = tmp_path / "small"
    folder.mkdir()
    shutil.copyfile(GPU_DATA / "h100_small_ctx256_train.pt.trace.json.gz", folder / "trace.pt.trace.json.gz")
    shutil.copyfile(GPU_DATA / "h100_small_ctx256_train_run.json", folder / "run.json")
    with gzip.open(GPU_DATA / "h100_small_ctx256_train_memory.pickle.gz") as packed:
        (folder / "memory.pickle").write_bytes(packed.read())
    for command in TRACE_COMMANDS:
        result = cli(*command, folder)
        check(result, command)
    result = cli("report", folder, "-o", tmp_path / "report")
    check(result, ["report"])
    text = Path(tmp_path / "report" / "report.md").read_text()
    assert not NONE.search(text) and "NVIDIA H100 80GB HBM3" in text
