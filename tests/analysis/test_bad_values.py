"""Rows with unusable times are left out of every number and reported in one line with their count; other
unusable GPU-op values read as unknown (counted, their rows kept), so every command sees the same rows.
Never crashed on nor misattributed; when nothing usable is left, one error line and exit status 1."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.model.range_specs import spec_patterns
from tracekit.sources import open_trace

GEMM = "ampere_sgemm_128x64_tn"
INT64_MAX = 2**63 - 1
UNUSABLE = (
    "unusable values (end before start, negative or out-of-range numbers, or NULL, REAL or TEXT where integers belong)"
)


def raw(value) -> Any:
    """A value of the wrong type, stored as a damaged or hand-edited export holds it."""
    return value


@pytest.fixture(params=["2022.4", "2026.2"])
def export(request, tmp_path):
    b = ExportBuilder(request.param)
    b.push_pop(0, 10_000, "step")
    b.kernel(100, 200, GEMM, launch_at=50)  # the only good kernel: 100 ns
    b.kernel(500, 400, GEMM, launch_at=60)  # ends before it starts
    b.kernel(-5, 300, GEMM, launch_at=70)  # negative time
    b.kernel(INT64_MAX - 10, INT64_MAX, GEMM, launch_at=80)  # at the edge of int64: a duration would overflow
    b.kernel(raw(1.5), raw(300.5), GEMM, launch_at=90)  # REAL where an integer belongs
    b.kernel(raw("soon"), 300, GEMM, launch_at=95)  # TEXT
    b.kernel(600, 700, GEMM, device=40_000, launch_at=96)  # a device index no int16 holds
    b.memcpy(800, 900, size=-4096, launch_at=97)  # negative bytes
    b.memcpy(900, 950, size=2048, launch_at=98)  # a good copy: 50 ns
    b.runtime(99, raw("late"), "cudaLaunchKernel_v7000", 999)  # a host call ending in TEXT
    b.push_pop(3_000, 2_000, "backwards")  # a range ending before it starts
    b.push_pop(raw("x"), 4_000, "garbled")
    return b.write(tmp_path / "bad.sqlite")


def test_bad_rows_are_left_out_and_counted(export):
    trace = open_trace(export)
    ops = trace.gpu_ops
    assert ops["duration"].tolist() == [100, 100, 100, 50]
    assert ops["kind"].tolist() == ["kernel", "kernel", "memcpy", "memcpy"]
    # the device no int16 holds and the negative size read as unknown: device and stream -1, 0 bytes
    assert ops["device"].tolist() == [0, -1, 0, 0] and ops["stream"].tolist() == [7, -1, 7, 7]
    assert ops["bytes"].tolist() == [0, 0, 0, 2048] and ops["start"].min() >= 0
    assert len(trace.launches) == 9 and sorted(trace.ranges["name"].astype(str)) == ["step"]
    warnings = trace.warnings
    assert len(warnings) == 4
    assert warnings[0].startswith("5 gpu_ops rows of") and "were left out: unusable values" in warnings[0]
    assert warnings[1].startswith("1 launches row of") and warnings[2].startswith("2 ranges rows")
    assert warnings[3].startswith("2 gpu_ops values of") and "(bytes: 1, device/stream: 1)" in warnings[3]


def test_commands_say_so_in_one_line_each(cli, export):
    result = cli("kernels", export, "--format", "csv")
    assert result.exit_code == 0, result.output
    # The kernel on device 40,000 has usable times and name, so it counts (its device is unknown); the five
    # kernels with unusable times are left out.
    assert result.stdout.splitlines()[1].split(",")[1:3] == ["200", "2"]  # Total Time, Instances
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith("note: 5 gpu_ops rows")  # only gpu_ops was read
    # a summary that reads the device too has the same rows, and says which values it could not read
    by_device = cli("kernels", export, "--by", "category", "--range", "step", "--format", "csv")
    assert by_device.exit_code == 0 and "note: 5 gpu_ops rows" in by_device.stderr
    assert "note: 2 gpu_ops values of" in by_device.stderr and "(bytes: 1, device/stream: 1)" in by_device.stderr
    assert by_device.stdout.splitlines()[1].split(",")[:4] == ["matmul", "100.0", "200", "2"]
    table = cli("breakdown", export, "--phases", "step")
    assert table.exit_code == 0 and "note: 5 gpu_ops rows" in table.stdout and "Traceback" not in table.output
    rows = json.loads(cli("ranges", export, "--format", "json").stdout)
    assert [row["Range"] for row in rows] == ["step"]


def test_cached_tables_keep_the_count(export, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")
    first = open_trace(export)
    assert len(first.gpu_ops) == 4
    second = open_trace(export)  # read from the cache the first one wrote
    assert len(second.gpu_ops) == 4 and second.warnings[0].startswith("5 gpu_ops rows")
    assert second.warnings[1].startswith("2 gpu_ops values") and len(second.warnings) == 2
    named = [open_trace(export) for _ in range(2)]  # a selection read, then the same from its cache
    for trace in named:
        assert trace.ranges_named(spec_patterns(["step", "backwards"]))["name"].astype(str).tolist() == ["step"]
        assert trace.warnings == [f"1 ranges row of {export} was left out: {UNUSABLE}"]  # "backwards"


def test_nothing_usable_is_one_error(cli, tmp_path):
    b = ExportBuilder("2026.2")
    b.kernel(500, 400, GEMM)
    b.kernel(raw("soon"), 300, GEMM)
    result = cli("kernels", b.write(tmp_path / "all-bad.sqlite"))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1
    assert "none of its GPU operations is usable: all 2 rows read hold unusable values" in lines[0]


@pytest.mark.parametrize("generation", ["2022.4", "2026.2"])
def test_packed_ids_that_do_not_fit_read_as_unknown(generation, tmp_path):
    """Readers pack small ids two to a number; TEXT there, or a field too wide for its half, must not
    turn into a plausible id (TEXT would count as 0: stream 0, device 0) or spill into its neighbour."""
    b = ExportBuilder(generation)
    b.kernel(100, 200, GEMM)  # the good one
    b.kernel(300, 400, GEMM, stream=raw("seven"))
    b.kernel(500, 600, GEMM, device=raw("gpu0"))
    b.kernel(700, 800, GEMM, grid=(1, 70_000, 1))  # gridY: CUDA allows at most 65535
    b.kernel(900, 1_000, GEMM, block=(128, 1, raw(2.5)))
    b.memcpy(1_100, 1_200, size=64, stream=raw("s"))
    trace = open_trace(b.write(tmp_path / "packed.sqlite"))
    ops = trace.gpu_ops
    assert ops["start"].tolist() == [100, 300, 500, 700, 900, 1_100]
    assert ops["stream"].tolist() == [7, -1, -1, 7, 7, -1] and ops["device"].tolist() == [0, -1, -1, 0, 0, -1]
    assert ops["grid_y"].tolist() == [1, 1, 1, 0, 1, 0] and ops["block_z"].tolist() == [1, 1, 1, 1, 0, 0]
    assert ops["grid_x"].tolist()[3:5] == [0, 1] and ops["block_x"].tolist()[3:5] == [128, 0]
    assert trace.warnings == [
        f"5 gpu_ops values of {trace.name} are unusable and read as unknown (block: 1, device/stream: 3, grid: 1); "
        "their rows count in everything else"
    ]


def test_huge_string_ids_cost_no_memory(tmp_path):
    """Ids near int32's limit are legal; tables indexed by id would take gigabytes, so none is built."""
    b = ExportBuilder("2026.2")
    b.strings[GEMM] = 2**31 - 2
    b.strings["step"] = 2**30
    b.push_pop(0, 1_000, "step", registered=True)
    b.kernel(100, 200, GEMM, launch_at=50)
    b.kernel(300, 450, "vectorized_elementwise_kernel", launch_at=60)
    path = b.write(tmp_path / "huge-ids.sqlite")
    tracemalloc.start()  # numpy reports its arrays to tracemalloc
    try:
        trace = open_trace(path)
        assert trace.gpu_ops["name"].astype(str).tolist() == [GEMM, "vectorized_elementwise_kernel"]
        assert trace.ranges["name"].astype(str).tolist() == ["step"] and not trace.warnings
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20  # an id-indexed table would be 8-16 GiB


def test_durations_that_would_overflow_a_sum_are_one_error(cli, tmp_path):
    """Each kernel is plausible on its own (below 2^53 ns), but 600 of them overlapping for 2^53 ns each
    add up past 2^62: int64 totals would wrap, so the export is refused in one line."""
    b = ExportBuilder("2026.2")
    for _ in range(600):
        b.kernel(0, 2**53 - 1, GEMM)
    result = cli("kernels", b.write(tmp_path / "forged.sqlite"))
    assert result.exit_code == 1 and "add up to more than 2^62 ns" in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_epoch_timestamps_give_the_same_tables(cli, shared_traces, tmp_path):
    """`nsys export --ts-normalize=true` writes times since the Unix epoch (~1.8e18 ns): valid, and every
    table must equal the one of the same capture with times from its start."""
    import shutil
    import sqlite3

    source = shared_traces / "h100_videogen_2gpu_b_nsys2026.2.sqlite"
    shifted = tmp_path / "epoch.sqlite"
    shutil.copy(source, shifted)
    shifted.chmod(0o644)
    epoch = 1_763_900_000_000_000_000
    with sqlite3.connect(shifted) as connection:
        for table in (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            "NVTX_EVENTS",
        ):
            connection.execute(f"UPDATE {table} SET start = start + ?, end = end + ?", (epoch, epoch))
    for command, options in (
        ("kernels", {}),
        ("ranges", {"raw_names": True}),
        ("breakdown", {"phases": "ncclGroupEnd"}),
    ):
        before = getattr(tracekit, command)(source, **options)
        after = getattr(tracekit, command)(shifted, **options)
        assert after.names == before.names
        for mine, theirs in zip(after.tables, before.tables):
            pd.testing.assert_frame_equal(mine.frame, theirs.frame)
        assert after.notes == [note.replace(str(source), str(shifted)) for note in before.notes], command
    # and the command line prints the same
    before, after = (cli("kernels", path, "--format", "csv") for path in (source, shifted))
    assert after.exit_code == 0 and after.stdout == before.stdout


@pytest.mark.parametrize("generation", ["2022.4", "2026.2"])
def test_too_wide_ids_read_as_unknown_without_a_bad_neighbour(generation, tmp_path):
    """No TEXT in the chunk to trip the check: ids too wide for their packed half must still be caught
    (stream 2^32 + 5 would read as device 1, stream 5; a name id past 2^32 as another name)."""
    b = ExportBuilder(generation)
    b.kernel(100, 200, GEMM)  # the good one
    b.kernel(300, 400, GEMM, stream=2**32 + 5)
    b.memcpy(500, 600, size=64, stream=2**33 + 9)
    b.kernel(700, 800, GEMM, grid=(-3, 1, 1))
    b.kernel(900, 1_000, GEMM)
    b.rows["CUPTI_ACTIVITY_KIND_KERNEL"][-1]["demangledName"] = 2**32 + b.string("other_kernel")
    b.kernel(1_100, 1_200, GEMM, stream=-1)
    b.kernel(1_300, 1_400, GEMM, device=2**15)
    trace = open_trace(b.write(tmp_path / "wide.sqlite"))
    ops = trace.gpu_ops.sort_values("start")
    assert ops["start"].tolist() == [100, 300, 500, 700, 900, 1_100, 1_300]
    assert ops["device"].tolist() == [0, -1, -1, 0, 0, -1, -1] and ops["stream"].tolist() == [7, -1, -1, 7, 7, -1, -1]
    assert ops["grid_x"].tolist() == [1, 1, 0, 0, 1, 1, 1]  # the copy has none; -3 is unknown
    names = ops["short_name"].astype(str).tolist()
    assert names[4] == "[unreadable kernel name]" and names[:4] == [GEMM, GEMM, "[CUDA memcpy HtoD]", GEMM]
    # the short name is the name's: one unknown value
    assert "6 gpu_ops values" in trace.warnings[0] and "(device/stream: 4, grid: 1, name: 1)" in trace.warnings[0]


def two_processes(tmp_path, global_pid) -> Any:
    """Processes 100 (range A) and 200 (range B) each launch a kernel with correlation id 1; the second
    kernel's globalPid is ``global_pid`` (None: as written)."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 10_000, "A", pid=100, tid=100)
    b.push_pop(0, 10_000, "B", pid=200, tid=200)
    b.kernel(100, 200, "kernel_of_A", launch_at=50, pid=100)
    b.next_correlation = 1  # process 200 numbers its own calls
    b.kernel(300, 1_300, "kernel_of_B", launch_at=60, pid=200, tid=200)
    if global_pid is not None:
        b.rows["CUPTI_ACTIVITY_KIND_KERNEL"][-1]["globalPid"] = global_pid
    return b.write(tmp_path / "two.sqlite")


@pytest.mark.parametrize("global_pid", [raw("garbled"), -5, -(2**24) - 3])
def test_an_unreadable_process_matches_no_launch(cli, tmp_path, global_pid):
    """An op whose process cannot be read is no op of any process: matched by correlation alone, it would
    be taken for the other process's launch (both number their calls from 1)."""
    path = two_processes(tmp_path, global_pid)
    inside_a = cli("kernels", path, "--range", "A", "--format", "csv")
    assert inside_a.exit_code == 0 and [line.split(",")[-1] for line in inside_a.stdout.splitlines()[1:]] == [
        "kernel_of_A"
    ]
    assert "no GPU kernels were launched inside B" in cli("kernels", path, "--range", "B").output
    trace = open_trace(path)
    for columns in (["pid"], ["pid", "grid_y"], ["pid", "device", "name"]):  # the same whatever else is read
        assert open_trace(path).columns("gpu_ops", columns)["pid"].tolist() == [100, -2]
    assert trace.gpu_ops["pid"].tolist() == [100, -2] and "(pid: 1)" in trace.warnings[0]
    delays = cli("launches", path, "--format", "csv")
    assert delays.exit_code == 0 and "kernel_of_B" not in delays.stdout and "kernel_of_A" in delays.stdout


def test_a_copy_kind_past_int32_reads_as_unknown_with_any_columns(tmp_path):
    b = ExportBuilder("2026.2")
    b.memcpy(100, 200, size=64)
    b.rows["CUPTI_ACTIVITY_KIND_MEMCPY"][-1]["copyKind"] = 2**31
    path = b.write(tmp_path / "copy.sqlite")
    for columns in (["name"], ["name", "stream"]):
        trace = open_trace(path)
        assert trace.columns("gpu_ops", columns)["name"].astype(str).tolist() == ["[CUDA memcpy Unknown]"]
        assert trace.warnings[0].startswith("1 gpu_ops value of") and "(name (copy kind): 1)" in trace.warnings[0]


def test_notes_from_the_cache_are_those_of_the_columns_read(cli, tmp_path, monkeypatch):
    """A cache holding more columns than a command reads says only what that command read: the kernel
    summary of a file with a copy of -5 bytes has no note, cold or after a command that read the sizes."""
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "step")
    b.kernel(100, 200, GEMM, launch_at=10)
    b.memcpy(300, 400, size=-5, launch_at=20)
    path = b.write(tmp_path / "copy.sqlite")
    cold = cli("kernels", path, "--format", "csv")
    assert cold.exit_code == 0 and cold.stderr == ""
    assert "(bytes: 1)" in cli("breakdown", path, "--phases", "step", "--format", "csv").output  # reads sizes
    warm = cli("kernels", path, "--format", "csv")
    assert (warm.stdout, warm.stderr) == (cold.stdout, "")


def test_an_unknown_device_is_no_gpu_of_its_own(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 10_000, "step")
    b.kernel(100, 200, GEMM, launch_at=50)
    b.kernel(300, 320, GEMM, launch_at=60, device=raw("gpu?"))
    b.kernel(400, 500, GEMM, launch_at=70)
    result = tracekit.breakdown(b.write(tmp_path / "device.sqlite"), phases="step")
    gpus = {row["GPU"]: row for row in result["gpus"].to_dict("records") if row["Phase"] == "step"}
    assert "cuda:-1" not in gpus and gpus["cuda:0"]["Busy (ns)"] == 200 and gpus["cuda:0"]["Span (ns)"] == 400
    assert "mean per GPU" not in gpus and "sum of GPUs" not in gpus  # over the one GPU known: its own row
    assert gpus["any GPU busy"]["Busy (ns)"] == 220  # the op on the unknown device ran on some GPU


@pytest.mark.parametrize("command", ["idle", "overlap", "steps"])
def test_per_gpu_tables_name_no_unknown_device(cli, tmp_path, command):
    """Ops whose device is unusable (read as -1) are on no GPU a table can name: no "cuda:-1" row or column
    (gaps between them would be gaps between unrelated GPUs), while the known GPU's figures stand."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "step")
    b.kernel(100, 200, GEMM, launch_at=50)
    b.kernel(300, 400, GEMM, launch_at=250, device=40_000)
    b.kernel(600, 700, GEMM, launch_at=550, device=40_000)
    b.kernel(800, 900, GEMM, launch_at=750)  # cuda:0 idles from 200 to 800 ns
    path = b.write(tmp_path / "devices.sqlite")
    result = cli(command, path, "--format", "csv")
    assert result.exit_code == 0, result.output
    assert "cuda:-1" not in result.stdout and "cuda:0" in result.stdout
