"""`tracekit queues`: each stream's launch queue on a built trace with exact numbers, and against
HolisticTraceAnalysis 0.5's queue length summary and time blocked on a full queue on every torch.profiler
trace in ../shared (equal, with --as-hta --drop-last-step: HTA's rounding and its step window)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from helpers.hta_loaded import hta_analysis
from helpers.kineto_builder import KinetoBuilder
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.waits.queues import queue_table
from tracekit.analysis.waits.queues_command import QueuesOptions
from tracekit.sources import open_trace

US = 1000
KINETO = SHARED / "kineto"
TRACES = (
    (sorted(KINETO.glob("*.json.gz")) + sorted((KINETO / "v100_dlrm_8ranks").glob("*.json"))) if KINETO.is_dir() else []
)


def built(path):
    """Stream 7: launches at 0, 10 and 20 µs, their kernels start at 5, 30 and 40 (10 µs each); a
    synchronous cudaMemcpy's copy is not queued. The queue: 1, 0, 1, 2, 1, 0."""
    b = KinetoBuilder()
    for correlation, (launch, start) in enumerate([(0, 5), (10, 30), (20, 40)], start=1):
        b.launch("cudaLaunchKernel", launch, 2, correlation=correlation).kernel("k", start, 10, correlation=correlation)
    b.launch("cudaMemcpy", 22, 1, correlation=9).memcpy(45, 4, correlation=9, size=64)
    return b.write(path / "queue.json")


def test_a_streams_queue_by_hand(tmp_path):
    result = tracekit.queues(built(tmp_path), max_queue=2, series=True)
    row = result["queues"].iloc[0]
    values = np.array([1, 0, 1, 2, 1, 0])
    assert (row["GPU"], row["Stream"], row["Launches"], row["Changes"]) == ("cuda:0", 7, 3, 6)
    assert row["Mean"] == pytest.approx(values.mean()) and row["StdDev"] == pytest.approx(values.std(ddof=1))
    assert (row["Min"], row["25%"], row["Median"], row["75%"], row["Max"]) == (0, 0.25, 1, 1, 2)
    assert row["Time-Weighted Mean"] == pytest.approx((5 * 1 + 5 * 0 + 10 * 1 + 10 * 2 + 10 * 1) / 40)
    assert row["At Max Queue (ns)"] == 10 * US and row["Of Trace (%)"] == pytest.approx(100 * 10 / 50)
    assert result["series"]["Length"].tolist() == values.tolist()
    assert result["series"]["Time (ns)"].tolist() == [0, 5 * US, 10 * US, 20 * US, 30 * US, 40 * US]
    assert "queues" in result.charts


def test_a_trace_without_queued_launches_is_a_clear_error(tmp_path):
    b = KinetoBuilder().launch("cudaMemcpy", 0, 5, correlation=1).memcpy(1, 3, correlation=1, size=8)
    with pytest.raises(tracekit.TracekitError, match="no launch queue"):
        tracekit.queues(b.write(tmp_path / "sync.json"))


@pytest.mark.skipif(not TRACES, reason=f"real traces not available: {KINETO}")
@pytest.mark.parametrize("path", TRACES, ids=lambda path: path.name)
def test_the_queues_equal_htas(path, tmp_path, monkeypatch):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")
    monkeypatch.delenv("HTA_DISABLE_NS_ROUNDING", raising=False)  # HTA's default reading, which --as-hta reproduces

    logging.getLogger("hta").setLevel(logging.ERROR)
    (tmp_path / path.name).symlink_to(path)
    analysis = hta_analysis(tmp_path)
    rank = analysis.t.get_ranks()[0]
    summary = analysis.get_queue_length_summary(ranks=[rank])
    assert summary is not None
    summary = summary.reset_index()
    summary.columns = [column if isinstance(column, str) else (column[1] or column[0]) for column in summary.columns]
    series = analysis.get_queue_length_time_series(ranks=[rank])
    blocked = analysis.get_time_spent_blocked_on_full_queue(series, max_queue_length=8)
    assert blocked is not None
    ours = queue_table(open_trace(path), QueuesOptions(as_hta=True, drop_last_step=True, max_queue=8))["queues"]
    ours = ours.set_index("Stream")
    assert sorted(ours.index) == sorted(int(stream) for stream in summary["stream"])
    pairs = [
        ("Changes", "count"),
        ("Mean", "mean"),
        ("StdDev", "std"),
        ("Min", "min"),
        ("25%", "25%"),
        ("Median", "50%"),
        ("75%", "75%"),
        ("Max", "max"),
    ]
    for row in summary.to_dict("records"):
        mine = ours.loc[int(row["stream"])]
        for column, theirs in pairs:
            assert mine[column] == pytest.approx(row[theirs], nan_ok=True), (row["stream"], column)
    # HTA keeps one stream per rank (a dict by rank, the last stream with blocked time): compare that one
    for row in blocked.to_dict("records"):
        assert ours.loc[int(row["stream"]), "At Max Queue (ns)"] == row["duration_at_max_queue_length"] * US


def test_an_nsys_export_gives_the_same_queue(tmp_path):
    """The built trace's three launches and kernels as nsys records them (versioned API names), ns."""
    from helpers.nsys_builder import ExportBuilder

    b = ExportBuilder("2026.2")
    for launch, start in [(0, 5), (10, 30), (20, 40)]:
        b.kernel(start * US, (start + 10) * US, "k", launch_at=launch * US, launch_end=launch * US + 2 * US)
    row = tracekit.queues(b.write(tmp_path / "queue.sqlite"), max_queue=2)["queues"].iloc[0]
    assert (row["Launches"], row["Max"], row["At Max Queue (ns)"]) == (3, 2, 10 * US)
    assert row["Time-Weighted Mean"] == pytest.approx(45 / 40)


def test_the_picture_keeps_each_columns_peak_and_holds_quiet_columns():
    from tracekit.analysis.primitives.intervals import column_peaks

    time, values = np.array([0, 5, 10, 20, 30, 40]), np.array([1, 0, 1, 2, 1, 0])
    assert column_peaks(time, values, 0, 40, 4) == [1, 1, 2, 1]
    assert column_peaks(time, values, 0, 40, 8) == [1, 0, 1, 1, 2, 2, 1, 0]
