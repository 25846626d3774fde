"""The CPU side of a window's graph: per thread, its operators and calls as a call stack, as one chain.

HolisticTraceAnalysis 0.5 walks each thread's events in time order (at one time ends before starts,
longer events start first and end last, then by row), pushing each start on a stack and popping the
top at each end, whichever event ends there (an improperly nested event ends with the stack). Here
that walk is columnar: one sort of the starts and ends, the stack depth as a cumulative sum, and each
end matched to the start it pops by pairing the starts and ends of one depth in order (a balanced
sequence alternates start, end at every depth). The nodes (operators' and calls' starts and ends; not
annotations) then form one chain per thread: each node's edge comes from the node before it, an
OPERATOR edge (the time between, attributed as ``_attribution`` says; 0 into a blocking call's end) or,
from one outermost node's end to the next one's start, a DEPENDENCY edge of weight 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analysis.critical_path.events import CALL, DEPENDENCY, OP, OPERATOR, Events


@dataclass
class CpuChains:
    """The window's CPU nodes, thread after thread ((pid, tid) order), each thread's in walk order. Per
    node: its id (2 x row, + 1 for an end), time (ns), and the chain edge into it from the node before:
    weight (ns), kind (-1: the thread's first node, no edge) and attributed event (row, -1: none).
    ``start_at``/``end_at``: per event of the window's CPU events, the index of its start/end node (-1:
    not a node)."""

    node: np.ndarray
    time: np.ndarray
    weight: np.ndarray
    kind: np.ndarray
    attributed: np.ndarray
    start_at: np.ndarray
    end_at: np.ndarray


def cpu_chains(events: Events, cpu: np.ndarray) -> CpuChains:
    """The chains of the CPU events ``cpu`` (rows, ascending)."""
    count = len(cpu)
    if not count:
        empty = np.zeros(0, dtype=np.int64)
        return CpuChains(empty, empty, empty, np.zeros(0, dtype=np.int8), empty, empty, empty)
    start, end = events.start[cpu], events.end[cpu]
    thread = _thread_ranks(events.pid[cpu], events.tid[cpu])
    walk = _walk_order(thread, start, end)  # elements: 0..count-1 starts, count..2count-1 ends (local event)
    is_start = walk < count
    local = np.where(is_start, walk, walk - count)
    depth = np.cumsum(np.where(is_start, 1, -1), dtype=np.int64)  # each thread's walk is balanced: no reset
    level = np.where(is_start, depth, depth + 1)  # a start's depth after its push; an end's before its pop
    # the starts and ends of one level alternate (start, end) in walk order, thread after thread
    by_level = np.argsort(level.astype(np.uint16) if level.max() < 2**16 else level, kind="stable")
    popped = np.empty(len(walk), dtype=np.int64)
    popped[by_level[1::2]] = local[by_level[0::2]]  # each end pops the start paired with it
    popped[is_start] = local[is_start]
    parent = _parents(local, is_start, level, by_level, count)
    node_roles = (events.role[cpu] == OPERATOR) | (events.role[cpu] == CALL)
    is_node = node_roles[popped]
    walk_start, event = is_start[is_node], popped[is_node]
    node_thread = thread[event]
    row = cpu[event]
    node = 2 * row + ~walk_start
    time = np.where(walk_start, start[event], end[event])
    node_depth = np.cumsum(np.where(walk_start, 1, -1), dtype=np.int64)
    outermost_start = walk_start & (node_depth == 1)
    first = np.ones(len(node), dtype=bool)
    first[1:] = node_thread[1:] != node_thread[:-1]
    kind = np.where(first, -1, np.where(outermost_start, DEPENDENCY, OP)).astype(np.int8)
    gap = np.zeros(len(node), dtype=np.int64)
    gap[1:] = time[1:] - time[:-1]
    into_blocking_end = ~walk_start & events.blocking[row]
    weight = np.where((kind == OP) & ~into_blocking_end, gap, 0)
    attributed = np.full(len(node), -1, dtype=np.int64)
    attributed[1:] = _attribution(walk_start, event, parent, cpu)[1:]
    attributed[kind != OP] = -1
    start_at, end_at = np.full(count, -1, dtype=np.int64), np.full(count, -1, dtype=np.int64)
    start_at[event[walk_start]] = np.flatnonzero(walk_start)
    end_at[event[~walk_start]] = np.flatnonzero(~walk_start)
    return CpuChains(node, time, weight, kind, attributed, start_at, end_at)


def _thread_ranks(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Per event, its thread's rank in (pid, tid) order."""
    import pandas as pd

    pid_code, pids = pd.factorize(pid, sort=True)
    tid_code, tids = pd.factorize(tid, sort=True)
    pair = pid_code.astype(np.int64) * len(tids) + tid_code  # in (pid, tid) order, as the codes are sorted
    pair_code, _ = pd.factorize(pair, sort=True)
    return pair_code.astype(np.int64)


def _walk_order(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The walk: elements (starts 0..n-1, then ends n..2n-1) by thread, time, ends before starts, then
    starts longest first and earliest row first, ends shortest first and latest row first (HTA's order).
    Sorted by time first (runs of the tables' start order: nearly sorted), then by thread (a radix sort
    of small codes), and only ties in (thread, time, start or end) by the rest."""
    count = len(start)
    base = min(int(start.min()), int(end.min()))
    time = np.concatenate([start - base, end - base])
    element_start = np.arange(2 * count) < count
    key = 2 * time + element_start  # ends (0) before starts (1) at one time
    order = np.argsort(key, kind="stable")
    threads = np.concatenate([thread, thread])
    small = threads.astype(np.uint16) if thread.max() < 2**16 else threads
    order = order[np.argsort(small[order], kind="stable")]
    key, threads = key[order], threads[order]
    same = (key[1:] == key[:-1]) & (threads[1:] == threads[:-1])
    if same.any():
        tied = np.zeros(len(order), dtype=bool)
        tied[1:] |= same
        tied[:-1] |= same
        at = np.flatnonzero(tied)
        group = np.cumsum(np.concatenate([[True], ~same]))[at]
        elements = order[at]
        local = np.where(elements < count, elements, elements - count)
        duration = end[local] - start[local]
        longer = np.where(elements < count, -duration, duration)  # starts: longest first; ends: shortest first
        position = np.where(elements < count, local, -local)  # starts: earliest row first; ends: latest first
        order[at] = elements[np.lexsort((position, longer, group))]
    return order


def _parents(
    local: np.ndarray, is_start: np.ndarray, level: np.ndarray, by_level: np.ndarray, count: int
) -> np.ndarray:
    """Per event (local index), the event on top of the stack when it started (-1: none): the latest start
    one level up before it in the walk (still open, the walk being balanced)."""
    parent = np.full(count, -1, dtype=np.int64)
    starts = by_level[is_start[by_level]]  # the starts by level, each level in walk order
    key = level[starts] * len(level) + starts
    inner = starts[level[starts] > 1]
    found = np.searchsorted(key, (level[inner] - 1) * len(level) + inner) - 1
    parent[local[inner]] = local[starts[found]]
    return parent


def _attribution(walk_start: np.ndarray, event: np.ndarray, parent: np.ndarray, cpu: np.ndarray) -> np.ndarray:
    """Per node, the event the OPERATOR edge into it belongs to: the event that starts at the edge's source,
    else the one that ends at its target, else (an end to the next sibling's start) the enclosing event."""
    before_start = np.concatenate([[False], walk_start[:-1]])
    before_event = np.concatenate([[0], event[:-1]])
    enclosing = parent[before_event]
    local = np.where(before_start, before_event, np.where(~walk_start, event, enclosing))
    return np.where(local >= 0, cpu[np.maximum(local, 0)], -1)
