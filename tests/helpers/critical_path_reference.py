"""The critical path as tracekit computed it before it was vectorized (issue 38): the graph built in
Python, event by event, and networkx's longest-path order replayed node by node. Kept as the reference
the columnar implementation must equal, edge for edge (tests/analysis/test_critical_path_equal.py); it
takes about 5 µs and 1.5 KB per event, so only small built traces go through it.

``reference_path(events, start, end, pid)``: the window's path as (source node, target node, weight,
kind, attributed event) per edge, and its length (ns).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analysis.critical_path.events import CALL, GPU, OPERATOR, SYNC, Events
from tracekit.errors import InvalidTraceError
from tracekit.model.schema import SYNC_KINDS


def reference_path(events: Events, start: int, end: int, pid: int | None) -> tuple[list[tuple[int, ...]], int]:
    """The path of the window [start, end] (ns) of process ``pid`` (None: all), edge by edge."""
    graph = build(events, window_rows(events, start, end, pid))
    edges, length = longest_path(graph)
    return [
        (graph.source[i], graph.target[i], graph.weight[i], graph.kind[i], graph.attributed[i]) for i in edges
    ], length


def _kinds(events: Events) -> np.ndarray:
    return np.asarray([*SYNC_KINDS, ""], dtype=object)[events.sync_kind]


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
    waits = (events.role == SYNC) & (_kinds(events) == "stream_wait_event")
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
            kind = _kinds(events)[row]
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
        if (
            queue[call] == 1
            and queue[row] == 0
            and (previous < 0 or node_time[previous] < call_time)
            and (source_end < 0 or node_time[source_end] < call_time)
        ):
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
    return event_links(events)


def event_links(events: Events) -> _Links:
    """For every event sync and stream wait of the trace: the op the event's record followed (the latest
    op launched to the recording stream at or before the cudaEventRecord call, on any thread) and, for a
    wait, the first op launched to the waiting stream by the waiting thread after the wait call. Launches
    are grouped by stream (and thread) once; each sync is then one binary search in its group."""
    syncs = np.flatnonzero((events.role == SYNC) & np.isin(_kinds(events), ["stream_wait_event", "event_sync"]))
    syncs = syncs[(events.event_stream[syncs] >= 0) & (events.event_correlation[syncs] >= 0)]
    recorded: dict[int, int] = {}
    next_launch: dict[int, int] = {}
    if not len(syncs):
        return _Links(recorded, next_launch)
    launches = np.flatnonzero(events.queued & (events.partner >= 0))
    ops = events.partner[launches]
    device = events.device[ops].astype(np.int64)
    by_stream = _groups(launches, device * 2**32 + events.stream[ops], events.start[launches])
    by_thread = _groups(
        launches,
        (device * 2**32 + events.stream[ops]) * 2**20 + (events.pid[launches] * 2**31 + events.tid[launches]) % 2**20,
        events.start[launches],
    )
    record_calls = np.flatnonzero(events.record_call)
    record_at = {
        (int(p), int(c)): int(r)
        for p, c, r in zip(events.pid[record_calls], events.correlation[record_calls], record_calls, strict=True)
    }
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
        if _kinds(events)[sync] != "stream_wait_event" or call < 0:
            continue
        key = (int(events.device[sync]) * 2**32 + int(events.stream[sync])) * 2**20 + (
            int(events.pid[call]) * 2**31 + int(events.tid[call])
        ) % 2**20
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


def longest_path(graph: Graph) -> tuple[list[int], int]:
    """(the edges of the path in order, as indices into ``graph``'s edge lists; its length in ns)."""
    source = np.asarray(graph.source, dtype=np.int64)
    target = np.asarray(graph.target, dtype=np.int64)
    if not len(source):
        return [], 0
    # a pair re-added: networkx keeps its first place and takes the last values
    pairs, first, inverse = np.unique(source * 2**32 + target, return_index=True, return_inverse=True)
    latest = np.full(len(pairs), -1, dtype=np.int64)
    np.maximum.at(latest, inverse.reshape(-1), np.arange(len(source)))
    by_place = np.argsort(first, kind="stable")
    edge = latest[by_place]  # one per pair, in the order pairs were first added; the values of its last addition
    weight = np.maximum(np.asarray(graph.weight, dtype=np.int64)[edge], 0).tolist()
    # nodes numbered in the order they first appear (source before target), as networkx holds them
    appearance = np.column_stack([source, target]).reshape(-1)
    nodes, seen_at = np.unique(appearance, return_index=True)
    number = np.empty(len(nodes), dtype=np.int64)
    number[np.argsort(seen_at, kind="stable")] = np.arange(len(nodes))
    tail = number[np.searchsorted(nodes, source[edge])]
    head = number[np.searchsorted(nodes, target[edge])]
    count = len(nodes)
    successors = _grouped(tail, head, count)
    incoming = _grouped(head, np.arange(len(edge)), count)  # each node's edges in, in edge order
    waiting = np.bincount(head, minlength=count).tolist()
    generation = [node for node in range(count) if waiting[node] == 0]
    topological: list[int] = []
    while generation:
        topological += generation
        following = []
        for node in generation:
            for successor in successors[node]:
                waiting[successor] -= 1
                if waiting[successor] == 0:
                    following.append(successor)
        generation = following
    if len(topological) != count:
        raise InvalidTraceError(
            "the trace's events make a cycle in the dependency graph (events on one thread that overlap "
            "without nesting?): no critical path"
        )
    tails = tail.tolist()
    distance = [0] * count
    via = [-1] * count  # the edge the best path reached a node by (-1: it starts there)
    for node in topological:
        best, best_edge = 0, -1
        for index in incoming[node]:
            candidate = distance[tails[index]] + weight[index]
            if best_edge < 0 or candidate > best:
                best, best_edge = candidate, index
        distance[node], via[node] = best, best_edge
    end = max(topological, key=distance.__getitem__)  # max keeps the first of equals, as networkx
    path = []
    node = end
    while via[node] >= 0:
        path.append(int(edge[via[node]]))
        node = tails[via[node]]
    path.reverse()
    return path, distance[end]


def _grouped(key: np.ndarray, values: np.ndarray, count: int) -> list[list[int]]:
    """Per key 0..count-1, its values in their order (a stable sort, then one split)."""
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(key[order], np.arange(count + 1))
    flat = values[order].tolist()
    return [flat[low:high] for low, high in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)]
