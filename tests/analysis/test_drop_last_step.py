"""`--drop-last-step` (HolisticTraceAnalysis's default window: GPU work launched before the last
ProfilerStep#N began) on every command that compares with HTA: kernels, ranks, idle, overlap,
breakdown, launches."""

from __future__ import annotations

import json

import pytest
from helpers.nsys_builder import ExportBuilder

import tracekit

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"


@pytest.fixture
def two_steps(tmp_path):
    """Two profiler steps; in each, a gemm, a gap, an add and an all-reduce beside the add. The second
    step's work (launched after 1,000 ns) is what the window leaves out."""
    b = ExportBuilder("2026.2")
    for step, offset in ((1, 0), (2, 1_000)):
        b.push_pop(offset, offset + 1_000, f"ProfilerStep#{step}", tid=100)
        b.kernel(offset + 100, offset + 200, "void gemm_kernel<float>()", launch_at=offset + 10)
        b.kernel(offset + 300, offset + 400, "void add_kernel<float>()", launch_at=offset + 250)  # host late
        b.kernel(offset + 350, offset + 450, NCCL, stream=20, launch_at=offset + 20)
    return b.write(tmp_path / "steps.sqlite")


def test_every_command_leaves_the_last_step_out(two_steps):
    for drop, kernels, idle in ((False, 6, [100, 100, 650]), (True, 3, [100])):  # 2 steps, or 1
        assert tracekit.kernels(two_steps, drop_last_step=drop)["kernels"]["Instances"].sum() == kernels
        gaps = tracekit.idle(two_steps, drop_last_step=drop)["gaps"]
        assert sorted(gaps["Idle (ns)"]) == idle
        overlap = tracekit.overlap(two_steps, drop_last_step=drop)["overlap"]
        assert overlap["Communication (ns)"].tolist() == [100 * kernels // 3]
        assert overlap["Overlapped (ns)"].tolist() == [50 * kernels // 3]
        breakdown = tracekit.breakdown(two_steps, phases="ProfilerStep*", drop_last_step=drop)["breakdown"]
        phases = breakdown.set_index("Phase")
        assert phases.loc["(whole trace)", "Kernels"] == kernels and phases.loc["ProfilerStep*", "Kernels"] == kernels
        assert phases.loc["ProfilerStep*", "Instances"] == kernels // 3  # the left-out step is no instance
        per_step = tracekit.kernels(two_steps, ranges="ProfilerStep*", per_instance=True, drop_last_step=drop)
        assert per_step["kernels"]["Instances"].sum() == 3  # 3 kernels a step, with or without the window
        launches = tracekit.launches(two_steps, drop_last_step=drop)
        assert launches["launches"]["Count"].sum() == kernels
        assert any("the last profiler step left out" in note for note in launches.notes) == drop


def test_the_flag_reaches_the_analyses(cli, two_steps):
    """The command line's --drop-last-step is the API's drop_last_step (one command suffices: the flags
    are generated from the same options)."""
    result = cli("kernels", two_steps, "--drop-last-step", "--format", "json")
    assert result.exit_code == 0 and sum(row["Instances"] for row in json.loads(result.stdout)) == 3
    assert "the last profiler step left out" in result.stderr
