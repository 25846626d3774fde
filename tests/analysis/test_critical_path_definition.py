"""tracekit's definition of the critical path (the default) against HolisticTraceAnalysis's (``definition="hta"``)
on built traces of the two shapes where HTA's misleads (times in µs): a side stream's long wait counted as
kernel-kernel overhead, and a path longer than its step (its GPU work ran on into the next step)."""

from __future__ import annotations

import pytest
from helpers.critical_path_traces import US, gpu_behind, side_stream_wait
from helpers.kineto_builder import KinetoBuilder

import tracekit
from tracekit.analysis.critical_path.definition import QUEUE_GAP
from tracekit.model.options import OptionError

BY_BOUND = ["Path (ns)", "CPU (ns)", "GPU Compute (ns)", "Kernel-Kernel Overhead (ns)", "Launch Overhead (ns)"]


def steps(path, **options) -> list[list]:
    table = tracekit.critical_path(path, **options)["steps"]
    return table[["Step", "Wall (ns)", *BY_BOUND, "Bound By"]].values.tolist()


def test_htas_path_jumps_a_side_streams_wait_as_overhead_and_tracekits_follows_the_backward(tmp_path):
    path = side_stream_wait(tmp_path)
    result = tracekit.critical_path(path)
    assert steps(path) == [["(whole trace)", 40_035 * US, 39_977 * US, 5 * US, 39_961 * US, 11 * US, 0, "GPU Compute"]]
    ops = result["ops"].set_index(["Name", "Bound By"])["Path Time (ns)"].to_dict()
    assert ops == {
        ("backward_kernel", "GPU Compute"): 39_960 * US,
        ("backward_kernel", "Kernel-Kernel Overhead"): 6 * US,  # the queue's 2 µs gaps, as HTA's
        ("aten::item", "CPU"): 5 * US,
        ("Memcpy DtoH (Device -> Pinned)", "GPU Compute"): 1 * US,  # the second copy, after the backward
    }
    assert result["path"][["On", "Path Time (ns)", "Longest"]].values.tolist() == [
        ["GPU", 39_972 * US, "backward_kernel"],
        ["CPU", 5 * US, "aten::item"],
    ]
    hta = tracekit.critical_path(path, definition="hta")
    assert steps(path, definition="hta") == [
        ["(whole trace)", 40_035 * US, 40_007 * US, 5 * US, 2 * US, 40_000 * US, 0, "Kernel-Kernel Overhead"]
    ]
    assert hta["ops"].iloc[0][["Name", "Bound By", "Path Time (ns)"]].tolist() == [
        "Memcpy DtoH (Device -> Pinned)",
        "Kernel-Kernel Overhead",
        40_000 * US,
    ]


def test_a_wait_on_one_gpu_is_not_followed_to_another_gpus_work(tmp_path):
    """The backward on GPU 1: nothing says the copy on GPU 0 waited for it, so no edge joins them; the wait
    still weighs 0, and the longest path is the backward alone (39,960 + 6)."""
    assert steps(side_stream_wait(tmp_path, device=1)) == [
        ["(whole trace)", 40_035 * US, 39_966 * US, 0, 39_960 * US, 6 * US, 0, "GPU Compute"]
    ]


def test_a_long_gap_with_nothing_else_running_is_a_wait_and_said(tmp_path):
    """One stream: K2 queued behind K1 starts 5 ms after it (past QUEUE_GAP), nothing else ran: HTA counts the
    gap as overhead; tracekit weighs it 0 and says so; a gap of QUEUE_GAP stays overhead."""
    b = KinetoBuilder()
    b.launch("cudaLaunchKernel", 0, 2, correlation=1).kernel("first_kernel", 10, 100, correlation=1)
    b.launch("cudaLaunchKernel", 3, 2, correlation=2).kernel("second_kernel", 5_110, 100, correlation=2)
    third = 5_210 + QUEUE_GAP // US
    b.launch("cudaLaunchKernel", 6, 2, correlation=3).kernel("third_kernel", third, 100, correlation=3)
    path = b.write(tmp_path / "one_stream.json")
    assert steps(path) == [["(whole trace)", 5_360 * US, 350 * US, 0, 300 * US, 50 * US, 0, "GPU Compute"]]
    notes = " ".join(tracekit.critical_path(path).notes)
    assert "5.000 ms of gaps on a stream on the path are waits, not overhead" in notes
    assert steps(path, definition="hta") == [
        ["(whole trace)", 5_360 * US, 5_350 * US, 0, 300 * US, 5_050 * US, 0, "Kernel-Kernel Overhead"]
    ]


def test_a_path_stops_at_its_steps_end_and_counts_the_work_queued_before_it(tmp_path):
    path = gpu_behind(tmp_path)
    assert steps(path) == [
        ["ProfilerStep#1", 10_000 * US, 9_002 * US, 2 * US, 8_990 * US, 0, 10 * US, "GPU Compute"],
        ["ProfilerStep#2", 10_000 * US, 8_012 * US, 0, 8_010 * US, 2 * US, 0, "GPU Compute"],
    ]
    notes = tracekit.critical_path(path).notes
    assert any("the GPU work ProfilerStep#1 launched ran on 6.010 ms past its end" in note for note in notes)
    one = tracekit.critical_path(path, step="1")["path"]
    assert one[["On", "Path Time (ns)", "Longest"]].values.tolist() == [
        ["CPU", 2 * US, "aten::mm"],
        ["GPU", 9_000 * US, "gemm_kernel"],
    ]
    assert steps(path, definition="hta") == [
        ["ProfilerStep#1", 10_000 * US, 15_012 * US, 2 * US, 15_000 * US, 0, 10 * US, "GPU Compute"],
        ["ProfilerStep#2", 10_000 * US, 6_012 * US, 2 * US, 2_000 * US, 0, 4_010 * US, "Launch Overhead"],
    ]


def test_the_definition_is_an_option_of_the_command_line(cli, tmp_path):
    path = side_stream_wait(tmp_path)
    shown = cli("critical-path", path, "--definition", "hta", "--format", "csv").output
    assert "Kernel-Kernel Overhead" in shown.splitlines()[1]
    assert "GPU Compute" in cli("critical-path", path, "--format", "csv").output.splitlines()[1]
    with pytest.raises(OptionError, match="definition 'networkx' is not one of tracekit, hta"):
        tracekit.critical_path(path, definition="networkx")  # pyright: ignore[reportArgumentType]
