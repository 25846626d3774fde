"""`--drop-last-step` (HolisticTraceAnalysis's default window: GPU work launched before the last
ProfilerStep#N began) on every command that compares with HTA: kernels, ranks, idle, overlap,
breakdown, launches."""

from __future__ import annotations

import json

import pytest
from helpers.nsys_builder import ExportBuilder

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


def rows(cli, *args):
    result = cli(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def test_every_command_leaves_the_last_step_out(cli, two_steps):
    for flag, kernels, idle in (([], 6, [100, 100, 650]), (["--drop-last-step"], 3, [100])):  # 2 steps, or 1
        table, notes = rows(cli, "kernels", two_steps, *flag)
        assert sum(row["Instances"] for row in table) == kernels
        gaps, _ = rows(cli, "idle", two_steps, "--unit", "ns", *flag)
        assert sorted(row["Idle (ns)"] for row in gaps["gaps"]) == idle
        overlap, _ = rows(cli, "overlap", two_steps, "--unit", "ns", *flag)
        assert [row["Communication (ns)"] for row in overlap] == [100 * kernels // 3]
        assert [row["Overlapped (ns)"] for row in overlap] == [50 * kernels // 3]
        breakdown, _ = rows(cli, "breakdown", two_steps, "--phases", "ProfilerStep*", *flag)
        phases = {row["Phase"]: row for row in breakdown["breakdown"]}
        assert phases["(whole trace)"]["Kernels"] == kernels and phases["ProfilerStep*"]["Kernels"] == kernels
        assert phases["ProfilerStep*"]["Instances"] == kernels // 3  # the left-out step is no instance
        per_step, _ = rows(cli, "kernels", two_steps, "--range", "ProfilerStep*", "--per-instance", *flag)
        assert sum(row["Instances"] for row in per_step) == 3  # 3 kernels a step, with or without the window
        launches, notes = rows(cli, "launches", two_steps, *flag)
        assert sum(row["Count"] for row in launches) == kernels
        assert ("the last profiler step left out" in notes) == bool(flag)
