"""`tracekit ranges --gpu-side`: each range's GPU time measured on the GPU side (GPU Busy: the union of the GPU
ops it launched; torch.profiler's GPU-side spans of its name), on built traces with exact numbers, and on the
real traces in ../shared against the figures it lies between."""

from __future__ import annotations

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED

import tracekit

US = 1000


def two_streams(path):
    """ "step" #1 (0-100 µs) launches 1000-1010 and 1040-1050 on stream 7 and 1005-1015 on stream 8 (inside it,
    "inner" (20-40) launches the 1040 one); "step" #2 (200-300) launches 2000-2010. A GPU-side span of "step"
    runs 995-1055."""
    b = KinetoBuilder()
    b.annotation("step", 0, 100).annotation("inner", 20, 20).annotation("step", 200, 100)
    b.annotation("step", 995, 60, pid=0, tid=7, cat="gpu_user_annotation")
    for correlation, (at, start, stream) in enumerate(
        ((10, 1000, 7), (25, 1040, 7), (50, 1005, 8), (210, 2000, 7)), start=1
    ):
        b.launch("cudaLaunchKernel", at, 2, correlation=correlation)
        b.kernel(f"k{correlation}", start, 10, correlation=correlation, stream=stream)
    return b.write(path / "two_streams.json")


def test_busy_is_the_union_of_the_ops_each_instance_launched(tmp_path):
    table = tracekit.ranges(two_streams(tmp_path), gpu_side=True)["ranges"].set_index("Range")
    step = table.loc["step"]
    assert (step["GPU Time (ns)"], step["GPU Span (ns)"]) == (40 * US, 50 * US + 10 * US)
    assert step["GPU Busy (ns)"] == (15 + 10 + 10) * US  # 1000-1015 and 1040-1050, then 2000-2010
    assert (step["GPU-Side Spans"], step["GPU-Side Time (ns)"]) == (1, 60 * US)
    inner = table.loc["inner"]
    assert (inner["GPU Busy (ns)"], inner["GPU Time (ns)"], inner["GPU-Side Spans"]) == (10 * US, 10 * US, 0)
    assert "GPU Busy (ns)" not in tracekit.ranges(two_streams(tmp_path))["ranges"]  # only when asked


def test_an_nsys_export_without_gpu_side_spans(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 100 * US, "forward")
    b.kernel(1000 * US, 1100 * US, "gemm", stream=7, launch_at=10 * US)
    b.kernel(1050 * US, 1150 * US, "gemm", stream=8, launch_at=20 * US)
    table = tracekit.ranges(b.write(tmp_path / "two.sqlite"), gpu_side=True)["ranges"]
    assert (table.iloc[0]["GPU Time (ns)"], table.iloc[0]["GPU Busy (ns)"]) == (200 * US, 150 * US)
    assert "GPU-Side Spans" not in table  # no GPU-side spans in the trace: no empty columns


def test_ops_overlapping_on_one_stream_count_once(tmp_path):
    # programmatic dependent launch lets a kernel start before the one ahead of it on its stream ends
    b = ExportBuilder("2026.2")
    b.push_pop(0, 100 * US, "r")
    b.kernel(100 * US, 130 * US, "k1", stream=7, launch_at=10 * US)
    b.kernel(120 * US, 150 * US, "k2", stream=7, launch_at=20 * US)
    row = tracekit.ranges(b.write(tmp_path / "pdl.sqlite"), gpu_side=True)["ranges"].iloc[0]
    assert (row["GPU Time (ns)"], row["GPU Span (ns)"], row["GPU Busy (ns)"]) == (60 * US, 50 * US, 50 * US)


REAL = (
    [*sorted((SHARED / "kineto").glob("*.json.gz")), *sorted((SHARED / "traces").glob("*.sqlite"))]
    if SHARED.is_dir()
    else []
)


@pytest.mark.skipif(not REAL, reason="real traces not available")
@pytest.mark.parametrize("path", REAL, ids=lambda path: path.name)
def test_busy_lies_between_the_longest_op_and_the_summed_time_on_real_traces(path):
    try:
        table = tracekit.ranges(path, gpu_side=True, raw_names=True)["ranges"]
    except tracekit.UsageError as error:  # a trace without ranges says so
        assert "no NVTX ranges" in str(error)
        return
    busy, time, span = (table[column].to_numpy() for column in ("GPU Busy (ns)", "GPU Time (ns)", "GPU Span (ns)"))
    assert (busy <= time).all() and (busy <= span).all()
    assert ((busy > 0) == (time > 0)).all()


def test_one_trace_at_a_time_and_the_table_only(tmp_path, cli):
    path = two_streams(tmp_path)
    other = tmp_path / "other.sqlite"
    other.write_bytes(path.read_bytes())  # two traces (one file named twice is one input)
    result = cli("ranges", path, other, "--gpu-side")
    assert result.exit_code != 0 and "--gpu-side takes one trace" in result.output
    result = cli("ranges", path, "--gpu-side", "--tree")
    assert result.exit_code != 0 and "--gpu-side adds columns to the range table: not with --tree" in result.output
