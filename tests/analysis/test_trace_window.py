"""A stretch of a trace as a trace: the calls begun in it, the GPU work they launched, the ranges over it, and
the optional tables' rows renumbered to the kept ops (a collective's record still found on its kernel)."""

from __future__ import annotations

from helpers.kineto_builder import KinetoBuilder

from tracekit.analysis.collectives.instances import collective_instances
from tracekit.analysis.primitives.trace_window import trace_window
from tracekit.sources import open_trace

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def test_the_window_keeps_what_was_launched_in_it(tmp_path):
    """A GEMM launched at 100 us (runs at 200), an all-reduce launched at 1,000 us carrying its record (runs at
    1,100), a range over 900-1,500 us: the window [900, 2,000) us keeps the all-reduce, its record and the range."""
    trace = KinetoBuilder()
    trace.launch("cudaLaunchKernel", 100, 5, 1).kernel("gemm_kernel", 200, 50, 1)
    trace.annotation("late_part", 900, 600)
    trace.launch("cudaLaunchKernel", 1000, 5, 2)
    args = {"device": 0, "stream": 7, "correlation": 2, "Collective name": "allreduce", "dtype": "Float"}
    trace.event("X", "kernel", ALL_REDUCE, 0, 7, 1100, 100, {**args, "In msg nelems": 256, "Out msg nelems": 256})
    whole = open_trace(trace.write(tmp_path / "t.json"))
    window = trace_window(whole, 900_000, 2_000_000)  # ns
    assert window.gpu_ops["name"].astype(str).tolist() == [ALL_REDUCE]
    assert window.launches["start"].tolist() == [whole.launches["start"].max()]
    assert window.ranges["name"].astype(str).tolist() == ["late_part"]
    instances = collective_instances(window)
    assert instances["op"].tolist() == [0] and instances["bytes"].tolist() == [1024]


def test_the_window_keeps_every_process_and_thread_name(tmp_path):
    """Names are not events: a thread named in the trace keeps its name in a window of it (the timeline of a
    step names its tracks)."""
    trace = KinetoBuilder().launch("cudaLaunchKernel", 100, 5, 1).kernel("gemm_kernel", 200, 50, 1)
    trace.names("process_name", 100, 0, "python3").names("thread_name", 100, 100, "pt_main_thread")
    window = trace_window(open_trace(trace.write(tmp_path / "t.json")), 900_000, 2_000_000)
    names = window.optional("thread_names")
    assert names is not None
    assert list(zip(names["tid"], names["name"].astype(str), strict=True)) == [(-1, "python3"), (100, "pt_main_thread")]
