"""`tracekit bandwidth`: copies' bandwidth per direction on a built trace with exact numbers, and against
HolisticTraceAnalysis 0.5's get_memory_bw_summary on the torch.profiler traces in ../shared (with --as-hta
--drop-last-step: HTA's rounding and step window)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from helpers.hta_loaded import hta_analysis
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.kernels.bandwidth import bandwidth_table
from tracekit.analysis.kernels.bandwidth_command import BandwidthOptions
from tracekit.sources import open_trace

KINETO = SHARED / "kineto"
TRACES = (
    (sorted(KINETO.glob("*.json.gz")) + sorted((KINETO / "v100_dlrm_8ranks").glob("rank[04].pt.trace.json")))
    if KINETO.is_dir()
    else []
)
PAIRS = [
    ("Points", "count"),
    ("Mean (GB/s)", "mean"),
    ("StdDev (GB/s)", "std"),
    ("Min (GB/s)", "min"),
    ("25% (GB/s)", "25%"),
    ("Median (GB/s)", "50%"),
    ("75% (GB/s)", "75%"),
    ("Max (GB/s)", "max"),
]


def test_bandwidth_per_direction_by_hand(tmp_path):
    """Two HtoD copies of 1,000 and 3,000 bytes over 1 µs each, overlapping by half; a DtoH copy whose
    profiler-recorded bandwidth (its exact duration) differs from bytes over the written whole µs."""
    b = KinetoBuilder()
    b.launch("cudaMemcpyAsync", 0, 1, correlation=1).memcpy(10, 1, correlation=1, size=1_000)
    b.launch("cudaMemcpyAsync", 1, 1, correlation=2).memcpy("10.5", 1, correlation=2, size=3_000)
    b.memcpy(20, 1, correlation=3, size=500, name="Memcpy DtoH (Device -> Pinned)", bandwidth=0.625)
    b.launch("cudaMemcpyAsync", 2, 1, correlation=3)
    table = tracekit.bandwidth(b.write(tmp_path / "bw.json"), series=True)
    rows = table["bandwidth"].set_index("Direction")
    htod = rows.loc["Memcpy HtoD"]
    assert (htod["Ops"], htod["Time (ns)"], htod["Busy (ns)"]) == (2, 2_000, 1_500)
    assert htod["Achieved (GB/s)"] == pytest.approx(4_000 / 1_500)
    # the series: 1 GB/s, then 1 + 3 = 4 while both run, then 3, then 0 (not a point)
    assert htod["Points"] == 3 and htod["Max (GB/s)"] == 4 and htod["Min (GB/s)"] == 1
    assert rows.loc["Memcpy DtoH", "Mean (GB/s)"] == 0.625  # the profiler's figure, not 500 bytes / 1 µs
    series = table["series"]
    assert series.loc[series["direction"] == "Memcpy HtoD", "Bandwidth (GB/s)"].tolist() == [1, 4, 3, 0]


def test_an_nsys_export_measures_bytes_over_duration(tmp_path):
    b = ExportBuilder("2026.2")
    b.memcpy(1_000, 2_000, copy_kind=1, size=8_000, launch_at=500)
    row = tracekit.bandwidth(b.write(tmp_path / "bw.sqlite"))["bandwidth"].iloc[0]
    assert (row["Direction"], row["Achieved (GB/s)"], row["Max (GB/s)"]) == ("Memcpy HtoD", 8.0, 8.0)


@pytest.mark.skipif(not TRACES, reason=f"real traces not available: {KINETO}")
@pytest.mark.parametrize("path", TRACES, ids=lambda path: path.name)
def test_the_bandwidth_summary_equals_htas(path, tmp_path, monkeypatch):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")

    monkeypatch.delenv("HTA_DISABLE_NS_ROUNDING", raising=False)  # HTA's default reading, as --as-hta rounds
    logging.getLogger("hta").setLevel(logging.ERROR)
    (tmp_path / path.name).symlink_to(path)
    analysis = hta_analysis(tmp_path)
    theirs = analysis.get_memory_bw_summary(ranks=[analysis.t.get_ranks()[0]])
    assert theirs is not None
    theirs = theirs.reset_index()
    theirs.columns = [column if isinstance(column, str) else (column[1] or column[0]) for column in theirs.columns]
    ours = bandwidth_table(open_trace(path), BandwidthOptions(as_hta=True, drop_last_step=True))["bandwidth"]
    ours = ours.set_index("Direction")
    if "name" not in theirs.columns:  # mi250: its GPU-side copies record no bytes, so HTA has no row;
        # tracekit takes them from the copy's call (hipMemcpyWithStream's size: 2,560 bytes each)
        assert ours["Bytes (MiB)"].sum() * 2**20 == 2 * 2_560 and (ours["Points"] > 0).all()
        return
    assert set(ours.index) == set(theirs["name"])
    for row in theirs.to_dict("records"):
        mine = ours.loc[row["name"]]
        if row["min"] < 1e-9:  # HTA counts a float residue of its running sum (1e-16 GB/s) as a point
            assert row["count"] > mine["Points"] and mine["Min (GB/s)"] > 1e-9
            continue
        for column, theirs_column in PAIRS:
            assert mine[column] == pytest.approx(row[theirs_column], rel=1e-9, nan_ok=True), (row["name"], column)
    assert np.isfinite(ours["Achieved (GB/s)"]).all()
