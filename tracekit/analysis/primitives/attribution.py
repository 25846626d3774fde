"""GPU operations attributed to the NVTX ranges that launched them.

A GPU op (kernel, memcpy, memset) is joined to the CUDA API call that launched it by correlation id
within its process (``joins``). It belongs to a range when that call happened while the range was open:

- default (``same_thread=False``): the call started while the range was open, in the same process,
  on any thread. PyTorch launches backward kernels from the autograd engine's thread, so a
  ``backward`` range pushed on the main thread owns them only this way.
- ``same_thread=True``: nsys's ``nvtx_gpu_proj`` rule: the call lies entirely inside the range, on
  the range's own thread, and only ranges that start and end on one thread count.

Everything is sorting and ``searchsorted`` over int64 (group, time) keys (``keyed_times``), no loop over
rows: for each range the calls inside it form one contiguous run of the calls sorted by (group,
time), so per-range sums come from prefix sums and per-range min/max from ``reduceat``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.intervals import merge_intervals, segment_reduce
from tracekit.analysis.primitives.joins import ATTRIBUTION_COLUMNS, OpLaunches, op_launches
from tracekit.analysis.primitives.keyed_times import KeyedTimes
from tracekit.model.nesting import thread_key
from tracekit.model.trace import Trace

# Per-range GPU columns (one row per range instance).
GPU_OPS = "gpu_ops"  # GPU operations launched inside the range
GPU_LAUNCHES = "gpu_launches"  # distinct launching calls (nsys's NumGPUOps counts these)
GPU_TIME = "gpu_time"  # sum of their durations, ns
GPU_START = "gpu_start"  # first op start, ns (-1 when none)
GPU_END = "gpu_end"  # last op end, ns (-1 when none)
GPU_SPAN = "gpu_span"  # last op end - first op start, ns (0 when none)


class _Groups:
    """Joint integer codes for (pid) or (pid, tid) over calls and ranges, and their keyed times
    (``keyed_times``): sorting keys sorts by group, then time, so a single ``searchsorted`` answers
    "calls of this group within [start, end]".
    """

    def __init__(self, same_thread: bool, call_pid, call_tid, range_pid, range_tid, times: list[np.ndarray]):
        def key(pid, tid):
            return thread_key(pid, tid) if same_thread else np.asarray(pid, dtype=np.int64)

        codes, uniques = pd.factorize(np.concatenate([key(call_pid, call_tid), key(range_pid, range_tid)]))
        self.call_code = codes[: len(call_pid)].astype(np.int64, copy=False)
        self.range_code = codes[len(call_pid) :].astype(np.int64, copy=False)
        self.keyed = KeyedTimes(len(uniques), times)

    def calls(self, t: np.ndarray) -> np.ndarray:
        return self.keyed.key(self.call_code, t)

    def ranges(self, t: np.ndarray) -> np.ndarray:
        return self.keyed.key(self.range_code, t)


def range_gpu_stats(trace: Trace, ranges: pd.DataFrame, same_thread: bool = False) -> pd.DataFrame:
    """GPU work of each range instance (rows aligned with ``ranges``).

    Columns gpu_ops, gpu_launches, gpu_time (ns), gpu_start, gpu_end (ns, -1 when none), gpu_span (ns).
    With ``same_thread``, ranges closed on another thread get no GPU work (as in nsys).
    """
    count = len(ranges)
    columns = {
        GPU_OPS: np.zeros(count, np.int64),
        GPU_LAUNCHES: np.zeros(count, np.int64),
        GPU_TIME: np.zeros(count, np.int64),
        GPU_START: np.full(count, -1, np.int64),
        GPU_END: np.full(count, -1, np.int64),
        GPU_SPAN: np.zeros(count, np.int64),
    }
    launches = op_launches(trace)
    if count and launches.found.any():
        _fill_range_gpu_stats(columns, trace, launches, ranges, same_thread)
    # copy=False: the arrays are this table's own; a copy would stack six columns of millions of rows again
    return pd.DataFrame(columns, index=ranges.index, copy=False)


@dataclass
class CallSegments:
    """The launching calls that have GPU ops, sorted by (group, start), and per range the run of them it
    holds: calls ``low[i]``..``high[i]`` (exclusive) of the sorted calls. ``calls``: per sorted call its
    pid, tid, start, end, ops (count), time (summed ns), first (op start) and last (op end); ``ops``: the
    GPU-op rows, grouped by call in the sorted calls' order, and ``op_low``: per sorted call, where its
    ops begin in ``ops`` (one past the last call: ``len(ops)``)."""

    calls: dict[str, np.ndarray]
    ops: np.ndarray
    op_low: np.ndarray
    low: np.ndarray
    high: np.ndarray


def call_segments(trace: Trace, launches: OpLaunches, ranges: pd.DataFrame, same_thread: bool) -> CallSegments:
    """Per range, the run of sorted launching calls inside it (see ``CallSegments``)."""
    ops = trace.columns("gpu_ops", ATTRIBUTION_COLUMNS)
    calls, op_order, boundaries = _calls_with_ops(launches, ops)
    groups = _Groups(
        same_thread,
        calls["pid"],
        calls["tid"],
        ranges["pid"].to_numpy(),
        ranges["tid"].to_numpy(),
        [calls["start"], calls["end"], ranges["start"].to_numpy(), ranges["end"].to_numpy()],
    )
    call_start = groups.calls(calls["start"])
    order = np.argsort(call_start, kind="stable")
    call_start = call_start[order]
    per_call = {key: values[order] for key, values in calls.items()}
    # Arrays of one value per range (millions): each freed, or reused in place, as soon as it is done with.
    low = np.searchsorted(call_start, groups.ranges(ranges["start"].to_numpy()), side="left")
    range_end = groups.ranges(ranges["end"].to_numpy())
    if same_thread:
        # Calls on one thread never overlap, so sorted by start they are sorted by end too.
        call_end = np.maximum.accumulate(groups.calls(calls["end"])[order])
        high = np.searchsorted(call_end, range_end, side="right")
        np.maximum(high, low, out=high)
        ineligible = (ranges["end_tid"] != ranges["tid"]).to_numpy()
        high[ineligible] = low[ineligible]
        del ineligible
    else:
        high = np.searchsorted(call_start, range_end, side="right")
    del range_end
    # the ops regrouped in the sorted calls' order: call j's ops follow call j-1's
    counts = per_call["ops"]
    op_low = np.concatenate(([0], np.cumsum(counts)))
    within = np.arange(int(op_low[-1])) - np.repeat(op_low[:-1], counts)
    sorted_ops = op_order[np.repeat(boundaries[order], counts) + within]
    return CallSegments(per_call, sorted_ops, op_low, low, high)


def _fill_range_gpu_stats(
    columns: dict[str, np.ndarray], trace: Trace, launches: OpLaunches, ranges: pd.DataFrame, same_thread: bool
) -> None:
    segments = call_segments(trace, launches, ranges, same_thread)
    per_call, low, high = segments.calls, segments.low, segments.high

    def between(values: np.ndarray) -> np.ndarray:
        """Sum of ``values`` (per call, in call order) over each range's calls [low, high)."""
        prefix = np.concatenate(([0], np.cumsum(values)))
        total = prefix[high]
        total -= prefix[low]
        return total

    columns[GPU_OPS] = between(per_call["ops"])
    columns[GPU_LAUNCHES] = np.subtract(high, low, dtype=np.int64)
    columns[GPU_TIME] = between(per_call["time"])
    # Most ranges launch nothing (4 in 5 of a PyTorch trace's op ranges): reduce over those that do
    with_ops = np.flatnonzero(high > low)
    reductions = [(np.minimum, per_call["first"]), (np.maximum, per_call["last"])]
    first, last = segment_reduce(reductions, low[with_ops], high[with_ops])
    columns[GPU_START][with_ops] = first
    columns[GPU_END][with_ops] = last
    columns[GPU_SPAN][with_ops] = last - first


def _calls_with_ops(launches: OpLaunches, ops: pd.DataFrame) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """One entry per launching call that has GPU ops: its ops' count, summed time, first start, last end;
    the op rows grouped by call, and where each call's begin among them."""
    rows = np.flatnonzero(launches.found)
    order = rows[np.argsort(launches.row[rows], kind="stable")]  # ops grouped by their call
    call_rows = launches.row[order]
    boundaries = np.flatnonzero(np.concatenate(([True], call_rows[1:] != call_rows[:-1])))
    take = order[boundaries]
    calls = {
        "pid": launches.pid[take],
        "tid": launches.tid[take],
        "start": launches.start[take],
        "end": launches.end[take],
        "ops": np.diff(np.append(boundaries, len(order))),
        "time": np.add.reduceat(ops["duration"].to_numpy()[order], boundaries),
        "first": np.minimum.reduceat(ops["start"].to_numpy()[order], boundaries),
        "last": np.maximum.reduceat(ops["end"].to_numpy()[order], boundaries),
    }
    return calls, order, boundaries


def ops_in_ranges(trace: Trace, ranges: pd.DataFrame, same_thread: bool = False) -> np.ndarray:
    """Boolean mask over ``trace.gpu_ops``: ops launched inside any of ``ranges`` (each op counted once)."""
    return interval_of_ops(trace, ranges, same_thread) >= 0


def interval_of_ops(trace: Trace, ranges: pd.DataFrame, same_thread: bool = False) -> np.ndarray:
    """For each GPU op, the index of the merged range interval (ranges of one group merged where they
    overlap) whose open time covers its launch, or -1. Merged intervals are numbered in (group, start) order.
    """
    launches = op_launches(trace)
    result = np.full(len(launches.found), -1, dtype=np.int64)  # one per GPU op
    if same_thread:
        ranges = ranges.loc[(ranges["end_tid"] == ranges["tid"]).to_numpy()]
    if ranges.empty or not launches.found.any():
        return result
    rows = np.flatnonzero(launches.found)
    groups = _Groups(
        same_thread,
        launches.pid[rows],
        launches.tid[rows],
        ranges["pid"].to_numpy(),
        ranges["tid"].to_numpy(),
        [launches.start[rows], launches.end[rows], ranges["start"].to_numpy(), ranges["end"].to_numpy()],
    )
    merged_start, merged_end = merge_intervals(
        groups.ranges(ranges["start"].to_numpy()), groups.ranges(ranges["end"].to_numpy())
    )
    call_start = groups.calls(launches.start[rows])
    index = np.searchsorted(merged_start, call_start, side="right") - 1
    valid = index >= 0
    inside = valid & (call_start <= merged_end[np.maximum(index, 0)])
    if same_thread:
        inside &= groups.calls(launches.end[rows]) <= merged_end[np.maximum(index, 0)]
    result[rows[inside]] = index[inside]
    return result
