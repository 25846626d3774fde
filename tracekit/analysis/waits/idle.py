"""``tracekit idle``: why each GPU sat idle, gap by gap.

A device is busy while any of its ops (kernel, copy, set) runs; its idle time is the gaps between the
merged busy intervals, from its first op to its last (``busy``: the same Idle). ``per_stream`` takes
each stream on its own instead (a stream's gaps, as HolisticTraceAnalysis counts them). Each gap gets
one cause, decided by the op that ends the gap (the first to start after it, "next op") and its
launching call:

Nothing was queued (the next op's launching call started after the gap began):
1. sync: a blocking host call of the process (``syncs``: synchronize, synchronous memcpy) was running
   when the gap began: the CPU waited for the GPU to drain before it could launch more. (A blocking
   call that starts inside the gap returns at once, the GPU having nothing left to finish: it does not
   explain the gap.)
2. host not launching: otherwise; the CPU was late (Python, data loading, a CPU-side op).
The next op was queued (its launching call started at or before the gap began):
3. launch overhead: the gap is shorter than ``overhead_max_ns`` (30 us, HolisticTraceAnalysis's
   ``consecutive_kernel_delay``): the time the GPU takes to start queued work after the previous op.
   A blocking call running meanwhile does not matter: the work was already queued.
4. other stream or device: longer, and the process called cudaStreamWaitEvent between the previous
   op's launch and the next op's launch: the next op waited on work recorded on another stream or device.
5. dependency not in trace: longer, with no such call: the op was queued and waited on something the
   trace does not show (an event of another process, a stream wait before the trace began, ...).
6. other: the next op has no launching call in the trace.
The causes of a device (or stream) add up to its idle time.

Against HolisticTraceAnalysis's ``get_idle_time_breakdown`` (per stream): its host wait is 1 + 2 (it
has no sync cause), its kernel wait 3 plus the gaps of 6 under the bound, its other 4 + 5 plus the rest
of 6; it counts kernels, copies and sets as tracekit does (not its cuda_sync events).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.intervals import merge_sorted
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.keyed_times import KeyedTimes
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.analysis.stats import grouped_describe
from tracekit.analysis.waits.idle_command import IdleOptions
from tracekit.analysis.waits.launches import api_name
from tracekit.analysis.waits.syncs import BLOCKING
from tracekit.model.derived import kept_per_trace
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace

CAUSES = ("sync", "host not launching", "launch overhead", "other stream or device", "dependency not in trace", "other")
OVERHEAD_MAX_NS = 30_000  # HolisticTraceAnalysis's consecutive_kernel_delay (30, in its microseconds)
STREAM_WAIT = re.compile(r"^(cudaStreamWaitEvent|cuStreamWaitEvent|hipStreamWaitEvent)$")


def method(overhead_max_ns: int = OVERHEAD_MAX_NS, per_stream: bool = False) -> str:
    """The note that says how gaps get their causes (the module docstring, in one line)."""
    where = "stream" if per_stream else "GPU"
    return (
        f"method: per {where}, each gap between busy intervals gets the first cause that holds. The next op was "
        "launched during the gap: sync (a blocking host call was running when the gap began), else host not "
        f"launching. It was queued before: launch overhead (gap under {overhead_max_ns / 1000:g} us), other "
        "stream or device (longer, after a cudaStreamWaitEvent), dependency not in trace (longer, no such call). "
        "other: no launching call in the trace. HolisticTraceAnalysis's host wait = sync + host not launching, "
        "kernel wait = launch overhead (+ short 'other'), other = the rest"
    )


def _calls_matching(trace: Trace, pattern: re.Pattern) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, pid) of the host calls whose API name matches, sorted by start."""
    calls = trace.launches
    names = calls["name"]
    wanted = np.asarray([bool(pattern.match(api_name(str(name)))) for name in names.cat.categories], dtype=bool)
    rows = np.flatnonzero(wanted[names.cat.codes.to_numpy()]) if len(wanted) else np.zeros(0, np.int64)
    order = rows[np.argsort(calls["start"].to_numpy()[rows], kind="stable")]
    return (calls["start"].to_numpy()[order], calls["end"].to_numpy()[order], calls["pid"].to_numpy()[order])


GAP_COLUMNS = ("start", "end", "device", "stream", "pid", "correlation_id", "duration")


def idle_gaps(
    trace: Trace, per_stream: bool = False, overhead_max_ns: int = OVERHEAD_MAX_NS, window: np.ndarray | None = None
) -> pd.DataFrame:
    """Every idle gap of every device (or stream): GPU, [Stream,] Start (ns), Idle (ns), Cause, and the
    positions in ``trace.gpu_ops`` of the op before the gap and the op that ends it (Previous Op, Next
    Op). ``window`` (a mask of GPU ops, ``step_window.launched_before_last_step``) keeps only those ops.
    Without a window, computed once per trace for each choice of options (a report asks for them in its
    idle table and again for its timeline); callers get a frame of their own to change."""
    if window is None:
        return _cached_gaps(trace, per_stream, overhead_max_ns)
    return _idle_gaps(trace, per_stream, overhead_max_ns, window)


@kept_per_trace
def _cached_gaps(trace: Trace, per_stream: bool, overhead_max_ns: int) -> pd.DataFrame:
    """The whole trace's gaps, computed once per trace and choice of options (each caller's frame its own)."""
    return _idle_gaps(trace, per_stream, overhead_max_ns, None)


def gap_devices(gaps: pd.DataFrame) -> np.ndarray:
    """The device index of each gap of ``idle_gaps`` (its GPU column names them "cuda:N"), parsed once per
    distinct name."""
    codes, names = pd.factorize(gaps["GPU"])
    return np.array([int(str(name).removeprefix("cuda:")) for name in names], dtype=np.int64)[codes]


def _idle_gaps(trace: Trace, per_stream: bool, overhead_max_ns: int, window: np.ndarray | None) -> pd.DataFrame:
    kernel_mask(trace, "all")  # a clear error for a trace without GPU work
    # the columns gaps need only: a trace's kernel names are its largest columns to read
    ops = trace.columns("gpu_ops", GAP_COLUMNS)
    launches = op_launches(trace)
    start, end, devices = ops["start"].to_numpy(), ops["end"].to_numpy(), ops["device"].to_numpy()
    streams = ops["stream"].to_numpy().astype(np.int64) if per_stream else np.zeros(len(ops), dtype=np.int64)
    owners = _stream_owners(ops, devices, streams) if per_stream else np.zeros(len(ops), dtype=np.int64)
    sync_start, sync_end, sync_pid = _calls_matching(trace, BLOCKING)
    wait_start, _, wait_pid = _calls_matching(trace, STREAM_WAIT)
    kept = devices >= 0  # an op on an unknown device (-1) has no gaps of its own
    if window is not None:
        kept &= window
    rows = np.flatnonzero(kept)
    if not len(rows):
        return _no_gaps(per_stream)
    # Every group's (device, stream, process) busy intervals at once (a loop over groups ran Python per
    # stream: 100k streams took 45 s): times keyed by group, so that groups sort apart and never merge.
    group = _group_codes(devices[rows], streams[rows], owners[rows])
    keyed = KeyedTimes(int(group.max()) + 1, [start[rows], end[rows]])
    key_start, key_end = keyed.key(group, start[rows]), keyed.key(group, end[rows])
    # one sort serves the busy intervals, the op that ends each gap and the op before it
    by_time = np.lexsort((key_end, key_start))  # by group, then start, then end
    order, group = rows[by_time], group[by_time]
    sorted_start, sorted_end = key_start[by_time], key_end[by_time]
    first, low, high = merge_sorted(sorted_start, sorted_end)
    between = np.flatnonzero(group[first[1:]] == group[first[:-1]])  # interval k and k + 1 of one group
    if not len(between):
        return _no_gaps(per_stream)
    gap_start, gap_end = keyed.split(high[between])[1], keyed.split(low[between + 1])[1]
    # the op that ends each gap: the first of the group's ops to start at the next interval's start
    next_op = order[first[between + 1]]
    found = launches.found[next_op]
    launch_start = launches.start[next_op]
    pid = np.where(found, launches.pid[next_op], ops["pid"].to_numpy()[next_op])
    previous_launch = np.where(
        found, _previous_launch(launches, order, sorted_start, group, first, high, between), NO_LAUNCH
    )
    late = found & (launch_start > gap_start)
    queued = found & ~late
    long_wait = queued & (gap_end - gap_start >= overhead_max_ns)
    # a stream wait between the two launches; a previous op with no launching call bounds nothing
    waited = (previous_launch != NO_LAUNCH) & _any_between(wait_start, wait_pid, pid, previous_launch, launch_start)
    synced = _running_at(sync_start, sync_end, sync_pid, pid, gap_start)
    cause = np.select(
        [late & synced, late, queued & ~long_wait, long_wait & waited, long_wait],
        [CAUSES.index(name) for name in CAUSES[:5]],
        default=CAUSES.index("other"),
    )
    previous_op = order[_interval_enders(sorted_end, first, high)[between]]
    at = order[first[between]]  # an op of the gap's group
    columns = {
        "Start (ns)": gap_start,
        "Idle (ns)": gap_end - gap_start,
        "Cause": cause.astype(np.int8),
        "Previous Op": previous_op,
        "Next Op": next_op,
    }
    # a device whose streams come from several processes: the table names the process
    shared = bool(owners[rows].any())
    return _gap_frame(devices[at], owners[at], streams[at], columns, per_stream, shared)


def _no_gaps(per_stream: bool) -> pd.DataFrame:
    columns = ["GPU", "Stream"] if per_stream else ["GPU"]
    return pd.DataFrame({name: [] for name in [*columns, "Start (ns)", "Idle (ns)", "Cause", "Previous Op", "Next Op"]})


def _group_codes(device: np.ndarray, stream: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Per op, its group's code: 0, 1, ... in (device, stream, process) order (hashed: a million ops, few groups)."""
    keys = pd.DataFrame({"device": device, "stream": stream, "owner": owner})
    return keys.groupby(["device", "stream", "owner"], sort=True).ngroup().to_numpy(np.int64)


def _gap_frame(
    device: np.ndarray,
    owner: np.ndarray,
    stream: np.ndarray,
    columns: dict[str, np.ndarray],
    per_stream: bool,
    shared: bool,
) -> pd.DataFrame:
    """The gaps as one frame, each with its group's keys (``device``, ``owner``, ``stream``). Built from whole
    columns, the GPUs as small codes: a million gaps are tens of MB."""
    devices, codes = np.unique(device, return_inverse=True)
    # categorical: a million gaps on a few GPUs, of a few causes (strings would be a million objects)
    frame = {"GPU": pd.Categorical.from_codes(codes.astype(np.int16), categories=[f"cuda:{d}" for d in devices])}
    if per_stream:
        if shared:
            frame["PID"] = owner
        frame["Stream"] = stream
    columns["Cause"] = pd.Categorical.from_codes(columns["Cause"], categories=list(CAUSES))
    return pd.DataFrame({**frame, **columns})


def _stream_owners(ops: pd.DataFrame, devices: np.ndarray, streams: np.ndarray) -> np.ndarray:
    """Per op, the process its stream belongs to, when that matters: stream ids are per process (CUDA
    context), so two processes on one GPU may both have a stream 7, which are two streams. A stream id
    used by one process on a device (ops whose process is unknown, -1, joining it) is one stream: 0."""
    pids = ops["pid"].to_numpy()
    owners = np.zeros(len(ops), dtype=np.int64)
    key = devices.astype(np.int64) * 2**32 + streams.astype(np.int64)
    known = pids >= 0
    # hashed, not sorted: a million ops, a few streams
    processes = pd.Series(pids[known]).groupby(key[known]).nunique()
    shared = np.isin(key, processes.index.to_numpy()[processes.to_numpy() > 1])
    owners[shared] = pids[shared]
    return owners


NO_LAUNCH = np.iinfo(np.int64).min  # no previous op, or one without a launching call in the trace


def _interval_enders(end: np.ndarray, first: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Per busy interval (ops sorted by start, then end): the position of the op that ends it, the last to
    end and of those the last to start (of ops alike, the last in row order)."""
    lengths = np.diff(np.append(first, len(end)))
    ending = np.where(end == np.repeat(high, lengths), np.arange(len(end)), -1)
    return np.maximum.reduceat(ending, first)


def _previous_launch(
    launches,
    order: np.ndarray,
    sorted_start: np.ndarray,
    group: np.ndarray,
    first: np.ndarray,
    high: np.ndarray,
    between: np.ndarray,
) -> np.ndarray:
    """Per gap (after busy interval ``between``): the launch start of the group's last op (in start order:
    ``order``, their starts ``sorted_start``, their groups ``group``) that started before the gap began;
    ``NO_LAUNCH`` when there is none or it has no launching call. The ops of later intervals start after
    the gap; those of the interval before it start at or before its end, the ones at its very end last:
    so the op is the interval's last one less those that start exactly at its end."""
    lengths = np.diff(np.append(first, len(sorted_start)))
    at_end = np.add.reduceat((sorted_start == np.repeat(high, lengths)).astype(np.int64), first)
    before = first[between + 1] - 1 - at_end[between]
    op = order[np.maximum(before, 0)]
    same_group = (before >= 0) & (group[np.maximum(before, 0)] == group[first[between]])
    return np.where(same_group & launches.found[op], launches.start[op], NO_LAUNCH)


def _any_between(times: np.ndarray, pids: np.ndarray, pid: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Per row: whether a call of the row's process started in [low, high]."""
    result = np.zeros(len(pid), dtype=bool)
    for process in pd.unique(pid):  # hashed: a million gaps, a few processes
        calls = times[pids == process]
        rows = pid == process
        result[rows] = np.searchsorted(calls, high[rows], "right") > np.searchsorted(calls, low[rows], "left")
    return result


def _running_at(call_start, call_end, call_pid, pid, time) -> np.ndarray:
    """Per row: whether a call of the row's process was running at ``time`` (started at or before it, ended
    after it; calls sorted by start)."""
    result = np.zeros(len(pid), dtype=bool)
    for process in pd.unique(pid):  # hashed: a million gaps, a few processes
        mine = call_pid == process
        starts, ends = call_start[mine], call_end[mine]
        if not len(starts):
            continue
        latest_end = np.maximum.accumulate(ends)  # of the calls that started up to a time
        rows = pid == process
        before = np.searchsorted(starts, time[rows], "right") - 1
        result[rows] = (before >= 0) & (latest_end[np.maximum(before, 0)] > time[rows])
    return result


INTERVAL_STATISTICS = (
    ("Mean", "mean"),
    ("StdDev", "std"),
    ("Min", "min"),
    ("25%", "25%"),
    ("Median", "50%"),
    ("75%", "75%"),
    ("Max", "max"),
)


def _largest(values: np.ndarray, top: int) -> np.ndarray:
    """Positions of the ``top`` largest values, largest first, ties in position order (as nlargest keeps
    them); a partition, not a sort, of a million gaps."""
    if top >= len(values):
        return np.argsort(-values, kind="stable")
    kth = np.partition(values, len(values) - top)[len(values) - top]
    above = np.flatnonzero(values > kth)
    chosen = np.concatenate([above, np.flatnonzero(values == kth)[: top - len(above)]])
    return chosen[np.argsort(-values[chosen], kind="stable")]


class _GapGroups:
    """The gaps grouped by ``keys`` and cause once: per gap its group, per group its keys (sorted)."""

    def __init__(self, gaps: pd.DataFrame, keys: list[str]):
        grouped = gaps.groupby([*keys, "Cause"], sort=True, observed=True)
        self.codes = np.asarray(grouped.ngroup())
        self.keys = pd.DataFrame(grouped.size().reset_index()[[*keys, "Cause"]])

    def sizes(self) -> np.ndarray:
        return np.bincount(self.codes, minlength=len(self.keys)).astype(np.int64)

    def sums(self, values: np.ndarray) -> np.ndarray:
        sums = np.zeros(len(self.keys), dtype=np.int64)
        np.add.at(sums, self.codes, values)  # integers: exact, unlike bincount's float weights
        return sums


def _interval_statistics(gaps: pd.DataFrame, keys: list[str], rank: dict[str, int], groups: _GapGroups) -> pd.DataFrame:
    """Per group and cause: the gaps' count and their lengths' statistics (ns)."""
    columns = [*keys, "Cause", "Gaps", *(f"{label} (ns)" for label, _ in INTERVAL_STATISTICS)]
    if gaps.empty:
        return pd.DataFrame(columns=columns)
    intervals = groups.keys.copy()
    # every group at once (pandas' describe, and a numpy call per group, ran Python per stream)
    figures = grouped_describe(groups.codes, gaps["Idle (ns)"].to_numpy(), len(intervals))
    intervals["Gaps"] = figures["count"].to_numpy().astype(np.int64)
    for label, column in INTERVAL_STATISTICS:
        intervals[f"{label} (ns)"] = figures[column].to_numpy()
    return intervals.sort_values(
        [*keys, "Cause"],
        key=lambda column: column.map(rank) if column.name == "Cause" else column,
        kind="stable",
        ignore_index=True,
    )


def idle_by_cause(trace: Trace, options: IdleOptions | None = None) -> Result:
    """Per GPU (and stream) and cause: gaps, idle time and share of the group's idle; the longest gaps; and
    the statistics of the gaps' lengths per cause ("intervals": count, mean, std, min, quartiles, max).
    ``overhead_max_us``: a gap before a queued op up to this long is launch overhead; ``drop_last_step``:
    HolisticTraceAnalysis's default window (GPU work launched before the last ProfilerStep began)."""
    options = options or IdleOptions()
    top, per_stream, drop_last_step = options.top, options.per_stream, options.drop_last_step
    overhead_max_ns = round(options.overhead_max_us * 1000)
    window, window_note = launched_before_last_step(trace) if drop_last_step else (None, None)
    # read only here: the cached frame itself (a million rows), not a copy
    gaps = (
        _cached_gaps(trace, per_stream, overhead_max_ns)
        if window is None
        else idle_gaps(trace, per_stream, overhead_max_ns, window)
    )
    keys = [key for key in ("GPU", "PID", "Stream") if key in gaps]
    rank = {cause: index for index, cause in enumerate(CAUSES)}
    groups = _GapGroups(gaps, keys)
    grouped = groups.keys.assign(Gaps=groups.sizes(), **{"Idle (ns)": groups.sums(gaps["Idle (ns)"].to_numpy())})
    totals = grouped.groupby(keys, observed=True)["Idle (ns)"].transform("sum").to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        grouped["Share (%)"] = np.where(totals > 0, grouped["Idle (ns)"] * 100 / totals, 0.0)
    grouped = grouped.sort_values(
        [*keys, "Cause"],
        key=lambda column: column.map(rank) if column.name == "Cause" else column,
        kind="stable",
        ignore_index=True,
    )
    intervals = _interval_statistics(gaps, keys, rank, groups)
    origin = int(trace.columns("gpu_ops", ("start",))["start"].min())
    longest = (
        gaps.drop(columns=["Previous Op", "Next Op"])
        .iloc[_largest(gaps["Idle (ns)"].to_numpy(), top)]
        .assign(**{"Start (ns)": lambda frame: frame["Start (ns)"] - origin})
    )
    # the tables name GPUs as text (the gaps keep them categorical: a million rows)
    grouped, intervals, longest = (
        table.assign(GPU=table["GPU"].astype(str)) if len(table) else table for table in (grouped, intervals, longest)
    )
    notes = [method(overhead_max_ns, per_stream), *([window_note] if window_note else []), *trace.warnings]
    where = " per stream" if per_stream else ""
    return Result(
        [
            Table("idle", grouped, f"GPU idle time by cause{where}: {trace.name}"),
            Table("gaps", longest.reset_index(drop=True), f"The {top} longest gaps (Start from the first GPU op)"),
            Table(
                "intervals",
                intervals,
                f"Gap lengths by cause{where} (HolisticTraceAnalysis's idle interval statistics)",
            ),
        ],
        notes,
    )
