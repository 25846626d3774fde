"""GPU operations attributed to the NVTX ranges that launched them.

A GPU op (kernel, memcpy, memset) is joined to the CUDA API call that launched it by correlation id
within its process. It belongs to a range when that call happened while the range was open:

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

from tracekit.analysis.primitives.keyed_times import KeyedTimes
from tracekit.model.nesting import thread_key
from tracekit.model.schema import UNKNOWN_PID, UNREADABLE_PID
from tracekit.model.trace import Trace

# Per-range GPU columns (one row per range instance).
GPU_OPS = "gpu_ops"  # GPU operations launched inside the range
GPU_LAUNCHES = "gpu_launches"  # distinct launching calls (nsys's NumGPUOps counts these)
GPU_TIME = "gpu_time"  # sum of their durations, ns
GPU_START = "gpu_start"  # first op start, ns (-1 when none)
GPU_END = "gpu_end"  # last op end, ns (-1 when none)
GPU_SPAN = "gpu_span"  # last op end - first op start, ns (0 when none)


@dataclass
class OpLaunches:
    """For each GPU op of a trace (row order of ``trace.gpu_ops``), the call that launched it."""

    found: np.ndarray  # bool: a launching call was recorded
    row: np.ndarray  # int64: the call's row in trace.launches (-1 when not found)
    start: np.ndarray  # int64 ns: call start (-1 when not found)
    end: np.ndarray  # int64 ns: call end
    pid: np.ndarray  # int64
    tid: np.ndarray  # int64


def op_launches(trace: Trace) -> OpLaunches:
    """Join every GPU op to its launching CUDA API call on (pid, correlation id); once per trace."""
    # Trace.derived stores any object; under this key it is always what _join_launches returns.
    launches: OpLaunches = trace.derived("op_launches", lambda: _join_launches(trace))
    unmatched = int((~launches.found).sum())
    if unmatched:  # said wherever ranges are asked about: these ops count in no range
        trace.note_found(
            f"{unmatched:,} of {len(launches.found):,} GPU operations have no recorded launching call (no correlation "
            "id, or the call is not in the capture): no range owns them (they count only in whole-trace figures) and what follows launches (launch delays, queues, ops) leaves them out"
        )
    return launches


# The GPU-op columns attributing ops to ranges reads (the column contract: nothing else is fetched).
ATTRIBUTION_COLUMNS = ("start", "end", "duration", "correlation_id", "pid")


def _join_launches(trace: Trace) -> OpLaunches:
    ops, calls = trace.columns("gpu_ops", ATTRIBUTION_COLUMNS), trace.launches
    n = len(ops)
    none = OpLaunches(np.zeros(n, bool), *(np.full(n, -1, np.int64) for _ in range(5)))
    if n == 0 or calls.empty:
        return none
    op_pid, op_correlation = ops["pid"].to_numpy(), ops["correlation_id"].to_numpy()
    call_correlation = calls["correlation_id"].to_numpy()
    found, row = _match(*_call_keys(calls["pid"].to_numpy(), call_correlation, op_pid, op_correlation))
    unknown_pid = op_pid == UNKNOWN_PID  # an export without the ops' process ids: correlation alone
    if unknown_pid.any():
        by_correlation = _match(call_correlation.astype(np.int64), op_correlation.astype(np.int64))
        found = np.where(unknown_pid, by_correlation[0], found)
        row = np.where(unknown_pid, by_correlation[1], row)
    found &= (op_correlation >= 0) & (op_pid != UNREADABLE_PID)  # an unreadable process matches no call
    row = np.where(found, row, -1)
    pick = lambda column: np.where(found, calls[column].to_numpy(np.int64)[np.maximum(row, 0)], -1)
    return OpLaunches(found, row, pick("start"), pick("end"), pick("pid"), pick("tid"))


def match_calls(calls: pd.DataFrame, pid: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """Per (pid, correlation id): the row in ``calls`` of the call with them (the first such), -1 for none
    (a correlation id below 0 matches nothing): GPU-side rows joined to their calls as GPU ops are."""
    return CallIndex(calls, [(pid, correlation)]).match(0)


class CallIndex:
    """The calls' (pid, correlation id) pairs sorted once, for joining several GPU-side tables to them
    (``sides``: each one's pid and correlation id arrays): ``match`` joins one as ``match_calls`` does,
    ``repeated`` says whether a pair is recorded twice."""

    def __init__(self, calls: pd.DataFrame, sides: list[tuple[np.ndarray, np.ndarray]]):
        self.correlation = calls["correlation_id"].to_numpy()
        self.sides = sides
        call_key, self.keys = _keys(calls["pid"].to_numpy(), self.correlation, sides)
        self.order = np.argsort(call_key, kind="stable")
        self.sorted_key = call_key[self.order]

    def match(self, side: int) -> np.ndarray:
        """Per row of ``sides[side]``: the row of its call (the first such), -1 for none."""
        key, correlation = self.keys[side], np.asarray(self.sides[side][1])
        if not len(self.sorted_key) or not len(key):
            return np.full(len(key), -1, dtype=np.int64)
        position = np.minimum(np.searchsorted(self.sorted_key, key), len(self.sorted_key) - 1)
        found = (self.sorted_key[position] == key) & (correlation >= 0)
        return np.where(found, self.order[position], -1)

    def repeated(self) -> bool:
        """Whether two calls have one (pid, correlation id), the correlation id at least 0."""
        same = self.sorted_key[1:] == self.sorted_key[:-1]
        return bool((same & (self.correlation[self.order[1:]] >= 0)).any())


def every_op_launch(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (GPU op, launching call) pair with the same pid and correlation id, for the ops ``rows``
    (a mask): two arrays, the op's index and the call's row. An op matched by several calls (an export
    that records a call twice) is paired with each, as an SQL join pairs them (nsys's reports do)."""
    ops, calls = trace.columns("gpu_ops", ATTRIBUTION_COLUMNS), trace.launches
    # an op whose process is unreadable matches no call
    chosen = np.flatnonzero(rows & (ops["correlation_id"].to_numpy() >= 0) & (ops["pid"].to_numpy() != UNREADABLE_PID))
    if calls.empty or not len(chosen):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    op_pid = ops["pid"].to_numpy()[chosen]
    call_pid = calls["pid"].to_numpy()
    if (op_pid == UNKNOWN_PID).any():  # an export without the ops' process ids: correlation alone (one process)
        op_pid, call_pid = np.zeros_like(op_pid), np.zeros_like(call_pid)
    call_key, op_key = _call_keys(call_pid, calls["correlation_id"].to_numpy(), op_pid,
                                  ops["correlation_id"].to_numpy()[chosen])  # fmt: skip
    order = np.argsort(call_key, kind="stable")
    sorted_key = call_key[order]
    low, high = np.searchsorted(sorted_key, op_key, "left"), np.searchsorted(sorted_key, op_key, "right")
    counts = high - low
    op_index = np.repeat(chosen, counts)
    within = np.arange(len(op_index)) - np.repeat(np.cumsum(counts) - counts, counts)
    return op_index, order[np.repeat(low, counts) + within]


def _match(call_key: np.ndarray, op_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each op key: whether a call has it, and that call's row (the first such call)."""
    order = np.argsort(call_key, kind="stable")
    sorted_key = call_key[order]
    position = np.minimum(np.searchsorted(sorted_key, op_key), len(sorted_key) - 1)
    found = sorted_key[position] == op_key
    return found, np.where(found, order[position], -1)


def _call_keys(call_pid, call_correlation, op_pid, op_correlation) -> tuple[np.ndarray, np.ndarray]:
    """One int64 key per (pid, correlation id) of the calls and of the ops, equal where both are."""
    call_key, (op_key,) = _keys(call_pid, call_correlation, [(op_pid, op_correlation)])
    return call_key, op_key


def _keys(call_pid, call_correlation, sides) -> tuple[np.ndarray, list[np.ndarray]]:
    """One int64 key per (pid, correlation id) of the calls and of each side's rows, equal where equal."""
    pids = [np.asarray(call_pid, dtype=np.int64)] + [np.asarray(pid, dtype=np.int64) for pid, _ in sides]
    correlations = [np.asarray(call_correlation, dtype=np.int64)] + [
        np.asarray(correlation, dtype=np.int64) for _, correlation in sides
    ]
    if all(_within(pid, 2**31) for pid in pids) and all(_within(correlation, 2**32) for correlation in correlations):
        # CUPTI correlation ids are 32-bit and pids small: the pair packs into one int64.
        keys = [(pid << 32) | correlation for pid, correlation in zip(pids, correlations, strict=True)]
    else:  # A source that writes larger ids (a JSON trace can): dense codes of the pairs, no bits dropped.
        codes = pd.MultiIndex.from_arrays([np.concatenate(pids), np.concatenate(correlations)]).factorize()[0]
        bounds = np.cumsum([0, *(len(pid) for pid in pids)])
        keys = [codes[low:high].astype(np.int64) for low, high in zip(bounds[:-1], bounds[1:], strict=True)]
    return keys[0], keys[1:]


def _within(values: np.ndarray, limit: int) -> bool:
    return len(values) == 0 or (int(values.min()) >= -1 and int(values.max()) < limit)


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


def segment_reduce(reductions: list[tuple[np.ufunc, np.ndarray]], low: np.ndarray, high: np.ndarray) -> list:
    """For each (ufunc, values): ufunc.reduce over values[low[i]:high[i]] for every i (empty segments give
    values[low], ignore them). One ordering of the segments serves every reduction.

    ``reduceat`` over interleaved (low, high) indices: even results are the segments; sorting the
    segments by ``low`` keeps the odd, discarded stretches disjoint, so the cost stays O(n + total
    segment length).
    """
    length = len(reductions[0][1])
    if length == 0:
        return [np.zeros(len(low), dtype=values.dtype) for _, values in reductions]
    order = np.argsort(low, kind="stable")
    indices = np.empty(2 * len(low), dtype=np.int64)
    indices[0::2] = low[order]
    indices[1::2] = np.maximum(high[order], indices[0::2])
    np.minimum(indices, length, out=indices)
    results = []
    for ufunc, values in reductions:
        padded = np.append(values, values[-1])  # reduceat indices must be < len
        result = np.empty(len(low), dtype=values.dtype)
        result[order] = ufunc.reduceat(padded, indices)[0::2]
        results.append(result)
    return results


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


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end] intervals (keyed times: groups never touch), sorted and disjoint."""
    if len(start) == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    _, low, high = merge_sorted(start[order], end[order])
    return low, high


def merge_sorted(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of [start, end] intervals already sorted by start: the position of each merged interval's
    first interval, and the merged intervals' starts and ends."""
    reach = np.maximum.accumulate(end)
    first = np.flatnonzero(np.concatenate(([True], start[1:] > reach[:-1])))
    return first, start[first], np.maximum.reduceat(end, first)
