"""report.html's host lanes: each thread's NVTX ranges (torch.profiler's record_function annotations), its
CPU operators (torch.profiler's ``cpu_op`` domain) and its CUDA API calls (``trace.launches``: launches,
copies, synchronisations), one lane per depth, which the page folds into one lane a group until it is
clicked open; and, for each GPU op, the thread that launched it and how long before the op started, which
the page draws as an arrow from the launching call's lane when the op is hovered.

A thread's calls are a lane of their own, below the deepest lane of the thread's last group (its CPU ops,
else its ranges: the calls happen inside them, and a lane apart keeps the ranges' depths as they are), or
a group of their own for a thread with no range (an nsys capture without NVTX, a thread that only
launches): every thread that launched a GPU op has a lane for the arrow to start from.

The page holds at most ``HOST_ROWS`` ranges and CPU ops and ``HOST_ROWS`` calls (the longest: a range that
is kept keeps the ranges around it, which are longer; the longest calls are the synchronisations and the
slow launches) and ``MAX_DEPTHS`` depths a group; what is left out is said in a note under the timeline. A
thread keeps its lanes when all its rows are left out. Columns throughout: loops only over threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.joins import op_launches
from tracekit.model.trace import Trace
from tracekit.render.safe_text import printable

HOST_ROWS = 100_000  # ranges and CPU ops in a page, and as many calls: each about 2 MB of JSON
MAX_DEPTHS = 12  # depth lanes a thread's group opens into
# what a host row is (its colour in the page: render.colours.HOST_COLOURS), by code
HOST_KINDS = ("range", "CPU op", "CUDA API")
RANGE, CPU_OP, CUDA_API = range(len(HOST_KINDS))
GROUP_LABELS = ("ranges", "CPU ops", "CUDA API")  # a group's lane label, by the kind of its first lane
CPU_DOMAIN, GPU_DOMAIN = "cpu_op", "gpu"  # torch.profiler's CPU operators; its annotations' GPU-side spans


@dataclass
class HostRows:
    """The host lanes (lane dicts in order, each group's depth 0 first; a calls lane has ``calls``: True)
    and their rows: lane (an index into ``lanes``), start and duration (ns, the trace's time), name (a code
    into ``names``), kind (a code into HOST_KINDS); each thread with CUDA API calls, (pid, tid) by the
    index of its calls' lane; a note on what was left out, or ""."""

    lanes: list[dict] = field(default_factory=list)
    lane: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    duration: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    name: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    names: list[str] = field(default_factory=list)
    threads: dict[tuple[int, int], int] = field(default_factory=dict)
    note: str = ""
    several_processes: bool = False


@dataclass
class _Rows:
    """Host rows of one source, those kept: pid, tid, kind (a HOST_KINDS code), start and duration (ns),
    name (an object array)."""

    pid: np.ndarray
    tid: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    duration: np.ndarray
    name: np.ndarray


def host_rows(trace: Trace) -> HostRows:
    """The host lanes of ``trace``: a group of lanes per (process, thread, kind), ordered so."""
    left_out: list[str] = []
    spans, depth = _range_rows(trace, left_out)
    calls, call_thread, call_threads = _call_rows(trace, left_out)
    if not len(spans.pid) and not len(call_threads):
        return HostRows(note="; ".join(left_out))
    # groups of ranges and of CPU ops: (pid, tid, kind), depths numbered 0, 1, 2, ... within each (the CPU
    # ops inside an annotation start below it)
    span_groups, span_group = distinct_rows(spans.pid, spans.tid, spans.kind)
    pairs, pair = distinct_rows(span_group, depth)
    depth = pair - np.searchsorted(pairs[:, 0], span_group)
    deep = depth >= MAX_DEPTHS
    if deep.any():
        left_out.append(f"{int(deep.sum()):,} ranges and CPU ops deeper than {MAX_DEPTHS} levels are not drawn")
    span_depths = np.minimum(np.bincount(pairs[:, 0], minlength=len(span_groups)), MAX_DEPTHS)
    # each thread's calls join its last group (sorted by kind: the highest), or make a group of their own
    last_group = {(p, t): index for index, (p, t, _) in enumerate(span_groups.tolist())}
    groups = [(p, t, k, d) for (p, t, k), d in zip(span_groups.tolist(), span_depths.tolist())]  # d: range depths
    groups += [(p, t, CUDA_API, 0) for p, t in call_threads.tolist() if (p, t) not in last_group]
    groups.sort()
    position = {(p, t, k): index for index, (p, t, k, _) in enumerate(groups)}
    span_position = np.array([position[(p, t, k)] for p, t, k in span_groups.tolist()], dtype=np.int64)
    calls_group = np.array(
        [
            span_position[last_group[key]] if key in last_group else position[(*key, CUDA_API)]
            for key in map(tuple, call_threads.tolist())
        ],
        dtype=np.int64,
    )
    has_calls = np.zeros(len(groups), bool)
    has_calls[calls_group] = True
    depths = np.array([d for *_, d in groups], dtype=np.int64)
    counts = depths + has_calls
    first_lane = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    several = len({p for p, *_ in groups}) > 1
    lanes = []
    for index, ((p, t, k, d), count) in enumerate(zip(groups, counts.tolist())):
        label = f"{thread_name(p, t, several)} · {GROUP_LABELS[k]}"
        lanes += [{"name": label, "kind": "host", "group": index, "depth": n, "depths": count} for n in range(d)]
        if has_calls[index]:
            lanes.append({"name": label, "kind": "host", "group": index, "depth": d, "depths": count, "calls": True})
    calls_lane = first_lane[calls_group] + depths[calls_group]  # per call thread
    kept = ~deep
    lane = np.concatenate([first_lane[span_position[span_group[kept]]] + depth[kept], calls_lane[call_thread]])
    start = np.concatenate([spans.start[kept], calls.start])
    order = np.lexsort((start, lane))  # by lane, then time: as the page reads rows
    codes, names = pd.factorize(np.concatenate([spans.name[kept], calls.name])[order])
    return HostRows(
        lanes,
        lane[order],
        start[order],
        np.concatenate([spans.duration[kept], calls.duration])[order],
        codes,
        np.concatenate([spans.kind[kept], calls.kind])[order],
        [printable(str(name)) for name in names],
        {(p, t): int(lane) for (p, t), lane in zip(call_threads.tolist(), calls_lane.tolist())},
        "; ".join(left_out),
        several,
    )


def _longest(duration: np.ndarray) -> np.ndarray:
    """The rows to keep, in their order: all, or the HOST_ROWS longest (those a whole-trace view can show)."""
    if len(duration) <= HOST_ROWS:
        return np.arange(len(duration))
    return np.sort(np.argpartition(-duration, HOST_ROWS - 1)[:HOST_ROWS])


def _range_rows(trace: Trace, left_out: list[str]) -> tuple[_Rows, np.ndarray]:
    """The host's ranges and CPU ops (not torch.profiler's GPU-side spans), the longest HOST_ROWS; and each
    one's depth as the trace records it."""
    ranges = trace.ranges
    rows = ranges.loc[(ranges["domain"] != GPU_DOMAIN).to_numpy(bool)]  # categorical: no string per row
    keep = _longest(rows["duration"].to_numpy(np.int64))
    if len(keep) < len(rows):
        left_out.append(f"the host lanes hold the {HOST_ROWS:,} longest of {len(rows):,} ranges and CPU ops")
        rows = rows.iloc[keep]
    kind = np.where((rows["domain"] == CPU_DOMAIN).to_numpy(bool), CPU_OP, RANGE)
    spans = _Rows(
        rows["pid"].to_numpy(np.int64),
        rows["tid"].to_numpy(np.int64),
        kind.astype(np.int64),
        rows["start"].to_numpy(np.int64),
        rows["duration"].to_numpy(np.int64),
        rows["name"].astype(str).to_numpy(dtype=object),
    )
    return spans, rows["depth"].to_numpy(np.int64)


def _call_rows(trace: Trace, left_out: list[str]) -> tuple[_Rows, np.ndarray, np.ndarray]:
    """The CUDA API calls, the longest HOST_ROWS, and each one's index into the threads that made calls;
    those threads, (pid, tid), all of them (a thread whose calls are all left out keeps its lane)."""
    calls = trace.launches
    pid, tid = calls["pid"].to_numpy(np.int64), calls["tid"].to_numpy(np.int64)
    threads, thread = distinct_rows(pid, tid)
    duration = calls["duration"].to_numpy(np.int64)
    keep = _longest(duration)
    if len(keep) < len(calls):
        left_out.append(f"the CUDA API lanes hold the {HOST_ROWS:,} longest of {len(calls):,} calls")
    kept = _Rows(
        pid[keep],
        tid[keep],
        np.full(len(keep), CUDA_API, np.int64),
        calls["start"].to_numpy(np.int64)[keep],
        duration[keep],
        calls["name"].iloc[keep].astype(str).to_numpy(dtype=object),  # strings of the kept rows only
    )
    return kept, thread[keep], threads


def distinct_rows(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of int64 ``columns``, sorted (an array of one row each, a column each), and each
    row's index into them: np.unique(axis=0)'s answer from a hash grouping, which takes a tenth of a second
    on millions of rows where sorting them as rows takes seconds."""
    frame = pd.DataFrame({index: np.asarray(column, np.int64) for index, column in enumerate(columns)})
    code = frame.groupby(list(frame.columns), sort=True).ngroup().to_numpy(np.int64)
    distinct = np.zeros((int(code.max()) + 1 if len(code) else 0, len(columns)), np.int64)
    distinct[code] = frame.to_numpy(np.int64)
    return distinct, code


def thread_name(pid: int, tid: int, several_processes: bool) -> str:
    """A thread as a lane names it, short enough for the lane's label: "tid 7", or with several processes
    "pid 3 · tid 7" ("pid 3" alone for a process's main thread, whose tid is its pid)."""
    if not several_processes:
        return f"tid {tid}"
    return f"pid {pid}" if pid == tid else f"pid {pid} · tid {tid}"


def op_launch_threads(trace: Trace, order: np.ndarray, host: HostRows, first_host_lane: int):
    """Per GPU op (in ``order``): the thread that launched it, as runs of [count, code] (code: an index into
    the thread list, -1 none recorded), and how long before the op the launching call started (ns; 0 where
    none); the thread list: each launching thread's name and the host lane of its calls (-1: none)."""
    launched = op_launches(trace)
    found, pid, tid = launched.found[order], launched.pid[order], launched.tid[order]
    keys, code = distinct_rows(pid, tid)
    code = np.where(found, code, -1)
    used = np.unique(code[code >= 0])
    code = np.where(code >= 0, np.searchsorted(used, code), -1)  # only threads that launched a found op
    several = host.several_processes or (len(np.unique(keys[used, 0])) > 1 if len(used) else False)
    thread_list = [
        {
            "name": thread_name(p, t, several),
            "lane": first_host_lane + host.threads[(p, t)] if (p, t) in host.threads else -1,
        }
        for p, t in keys[used].tolist()
    ]
    change = np.flatnonzero(code[1:] != code[:-1]) + 1
    starts = np.concatenate([[0], change]).astype(np.int64)
    counts = np.diff(np.concatenate([starts, [len(code)]]))
    runs = np.stack([counts, code[starts]], axis=1).reshape(-1) if len(code) else np.zeros(0, np.int64)
    lead = np.where(found, trace.gpu_ops["start"].to_numpy(np.int64)[order] - launched.start[order], 0)
    return {"thread_runs": runs.tolist(), "lead": lead.tolist()}, thread_list
