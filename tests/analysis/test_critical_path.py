"""The critical path on built torch.profiler traces whose path is worked out by hand (times in µs)."""

from __future__ import annotations

import pytest
from helpers.critical_path_traces import US, launch_then_sync, stream_wait
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.analysis.primitives.hta import hta_rounded
from tracekit.errors import UsageError


def test_the_path_crosses_from_cpu_to_gpu_and_back_through_the_sync(tmp_path):
    result = tracekit.critical_path(launch_then_sync(tmp_path))
    row = result["steps"].iloc[0]
    assert row["Step"] == "(whole trace)"
    assert row["Wall (ns)"] == 210 * US
    assert row["Path (ns)"] == 185 * US
    assert (
        row["CPU (ns)"],
        row["GPU Compute (ns)"],
        row["Kernel-Kernel Overhead (ns)"],
        row["Launch Overhead (ns)"],
    ) == (7 * US, 150 * US, 10 * US, 18 * US)
    assert row["Communication (ns)"] == 0 and row["Bound By"] == "GPU Compute"
    ops = result["ops"].set_index(["Name", "Bound By"])["Path Time (ns)"].to_dict()
    assert ops == {
        ("gemm_kernel", "GPU Compute"): 100 * US,
        ("add_kernel", "GPU Compute"): 50 * US,
        ("gemm_kernel", "Kernel-Kernel Overhead"): 10 * US,  # the gap after a kernel is its (as HTA)
        ("aten::item", "CPU"): 5 * US,
        ("aten::mm", "CPU"): 2 * US,
    }
    assert result["ops"]["Share (%)"].iloc[0] == pytest.approx(100 * 100 / 185)
    path = result["path"]  # runs on one side: mm's own time, the GPU from K1's launch to K2's end, item
    assert path["On"].tolist() == ["CPU", "GPU", "CPU"]
    assert path["Start (ns)"].tolist() == [0, 2 * US, 205 * US]
    assert path["Path Time (ns)"].tolist() == [2 * US, 178 * US, 5 * US]
    assert path["Bound By"].tolist() == ["CPU", "GPU Compute", "CPU"]
    assert path["Edges"].tolist() == [1, 4, 1] and path["Longest"].tolist() == ["aten::mm", "gemm_kernel", "aten::item"]


def test_without_the_gpu_side_sync_the_path_cannot_return_to_the_cpu(tmp_path):
    result = tracekit.critical_path(launch_then_sync(tmp_path, with_sync=False))
    row = result["steps"].iloc[0]
    assert row["Path (ns)"] == 180 * US and row["CPU (ns)"] == 2 * US  # aten::item is no longer after the GPU
    assert any("no GPU-side synchronization" in note for note in result.notes)


def test_a_step_is_chosen_by_label_or_number_and_its_window_is_the_step(tmp_path):
    path = launch_then_sync(tmp_path, step=True)
    by_number = tracekit.critical_path(path, step="7")
    by_label = tracekit.critical_path(path, step="ProfilerStep#7")
    for result in (by_number, by_label):
        row = result["steps"].iloc[0]
        assert (row["Step"], row["Wall (ns)"], row["Path (ns)"]) == ("ProfilerStep#7", 212 * US, 185 * US)
    with pytest.raises(UsageError, match="no step '8'"):
        tracekit.critical_path(path, step="8")


def test_a_stream_wait_makes_the_next_kernel_on_the_waiting_stream_depend_on_the_recorded_one(tmp_path):
    row = tracekit.critical_path(stream_wait(tmp_path))["steps"].iloc[0]
    assert (row["Path (ns)"], row["Launch Overhead (ns)"], row["GPU Compute (ns)"]) == (130 * US, 10 * US, 120 * US)
    row = tracekit.critical_path(stream_wait(tmp_path, wait=False))["steps"].iloc[0]
    assert (row["Path (ns)"], row["Launch Overhead (ns)"], row["CPU (ns)"]) == (132 * US, 103 * US, 9 * US)


def test_nccl_kernels_on_the_path_are_communication(tmp_path):
    b = KinetoBuilder()
    b.launch("cudaLaunchKernel", 0, 4, correlation=1)
    b.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 10, 300, correlation=1)
    row = tracekit.critical_path(b.write(tmp_path / "nccl.json"))["steps"].iloc[0]
    assert (row["Path (ns)"], row["Communication (ns)"], row["Launch Overhead (ns)"]) == (310 * US, 300 * US, 10 * US)
    assert row["Bound By"] == "Communication"


def test_hta_rounding_shrinks_each_event_inward_to_whole_microseconds():
    import numpy as np

    start = np.array([1_712_195_495_505_543_140, 2_000_000], dtype=np.int64)
    end = start + np.array([400, 2_500], dtype=np.int64)
    rounded_start, rounded_end = hta_rounded(start, end)
    assert rounded_start.tolist() == [1_712_195_495_505_544_000, 2_000_000]
    assert rounded_end.tolist() == [1_712_195_495_505_543_000, 2_002_000]  # the first now ends before it starts


def test_a_trace_without_gpu_work_is_a_clear_error(tmp_path):
    """A CPU-only capture (the demo's): the error says how to capture GPU work, as kernels' does."""
    b = KinetoBuilder().annotation("aten::mm", 0, 10, cat="cpu_op")
    with pytest.raises(tracekit.TracekitError, match=r"no CUDA GPU operations: the capture traced no CUDA.*Capture on"):
        tracekit.critical_path(b.write(tmp_path / "cpu.json"))


def test_an_nsys_export_gives_the_same_path_with_emit_nvtx_ranges_as_operators(tmp_path):
    """The first trace as nsys records it: emit_nvtx ranges are the operators, versioned runtime names,
    the stream sync from CUPTI's synchronization records."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 10 * US, "aten::mm, seq = 1, op_id = 1")
    b.kernel(20 * US, 120 * US, "gemm_kernel", launch_at=2 * US, launch_end=5 * US)
    b.push_pop(30 * US, 40 * US, "aten::add, seq = 2, op_id = 2")
    b.kernel(130 * US, 180 * US, "add_kernel", launch_at=32 * US, launch_end=35 * US)
    b.runtime(45 * US, 200 * US, "cudaStreamSynchronize_v3020", correlation=100)
    b.sync(181 * US, 182 * US, 3, correlation=100)
    b.push_pop(205 * US, 210 * US, "aten::item, seq = 3, op_id = 3")
    result = tracekit.critical_path(b.write(tmp_path / "built.sqlite"))
    row = result["steps"].iloc[0]
    assert (row["Path (ns)"], row["CPU (ns)"], row["GPU Compute (ns)"]) == (185 * US, 7 * US, 150 * US)
    assert (row["Kernel-Kernel Overhead (ns)"], row["Launch Overhead (ns)"]) == (10 * US, 18 * US)
    assert ("aten::mm", "CPU") in set(zip(result["ops"]["Name"], result["ops"]["Bound By"], strict=True))


@pytest.mark.parametrize("by_sync_id", [True, False], ids=["eventSyncId", "latest record of the event"])
def test_an_nsys_stream_wait_is_joined_to_its_event_record(tmp_path, by_sync_id):
    b = ExportBuilder("2026.2")
    b.kernel(10 * US, 110 * US, "first_kernel", launch_at=0, launch_end=5 * US)
    b.runtime(6 * US, 8 * US, "cudaEventRecord_v3020", correlation=50)
    b.event_record(50, stream=7, event=9, event_sync=1 if by_sync_id else None)
    b.runtime(9 * US, 11 * US, "cudaStreamWaitEvent_v3020", correlation=51)
    b.sync(12 * US, 13 * US, 2, correlation=51, stream=20, event=9, event_sync=1 if by_sync_id else None)
    b.kernel(115 * US, 135 * US, "third_kernel", stream=20, launch_at=12 * US, launch_end=15 * US)
    trace = tracekit.open_trace(b.write(tmp_path / "wait.sqlite"))
    syncs = trace.optional("gpu_syncs")
    assert syncs is not None
    assert syncs[["kind", "stream", "event_stream", "event_correlation_id"]].astype(str).values.tolist() == [
        ["stream_wait_event", "20", "7", "50"]
    ]
    row = tracekit.critical_path(trace)["steps"].iloc[0]
    assert (row["Path (ns)"], row["Launch Overhead (ns)"], row["GPU Compute (ns)"]) == (130 * US, 10 * US, 120 * US)


def test_advise_shows_the_critical_path_of_the_median_step_and_what_bounds_it(tmp_path):
    result = tracekit.advise(launch_then_sync(tmp_path, step=True))
    path = result["critical-path"]
    assert path[["Step", "Path (ns)", "Bound By"]].values.tolist() == [["ProfilerStep#7", 185 * US, "GPU Compute"]]
    assert result["critical-path-ops"]["Name"].iloc[0] == "gemm_kernel"
    assert "the critical path of ProfilerStep#7 is 81 % GPU Compute" in " ".join(result.notes)


def test_gpu_ops_without_their_launching_calls_are_a_clear_error(tmp_path):
    """Without the runtime calls no edge joins the GPU to the CPU: the path would be the CPU alone."""
    b = KinetoBuilder().annotation("aten::mm", 0, 10, cat="cpu_op").kernel("gemm_kernel", 20, 100, correlation=1)
    with pytest.raises(tracekit.TracekitError, match="launching CUDA call"):
        tracekit.critical_path(b.write(tmp_path / "no_calls.json"))
    assert any("no critical path" in note for note in tracekit.advise(tmp_path / "no_calls.json").notes)
