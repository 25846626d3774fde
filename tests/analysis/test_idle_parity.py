"""`tracekit idle --per-stream --drop-last-step` against HolisticTraceAnalysis's get_idle_time_breakdown
on every torch.profiler trace in ../shared, within 1 us per stream and category, and the gaps' lengths
against its idle interval statistics (count, mean, min, quartiles, max; HTA also counts the zero-length
intervals between ops that abut, which are no gap: where it has them, only that is checked).

tracekit's causes map onto HTA's three: host wait = sync + host not launching (HTA has no sync cause),
kernel wait = launch overhead (a queued op, gap under 30 us: HTA's consecutive_kernel_delay), other =
other stream or device + dependency not in trace. Two differences are HTA's and are applied gap by gap:
- an op whose launching call is not in the trace (tracekit's "other"): HTA joins it to the trace's first
  event (its row 0, index_correlation 0) and compares that event's time with the gap's start;
- times: HTA reads them as float64 microseconds and subtracts the earliest (0.25 us apart at epoch
  microseconds), where tracekit compares exact integer nanoseconds; a launch and a gap start that close
  can fall on the other side of each other. Such gaps are re-decided with HTA's arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from helpers.hta_loaded import hta_analysis
from helpers.paths import SHARED

from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.analysis.waits.idle import idle_gaps
from tracekit.sources import open_trace

pytestmark = pytest.mark.filterwarnings("ignore:::hta")
KINETO = SHARED / "kineto"
TRACES = (
    (sorted(KINETO.glob("*.json.gz")) + sorted((KINETO / "v100_dlrm_8ranks").glob("*.json"))) if KINETO.is_dir() else []
)
HOST = {"sync", "host not launching"}
MAPPED = {
    "sync": "host_wait",
    "host not launching": "host_wait",
    "launch overhead": "kernel_wait",
    "other stream or device": "other",
    "dependency not in trace": "other",
}
DELAY_US = 30  # HTA's consecutive_kernel_delay, in its microseconds


def hta_idle(path, tmp_path, monkeypatch):
    """HTA's breakdown of the one trace (its default window: the last profiler step left out), its event
    frame, and the time it subtracted from every event (us)."""
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")  # else it rounds ns-precision traces to whole us first

    (tmp_path / path.name).symlink_to(path)
    analysis = hta_analysis(tmp_path)
    rank = analysis.t.get_ranks()[0]
    breakdown, intervals = analysis.get_idle_time_breakdown(
        ranks=[rank], visualize=False, show_idle_interval_stats=True
    )
    breakdown.attrs["intervals"] = intervals  # per stream and category: count, mean, std, min, quartiles, max (µs)
    return breakdown, analysis.t.get_trace(rank), float(analysis.t.min_ts)


@pytest.mark.parametrize("path", TRACES, ids=lambda path: path.name)
def test_idle_split_per_stream_equals_hta(path, tmp_path, monkeypatch):
    theirs, frame, origin = hta_idle(path, tmp_path, monkeypatch)
    trace = open_trace(path)
    gaps = idle_gaps(trace, per_stream=True, window=launched_before_last_step(trace)[0])
    ops, launches = trace.gpu_ops, op_launches(trace)
    starts, durations = ops["start"].tolist(), ops["duration"].tolist()
    stamps = frame["ts"]
    first_event = float(stamps.loc[0]) if 0 in stamps.index else math.nan  # what HTA joins an unseen launch to

    def us(nanoseconds: int) -> float:
        return nanoseconds / 1000  # a Python int's true division rounds once, as parsing the decimal text does

    categories, re_decided = [], []
    for cause, previous, following in zip(gaps["Cause"], gaps["Previous Op"], gaps["Next Op"], strict=True):
        previous_end = (us(starts[previous]) - origin) + us(durations[previous])
        gap = (us(starts[following]) - origin) - previous_end
        if launches.found[following]:
            launch = int(launches.start[following])
            host = (us(launch) - origin) > previous_end
            if host == (cause in HOST):
                categories.append(MAPPED[cause])
                continue
            re_decided.append(abs(launch - (starts[previous] + durations[previous])))
        else:
            host = first_event > previous_end  # NaN (no row 0 left after HTA's window): False
        categories.append("host_wait" if host else "kernel_wait" if gap < DELAY_US else "other")
    ours: dict[tuple[int, str], float] = {}
    for stream, category, idle_ns in zip(gaps["Stream"].tolist(), categories, gaps["Idle (ns)"].tolist(), strict=True):
        ours[(stream, category)] = ours.get((stream, category), 0.0) + idle_ns / 1000
    assert len(theirs) > 0
    for stream, category, idle_us in zip(theirs["stream"], theirs["idle_category"], theirs["idle_time"], strict=True):
        assert ours.get((stream, category), 0.0) == pytest.approx(idle_us, abs=1.0), (stream, category)
    assert {key for key, value in ours.items() if value} <= set(zip(theirs["stream"], theirs["idle_category"]))
    # the gaps' lengths per stream and category: HTA's idle interval statistics (rounded to 0.01 µs)
    lengths = pd.DataFrame(
        {"stream": gaps["Stream"].to_numpy(), "category": categories, "us": gaps["Idle (ns)"].to_numpy() / 1000}
    )
    described = lengths.groupby(["stream", "category"])["us"].describe()
    stats = theirs.attrs["intervals"].reset_index().rename(columns={"index": "idle_category"})
    for row in stats.loc[stats["count"] > 0].to_dict("records"):
        key = (row["stream"], row["idle_category"])
        mine = described.loc[key] if key in described.index else pd.Series({"count": 0})
        if mine["count"] != row["count"]:
            # HTA counts every interval between consecutive ops, those of length 0 too (ops that abut: no
            # idle, not a gap here); then its statistics are over more values, and its minimum is that 0
            assert row["count"] > mine["count"] and row["min"] <= 0.26, key
            continue
        for column in ("mean", "min", "25%", "50%", "75%", "max"):
            assert mine[column] == pytest.approx(row[column], abs=0.26), (row["stream"], row["idle_category"], column)
    assert all(apart <= 250 for apart in re_decided)  # only ties within HTA's 0.25 us float granularity
    assert np.array_equal(gaps["Cause"] == "other", ~launches.found[gaps["Next Op"].to_numpy(np.int64)])
