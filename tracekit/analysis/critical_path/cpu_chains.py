"""The CPU side of a window's graph: per thread, its operators and calls as a call stack, as one chain.

HolisticTraceAnalysis 0.5 walks each thread's events in time order (at one time ends before starts,
longer events start first and end last, then by row), pushing each start on a stack and popping the
top at each end, whichever event ends there (an improperly nested event ends with the stack). Here
that walk is columnar: one sort of the starts and ends, the stack depth as a cumulative sum. Each end
pops its own event when every event starts and ends at one depth (properly nested: the usual case,
checked); otherwise each end is paired with the start it pops by pairing the starts and ends of one
depth in order (a balanced walk alternates start, end at every depth). The nodes (operators' and
calls' starts and ends; not annotations) then form one chain per thread: each node's edge comes from
the node before it, an OPERATOR edge (the time between, attributed as ``_attributed`` says; 0 into a
blocking call's end) or, from one outermost node's end to the next one's start, a DEPENDENCY edge of
weight 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.events import CALL, DEPENDENCY, OP, OPERATOR, Events

FEW_THREADS = 16  # up to this many threads, the walk is split by thread a pass per thread (else radix-sorted)


@dataclass
class CpuChains:
    """The window's CPU nodes, thread after thread ((pid, tid) order), each thread's in walk order. Per
    node: its id (2 x row, + 1 for an end), and the chain edge into it from the node before: weight
    (ns), kind (-1: the thread's first node, no edge) and attributed event (row, -1: none).
    ``start_at``/``end_at``: per event of the window's CPU events, the index of its start/end node (-1:
    not a node)."""

    node: np.ndarray
    weight: np.ndarray
    kind: np.ndarray
    attributed: np.ndarray
    start_at: np.ndarray
    end_at: np.ndarray


def cpu_chains(events: Events, cpu: np.ndarray) -> CpuChains:
    """The chains of the CPU events ``cpu`` (rows, ascending)."""
    count = len(cpu)
    if not count:
        empty = np.zeros(0, dtype=np.int32)
        return CpuChains(empty, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8), empty, empty, empty)
    start, end = events.start[cpu], events.end[cpu]
    walk, time, thread = _walk(_thread_ranks(events.pid[cpu], events.tid[cpu]), start, end)
    is_start = walk < count  # per element of the walk: a start (else an end) of event ``local``
    local = walk.astype(np.int32)
    del walk
    np.subtract(local, count, out=local, where=~is_start)
    depth = np.cumsum(np.where(is_start, np.int32(1), np.int32(-1)), dtype=np.int32)  # each thread's walk is balanced
    level = depth + ~is_start  # a start's depth after its push; an end's before its pop
    del depth
    popped = _popped(local, is_start, level, count)
    node_role = (events.role[cpu] == OPERATOR) | (events.role[cpu] == CALL)
    is_node = node_role[popped]
    walk_start, event = is_start[is_node], popped[is_node]
    node_time, node_thread = time[is_node], thread[is_node]
    del time, thread
    mismatched = ~walk_start & (local[is_node] != event)  # an end that popped another event: that one's end
    node_time[mismatched] = end[event[mismatched]]
    node = cpu.astype(np.int32)[event]  # node ids: 2 x row, + 1 for an end (int32, as rows are)
    node <<= 1
    node |= ~walk_start
    first = np.ones(len(node), dtype=bool)
    first[1:] = node_thread[1:] != node_thread[:-1]
    node_depth = np.cumsum(np.where(walk_start, np.int32(1), np.int32(-1)), dtype=np.int32)
    kind = np.where(walk_start & (node_depth == 1), np.int8(DEPENDENCY), np.int8(OP))  # into an outermost start
    kind[first] = -1
    del node_depth, first, node_thread
    weight = np.zeros(len(node), dtype=np.int64)
    np.subtract(node_time[1:], node_time[:-1], out=weight[1:])
    weight[(kind != OP) | (~walk_start & events.blocking[node >> 1])] = 0  # into a blocking call's end: the GPU's
    del node_time
    attributed = _attributed(node, kind, np.flatnonzero(is_node), local, is_start, level, cpu)
    start_at, end_at = np.full(count, -1, dtype=np.int32), np.full(count, -1, dtype=np.int32)
    start_at[event[walk_start]] = np.flatnonzero(walk_start)
    end_at[event[~walk_start]] = np.flatnonzero(~walk_start)
    return CpuChains(node, weight, kind, attributed, start_at, end_at)


def _thread_ranks(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Per event, its thread's rank in (pid, tid) order (small codes)."""
    if len(pid) and min(pid.min(), tid.min()) >= 0 and max(pid.max(), tid.max()) < 2**31:
        pair = pid.astype(np.int64) << 31 | tid
    else:  # ids outside 31 bits (a JSON trace can have them): the pairs' ranks, no bits dropped
        pid_code, _ = pd.factorize(pid, sort=True)
        tid_code, tids = pd.factorize(tid, sort=True)
        pair = pid_code.astype(np.int64) * len(tids) + tid_code
    code, ranks = pd.factorize(pair, sort=True)
    return code.astype(np.uint16 if len(ranks) < 2**16 else np.int64)


def _walk(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The walk: elements (starts 0..n-1, then ends n..2n-1) by thread, time, ends before starts, then
    starts longest first and earliest row first, ends shortest first and latest row first (HTA's order);
    and each element's time and thread. Sorted by time first (runs of the tables' start order: nearly
    sorted), then by thread, and only ties in (thread, time, start or end) by the rest."""
    count = len(start)
    base = min(int(start.min()), int(end.min()))
    key = np.empty(2 * count, dtype=np.int64)
    np.subtract(start, base, out=key[:count])
    np.subtract(end, base, out=key[count:])
    key <<= 1
    key[:count] += 1  # ends (0) before starts (1) at one time
    order = np.argsort(key, kind="stable")
    threads = np.concatenate([thread, thread])[order]
    count_of = np.bincount(threads)
    if len(count_of) > 1:  # stable by thread: a pass per thread when few, else a radix sort
        by_thread = (np.argsort(threads, kind="stable") if len(count_of) > FEW_THREADS else
                     np.concatenate([np.flatnonzero(threads == code) for code in range(len(count_of))]))  # fmt: skip
        order = order[by_thread]
        threads = np.repeat(np.arange(len(count_of), dtype=threads.dtype), count_of)
        del by_thread
    key = key[order]
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
    key >>= 1
    key += base
    return order, key, threads


def _popped(local: np.ndarray, is_start: np.ndarray, level: np.ndarray, count: int) -> np.ndarray:
    """Per element, the event it pushes (a start) or pops (an end)."""
    start_level = np.empty(count, dtype=np.int32)
    end_level = np.empty(count, dtype=np.int32)
    start_level[local[is_start]] = level[is_start]
    end_level[local[~is_start]] = level[~is_start]
    if np.array_equal(start_level, end_level):  # properly nested: each end pops its own event
        return local
    # the starts and ends of one level alternate (start, end) in walk order, thread after thread
    by_level = _by_level(level)
    popped = local.copy()
    popped[by_level[1::2]] = local[by_level[0::2]]
    return popped


def _attributed(node: np.ndarray, kind: np.ndarray, at_walk: np.ndarray, local: np.ndarray, is_start: np.ndarray,
                level: np.ndarray, cpu: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per node, the event its OPERATOR edge belongs to (-1 for other edges): the event that starts at the
    edge's source, else the one that ends at its target, else (an end to the next sibling's start) the
    enclosing event: the one on top of the stack when the source's event started, that is the latest
    start one level up before the source (still open, the walk being balanced)."""
    attributed = np.full(len(node), -1, dtype=np.int32)
    if len(node) < 2:
        return attributed
    from_start = (node[:-1] & 1) == 0
    np.right_shift(np.where(from_start, node[:-1], node[1:]), 1, out=attributed[1:])
    siblings = np.flatnonzero(~from_start & ((node[1:] & 1) == 0)) + 1
    attributed[kind != OP] = -1
    siblings = siblings[kind[siblings] == OP]
    source = at_walk[siblings - 1]  # the sibling's end, in the walk
    enclosing = level[source] > 1
    attributed[siblings[~enclosing]] = -1
    siblings, source = siblings[enclosing], source[enclosing]
    if len(siblings):  # starts and wanted ends by (level, walk): radix sorts by level keep walk order
        starts = np.flatnonzero(is_start)
        starts = starts[_by_level(level[starts])]
        key = level[starts].astype(np.int64) * len(level) + starts
        by_wanted = _by_level(level[source])
        wanted = (level[source[by_wanted]].astype(np.int64) - 1) * len(level) + source[by_wanted]
        attributed[siblings[by_wanted]] = cpu[local[starts[np.searchsorted(key, wanted) - 1]]]
    return attributed


def _by_level(level: np.ndarray) -> np.ndarray:
    """The stable order of ``level`` (small values: a radix sort)."""
    return np.argsort(level.astype(np.uint16) if len(level) and level.max() < 2**16 else level, kind="stable")
