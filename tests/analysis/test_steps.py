"""`tracekit steps` on built exports with exact numbers, and on real traces."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED

import tracekit


def built_steps(tmp_path):
    """Four steps of 1000 ns (the last 3000: an outlier); each launches two kernels of 100 ns at
    step start + 100 and + 300 (launch calls at + 10 and + 20), the GPU running 50 ns behind; a forward
    range of 400 ns and a backward of 500 ns inside each step."""
    b = ExportBuilder("2026.2")
    for start, wall in [(0, 1000), (1000, 1000), (2000, 1000), (3000, 3000)]:
        b.push_pop(start, start + wall, "step")
        b.push_pop(start + 5, start + 405, "forward")
        b.push_pop(start + 450, start + 950, "backward")
        b.kernel(start + 150, start + 250, "gemm", launch_at=start + 10, launch_end=start + 15)
        b.kernel(start + 350, start + 450, "relu", launch_at=start + 20, launch_end=start + 25)
    return b.write(tmp_path / "steps.sqlite")


def test_steps_of_a_built_export(tmp_path):
    result = tracekit.steps(built_steps(tmp_path))
    rows = result["steps"].to_dict("records")
    assert [row["Wall (ns)"] for row in rows] == [1000, 1000, 1000, 3000]
    assert [row["Step"] for row in rows] == ["step #1", "step #2", "step #3", "step #4"]  # which is the outlier
    assert all(row["Kernels"] == 2 and row["Kernel Time (ns)"] == 200 for row in rows)
    assert all(row["cuda:0 Busy (ns)"] == 200 for row in rows)
    # On the GPU's clock a step runs from its first kernel (start + 150) to the next step's first one.
    assert [row["cuda:0 Idle (ns)"] for row in rows] == [800, 800, 800, 100]
    assert all(row["forward (ns)"] == 400 and row["backward (ns)"] == 500 for row in rows)
    assert [row["Flag"] for row in rows] == ["", "", "", "outlier"]
    assert any("1 of 4 steps are outliers" in note for note in result.notes)


def test_steps_need_step_ranges(cli, tmp_path):
    b = ExportBuilder("2026.2")
    b.kernel(100, 200, "gemm", launch_at=10)
    b.push_pop(0, 500, "train")
    path = b.write(tmp_path / "k.sqlite")
    result = cli("steps", path)
    assert result.exit_code == 1 and "--step-range" in result.output and "Traceback" not in result.output
    named = tracekit.steps(path, step_range="train")["steps"].iloc[0]
    assert named["Wall (ns)"] == 500 and named["Kernels"] == 1
    with pytest.raises(tracekit.TracekitError, match="step_range"):  # the API names its keyword
        tracekit.steps(path)


@pytest.mark.skipif(not (SHARED / "kineto").is_dir(), reason="real traces not available")
def test_steps_of_a_real_torch_profiler_trace():
    trace = tracekit.open_trace(SHARED / "kineto" / "a100_ddp_rank0of2_nccl.json.gz")
    steps = tracekit.steps(trace)["steps"]
    assert steps["Step"].tolist() == ["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]
    kernels = tracekit.kernels(trace, ranges="ProfilerStep#*")["kernels"]
    assert steps["Kernels"].sum() == kernels["Instances"].sum()
    assert steps["Kernel Time (ns)"].sum() == kernels["Total Time (ns)"].sum()


def test_diff_step_by_step(tmp_path):
    a = built_steps(tmp_path)
    b = ExportBuilder("2026.2")
    for start in (0, 2000):  # two steps of 2000 ns, one kernel of 300 ns each
        b.push_pop(start, start + 2000, "step")
        b.kernel(start + 100, start + 400, "gemm", launch_at=start + 10)
    result = tracekit.diff(a, b.write(tmp_path / "b.sqlite"), by="step")
    rows = result.frame.to_dict("records")
    assert [(row["A Wall (ns)"], row["B Wall (ns)"], row["Delta Wall (ns)"], row["Wall Ratio"]) for row in rows] == [
        (1000, 2000, 1000, 2.0),
        (1000, 2000, 1000, 2.0),
    ]
    assert [row["Delta Kernel Time (ns)"] for row in rows] == [100, 100]
    assert any("A has 4 steps, B 2: the first 2 are compared" in note for note in result.notes)


def test_steps_picture(cli, tmp_path):
    from tracekit.analysis.ranges.steps import step_table
    from tracekit.sources import open_trace

    path = built_steps(tmp_path)
    data = step_table(open_trace(path)).charts["timeline"].data
    starts, widths = data["rows"]["CPU steps"]
    assert list(starts * 1e6) == [0, 1000, 2000, 3000] and list(widths * 1e6) == [1000, 1000, 1000, 3000]
    # each GPU row: the busy share of 2,000 equal columns over the 6,000 ns from the first step
    shares = data["busy"]["cuda:0"]
    assert len(shares) == 2000 and data["span_ms"] == 6000 / 1e6
    assert np.isclose((shares * 3).sum(), 8 * 100)  # 3 ns a column: the 8 kernels' 800 ns, no more
    assert shares[50:83].min() == 1.0 and shares[:50].max() == 0.0  # busy 150..250 ns, idle before
    picture = tmp_path / "steps.png"
    result = cli("steps", path, "--picture", picture)
    assert result.exit_code == 0 and picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_has_the_why_section(cli, tmp_path):
    result = cli("report", built_steps(tmp_path), "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "### Why the GPU waits" in text and "tracekit idle" in text and "steps.png" in text
    assert (tmp_path / "report" / "steps.png").is_file()


def test_gaps_thinner_than_a_column_still_show(tmp_path):
    """10,000 kernels of 900 ns, one every 1,000 ns: every column of the picture is 90 % busy, none solid
    (merged intervals drew this as one solid bar)."""
    from tracekit.analysis.ranges.steps import timeline_chart
    from tracekit.sources import open_trace

    b = ExportBuilder("2026.2")
    b.push_pop(0, 10_000_000, "step")
    for index in range(10_000):
        b.kernel(index * 1_000, index * 1_000 + 900, "gemm", launch_at=index * 1_000)
    trace = open_trace(b.write(tmp_path / "dense.sqlite"))
    shares = timeline_chart(trace, trace.ranges).data["busy"]["cuda:0"]
    assert np.allclose(shares, 0.9)


@pytest.mark.filterwarnings("error")
def test_a_short_step_at_epoch_times_has_a_busy_share_in_every_column(tmp_path):
    """Times since the Unix epoch (~1.7e18 ns, as ``nsys export --ts-normalize`` and torch.profiler's
    base time give) over a 1 us step: float64 cannot tell apart edges 0.5 ns apart at that magnitude, so
    columns of zero width divided 0 by 0 (a RuntimeWarning, NaN shares); the columns are measured from
    the first step instead."""
    from tracekit.analysis.ranges.steps import timeline_chart
    from tracekit.sources import open_trace

    epoch = 1_712_195_495_519_000_000
    b = ExportBuilder("2026.2")
    b.push_pop(epoch, epoch + 1_000, "step")
    b.kernel(epoch + 100, epoch + 300, "gemm", launch_at=epoch + 10)
    b.kernel(epoch + 500, epoch + 600, "gemm", launch_at=epoch + 20)
    trace = open_trace(b.write(tmp_path / "epoch.sqlite"))
    chart = timeline_chart(trace, trace.ranges, bins=100)  # columns of 10 ns
    shares = chart.data["busy"]["cuda:0"]
    assert np.isfinite(shares).all()
    assert shares.tolist() == [0.0] * 10 + [1.0] * 20 + [0.0] * 20 + [1.0] * 10 + [0.0] * 40
    assert tracekit.steps(trace)["steps"]["cuda:0 Busy (ns)"].tolist() == [300]
