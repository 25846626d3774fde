"""Counter tracks of the timeline, as HolisticTraceAnalysis's ``generate_trace_with_counters`` adds them to a
trace, on each GPU's process:
- each stream's launch-queue length (``tracekit queues``' series: ops launched and not yet started), a track
  per stream named "stream N Queue Length" (HTA's counter "Queue Length", beside its stream's track);
- the summed bandwidth of the copies and sets running at each moment, per direction (``tracekit
  bandwidth``'s series, GB/s to three decimals), a track per direction named "Memcpy HtoD Memcpy BW", ...,
  "Memset Memcpy BW" (HTA's counters: the direction's name, its series "Memcpy BW").
A trace without queued launch calls, or without copies, has no such track. Each value lasts until the next
change of its track: the window keeps the changes whose value holds within it (the one in force at its
start included, at its own time, as an op that overlaps the window is written whole).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from tracekit.analysis.kernels.bandwidth import bandwidth_series, copy_ops
from tracekit.analysis.waits.queues import queue_series
from tracekit.model.trace import Trace
from tracekit.trace_events.events import Counters
from tracekit.trace_events.tracks import Place, slices
from tracekit.trace_events.window import Window

QUEUE_SERIES = "Queue Length"  # HTA's counter names
BANDWIDTH_SERIES = "Memcpy BW"


def queue_counters(trace: Trace, window: Window, place: Place) -> Iterator[Counters]:
    """Each stream's queue length at each change, a counter track per stream on its GPU's process."""
    series = queue_series(trace)
    key = series["device"].to_numpy() * 2**32 + series["stream"].to_numpy()
    for rows in _tracks(key, series["time"].to_numpy(), window):
        device, stream = int(series["device"].iat[rows[0]]), int(series["stream"].iat[rows[0]])
        yield from _counters(series.iloc[rows], "length", f"stream {stream}", QUEUE_SERIES, device, place, 0)


def bandwidth_counters(trace: Trace, window: Window, place: Place) -> Iterator[Counters]:
    """Per GPU and direction, the summed bandwidth of its running copies or sets (GB/s) after each start and
    end, a counter track per direction on the GPU's process."""
    ops = copy_ops(trace)
    if ops.empty:
        return
    series = bandwidth_series(ops)
    codes = series["direction"].cat.codes.to_numpy().astype(np.int64)
    key = series["device"].to_numpy().astype(np.int64) * 2**32 + codes
    directions = series["direction"].cat.categories
    for rows in _tracks(key, series["time"].to_numpy(), window):
        device, direction = int(series["device"].iat[rows[0]]), str(directions[codes[rows[0]]])
        kept = series.iloc[rows].assign(thousandths=np.round(series["bandwidth"].to_numpy()[rows] * 1000))
        yield from _counters(kept, "thousandths", direction, BANDWIDTH_SERIES, device, place, 3)


def _tracks(key: np.ndarray, time: np.ndarray, window: Window) -> Iterator[np.ndarray]:
    """The rows of each track (a run of one ``key``: the series run track by track, each in time order) that
    the window keeps: those whose value holds within it (from its time to the track's next change)."""
    if not len(key):
        return
    same = key[1:] == key[:-1]
    until = time.copy()  # a track's last value: the time of its change alone
    until[:-1] = np.where(same, time[1:], time[:-1])
    inside = window.overlapping(time, until)
    bounds = np.flatnonzero(np.concatenate(([True], ~same, [True])))
    for first, last in zip(bounds[:-1], bounds[1:]):
        rows = np.arange(first, last) if inside is None else first + np.flatnonzero(inside[first:last])
        if len(rows):
            yield rows


def _counters(
    series: pd.DataFrame, column: str, name: str, label: str, device: int, place: Place, decimals: int
) -> Iterator[Counters]:
    """One track's values, ``tracks.ROWS`` at a time."""
    pid = int(place.gpu_pid(np.array([device]))[0])
    times, values = place.time(series["time"].to_numpy()), series[column].to_numpy().astype(np.int64)
    for rows in slices(len(times)):
        yield Counters(pid, name, times[rows], {label: values[rows]}, decimals=decimals)
