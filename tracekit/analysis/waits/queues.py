"""``tracekit queues``: how deep each stream's launch queue ran, and how long it stayed full, as
HolisticTraceAnalysis 0.5 defines them (``get_queue_length_time_series``, ``get_queue_length_summary``,
``get_time_spent_blocked_on_full_queue``).

A stream's queue length is the number of its ops launched and not yet started: +1 when a launch call
(cudaLaunchKernel, cudaMemcpyAsync, cudaMemsetAsync, cuLaunchKernel and their HIP kin: HTA's list)
starts, -1 when the op it launched starts; ops whose call is another (cudaMemcpy, cudaGraphLaunch) or
absent are not counted. The series holds the length after each change, in time order (at one time,
calls before ops, each in table order; with ``as_hta``, HTA's own order: it sorts the same array of
whole-µs times with numpy's quicksort, which orders events of one time as it happens to).
- Changes, Mean, StdDev, Min, 25%, Median, 75%, Max: the statistics of the series' values, one per
  change (HTA's ``describe``; not weighted by time).
- Time-Weighted Mean: the mean length over the stream's time from its first change to its last.
- At Max Queue (ns): time the length was at least ``max_queue`` (each change's value held until the
  next); Of Trace (%): its share of the trace's duration (first event's start to the last end). With
  the CUDA driver's launch queue of 1,024 entries (HTA's example value), a stream at the limit blocks
  the launching thread until a slot frees.
Streams are (device, stream) pairs (HTA keys them by stream number alone).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.hta import API_VERSION, QUEUED_CALLS, hta_rounded
from tracekit.analysis.primitives.intervals import column_peaks
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.analysis.stats import DESCRIBE, grouped_describe
from tracekit.analysis.waits.queues_command import QueuesOptions
from tracekit.errors import NoGpuDataError
from tracekit.model.result import Chart, Result, Table
from tracekit.model.trace import Trace

STATISTICS = ("Mean", "StdDev", "Min", "25%", "Median", "75%", "Max")
TOP_STREAMS = 8  # drawn in the picture: the streams with most launches


def queue_series(trace: Trace, as_hta: bool = False, drop_last_step: bool = False) -> pd.DataFrame:
    """Every change of every stream's queue length: device, stream, time (ns), length; per stream in
    time order (see the module docstring)."""
    ops = trace.columns("gpu_ops", ("start", "device", "stream"))  # only what it reads (a column store)
    launches = op_launches(trace)
    calls = trace.launches
    names = calls["name"]
    queued_name = np.asarray([API_VERSION.sub("", str(name)) in QUEUED_CALLS for name in names.cat.categories], bool)
    counted = launches.found.copy()
    counted[counted] = queued_name[names.cat.codes.to_numpy()[launches.row[counted]]]
    if drop_last_step:
        window, _ = launched_before_last_step(trace)
        if window is not None:
            counted &= window
    rows = np.flatnonzero(counted)
    call_rows = launches.row[rows]
    by_call = np.argsort(call_rows, kind="stable")  # HTA lists the calls in the table's order, then the ops
    start = np.concatenate([launches.start[rows][by_call], ops["start"].to_numpy()[rows]])
    if as_hta:
        start = hta_rounded(start, start)[0]
    device = np.concatenate([ops["device"].to_numpy()[rows][by_call], ops["device"].to_numpy()[rows]]).astype(np.int64)
    stream = np.concatenate([ops["stream"].to_numpy()[rows][by_call], ops["stream"].to_numpy()[rows]]).astype(np.int64)
    change = np.concatenate([np.ones(len(rows), dtype=np.int64), -np.ones(len(rows), dtype=np.int64)])
    # by time (calls first, in table order, at one time; as HTA: its sort, quicksort, on the same array), then
    # by stream keeping that order
    by_time = np.argsort(start, kind="quicksort") if as_hta else np.argsort(start, kind="stable")
    order = by_time[np.argsort((device * 2**32 + stream)[by_time], kind="stable")]
    key = device[order] * 2**32 + stream[order]
    running = np.cumsum(change[order])
    first = np.ones(len(order), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    base = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    length = running - np.concatenate([[0], running])[base]
    return pd.DataFrame({"device": device[order], "stream": stream[order], "time": start[order], "length": length})


def queue_table(trace: Trace, options: QueuesOptions | None = None) -> Result:
    """Per stream, its queue's statistics and time at ``max_queue`` (table "queues"); the series itself
    with ``series``; a picture of the queues over time."""
    options = options or QueuesOptions()
    kernel_mask(trace, "all")  # a trace without GPU work (a CPU run): say so, and how to capture it
    series = queue_series(trace, options.as_hta, options.drop_last_step)
    if series.empty:
        raise NoGpuDataError(
            f"{trace.name}: no GPU op launched by a queued launch call (cudaLaunchKernel, "
            "cudaMemcpyAsync, ...) in the trace: no launch queue to follow"
        )
    key = series["device"].to_numpy() * 2**32 + series["stream"].to_numpy()
    time, length = series["time"].to_numpy(), series["length"].to_numpy()
    held = np.zeros(len(series), dtype=np.int64)  # each value lasts until the stream's next change
    same = key[1:] == key[:-1]
    held[:-1] = np.where(same, time[1:] - time[:-1], 0)
    # the series runs stream by stream, in (device, stream) order: a stream is a run of one key, and every
    # figure is computed for all streams at once (per stream in Python: 0.7 ms each, 96 s for 100k streams)
    starts = np.flatnonzero(np.concatenate(([True], ~same)))
    stream_of = np.cumsum(np.concatenate(([False], ~same)))
    stats = grouped_describe(stream_of, length, len(starts))
    weighted, full = held * length, np.where(length >= options.max_queue, held, 0)
    sums = {
        name: np.add.reduceat(values, starts)
        for name, values in (("held", held), ("weighted", weighted), ("full", full))
    }
    duration = _trace_duration(trace, options.as_hta)
    devices, device = np.unique(series["device"].to_numpy()[starts], return_inverse=True)
    table = pd.DataFrame(
        {
            "GPU": np.array([f"cuda:{index}" for index in devices], dtype=object)[device],
            "Stream": series["stream"].to_numpy()[starts],
            "Launches": (stats["count"].to_numpy() // 2).astype(np.int64),
            "Changes": stats["count"].to_numpy().astype(np.int64),
            **{name: stats[column].to_numpy() for name, column in zip(STATISTICS, DESCRIBE[1:], strict=True)},
            "Time-Weighted Mean": np.divide(
                sums["weighted"], sums["held"], out=np.zeros(len(starts)), where=sums["held"] > 0
            ),
            "At Max Queue (ns)": sums["full"].astype(np.int64),
            "Of Trace (%)": 100.0 * sums["full"] / duration if duration > 0 else 0.0,
        }
    )
    tables = [Table("queues", table, f"Launch queue per stream: {trace.name}")]
    if options.series:
        tables.append(
            Table(
                "series",
                series.rename(columns={"time": "Time (ns)", "length": "Length"}),
                "Queue length after each change",
            )
        )
    notes = [
        f"queue length: ops launched and not yet started, per stream (HolisticTraceAnalysis's definition); At Max "
        f"Queue: time at {options.max_queue:,} or more"
    ]
    if options.drop_last_step:
        notes.append(launched_before_last_step(trace)[1])
    result = Result(tables, notes + list(trace.warnings))
    result.charts["queues"] = _chart(series, table, trace.name)
    return result


def _trace_duration(trace: Trace, as_hta: bool) -> int:
    """The trace's first start to its last end over every table (ns), as HTA's get_trace_duration."""
    starts, ends = [], []
    for table in (trace.columns("gpu_ops", ("start", "end")), trace.launches, trace.ranges):
        if len(table):
            low, high = table["start"].to_numpy(), table["end"].to_numpy()
            if as_hta:
                low, high = hta_rounded(low, high)
            starts.append(int(low.min()))
            ends.append(int(high.max()))
    return max(ends) - min(starts) if starts else 0


def _chart(series: pd.DataFrame, table: pd.DataFrame, name: str, bins: int = 1500) -> Chart:
    """The queue length over time of the streams with most launches: per stream, the largest length in
    each of ``bins`` columns (a peak narrower than a column still shows)."""
    origin = int(series["time"].min())
    span = max(int(series["time"].max()) - origin, 1)
    busiest = table.sort_values("Launches", ascending=False, kind="stable").head(TOP_STREAMS)
    lines = {}
    for gpu, stream in zip(busiest["GPU"], busiest["Stream"], strict=True):
        mine = series.loc[(series["device"] == int(gpu.split(":")[1])) & (series["stream"] == stream)]
        lines[f"{gpu} stream {stream}"] = column_peaks(
            mine["time"].to_numpy(), mine["length"].to_numpy(), origin, span, bins
        )
    return Chart(
        "queue_lengths",
        f"Launch queue length per stream: {name}",
        {"x_ms": (np.arange(bins) * span / bins / 1e6).tolist(), "lines": lines},
    )
