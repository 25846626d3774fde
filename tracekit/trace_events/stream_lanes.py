"""GPU ops that overlap on one stream, put on lanes of their own beside it so that every track's slices can be
drawn: Perfetto and chrome://tracing end the latest open slice of a track at each end, so an op that begins
inside another and ends after it would take the other's end (two durations wrong), and ops of one stream
cannot run at once anyway (a profiler whose clocks disagree, synthetic traces).

An op starting before an earlier op of its stream has ended goes one lane over, and the same on that lane, up
to ``MAX_LANES``: lane 0 is the stream's own track, and on each lane no op overlaps another. Columns only:
a sort by start and a stable sort by stream, and a running maximum of ends per stream.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MAX_LANES = 8  # lanes of one stream (ops past the last lane's overlaps stay on it)
LANE_STRIDE = 1 << 27  # lane k of stream s is track s + k * LANE_STRIDE (below the sequence tracks' ids)


def stream_lanes(device: np.ndarray, stream: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each op's lane on its stream (0: the stream's own track); ``start``/``end`` in ns."""
    lane = np.zeros(len(start), dtype=np.int64)
    rows = np.flatnonzero((stream >= 0) & (stream < LANE_STRIDE))  # (a track id past the stride: left alone)
    for number in range(1, MAX_LANES):
        overlapping = overlaps_earlier(device[rows], stream[rows], start[rows], end[rows])
        if not overlapping.any():
            break
        rows = rows[overlapping]
        lane[rows] = number
    return lane


def overlaps_earlier(device: np.ndarray, stream: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Whether each op starts before an op of its stream that started earlier (or at once, before it in the
    table) has ended."""
    if len(start) < 2:
        return np.zeros(len(start), dtype=bool)
    codes, groups = pd.factorize((np.asarray(device, dtype=np.int64) << 32) ^ np.asarray(stream, dtype=np.int64))
    by_start = np.argsort(start, kind="stable")
    keys = codes[by_start].astype(np.int16) if len(groups) < 2**15 else codes[by_start]  # (16 bits: a radix sort)
    order = by_start[np.argsort(keys, kind="stable")]
    group, ends = codes[order], end[order]
    latest = _running_max(ends, group)
    before = np.empty_like(latest)
    before[0] = np.iinfo(np.int64).min
    before[1:] = latest[:-1]
    first = np.ones(len(group), dtype=bool)
    first[1:] = group[1:] != group[:-1]
    before[first] = np.iinfo(np.int64).min  # a stream's first op overlaps nothing
    overlapping = np.zeros(len(start), dtype=bool)
    overlapping[order] = start[order] < before
    return overlapping


def _running_max(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The running maximum of ``values`` within each run of equal ``group`` (sorted by group): one
    accumulate over values lifted by group * span, where that fits in int64, else pandas' cummax."""
    low, span = int(values.min()), int(values.max()) - int(values.min()) + 1
    if span * (int(group.max()) + 1) < 2**62:
        lift = group.astype(np.int64) * span
        return np.maximum.accumulate(values - low + lift) - lift + low
    return pd.Series(values).groupby(group).cummax().to_numpy()
