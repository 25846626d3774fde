"""breakdown: kernel time is kernels (copies and sets apart), category shares equal `kernels --by category`
on the same selection, and busy/idle per GPU, summed, averaged and for any GPU."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import shared_export_paths
from helpers.steps import ADD, GEMM, build_step

import tracekit
from tracekit.analysis.kernels.summary import category_table
from tracekit.analysis.primitives.keyed_times import KeyedTimes
from tracekit.analysis.ranges.breakdown import breakdown_table, gpu_table, phase_breakdown
from tracekit.analysis.ranges.breakdown_command import BreakdownOptions
from tracekit.analysis.ranges.summary import range_table
from tracekit.sources import open_trace


@pytest.fixture
def trace(tmp_path):
    """One step (see test_ranges.build_step) plus a copy and a set in backward, and a kernel outside."""
    b = ExportBuilder("2026.2")
    build_step(b)
    b.memcpy(760, 790, copy_kind=1, size=4 * 2**20, tid=100, launch_at=455)  # in backward
    b.memset(795, 799, size=2**20, tid=100, launch_at=456)
    b.kernel(1100, 1105, "void at::native::reduce_kernel<512, 1>()", launch_at=1100)
    return open_trace(b.write(tmp_path / "step.sqlite"))


def test_kernel_time_is_kernels_and_copies_stand_apart(trace):
    table = breakdown_table(trace).set_index("Phase")
    forward = table.loc["forward"]
    assert forward[["Kernels", "Kernel Time (ns)", "Memcpy Time (ns)"]].tolist() == [3, 160, 0]
    assert forward[["matmul (%)", "softmax (%)"]].tolist() == [62.5, 37.5]
    backward = table.loc["backward"]
    assert backward[["Kernels", "Kernel Time (ns)", "Memcpy Time (ns)", "Memset Time (ns)"]].tolist() == [3, 260, 30, 4]
    assert backward[["Memcpy (MiB)", "Memset (MiB)"]].tolist() == [4.0, 1.0]
    # 200, 50 and 10 (the FILL kernel) of 260 ns, unrounded
    assert backward[["matmul (%)", "elementwise (%)", "memory (%)"]].tolist() == pytest.approx(
        [2000 / 26, 500 / 26, 100 / 26]
    )
    assert table.loc["optimizer", "optimizer (%)"] == 100.0
    assert table.loc["(whole trace)", ["Kernels", "Kernel Time (ns)"]].tolist() == [8, 455]
    every = breakdown_table(trace, which_ops="all").set_index("Phase")
    assert every.loc["backward", ["GPU Ops", "GPU Op Time (ns)"]].tolist() == [5, 294]  # 260 + 30 + 4
    assert every.loc["backward", "memory (%)"] == pytest.approx(100 * (10 + 30 + 4) / 294, abs=0.05)
    same = breakdown_table(trace, same_thread=True).set_index("Phase")
    assert same.loc["backward", "Kernel Time (ns)"] == 10


def test_busy_and_idle_on_one_gpu(trace):
    gpus = gpu_table(trace).set_index(["Phase", "GPU"])
    # forward ran 50-150, 150-190, 200-220 on cuda:0: span 170, busy 160
    assert gpus.loc[("forward", "cuda:0"), ["Busy (ns)", "Span (ns)", "Idle (ns)"]].tolist() == [160, 170, 10]
    # backward: fill 410-420, gemm 500-700, add 700-750, copy 760-790, set 795-799 -> busy 294 of 389
    assert gpus.loc[("backward", "cuda:0"), ["Busy (ns)", "Span (ns)", "Idle (ns)"]].tolist() == [294, 389, 95]
    # one GPU: the sum, the mean and "any GPU busy" would repeat its row (four identical rows per phase)
    assert gpus.index.get_level_values("GPU").unique().tolist() == ["cuda:0"]


def test_busy_and_idle_on_two_gpus(tmp_path):
    """Two GPUs that take turns: each idles while the other works; "any GPU busy" sees no idle at all."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1000, "step", tid=100)
    b.kernel(100, 200, GEMM, device=0, launch_at=10)
    b.kernel(200, 300, GEMM, device=1, launch_at=20)
    b.kernel(300, 400, ADD, device=0, launch_at=30)
    b.kernel(400, 450, ADD, device=1, launch_at=40)
    trace = open_trace(b.write(tmp_path / "two.sqlite"))
    gpus = gpu_table(trace, ["step"]).set_index(["Phase", "GPU"]).loc["step"]
    assert gpus.loc["cuda:0", ["Busy (ns)", "Span (ns)", "Idle (ns)"]].tolist() == [200, 300, 100]
    assert gpus.loc["cuda:1", ["Busy (ns)", "Span (ns)", "Idle (ns)"]].tolist() == [150, 250, 100]
    assert gpus.loc["sum of GPUs", ["Busy (ns)", "Span (ns)", "Idle (ns)"]].tolist() == [350, 550, 200]
    assert gpus.loc["mean per GPU", ["Busy (ns)", "Span (ns)", "Idle (ns)"]].tolist() == [175, 275, 100]
    assert gpus.loc["any GPU busy", ["Busy (ns)", "Span (ns)", "Idle (ns)"]].tolist() == [350, 350, 0]
    assert gpus.loc["cuda:0", "Idle (%)"] == pytest.approx(100 / 3)


def test_any_gpu_busy_over_two_ranks_running_at_once(tmp_path):
    """A two-GPU DDP export: each rank (process) has its own forward range at the same time. "any GPU
    busy" was their sum (busy 5.4 ms over a 628.5 ms span where each GPU spanned 300 and 328 ms): the
    union of both ranks' ops over the union of their spans is meant."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1000, "forward pass", pid=1000, tid=1000)
    b.push_pop(20, 1020, "forward pass", pid=2000, tid=2000)
    b.kernel(100, 400, GEMM, device=0, pid=1000, launch_at=50)  # rank 0: span 100-500, busy 300 + 50
    b.kernel(450, 500, ADD, device=0, pid=1000, launch_at=60)
    b.kernel(300, 600, GEMM, device=1, pid=2000, launch_at=70)  # rank 1: span 300-628
    b.kernel(610, 628, ADD, device=1, pid=2000, launch_at=80)
    trace = open_trace(b.write(tmp_path / "ddp.sqlite"))
    gpus = gpu_table(trace, ["forward pass"]).set_index(["Phase", "GPU"]).loc["forward pass"]
    assert gpus.loc["cuda:0", ["Busy (ns)", "Span (ns)"]].tolist() == [350, 400]
    assert gpus.loc["cuda:1", ["Busy (ns)", "Span (ns)"]].tolist() == [318, 328]
    assert gpus.loc["sum of GPUs", ["Busy (ns)", "Span (ns)"]].tolist() == [668, 728]
    # union of ops: 100-600 and 610-628; union of the ranks' spans: 100-628
    assert gpus.loc["any GPU busy", ["Busy (ns)", "Span (ns)", "Idle (ns)"]].tolist() == [518, 528, 10]


def test_many_instances_over_a_long_capture(tmp_path):
    """2,000 step instances spread over 2^53 ns (104 days): (instance, time) keys would overflow int64
    as code * span, so times are keyed by rank; every figure must still be exact."""
    b = ExportBuilder("2026.2")
    gap = 2**42  # 2,000 instances x 2^42 ns stays below 2^53
    for i in range(2_000):
        at = i * gap
        b.push_pop(at, at + 1_000, "step", tid=100)
        b.kernel(at + 100, at + 300, GEMM, launch_at=at + 10)
        b.kernel(at + 200, at + 400, ADD, stream=8, launch_at=at + 20)  # overlaps the first by 100 ns
    trace = open_trace(b.write(tmp_path / "long.sqlite"))
    gpus = gpu_table(trace, ["step"]).set_index(["Phase", "GPU"]).loc["step"]
    assert gpus.loc["cuda:0", ["Busy (ns)", "Span (ns)", "Idle (ns)"]].tolist() == [600_000, 600_000, 0]
    table = breakdown_table(trace, ["step"]).set_index("Phase")
    assert table.loc["step", ["Instances", "Kernels", "Kernel Time (ns)"]].tolist() == [2_000, 4_000, 800_000]


def test_copies_by_direction(trace):
    copies = phase_breakdown(trace).table("copies").set_index(["Phase", "Operation"])
    assert copies.loc[("backward", "memcpy HtoD"), ["Count", "Time (ns)", "MiB"]].tolist() == [1, 30, 4.0]
    assert copies.loc[("backward", "memset"), ["Count", "Time (ns)", "MiB"]].tolist() == [1, 4, 1.0]


@pytest.mark.parametrize("export", shared_export_paths(), ids=lambda path: path.name)
def test_breakdown_equals_kernels_by_category_on_real_exports(shared_traces, export, cli):
    """Whole trace and the three range names that launched the most GPU work, as phases: kernel time =
    the kernels' total, shares = Time (%); --ops all = kernels + copies + sets."""
    trace = open_trace(export)
    phases = []
    if not trace.ranges.empty:  # real names of this trace as literal specs
        named = range_table(trace, raw_names=True).sort_values("GPU Time (ns)", ascending=False, kind="stable")
        phases = ["=" + name for name in named.loc[named["GPU Time (ns)"] > 0, "Range"].head(3)]
    table = breakdown_table(trace, phases or None).set_index("Phase")
    everything = breakdown_table(trace, phases or None, which_ops="all").set_index("Phase")
    ops = trace.gpu_ops
    assert all(everything.loc[phase, "GPU Ops"] > 0 for phase in phases)  # each phase has work to check
    for phase in table.index:
        ranges = None if phase == "(whole trace)" else [phase]
        if phase != "(whole trace)" and table.loc[phase, "Kernels"] == 0:
            continue  # only copies launched inside
        expected = category_table(trace, ranges=ranges).set_index("Category")
        assert table.loc[phase, "Kernel Time (ns)"] == expected["Total Time (ns)"].sum()
        for category, row in expected.iterrows():
            share = table.loc[phase].get(f"{category} (%)", 0.0)
            assert share == row["Time (%)"], (phase, category)
        assert everything.loc[phase, "GPU Op Time (ns)"] == (
            table.loc[phase, "Kernel Time (ns)"]
            + table.loc[phase, "Memcpy Time (ns)"]
            + table.loc[phase, "Memset Time (ns)"]
        )
    whole = table.loc["(whole trace)"]
    kernels = (ops["kind"] == "kernel").to_numpy()
    assert whole["Kernel Time (ns)"] == int(ops["duration"].to_numpy()[kernels].sum())
    categories = tracekit.kernels(export, by="category")["categories"]
    assert whole["Kernel Time (ns)"] == categories["Total Time (ns)"].sum()
    assert np.isclose(whole["Memcpy (MiB)"] * 2**20, ops.loc[(ops["kind"] == "memcpy").to_numpy(), "bytes"].sum())


def independent_busy(starts, ends) -> int:
    """Union length of [start, end) intervals, the plain way."""
    total, reach = 0, None
    for start, end in sorted(zip(starts, ends)):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def test_idle_per_gpu_on_a_real_two_gpu_trace(shared_traces):
    trace = open_trace(shared_traces / "h100_videogen_2gpu_b_nsys2026.2.sqlite")
    gpus = gpu_table(trace).set_index(["Phase", "GPU"]).loc["(whole trace)"]
    ops = trace.gpu_ops
    total_idle = 0
    for device in (0, 1):
        mine = ops.loc[(ops["device"] == device).to_numpy()]
        busy = independent_busy(mine["start"].tolist(), mine["end"].tolist())
        span = int(mine["end"].max() - mine["start"].min())
        assert gpus.loc[f"cuda:{device}", ["Busy (ns)", "Span (ns)"]].tolist() == [busy, span]
        total_idle += span - busy
    assert gpus.loc["sum of GPUs", "Idle (ns)"] == total_idle  # about 104 ms
    every = independent_busy(ops["start"].tolist(), ops["end"].tolist())
    assert gpus.loc["any GPU busy", "Busy (ns)"] == every  # idle only when both are: about 30 ms
    assert gpus.loc["any GPU busy", "Idle (ns)"] < gpus.loc["sum of GPUs", "Idle (ns)"] / 3


def test_phases_by_emit_nvtx_op_on_a_real_trace(shared_traces):
    export = shared_traces / "a100_small_lm_trainstep_nsys2026.3.sqlite"
    table = breakdown_table(open_trace(export), ["aten::bmm", "aten::mul"]).set_index("Phase")
    raw = open_trace(export).ranges["name"].astype(str)
    assert table.loc["aten::bmm", "Instances"] == raw.str.startswith("aten::bmm,").sum() > 10
    assert table.loc["aten::bmm", "matmul (%)"] > 90
    grouped = tracekit.ranges(export)["ranges"]
    raw_rows = tracekit.ranges(export, raw_names=True)["ranges"]
    assert len(grouped) < 200 < len(raw_rows)


def test_a_trace_without_the_default_phases_says_so(tmp_path, trace):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "train_step")
    b.kernel(100, 200, GEMM, launch_at=10)
    other = open_trace(b.write(tmp_path / "named-otherwise.sqlite"))
    notes = phase_breakdown(other).notes
    assert len(notes) == 1 and notes[0].startswith(
        "no range of this trace names a phase (forward, backward, optimizer)"
    )
    assert phase_breakdown(trace).notes == []  # the step fixture has all three
    assert phase_breakdown(other, BreakdownOptions(phases=("train_step",))).notes == []


def test_ranges_of_many_processes_over_a_huge_span(tmp_path):
    """Six processes whose ranges lie 2^59 ns apart: (process, time) keys would wrap int64, so the launch
    attribution keys times by rank; every range must still own exactly its own kernel."""
    b = ExportBuilder("2026.2")
    for i in range(6):
        at = i * 2**59
        b.push_pop(at, at + 1_000, f"work{i}", pid=100 + i, tid=100 + i)
        b.kernel(at + 100, at + 100 + 10 * (i + 1), GEMM, pid=100 + i, tid=100 + i, launch_at=at + 10)
    trace = open_trace(b.write(tmp_path / "huge-span.sqlite"))
    table = breakdown_table(trace, [f"work{i}" for i in range(6)]).set_index("Phase")
    assert table["Kernel Time (ns)"].tolist() == [10, 20, 30, 40, 50, 60, 210]
    same = breakdown_table(trace, [f"work{i}" for i in range(6)], same_thread=True).set_index("Phase")
    assert same["Kernel Time (ns)"].tolist() == [10, 20, 30, 40, 50, 60, 210]


def test_keyed_times_sort_by_group_then_time_at_any_scale():
    """Keys order (group, time) pairs exactly as a lexsort does, also when group * span passes int64
    (100 groups over 2^58 ns: plain keys of groups 0 and 64 would coincide)."""
    rng = np.random.default_rng(7)
    for span in (10_000, 2**58):
        groups = rng.integers(0, 100, 5_000)
        times = rng.integers(0, span, 5_000)
        times[:2] = 0, span - 1
        keyed = KeyedTimes(100, [times])
        keys = keyed.key(groups, times)
        assert (np.argsort(keys, kind="stable") == np.lexsort((np.arange(5_000), times, groups))).all()
        code, back = keyed.split(keys)
        assert (code == groups).all() and (back == times).all()


def test_phases_are_found_by_the_names_traces_use(tmp_path):
    """DDP's "## forward ##", a "backward pass", an optimizer's step: taken as the phases, each row named by
    its word; an operator whose name merely contains the word ("BatchNormBackward0") is not."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "## forward ##")
    b.push_pop(1_000, 5_000, "BatchNormBackward0")  # the most time, but an operator's name
    b.push_pop(5_000, 6_000, "backward pass")
    b.push_pop(6_000, 6_100, "Optimizer.zero_grad#SGD.zero_grad")
    b.push_pop(6_100, 7_000, "Optimizer.step#SGD.step")
    b.kernel(100, 200, GEMM, launch_at=10)
    b.kernel(5_100, 5_400, GEMM, launch_at=5_010)
    b.kernel(6_200, 6_250, GEMM, launch_at=6_150)
    b.kernel(6_300, 6_310, GEMM, launch_at=6_050)  # launched in zero_grad
    result = phase_breakdown(open_trace(b.write(tmp_path / "ddp.sqlite")))
    table = result["breakdown"]
    assert table[["Phase", "Instances", "Kernel Time (ns)"]].values.tolist() == [
        ["forward", 1, 100],
        ["backward", 1, 300],
        ["optimizer", 1, 50],
        ["zero_grad", 1, 10],
        ["(whole trace)", 1, 460],
    ]
    (note,) = result.notes
    assert note.startswith(
        "phases found by their range names: forward = '## forward ##', backward = 'backward pass', "
        "optimizer = 'Optimizer.step#SGD.step', zero_grad = 'Optimizer.zero_grad#*'"
    )
