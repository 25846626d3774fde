"""GPU time per user annotation measured on the GPU side: `tracekit ranges --domain gpu` (torch.profiler's
GPU-side spans of record_function annotations) against HolisticTraceAnalysis 0.5's
get_gpu_user_annotation_breakdown on every torch.profiler trace in ../shared that has such spans: per
annotation the sum, max, min, mean and standard deviation of its spans' durations, equal within 1 µs
(HTA's times are µs floats; its "others" row is avoided by asking for every annotation). HTA leaves out the
last profiler step where a trace has two or more: there the spans before it are compared. Elsewhere
`ranges --gpu-side` is checked too: its GPU-Side Time beside each CPU-side annotation is HTA's sum."""

from __future__ import annotations

import logging

import pytest
from helpers.hta_loaded import hta_analysis
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.primitives.step_window import last_step_start

KINETO = SHARED / "kineto"
TRACES = (
    (sorted(KINETO.glob("*.json.gz")) + sorted((KINETO / "v100_dlrm_8ranks").glob("rank[0].pt.trace.json")))
    if KINETO.is_dir()
    else []
)


@pytest.mark.skipif(not TRACES, reason=f"real traces not available: {KINETO}")
@pytest.mark.parametrize("path", TRACES, ids=lambda path: path.name)
def test_gpu_side_annotation_time_equals_htas(path, tmp_path, monkeypatch):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")

    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")  # HTA's times as float µs, without its rounding
    logging.getLogger("hta").setLevel(logging.ERROR)
    (tmp_path / path.name).symlink_to(path)
    analysis = hta_analysis(tmp_path)
    theirs = analysis.get_gpu_user_annotation_breakdown(visualize=False, num_kernels=10**9, duration_ratio=1.0)
    trace = tracekit.open_trace(path)
    spans = trace.ranges.loc[(trace.ranges["domain"].astype(str) == "gpu").to_numpy()]
    if theirs is None or theirs.empty:
        assert spans.empty
        return
    cutoff = last_step_start(trace)
    if cutoff is None:  # the command's own table
        ours = tracekit.ranges(path, domain="gpu", raw_names=True)["ranges"]
        ours = ours.set_index(ours["Range"].str.removeprefix("gpu:"))  # the domain's names, as HTA names them
        # --gpu-side: beside each CPU-side annotation, the GPU-side spans of its name, HTA's sum
        beside = tracekit.ranges(path, gpu_side=True, raw_names=True)["ranges"].set_index("Range")
        sums = {str(row["name"]): row["sum (us)"] for row in theirs.to_dict("records")}
        named = [name for name in beside.index if name in sums]
        assert named
        for name in named:
            assert beside.loc[name, "GPU-Side Time (ns)"] / 1000 == pytest.approx(sums[name], abs=1.0), name
    else:  # HTA left out the last profiler step (and every span from its start on): the same spans' figures
        kept = spans.loc[(spans["start"] < cutoff).to_numpy()]
        durations = kept["duration"].groupby(kept["name"].astype(str).str.removeprefix("gpu:").to_numpy())
        ours = durations.agg(["sum", "max", "min", "mean", "std"]).fillna({"std": 0.0})
        ours.columns = ["Total Time (ns)", "Max (ns)", "Min (ns)", "Avg (ns)", "StdDev (ns)"]
    assert len(ours) == len(theirs)
    for row in theirs.to_dict("records"):
        mine = ours.loc[str(row["name"])]
        assert mine["Total Time (ns)"] / 1000 == pytest.approx(row["sum (us)"], abs=1.0), row["name"]
        assert mine["Max (ns)"] / 1000 == pytest.approx(row["max (us)"], abs=1.0)
        assert mine["Min (ns)"] / 1000 == pytest.approx(row["min (us)"], abs=1.0)
        assert mine["Avg (ns)"] / 1000 == pytest.approx(row["mean (us)"], abs=1.0)
        assert mine["StdDev (ns)"] / 1000 == pytest.approx(row["stddev"], abs=1.0)
