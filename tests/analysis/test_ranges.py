"""Ranges, GPU attribution, kernels --range and breakdown on an export built with known numbers.

One training step on process 100: main thread 100 pushes step/forward/attention/backward/optimizer;
the autograd thread 101 launches the backward GEMM and add while main's `backward` range is open.
"""

import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.steps import ADD, FILL, GEMM, SUM, build_step

import tracekit
from tracekit.analysis.kernels.summary import category_table, kernel_table
from tracekit.analysis.primitives.attribution import range_gpu_stats
from tracekit.analysis.primitives.selection import select_ranges
from tracekit.analysis.ranges.summary import range_table, range_tree, range_within
from tracekit.errors import NoGpuDataError, UsageError
from tracekit.sources.nsys.export import read_nsys_export


@pytest.fixture
def trace(tmp_path):
    b = ExportBuilder("2026.2")
    build_step(b)
    b.kernel(1100, 1105, SUM, launch_at=1100)  # outside every range
    return read_nsys_export(b.write(tmp_path / "step.sqlite"))


@pytest.fixture
def two_steps(tmp_path):
    b = ExportBuilder("2022.4")
    build_step(b, 0)
    build_step(b, 2000)
    return read_nsys_export(b.write(tmp_path / "steps.sqlite"))


def by_name(trace, same_thread=False):
    gpu = range_gpu_stats(trace, trace.ranges, same_thread)
    return pd.concat([trace.ranges, gpu], axis=1).set_index(trace.ranges["name"].astype(str))


def test_backward_owns_autograd_thread_kernels_by_default(trace):
    rows = by_name(trace)
    assert rows.loc["backward", ["gpu_ops", "gpu_time", "gpu_start", "gpu_end", "gpu_span"]].tolist() == [
        3,
        260,
        410,
        750,
        340,
    ]
    assert rows.loc["step", ["gpu_ops", "gpu_time"]].tolist() == [7, 450]
    assert rows.loc["attention", ["gpu_ops", "gpu_time", "gpu_span"]].tolist() == [1, 20, 20]


def test_same_thread_is_nsys_projection(trace):
    rows = by_name(trace, same_thread=True)
    # only the fill launched on main itself; the autograd thread's GEMM and add are not backward's
    assert rows.loc["backward", ["gpu_ops", "gpu_time", "gpu_span"]].tolist() == [1, 10, 10]
    assert rows.loc["step", ["gpu_launches", "gpu_start", "gpu_end"]].tolist() == [5, 50, 850]


def test_paths_and_specs(trace):
    assert set(select_ranges(trace, ["step/attention"])["name"]) == {"attention"}  # nested at any depth
    assert set(select_ranges(trace, ["*ward"])["name"]) == {"forward", "backward"}
    with pytest.raises(UsageError, match="no NVTX range matches backward/forward"):
        select_ranges(trace, ["backward/forward"])


def test_range_table(trace):
    table = range_table(trace).set_index("Range")
    assert table.loc[
        "backward", ["Instances", "Total Time (ns)", "GPU Ops", "GPU Time (ns)", "GPU Span (ns)"]
    ].tolist() == [1, 400, 3, 260, 340]
    assert table.loc["attention", "Depth"] == 2 and table.loc["step", "Style"] == "PushPop"
    # nvtxsum's Time (%): each range's share of all ranges' summed durations (1000+390+200+400+150)
    assert table.loc["step", "Time (%)"] == pytest.approx(100_000 / 2140)


def test_kernels_inside_ranges(trace):
    table = kernel_table(trace, ranges=["backward"]).set_index("Name")
    assert table["Total Time (ns)"].to_dict() == {GEMM: 200, ADD: 50, FILL: 10}
    same = kernel_table(trace, ranges=["backward"], same_thread=True)
    assert same["Name"].tolist() == [FILL]
    both = kernel_table(trace, ranges=["forward", "step/forward/attention"])  # nested: counted once
    assert both["Instances"].sum() == 3
    with pytest.raises(NoGpuDataError, match="own threads"):
        kernel_table(without_main_thread_backward_kernel(trace), ranges=["backward"], same_thread=True)


def without_main_thread_backward_kernel(trace):
    """The same trace without the one kernel main launches in backward: same-thread finds nothing there."""
    from tracekit.model.trace import Trace

    ops = trace.gpu_ops[trace.gpu_ops["name"] != FILL].reset_index(drop=True)
    return Trace.from_frames(trace.meta, ops, trace.launches, trace.ranges)


def test_per_instance(two_steps):
    table = kernel_table(two_steps, ranges=["step"], per_instance=True).set_index("Name")
    assert table.loc[GEMM, ["Total Time (ns)", "Instances", "Avg (ns)"]].tolist() == [300.0, 2.0, 150.0]
    categories = category_table(two_steps, ranges=["step"], per_instance=True).set_index("Category")
    assert categories.loc["matmul", "Total Time (ns)"] == 300.0


def test_tree_and_within(trace):
    tree = range_tree(trace)
    assert tree["Range"].tolist() == ["step", "  forward", "    attention", "  backward", "  optimizer"]
    assert tree.set_index("Range").loc["  backward", ["Start (ns)", "CPU (ns)", "GPU Time (ns)"]].tolist() == [
        400,
        400,
        260,
    ]
    within = range_within(trace, "step").set_index("Range")
    assert within.loc["forward", ["CPU (ns)", "CPU (%)", "GPU Time (ns)"]].tolist() == [390, 39.0, 160]
    assert within.loc["backward", "GPU (%)"] == pytest.approx(26_000 / 450)  # 260 of 450
    assert within.loc["(in step itself)", "CPU (ns)"] == 60


def test_ranges_commands(cli, trace):
    path = trace.meta.source
    assert set(tracekit.ranges(path)["ranges"]["Range"]) == {"step", "forward", "attention", "backward", "optimizer"}
    assert "    attention" in cli("ranges", path, "--tree").output
    phases = tracekit.breakdown(path)["breakdown"]["Phase"].tolist()
    assert phases == ["forward", "backward", "optimizer", "(whole trace)"]
    assert tracekit.kernels(path, ranges="backward")["kernels"]["Total Time (ns)"].sum() == 260
    # The command line's side: errors are one line, the flag is named as the command line spells it.
    missing = cli("kernels", path, "--range", "decode")
    assert missing.exit_code == 1 and "its ranges include" in missing.output
    needs_range = cli("kernels", path, "--per-instance")
    assert needs_range.exit_code == 2 and "--range" in needs_range.output


def test_a_range_name_that_matches_nothing_gets_an_error_of_one_short_line(cli, tmp_path):
    """Range names such as pyprof's dict reprs run to kilobytes: the error names a few, each clipped
    (it printed a 2 KB line on a real export)."""
    b = ExportBuilder("2026.2")
    long_name = "{'mod': 'torch', 'op': '__getattr__', 'args': [" + "{'name': '', 'type': 'str'}, " * 40 + "]}"
    for index in range(10):
        b.push_pop(100 * index, 100 * index + 50, f"{long_name} #{index}")
    b.kernel(10, 20, "gemm")
    path = b.write(tmp_path / "long_names.sqlite")
    result = cli("kernels", path, "--range", "forward")
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert len(line) < 1_000 and line.count("…") == 8 and line.endswith(" ...")
    assert "{'mod': 'torch', 'op': '__getattr__', 'args': [{'name': '',…, " in line
