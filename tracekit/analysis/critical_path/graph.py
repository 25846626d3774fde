"""The dependency graph of one window (a step, or the whole trace), as HolisticTraceAnalysis 0.5 builds it.

Nodes: the start and the end of every event that is one (operators, calls, GPU ops; ``events``):
node 2i is row i's start, 2i + 1 its end. Edges, each with a weight in ns:
- CPU (per thread, its events nested by time into a call stack, visited depth first): an operator's
  own time before its first child, between children and after the last (OPERATOR, weight = the time
  between the two nodes; the edge into a blocking call's end weighs 0: that wait is the GPU's, reached
  by a sync edge); consecutive outermost operators and calls are chained by DEPENDENCY edges of weight
  0 (the CPU idle between them is never on the path).
- GPU: each op's own time (OPERATOR); into its start either a launch edge from its call's start
  (KERNEL_LAUNCH_DELAY: only when its stream's queue was empty at the launch and nothing queued
  behind it when it started, and the stream's previous op ended before the launch) or else a
  kernel-kernel edge from the stream's previous op's end (KERNEL_KERNEL_DELAY, negative when they
  overlap); a SYNC_DEPENDENCY (weight 0) from the op another stream waited for (cudaStreamWaitEvent: to
  the next op launched to the waiting stream by the waiting thread) or from the last op of a
  synchronized stream, context or event to the end of the call that waited.
Which events a window holds: CPU events that start inside it (at or after its start, at or before its
end) and last longer than 0, the GPU ops and syncs whose call is among them, and every stream wait.
Where HTA keys streams by number alone, tracekit keys them by (device, stream); otherwise the rules
are HTA's, tie orders included where they decide an edge (launches before ops at one time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analysis.critical_path.events import CALL, GPU, OPERATOR, SYNC, Events

OP, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC_DEPENDENCY = range(5)
EDGE_TYPES = ("operator", "dependency", "launch delay", "kernel-kernel delay", "sync")


@dataclass
class Graph:
    """The edges of a window in insertion order (which decides between paths of equal length, as in
    HTA), each: source and destination node, weight (ns), type and the event it is attributed to (row
    of ``Events``; -1: none). ``rows``: the window's events (rows of ``Events``); ``node_time``: per
    node (2 x row + 0 start / 1 end), its time (ns)."""

    source: list[int]
    target: list[int]
    weight: list[int]
    kind: list[int]
    attributed: list[int]
    rows: np.ndarray
    node_time: np.ndarray


def window_rows(events: Events, start: int, end: int, pid: int | None = None) -> np.ndarray:
    """The rows of ``events`` a window [start, end] holds (see the module docstring); ``pid``: one
    process's events only."""
    cpu = events.role <= CALL
    inside = cpu & (events.start >= start) & (events.start <= end) & (events.end > events.start)
    if pid is not None:
        inside &= events.pid == pid
    gpu_side = np.zeros(len(events), dtype=bool)
    launched = events.partner[inside & (events.partner >= 0)]
    gpu_side[launched] = True
    gpu_side &= events.role >= GPU
    waits = (events.role == SYNC) & (events.sync_kind == "stream_wait_event")
    if pid is not None:
        waits &= events.pid == pid
    return np.flatnonzero(inside | gpu_side | waits)


def build(events: Events, rows: np.ndarray) -> Graph:
    """The graph of the window holding ``rows``."""
    node_time = np.empty(2 * len(events), dtype=np.int64)  # indexed by node id; only the window's are read
    node_time[2 * rows] = events.start[rows]
    node_time[2 * rows + 1] = events.end[rows]
    graph = Graph([], [], [], [], [], rows, node_time)
    _cpu_edges(events, rows, graph)
    _gpu_edges(events, rows, graph)
    return graph


def _add(graph: Graph, source: int, target: int, kind: int, attributed: int = -1, zero: bool = False) -> None:
    weight = (
        0 if zero or kind in (DEPENDENCY, SYNC_DEPENDENCY) else int(graph.node_time[target] - graph.node_time[source])
    )
    graph.source.append(source)
    graph.target.append(target)
    graph.weight.append(weight)
    graph.kind.append(kind)
    graph.attributed.append(attributed)


def _cpu_edges(events: Events, rows: np.ndarray, graph: Graph) -> None:
    """Per CPU thread (in (pid, tid) order), its events as a call stack, visited depth first (HTA's
    order: at one time ends before starts, longer events start first and end last)."""
    cpu = rows[events.role[rows] <= CALL]
    if not len(cpu):
        return
    start, end = events.start[cpu], events.end[cpu]
    duration = end - start
    count = len(cpu)
    row = np.concatenate([cpu, cpu])
    time = np.concatenate([start, end])
    is_start = np.concatenate([np.ones(count, dtype=np.int8), np.zeros(count, dtype=np.int8)])
    longer = np.concatenate([-duration, duration])  # starts: longest first; ends: shortest first
    position = np.concatenate([cpu, -cpu])  # starts: earliest row first; ends: latest first
    pid, tid = events.pid[row], events.tid[row]
    order = np.lexsort((position, longer, is_start, time, tid, pid))
    node = (events.role[row] == OPERATOR) | (events.role[row] == CALL)
    blocking = events.blocking
    thread = pid * (2**32) + tid
    state_thread = None
    stack: list[int] = []
    parent_of: dict[int, int] = {}
    last = last_top_end = -1
    depth = 0
    last_parent = -1
    for index, event, starting, is_node in zip(
        order.tolist(), row[order].tolist(), is_start[order].tolist(), node[order].tolist(), strict=True
    ):
        if thread[index] != state_thread:
            state_thread, stack, last, last_top_end, depth, last_parent = thread[index], [], -1, -1, 0, -1
        if starting:
            parent_of[event] = stack[-1] if stack else -1
            stack.append(event)
            if not is_node:
                continue
            start_node = 2 * event
            if depth == 0 and last_top_end >= 0:
                _add(graph, last_top_end, start_node, DEPENDENCY)
            depth += 1
            if last >= 0:
                _add(graph, last, start_node, OP, _attribution(last, start_node, last_parent))
            last, last_parent = start_node, parent_of[event]
            continue
        if not stack:
            continue
        event = stack.pop()  # whatever is on top: an improperly nested event ends with the stack (as HTA)
        if events.role[event] not in (OPERATOR, CALL):
            continue
        end_node = 2 * event + 1
        depth -= 1
        if last >= 0:
            _add(graph, last, end_node, OP, _attribution(last, end_node, last_parent), zero=bool(blocking[event]))
        if depth == 0:
            last, last_top_end = -1, end_node
        else:
            last, last_parent = end_node, parent_of[event]


def _attribution(source: int, target: int, parent: int) -> int:
    """The event an operator edge's time belongs to: the event that starts at its source, else the one
    that ends at its target, else (an end to the next sibling's start) the enclosing event."""
    if source % 2 == 0:
        return source // 2
    if target % 2 == 1:
        return target // 2
    return parent


def _gpu_edges(events: Events, rows: np.ndarray, graph: Graph) -> None:
    queue = events.queue
    gpu = rows[(events.role[rows] >= GPU) & (events.partner[rows] >= 0)]
    is_sync = events.role[gpu] == SYNC
    key = np.where(is_sync, events.end[gpu], events.start[gpu])
    gpu = gpu[np.argsort(key, kind="stable")]
    links = _event_links(events, rows)
    last: dict[tuple[int, int], int] = {}  # (device, stream) -> end node of its last op
    waiting: dict[int, int] = {}  # op row -> the row of the op it must wait for
    node_time = graph.node_time
    in_window = np.zeros(len(events), dtype=bool)
    in_window[rows] = True
    for row in gpu.tolist():
        call = int(events.partner[row])
        stream = (int(events.device[row]), int(events.stream[row]))
        if events.role[row] == SYNC:
            kind = events.sync_kind[row]
            if kind in ("stream_wait_event", "event_sync"):
                source = links.recorded.get(row, -1)
                if source < 0:
                    continue
                if kind == "stream_wait_event":
                    launched = links.next_launch.get(row, -1)
                    if launched >= 0:
                        waiting[int(events.partner[launched])] = source
                elif in_window[source]:
                    _add(graph, 2 * source + 1, 2 * call + 1, SYNC_DEPENDENCY)
            elif kind == "stream_sync" and stream in last:
                _add(graph, last[stream], 2 * call + 1, SYNC_DEPENDENCY)
            elif kind == "context_sync":
                for (device, _), end_node in list(last.items()):
                    if device == stream[0]:
                        _add(graph, end_node, 2 * call + 1, SYNC_DEPENDENCY)
            continue
        start_node, end_node = 2 * row, 2 * row + 1
        _add(graph, start_node, end_node, OP, row)
        source = waiting.pop(row, -1)
        source_end = -1
        if source >= 0 and in_window[source]:
            source_end = 2 * source + 1
            _add(graph, source_end, start_node, SYNC_DEPENDENCY)
        call_time = events.start[call]
        previous = last.get(stream, -1)
        if (queue[call] == 1 and queue[row] == 0 and (previous < 0 or node_time[previous] < call_time)
                and (source_end < 0 or node_time[source_end] < call_time)):  # fmt: skip
            _add(graph, 2 * call, start_node, LAUNCH)
        elif previous >= 0 and (source_end < 0 or node_time[source_end] < node_time[previous]):
            _add(graph, previous, start_node, KERNEL_KERNEL, previous // 2)
        last[stream] = end_node


@dataclass
class _Links:
    recorded: dict[int, int]  # sync row (event sync, stream wait) -> the GPU op its event waited for
    next_launch: dict[int, int]  # stream-wait sync row -> the next queued call to the waiting stream


def _event_links(events: Events, rows: np.ndarray) -> _Links:
    """The links of the trace's event syncs and stream waits (``event_links``), found once per trace."""
    if events.links is None:
        events.links = event_links(events)
    return events.links


def event_links(events: Events) -> _Links:
    """For every event sync and stream wait of the trace: the op the event's record followed (the latest
    op launched to the recording stream at or before the cudaEventRecord call, on any thread) and, for a
    wait, the first op launched to the waiting stream by the waiting thread after the wait call. Launches
    are grouped by stream (and thread) once; each sync is then one binary search in its group."""
    syncs = np.flatnonzero((events.role == SYNC) & np.isin(events.sync_kind, ["stream_wait_event", "event_sync"]))
    syncs = syncs[(events.event_stream[syncs] >= 0) & (events.event_correlation[syncs] >= 0)]
    recorded: dict[int, int] = {}
    next_launch: dict[int, int] = {}
    if not len(syncs):
        return _Links(recorded, next_launch)
    launches = np.flatnonzero(events.queued & (events.partner >= 0))
    ops = events.partner[launches]
    by_stream = _groups(launches, events.device[ops] * 2**32 + events.stream[ops], events.start[launches])
    by_thread = _groups(launches, (events.device[ops] * 2**32 + events.stream[ops]) * 2**20
                        + (events.pid[launches] * 2**31 + events.tid[launches]) % 2**20, events.start[launches])  # fmt: skip
    record_calls = np.flatnonzero(events.record_call)
    record_at = {(int(p), int(c)): int(r) for p, c, r in
                 zip(events.pid[record_calls], events.correlation[record_calls], record_calls, strict=True)}  # fmt: skip
    for sync in syncs.tolist():
        record = record_at.get((int(events.pid[sync]), int(events.event_correlation[sync])))
        group = by_stream.get(int(events.device[sync]) * 2**32 + int(events.event_stream[sync]))
        if record is None or group is None:
            continue
        rows_of, starts = group
        before = int(np.searchsorted(starts, events.start[record], side="right"))
        if before == 0:
            continue
        recorded[sync] = int(events.partner[rows_of[before - 1]])
        call = int(events.partner[sync])
        if events.sync_kind[sync] != "stream_wait_event" or call < 0:
            continue
        key = (int(events.device[sync]) * 2**32 + int(events.stream[sync])) * 2**20 + (
            int(events.pid[call]) * 2**31 + int(events.tid[call])) % 2**20  # fmt: skip
        waiting = by_thread.get(key)
        if waiting is None:
            continue
        rows_of, starts = waiting
        same = (events.pid[rows_of] == events.pid[call]) & (events.tid[rows_of] == events.tid[call])
        rows_of, starts = rows_of[same], starts[same]  # a thread key shared by chance: the exact thread only
        after = int(np.searchsorted(starts, events.start[call], side="right"))
        if after < len(rows_of):
            next_launch[sync] = int(rows_of[after])
    return _Links(recorded, next_launch)


def _groups(rows: np.ndarray, key: np.ndarray, time: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per key, its rows and their times in time order (ties in row order)."""
    order = np.lexsort((rows, time, key))
    rows, key, time = rows[order], key[order], time[order]
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if len(key) else np.zeros(0, np.int64)
    bounds = np.append(first, len(key))
    return {int(key[low]): (rows[low:high], time[low:high]) for low, high in zip(bounds[:-1], bounds[1:], strict=True)}
