"""Inputs real tools write that carry less than usual, through every command: GPUs described by their id
and name alone, string ids that resolve to nothing (in every row, some rows, past the end of StringIds,
NULL) in every column read through StringIds, the same input given twice, and a Result of no table.
No traceback anywhere: exit status 0 with the real values, or one error line."""

from __future__ import annotations

import gzip
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import GPU_ID_AND_NAME, ExportBuilder, without_not_null

import tracekit
from tracekit.commands import run_command
from tracekit.commands.registry import COMMANDS
from tracekit.model.range_specs import spec_patterns
from tracekit.model.schema import GPU_LIMIT_COLUMNS
from tracekit.render import FORMATS
from tracekit.render.tables import render_text, write

GEMM = "ampere_sgemm_128x64_tn"
H100 = "NVIDIA H100 80GB HBM3"
KERNEL_NS = 500  # each of the 9 kernels: 3 steps of 3
UNREADABLE_KERNEL, UNREADABLE_CALL, UNREADABLE_RANGE = (
    "[unreadable kernel name]",
    "[unreadable call name]",
    "[unreadable range name]",
)


def three_steps(path: Path, generation: str = "2026.2", gpu_columns: str | None = None) -> Path:
    """3 steps ("step" registered through StringIds, as the nvtx package names ranges), each a "forward"
    range launching 3 GEMMs of 500 ns and a copy; one GPU, described in full unless ``gpu_columns``."""
    b = ExportBuilder(generation)
    if gpu_columns is not None:
        b.gpu_columns = gpu_columns
    b.gpu(0, H100, 132, 85_000_000_000, 9, 0)
    for step in range(3):
        t = step * 10_000
        b.push_pop(t, t + 9_000, "step", registered=True)
        b.push_pop(t + 100, t + 4_000, "forward")
        for k in range(3):
            b.kernel(t + 1_000 + k * 1_000, t + 1_000 + k * 1_000 + KERNEL_NS, GEMM, launch_at=t + 200 + k * 100)
        b.memcpy(t + 5_000, t + 5_400, size=4096, launch_at=t + 4_100)
    return b.write(path)


def edited(path: Path, *statements: str, nulls: bool = False) -> Path:
    if nulls:
        without_not_null(path)
    with sqlite3.connect(path) as connection:
        for statement in statements:
            connection.execute(statement)
    return path


def every_command(tmp_path: Path, source: Path) -> list[list]:
    """Each command of the registry on ``source`` (a pair: it and itself), then timeline, report (with its
    HTML page) and export."""
    runs = [
        [name, source, source] if spec.inputs == "pair" else [name, source]
        for name, spec in COMMANDS.items()
        if spec.inputs != "snapshots"
    ]
    return runs + [
        ["timeline", source, "-o", tmp_path / "timeline.json"],
        ["report", source, "-o", tmp_path / "report", "--html"],
        ["export", source, "--parquet", tmp_path / "parquet"],
    ]


def clean(result, args) -> None:
    """No traceback; a failure is one error line."""
    output = result.stdout + result.stderr
    assert "Traceback" not in output, (args, output[-2000:])
    if result.exit_code:
        errors = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code == 1 and len(errors) == 1 and errors[0].startswith("Error:"), (args, output)


def json_of(result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --- GPUs described by their id and name alone ---------------------------------------------------------


@pytest.fixture(params=["2022.4", "2026.2"])
def id_and_name(request, tmp_path) -> Path:
    """TARGET_INFO_GPU with an id and a name and no other column, as three real exports have it."""
    return three_steps(tmp_path / "gpu.sqlite", request.param, GPU_ID_AND_NAME)


def test_gpus_known_by_id_and_name_alone_go_through_every_command(cli, id_and_name, tmp_path):
    for args in every_command(tmp_path, id_and_name):
        result = cli(*args)
        clean(result, args)
        # ops needs aten:: operators and collectives NCCL kernels, which this trace has none of: one line says so
        assert result.exit_code == 0 or args[0] in ("ops", "collectives"), (args, result.output)
    header = json.loads((tmp_path / "timeline.json").read_text())["deviceProperties"]
    assert header == [{"id": 0, "name": H100}]  # what is known, nothing invented
    assert f"GPUs: {H100}." in (tmp_path / "report" / "report.md").read_text()
    meta = json.loads((tmp_path / "parquet" / "meta.json").read_text())
    unknown = dict.fromkeys(["sm_count", "memory_bytes", "compute_capability", *GPU_LIMIT_COLUMNS])
    assert meta["gpus"] == [{"id": 0, "name": H100, **unknown}]
    kernels = json_of(cli("kernels", id_and_name, "--format", "json"))
    assert [(row["Name"], row["Instances"], row["Total Time (ns)"]) for row in kernels] == [(GEMM, 9, 9 * KERNEL_NS)]


def test_gpu_fields_left_null_are_unknown_and_left_out_of_the_timeline(cli, tmp_path):
    export = edited(
        three_steps(tmp_path / "nulls.sqlite"),
        "UPDATE TARGET_INFO_GPU SET smCount = NULL, totalMemory = NULL, computeMajor = NULL",
    )
    assert cli("timeline", export, "-o", tmp_path / "t.json").exit_code == 0
    assert json.loads((tmp_path / "t.json").read_text())["deviceProperties"] == [{"id": 0, "name": H100}]
    gpus = tracekit.open_trace(export).meta.gpus
    assert gpus["sm_count"].isna().all() and gpus["compute_capability"].isna().all()


def fp32_gemms(path: Path, gpu_columns: str | None = None) -> Path:
    """Three FP32 GEMMs of 1 ms back to back: advise's FP32-matmul rule, which reads the compute capability."""
    b = ExportBuilder("2026.2")
    if gpu_columns is not None:
        b.gpu_columns = gpu_columns
    b.gpu(0, H100, 132, 85_000_000_000, 9, 0)
    for k in range(3):
        b.kernel(10_000 + k * 1_001_000, 1_010_000 + k * 1_001_000, GEMM, launch_at=k * 100)
    return b.write(path)


@pytest.mark.parametrize(
    "gpu_columns, said", [(None, "(compute capability 9.0)"), (GPU_ID_AND_NAME, "compute capability is not recorded")]
)
def test_advise_uses_the_compute_capability_only_where_it_is_recorded(cli, tmp_path, gpu_columns, said):
    result = cli("advise", fp32_gemms(tmp_path / "fp32.sqlite", gpu_columns), "--format", "json")
    findings = json_of(result)["findings"]
    fp32 = [finding for finding in findings if "FP32" in finding["What"]]
    assert len(fp32) == 1 and said in fp32[0]["What"] and "3 GEMM/convolution kernels" in fp32[0]["What"]


def test_a_full_description_is_written_back_whole(cli, tmp_path):
    export = three_steps(tmp_path / "full.sqlite")
    assert cli("timeline", export, "-o", tmp_path / "t.json").exit_code == 0
    assert json.loads((tmp_path / "t.json").read_text())["deviceProperties"] == [
        {"id": 0, "name": H100, "totalGlobalMem": 85_000_000_000, "computeMajor": 9, "computeMinor": 0, "numSms": 132}
    ]


def kineto_steps(path: Path, devices: list[dict]) -> Path:
    b = KinetoBuilder()
    b.head["deviceProperties"] = devices
    for step in range(3):
        t = 1_000_000 + step * 100
        b.annotation(f"ProfilerStep#{step}", t, 90)
        b.launch("cudaLaunchKernel", t + 1, 2, correlation=step + 1)
        b.kernel(GEMM, t + 5, 20, correlation=step + 1)
    return b.write(path)


@pytest.mark.parametrize("devices", [[{"id": 0, "name": H100}], [{"id": 0}]], ids=["id and name", "id alone"])
def test_torch_profiler_devices_known_by_id_and_name_go_through_every_command(cli, tmp_path, devices):
    trace = kineto_steps(tmp_path / "k.pt.trace.json", devices)
    for args in every_command(tmp_path, trace):
        result = cli(*args)
        clean(result, args)
        # no aten:: operators, no NCCL, no copies in this trace: those commands' one line says so
        assert result.exit_code == 0 or args[0] in ("ops", "overlap", "bandwidth", "collectives"), (args, result.output)
    assert json.loads((tmp_path / "timeline.json").read_text())["deviceProperties"] == devices
    back = tracekit.open_trace(tmp_path / "timeline.json")  # read back: the same description
    assert back.meta.gpus["name"].tolist() == [device.get("name") for device in devices]
    steps = json_of(cli("steps", trace, "--format", "json"))
    assert [row["Kernels"] for row in steps] == [1, 1, 1]


# --- string ids that resolve to nothing ------------------------------------------------------------------

# (statements, whether NOT NULL is lifted first); the kernels' names resolve to nothing in every row
KERNEL_NAMES = {
    "every row -1": (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = -1"], False),
    "both names -1": (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = -1, shortName = -1"], False),
    "past StringIds": (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 10000, shortName = 10001"], False),
    "NULL": (["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = NULL, shortName = NULL"], True),
    "StringIds empty": (["DELETE FROM StringIds"], False),
}


@pytest.mark.parametrize("case", KERNEL_NAMES, ids=list(KERNEL_NAMES))
def test_kernel_names_that_resolve_to_nothing_read_as_unknown_in_every_command(cli, tmp_path, case):
    statements, nulls = KERNEL_NAMES[case]
    export = edited(three_steps(tmp_path / "names.sqlite"), *statements, nulls=nulls)
    for args in every_command(tmp_path, export):
        result = cli(*args)
        clean(result, args)
        if case != "StringIds empty":  # (there the step range's registered name is gone too: no steps)
            assert result.exit_code == 0 or args[0] in ("ops", "collectives"), (args, result.output)
    result = cli("kernels", export, "--format", "json")
    kernels = json_of(result)
    assert [(row["Name"], row["Instances"], row["Total Time (ns)"]) for row in kernels] == [
        (UNREADABLE_KERNEL, 9, 9 * KERNEL_NS)
    ]
    assert "9 gpu_ops values" in result.stderr and "read as unknown (name: 9" in result.stderr, result.stderr


@pytest.mark.parametrize("past", [10_000, 2**30], ids=["small id", "id past the dense lookup table"])
def test_some_kernel_names_past_string_ids_are_counted_beside_the_readable_ones(cli, tmp_path, past):
    export = edited(
        three_steps(tmp_path / "some.sqlite"),
        f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = {past} WHERE rowid <= 3",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = -1 WHERE rowid = 4",
    )
    result = cli("kernels", export, "--format", "json")
    rows = {row["Name"]: row["Instances"] for row in json_of(result)}
    assert rows == {GEMM: 5, UNREADABLE_KERNEL: 4}
    assert "4 gpu_ops values" in result.stderr and "(name: 4)" in result.stderr, result.stderr


CALL_NAMES = {
    "every row -1": (["UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = -1"], False),
    "past StringIds": (["UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = nameId + 10000"], False),
    "NULL": (["UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = NULL"], True),
}


@pytest.mark.parametrize("case", CALL_NAMES, ids=list(CALL_NAMES))
def test_call_names_that_resolve_to_nothing_keep_their_calls(cli, tmp_path, case):
    """A CUDA API call whose name is unknown still launched its kernel: the kernel stays in its range."""
    statements, nulls = CALL_NAMES[case]
    export = edited(three_steps(tmp_path / "calls.sqlite"), *statements, nulls=nulls)
    for args in every_command(tmp_path, export):
        clean(cli(*args), args)
    trace = tracekit.open_trace(export)
    assert trace.launches["name"].astype(str).tolist() == [UNREADABLE_CALL] * 12
    assert any("12 launches values" in warning and "(name: 12)" in warning for warning in trace.warnings)
    ranges = {row["Range"]: row["GPU Ops"] for row in json_of(cli("ranges", export, "--format", "json"))}
    assert ranges == {"step": 12, "forward": 9}  # the GEMMs launched inside forward, the copies after it


NVTX_NAMES = {
    "every row -5": (["UPDATE NVTX_EVENTS SET textId = -5, text = NULL"], 6),
    "past StringIds": (["UPDATE NVTX_EVENTS SET textId = 10000, text = NULL"], 6),
    "registered ones past StringIds": (["UPDATE NVTX_EVENTS SET textId = 10000 WHERE textId IS NOT NULL"], 3),
}


@pytest.mark.parametrize("case", NVTX_NAMES, ids=list(NVTX_NAMES))
def test_range_names_that_resolve_to_nothing_keep_their_ranges(cli, tmp_path, case):
    statements, unreadable = NVTX_NAMES[case]
    export = edited(three_steps(tmp_path / "ranges.sqlite"), *statements)
    for args in every_command(tmp_path, export):
        clean(cli(*args), args)
    result = cli("ranges", export, "--format", "json")
    ranges = {row["Range"]: row["Instances"] for row in json_of(result)}
    assert ranges == ({UNREADABLE_RANGE: 6} if unreadable == 6 else {UNREADABLE_RANGE: 3, "forward": 3})
    assert f"{unreadable} ranges values" in result.stderr and f"(name: {unreadable})" in result.stderr


def test_a_read_of_some_ranges_counts_the_unreadable_names_among_them_only(tmp_path):
    """Ranges of a named domain all pass the SQL filter of a selective read; the unreadable ones it then
    leaves out are not counted in its note."""
    b = ExportBuilder("2026.2")
    b.domain(1, "NCCL")
    b.push_pop(0, 100, "allreduce", domain_id=1)
    b.push_pop(200, 300, "broken", domain_id=1, registered=True)
    export = edited(b.write(tmp_path / "nccl.sqlite"), "UPDATE NVTX_EVENTS SET textId = 10000 WHERE textId IS NOT NULL")
    some = tracekit.open_trace(export)
    assert some.ranges_named(spec_patterns(["NCCL:allreduce"]))["name"].astype(str).tolist() == ["NCCL:allreduce"]
    assert not some.warnings
    every = tracekit.open_trace(export)
    assert every.ranges["name"].astype(str).tolist() == ["NCCL:allreduce", f"NCCL:{UNREADABLE_RANGE}"]
    assert any("1 ranges value" in warning and "(name: 1)" in warning for warning in every.warnings)


# --- the same input twice ----------------------------------------------------------------------------------


@pytest.fixture
def spellings(tmp_path, monkeypatch) -> list[str]:
    """One export named three ways: its name, ./its name, and a symbolic link to it."""
    monkeypatch.chdir(tmp_path)
    three_steps(tmp_path / "A.sqlite")
    (tmp_path / "link.sqlite").symlink_to(tmp_path / "A.sqlite")
    return ["A.sqlite", "./A.sqlite", "link.sqlite"]


@pytest.mark.parametrize(
    "twice",
    [["A.sqlite", "A.sqlite"], ["A.sqlite", "./A.sqlite", "link.sqlite"]],
    ids=["same path", "spellings and a link"],
)
def test_report_of_one_input_given_twice_is_the_report_of_it(cli, spellings, tmp_path, twice):
    result = cli("report", *twice, "-o", tmp_path / "twice")
    assert result.exit_code == 0, result.output
    assert cli("report", "A.sqlite", "-o", tmp_path / "once").exit_code == 0
    dropped = len(twice) - 1
    assert f"note: {dropped} input{'s' if dropped > 1 else ''} given more than once, read once" in result.stderr
    text = (tmp_path / "twice" / "report.md").read_text()
    note = next(line for line in text.splitlines() if line.startswith("> note: "))
    assert "given more than once, read once: dropped" in note and "-vs-" not in text.splitlines()[0]  # no comparison
    once = (tmp_path / "once" / "report.md").read_text()
    # the same sections, tables and numbers (the time it was generated and the note aside)
    assert without_time(text.replace(f"{note}\n\n", "")) == without_time(once)


def without_time(report: str) -> list[str]:
    return [line for line in report.splitlines() if not line.startswith("Generated ")]


@pytest.mark.parametrize("command", ["kernels", "ranges", "breakdown", "advise", "ranks", "compare"])
def test_every_many_input_command_reads_a_repeated_input_once(cli, spellings, command):
    once = cli(command, "A.sqlite", "--format", "json")
    twice = cli(command, *spellings, "--format", "json")
    assert twice.exit_code == 0, twice.output
    assert json.loads(twice.stdout) == json.loads(once.stdout)
    assert (
        "2 inputs given more than once, read once: dropped ./A.sqlite (the same file as A.sqlite), link.sqlite"
        in twice.stderr
    )


def test_a_folder_and_a_file_in_it_are_one_input(cli, spellings):
    result = cli("kernels", ".", "A.sqlite", "--format", "json")
    # the folder holds A and its link: one input, read once, as the file named after it
    assert (
        "2 inputs given more than once, read once: dropped link.sqlite (the same file as A.sqlite), A.sqlite"
        in result.stderr
    )
    kernels = json_of(result)["kernels"]
    assert [(row["Name"], row["Instances"], row["Total Time (ns)"]) for row in kernels] == [(GEMM, 9, 9 * KERNEL_NS)]
    assert "note: 1 input read" in result.stderr


def test_timeline_and_the_api_take_a_repeated_input_once(cli, spellings, tmp_path):
    result = cli("timeline", *spellings, "-o", tmp_path / "t.json")
    assert result.exit_code == 0 and "2 inputs given more than once" in result.stderr, result.output
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert sum(event.get("cat") == "kernel" for event in events) == 9  # once, not three times
    api = tracekit.kernels(spellings)
    assert api.frame["Instances"].tolist() == [9] and any("given more than once" in note for note in api.notes)
    trace = tracekit.open_trace("A.sqlite")
    assert run_command("steps", [trace, trace]).frame["Kernels"].tolist() == [3, 3, 3]  # one trace: its steps


def test_diff_of_a_trace_with_itself_is_no_change(cli, spellings):
    """A pair is two inputs by definition: comparing a run with itself stays allowed (and shows nothing moved)."""
    kernels = json_of(cli("diff", "A.sqlite", "link.sqlite", "--format", "json"))["kernels"]
    assert [(row["Name"], row["A Instances"], row["B Instances"], row["Delta (ms)"]) for row in kernels] == [
        (GEMM, 9, 9, 0.0)
    ]


# --- a Result of no table ----------------------------------------------------------------------------------


def test_a_result_of_no_table_converts_to_an_empty_frame():
    result = tracekit.Result([], [])
    frame = result.to_pandas()
    assert isinstance(frame, pd.DataFrame) and frame.shape == (0, 0) and frame.attrs["units"] == {}
    assert result.frame.empty and result.units() == {} and list(result) == []
    with pytest.raises(KeyError, match="no table 'kernels'; this result has no tables"):
        result["kernels"]
    assert repr(result) == "<tracekit.Result: no tables; 0 notes>" and str(result) == ""
    assert "<table>" not in result._repr_html_()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_result_of_no_table_renders_in_every_format(tmp_path, fmt):
    result = tracekit.Result([], ["nothing to show"])
    if fmt in ("table", "md", "csv", "json"):
        text = render_text(result, fmt)
        assert text == {"table": "note: nothing to show", "md": "note: nothing to show", "csv": "", "json": "{}"}[fmt]
    written = write(result, fmt, tmp_path / f"empty.{fmt}")
    assert written == [tmp_path / f"empty.{fmt}"] and written[0].exists()
    if fmt == "parquet":
        assert pd.read_parquet(written[0]).empty
    if fmt == "json":
        assert json.loads(written[0].read_text()) == {}


def test_a_gzip_timeline_header_has_the_same_partial_description(tmp_path):
    """The header of a gzip timeline carries the same partial description (the writer's one path)."""
    export = three_steps(tmp_path / "g.sqlite", gpu_columns=GPU_ID_AND_NAME)
    tracekit.timeline(export, tmp_path / "t.json.gz")
    with gzip.open(tmp_path / "t.json.gz") as handle:
        assert json.load(handle)["deviceProperties"] == [{"id": 0, "name": H100}]


def test_a_trace_of_copies_and_sets_alone_is_not_said_to_have_no_cuda_activity(cli, tmp_path):
    """No kernel but a copy and a set: CUDA was traced, so the error says what there is and how to see it
    (it said the capture "traced no CUDA activity", a CPU-only run's message)."""
    b = ExportBuilder("2026.2")
    b.memcpy(1_000, 1_400, size=4096, launch_at=900)
    b.memset(2_000, 2_100, size=64)
    export = b.write(tmp_path / "copies.sqlite")
    result = cli("kernels", export)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: {export} has no CUDA kernels: its 2 GPU operations are memory copies and sets: --ops all "
        "summarizes them (bandwidth measures them)"
    )
    every_op = cli("kernels", export, "--ops", "all", "--format", "csv")
    assert every_op.exit_code == 0, every_op.output
    assert pd.read_csv(io.StringIO(every_op.stdout))["Total Time (ns)"].sum() == 500
