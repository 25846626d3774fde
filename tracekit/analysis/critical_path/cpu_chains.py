"""The CPU side of a window's graph: per thread, its operators and calls as a call stack, as one chain.

HolisticTraceAnalysis 0.5 walks each thread's events in time order (at one time ends before starts,
longer events start first and end last, then by row), pushing each start on a stack and popping the
top at each end, whichever event ends there (an improperly nested event ends with the stack). Here
that walk is columnar: one sort of the starts and ends (thread, then time, in one key), the stack depth
as a cumulative sum. Each end pops its own event when every event starts and ends at one depth
(properly nested: the usual case, checked through each event's two places in the walk); otherwise
each end is paired with the start it pops by pairing the starts and ends of one depth in order (a
balanced walk alternates start, end at every depth). The nodes (operators' and calls' starts and ends;
not annotations) then form one chain per thread: each node's edge comes from the node before it, an
OPERATOR edge (the time between, attributed as ``_attributed`` says; 0 into a blocking call's end) or,
from one outermost node's end to the next one's start, a DEPENDENCY edge of weight 0.

Arrays of one entry per element of the walk (two per event: 13M for the 6.6M CPU events of a 1M-kernel
export) are the cost: they are int32 or narrower where the values allow, few, and freed once used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.events import CALL, DEPENDENCY, OP, OPERATOR, Events

KEY_LIMIT = 2**62  # the walk's sort key: (thread x span + time) x 2 + start below 2^63


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
    walk, clock, sizes = _walk(_thread_ranks(events.pid[cpu], events.tid[cpu]), start, end)
    is_start = walk < count  # per element of the walk: a start (else an end) of event ``local``
    place = np.empty(2 * count, dtype=np.int32)  # per event, where its start (then its end) is in the walk
    place[walk] = np.arange(2 * count, dtype=np.int32)
    local = walk.astype(np.int32)
    del walk
    np.subtract(local, count, out=local, where=~is_start)
    level = np.cumsum(np.where(is_start, np.int32(1), np.int32(-1)), dtype=np.int32)  # each thread's walk is balanced
    level += ~is_start  # a start's depth after its push; an end's before its pop
    nested = np.array_equal(level[place[:count]], level[place[count:]])
    node_role = (events.role[cpu] == OPERATOR) | (events.role[cpu] == CALL)
    if nested and node_role.all():  # every event a node, each end its own: the chain is the walk
        start_at, end_at = place[:count], place[count:]
        node_start, depth, popped, at_walk = is_start, level, local, None
    else:
        del place
        popped = local if nested else _popped(local, is_start, level)
        is_node = node_role[popped]
        if not nested:  # an end that popped another event: that one's end (same thread: same clock offset)
            mismatched = np.flatnonzero(is_node & ~is_start & (local != popped))
            clock[mismatched] += end[popped[mismatched]] - end[local[mismatched]]
        firsts = np.append(0, np.cumsum(sizes)[:-1])
        sizes = np.add.reduceat(is_node, firsts, dtype=np.int64)
        at_walk = np.flatnonzero(is_node)
        node_start, popped, clock = is_start[at_walk], popped[at_walk], clock[at_walk]
        depth = np.cumsum(np.where(node_start, np.int32(1), np.int32(-1)), dtype=np.int32)  # annotations left out
        start_at, end_at = np.full(count, -1, dtype=np.int32), np.full(count, -1, dtype=np.int32)
        start_at[popped[node_start]] = np.flatnonzero(node_start)
        end_at[popped[~node_start]] = np.flatnonzero(~node_start)
    node = popped + np.int32(cpu[0]) if cpu[-1] - cpu[0] == count - 1 else cpu.astype(np.int32)[popped]
    node <<= 1  # node ids: 2 x row, + 1 for an end (int32, as rows are)
    node |= ~node_start
    del popped
    kind = np.where(node_start & (depth == 1), np.int8(DEPENDENCY), np.int8(OP))  # into an outermost start
    del depth
    firsts = np.append(0, np.cumsum(sizes)[:-1])
    kind[firsts[firsts < len(kind)]] = -1  # each thread's first node
    weight = np.zeros(len(node), dtype=np.int64)
    np.subtract(clock[1:], clock[:-1], out=weight[1:])
    del clock
    weight[kind != OP] = 0
    blocking = end_at[np.flatnonzero(events.blocking[cpu])]
    weight[blocking[blocking >= 0]] = 0  # into a blocking call's end: the GPU's time
    if at_walk is None:
        attributed = _attributed(node, kind, node_start, None, level, is_start, local, cpu)
    else:
        attributed = _attributed(node, kind, node_start, at_walk, level, is_start, local, cpu)
    return CpuChains(node, weight, kind, attributed, start_at, end_at)


def _thread_ranks(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Per event, its thread's rank in (pid, tid) order (small codes)."""
    if len(pid) and min(pid.min(), tid.min()) >= 0 and max(pid.max(), tid.max()) < 2**31:
        pair = pid.astype(np.int64)
        pair <<= 31
        pair |= tid
    else:  # ids outside 31 bits (a JSON trace can have them): the pairs' ranks, no bits dropped
        pid_code, _ = pd.factorize(pid, sort=True)
        tid_code, tids = pd.factorize(tid, sort=True)
        pair = pid_code.astype(np.int64) * len(tids) + tid_code
    code, pairs = pd.factorize(pair)  # by hashing, in order of appearance; then ranked (few pairs)
    rank = np.argsort(np.argsort(pairs)).astype(np.uint16 if len(pairs) < 2**16 else np.int64)
    return rank[code]


def _walk(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The walk: elements (starts 0..n-1, then ends n..2n-1) by thread, time, ends before starts, then
    starts longest first and earliest row first, ends shortest first and latest row first (HTA's order);
    per element of the walk its clock (ns: its time, shifted per thread so that threads never overlap);
    and the elements per thread. One sort of a key holding the thread, the time and start or end (its
    runs of the tables' start order make it nearly sorted), then only ties by the rest."""
    count = len(start)
    base = min(int(start.min()), int(end.min()))
    span = max(int(start.max()), int(end.max())) - base + 1
    sizes = 2 * np.bincount(thread)
    key = np.empty(2 * count, dtype=np.int64)
    np.subtract(start, base, out=key[:count])
    np.subtract(end, base, out=key[count:])
    if len(sizes) * span < KEY_LIMIT:  # every thread's times after the last one's
        if len(sizes) > 1:
            shift = thread.astype(np.int64)
            shift *= span
            key[:count] += shift
            key[count:] += shift
            del shift
        key <<= 1
        key[:count] += 1  # ends (0) before starts (1) at one time
        order = np.argsort(key, kind="stable")
        key = key[order]
    else:  # a long capture of many threads: times sorted first, then threads (a radix sort)
        key <<= 1
        key[:count] += 1
        order = np.argsort(key, kind="stable")
        order = order[np.argsort(np.concatenate([thread, thread])[order], kind="stable")]
        key = key[order]
        key += np.repeat(np.arange(len(sizes), dtype=np.int64) * (2 * span), sizes)  # ties within a thread only
    same = key[1:] == key[:-1]
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
    del same
    key >>= 1  # the clock: time - base + the thread's shift
    return order, key, sizes


def _popped(local: np.ndarray, is_start: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Per element of an improperly nested walk, the event it pushes (a start) or pops (an end): the
    starts and ends of one level alternate (start, end) in walk order, thread after thread."""
    by_level = _by_level(level)
    popped = local.copy()
    popped[by_level[1::2]] = local[by_level[0::2]]
    return popped


def _attributed(node: np.ndarray, kind: np.ndarray, node_start: np.ndarray, at_walk: np.ndarray | None,
                level: np.ndarray, is_start: np.ndarray, local: np.ndarray, cpu: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per node, the event its OPERATOR edge belongs to (-1 for other edges): the event that starts at the
    edge's source, else the one that ends at its target, else (an end to the next sibling's start) the
    enclosing event: the one on top of the stack when the source's event started, that is the latest
    start one level up before the source in the walk (still open, the walk being balanced; an annotation
    can be it). ``at_walk``: each node's place in the walk (None: the same place)."""
    attributed = np.full(len(node), -1, dtype=np.int32)
    if len(node) < 2:
        return attributed
    from_start = node_start[:-1]
    np.right_shift(np.where(from_start, node[:-1], node[1:]), 1, out=attributed[1:])
    siblings = np.flatnonzero(~from_start & node_start[1:]) + 1
    attributed[kind != OP] = -1
    siblings = siblings[kind[siblings] == OP]
    source = siblings - 1 if at_walk is None else at_walk[siblings - 1]  # the sibling's end, in the walk
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
