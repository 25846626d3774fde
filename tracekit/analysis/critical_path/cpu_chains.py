"""The CPU side of a window's graph: per thread, its operators and calls as a call stack, as one chain.

HolisticTraceAnalysis 0.5 walks each thread's events in time order (at one time ends before starts,
longer events start first and end last, then by row), pushing each start on a stack and popping the
top at each end, whichever event ends there (an improperly nested event ends with the stack). Here
that walk is columnar: one sort of the starts and ends (by thread, then time, in one key), the stack
depth as a cumulative sum. Each end pops its own event when every event starts and ends at one depth
(properly nested: the usual case, checked through each event's two places in the walk); otherwise
each end is paired with the start it pops by pairing the starts and ends of one depth in order (a
balanced walk alternates start, end at every depth). The nodes (operators' and calls' starts and ends;
not annotations) then form one chain per thread: each node's edge comes from the node before it, an
OPERATOR edge (the time between, attributed as ``cpu_chains`` says; 0 into a blocking call's end) or,
from one outermost node's end to the next one's start, a DEPENDENCY edge of weight 0.

The cost is arrays of one entry per element of the walk (two per event: 13M for the 6.6M CPU events of
a 1M-kernel export), and most of it the kernel's, giving each new array fresh memory: so they are few,
int32 or narrower where the values allow, and the sort's key and order, once used, hold later arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.events import CALL, DEPENDENCY, OP, OPERATOR, Events

KEY_LIMIT = 2**62  # the walk's sort key: (thread x span + time) x 2 + start below 2^63
FEW_THREADS = 16  # up to this many (pid, tid) pairs, threads are told apart by a pass per pair


@dataclass
class CpuChains:
    """The window's CPU nodes, thread after thread ((pid, tid) order), each thread's in walk order, then
    ``room`` entries left for the caller (the GPU's nodes). Per node: its id (2 x row, + 1 for an end),
    and the chain edge into it from the node before: weight (ns), kind (-1: the thread's first node, no
    edge) and attributed event (row, -1: none). ``count``: the CPU nodes. ``start_at``/``end_at``: per
    event of the window's CPU events, the index of its start/end node (-1: not a node)."""

    node: np.ndarray
    weight: np.ndarray
    kind: np.ndarray
    attributed: np.ndarray
    count: int
    start_at: np.ndarray
    end_at: np.ndarray


def cpu_chains(events: Events, cpu: np.ndarray, room: int = 0) -> CpuChains:
    """The chains of the CPU events ``cpu`` (rows, ascending), with ``room`` entries after them."""
    count = len(cpu)
    if not count:
        return _no_chains(room)
    contiguous = int(cpu[-1]) - int(cpu[0]) == count - 1
    rows = slice(int(cpu[0]), int(cpu[-1]) + 1) if contiguous else cpu  # a slice reads without copying
    start, end = events.start[rows], events.end[rows]
    walk = _Walk(events.pid[rows], events.tid[rows], start, end)
    node_role = (events.role[rows] == OPERATOR) | (events.role[rows] == CALL)
    found = _nodes(walk, node_role, end)
    at_walk, node_start, depth, popped, clock = found.at_walk, found.is_start, found.depth, found.event, found.clock
    sizes, start_at, end_at = found.sizes, found.start_at, found.end_at
    nodes = len(popped)
    if not nodes:
        return _no_chains(room, start_at, end_at)
    node = np.empty(nodes + room, dtype=np.int32)  # node ids: 2 x row, + 1 for an end (int32, as rows are)
    _rows(cpu, popped, out=node[:nodes])
    node[:nodes] <<= 1
    node[:nodes] |= ~node_start
    kind = np.empty(nodes + room, dtype=np.int8)
    kind[:nodes] = OP
    kind[:nodes][node_start & (depth == 1)] = DEPENDENCY  # into an outermost start
    firsts = np.append(0, np.cumsum(sizes)[:-1])
    kind[firsts[firsts < nodes]] = -1  # each thread's first node
    weight = np.empty(nodes + room, dtype=np.int64)
    weight[0] = 0
    np.subtract(clock[1:], clock[:-1], out=weight[1:nodes])
    weight[:nodes][kind[:nodes] != OP] = 0
    blocking = end_at[np.flatnonzero(events.blocking[rows])]
    weight[blocking[blocking >= 0]] = 0  # into a blocking call's end: the GPU's time
    del clock
    attributed = np.empty(nodes + room, dtype=np.int32)
    attributed[0] = -1
    # an edge from a start: that event's; into an end: that event's; else, from an end to the next
    # sibling's start: the event enclosing both (HTA: the top of the stack under the ended event)
    from_start = node_start[:-1]
    attributed[1:nodes] = node[1:nodes]
    np.copyto(attributed[1:nodes], node[: nodes - 1], where=from_start)
    attributed[1:nodes] >>= 1
    attributed[:nodes][kind[:nodes] != OP] = -1
    siblings = np.flatnonzero(~from_start & node_start[1:] & (kind[1:nodes] == OP)) + 1
    ended = siblings - 1 if at_walk is None else at_walk[siblings - 1]  # the sibling's end, in the walk
    attributed[siblings] = walk.enclosing(ended, cpu)
    return CpuChains(node, weight, kind, attributed, nodes, start_at, end_at)


@dataclass
class _Nodes:
    """The walk's nodes (operators' and calls' starts and ends), in walk order: their places in the walk
    (None: every element is one), whether each is a start, its depth (a start's: after its push; counting
    nodes only), its event (an improperly nested end: the one it popped), its clock (such an end: that
    event's end), the nodes per thread, and each event's start and end node (-1: not a node)."""

    at_walk: np.ndarray | None
    is_start: np.ndarray
    depth: np.ndarray
    event: np.ndarray
    clock: np.ndarray
    sizes: np.ndarray
    start_at: np.ndarray
    end_at: np.ndarray


def _nodes(walk: _Walk, node_role: np.ndarray, end: np.ndarray) -> _Nodes:
    """The nodes of ``walk`` (``_Nodes``), ``node_role`` saying which events are nodes."""
    count = len(end)
    if walk.nested and node_role.all():  # every event a node, each end its own: the chain is the walk
        place = walk.place
        return _Nodes(None, walk.is_start, walk.level, walk.local, walk.clock, walk.sizes, place[:count], place[count:])
    popped = walk.local if walk.nested else _popped(walk.local, walk.is_start, walk.level)
    clock = walk.clock
    is_node = node_role[popped]
    if not walk.nested:  # an end that popped another event: that one's end (same thread: same clock offset)
        mismatched = np.flatnonzero(is_node & ~walk.is_start & (walk.local != popped))
        clock[mismatched] += end[popped[mismatched]] - end[walk.local[mismatched]]
    sizes = np.add.reduceat(is_node, np.append(0, np.cumsum(walk.sizes)[:-1]), dtype=np.int64)
    at_walk = np.flatnonzero(is_node).astype(np.int32)
    node_start, popped, clock = walk.is_start[at_walk], popped[at_walk], clock[at_walk]
    depth = np.cumsum(np.where(node_start, np.int32(1), np.int32(-1)), dtype=np.int32)  # annotations left out
    start_at, end_at = np.full(count, -1, dtype=np.int32), np.full(count, -1, dtype=np.int32)
    start_at[popped[node_start]] = np.flatnonzero(node_start)
    end_at[popped[~node_start]] = np.flatnonzero(~node_start)
    return _Nodes(at_walk, node_start, depth, popped, clock, sizes, start_at, end_at)


def _no_chains(room: int, start_at: np.ndarray | None = None, end_at: np.ndarray | None = None) -> CpuChains:
    """No CPU node (none in the window, or only annotations), and the room after them."""
    none = np.zeros(0, dtype=np.int32)
    return CpuChains(
        np.empty(room, dtype=np.int32),
        np.empty(room, dtype=np.int64),
        np.empty(room, dtype=np.int8),
        np.empty(room, dtype=np.int32),
        0,
        none if start_at is None else start_at,
        none if end_at is None else end_at,
    )


class _Walk:
    """The walk of ``count`` events (starts 0..count-1, then ends): per element of the walk (position),
    ``local``: its event; ``is_start``; ``level``: a start's depth after its push, an end's before its
    pop; ``clock`` (ns: its time, shifted per thread so that threads never overlap); and ``place``: per
    element (starts, then ends), its position. ``sizes``: elements per thread; ``nested``: whether every
    end pops its own event."""

    def __init__(self, pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray):
        count = len(start)
        thread, threads = _thread_ranks(pid, tid)
        self.sizes = 2 * threads
        order, self.clock, spare = _walk_order(thread, self.sizes, start, end)
        self.is_start = order < count
        # the sort's key (read by now) holds ``place`` and ``local``
        self.place, self.local = _halves(spare)
        _arange(self.local)
        self.place[order] = self.local
        np.copyto(self.local, order, casting="unsafe")
        np.subtract(self.local, count, out=self.local, where=~self.is_start)
        # the sort's order is dead now: it holds ``level`` (the depth as a cumulative sum of steps)
        step, self.level = _halves(order)
        np.copyto(step, self.is_start)
        step <<= 1
        step -= 1
        np.cumsum(step, out=self.level)
        np.add(self.level, ~self.is_start, out=self.level)
        np.take(self.level, self.place, out=step)
        self.nested = np.array_equal(step[:count], step[count:])
        self.scratch = step  # free again: one int32 per position for ``enclosing``

    def enclosing(self, ended: np.ndarray, cpu: np.ndarray) -> np.ndarray:
        """For ends ``ended`` (positions): the event enclosing each one's event when it started (row; -1 at
        the top level)."""
        if self.nested:
            return _enclosing(ended, self.is_start, self.level, self.local, self.place, cpu, self.scratch)
        return _enclosing_searched(ended, self.is_start, self.level, self.local, cpu)


def _halves(buffer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two int32 arrays as long as ``buffer`` (64-bit values no longer needed), in its memory."""
    if buffer.dtype.itemsize != 8 or not buffer.flags.c_contiguous:
        return np.empty(len(buffer), dtype=np.int32), np.empty(len(buffer), dtype=np.int32)
    halves = buffer.view(np.int32)
    return halves[: len(buffer)], halves[len(buffer) :]


def _arange(out: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... written into ``out`` (int32; np.arange would take fresh memory)."""
    out[:] = 1
    if len(out):
        out[0] = 0
    return np.cumsum(out, out=out)


def _rows(cpu: np.ndarray, local: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The rows (int32) of the window's CPU events ``local`` (indices into ``cpu``)."""
    if len(cpu) and int(cpu[-1]) - int(cpu[0]) == len(cpu) - 1:
        return np.add(local, np.int32(cpu[0]), out=out, dtype=np.int32)
    return np.take(cpu.astype(np.int32), local, out=out)


def _thread_ranks(pid: np.ndarray, tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per event, its thread's rank in (pid, tid) order (small codes); and the events per thread."""
    pids, tids = np.sort(pd.unique(pid)), np.sort(pd.unique(tid))
    if len(pids) * len(tids) <= FEW_THREADS:  # few processes and thread ids: a pass per pair
        rank = np.zeros(len(tid), dtype=np.uint16)
        counts = []
        for process in pids.tolist():
            in_process = pid == process if len(pids) > 1 else None
            for thread in tids.tolist():
                mine = tid == thread if in_process is None else in_process & (tid == thread)
                count = np.count_nonzero(mine)
                if count:
                    rank[mine] = len(counts)
                    counts.append(count)
        return rank, np.asarray(counts, dtype=np.int64)
    if len(pid) and min(pid.min(), tid.min()) >= 0 and max(pid.max(), tid.max()) < 2**31:
        pair = pid.astype(np.int64)
        pair <<= 31
        pair |= tid
    else:  # ids outside 31 bits (a JSON trace can have them): the pairs' ranks, no bits dropped
        pid_code, _ = pd.factorize(pid, sort=True)
        tid_code, tids = pd.factorize(tid, sort=True)
        pair = pid_code.astype(np.int64) * len(tids) + tid_code
    code, pairs = pd.factorize(pair)  # by hashing, in order of appearance; then ranked (few pairs)
    by_pair = np.argsort(pairs)
    rank = np.empty(len(pairs), dtype=np.uint16 if len(pairs) < 2**16 else np.int64)
    rank[by_pair] = np.arange(len(pairs))
    return rank[code], np.bincount(code, minlength=len(pairs))[by_pair]


def _walk_order(
    thread: np.ndarray, sizes: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The walk: elements (starts 0..n-1, then ends n..2n-1) by thread, time, ends before starts, then
    starts longest first and earliest row first, ends shortest first and latest row first (HTA's order);
    per element of the walk its clock; and the sort's key, free for other use. One sort of a key holding
    the thread, the time and start or end (its runs of the tables' start order make it nearly sorted),
    then only ties by the rest."""
    count = len(start)
    base = min(int(start.min()), int(end.min()))
    span = max(int(start.max()), int(end.max())) - base + 1
    key = np.empty(2 * count, dtype=np.int64)
    low, high = key[:count], key[count:]
    by_thread = len(sizes) * span < KEY_LIMIT
    if by_thread and len(sizes) > 1:  # every thread's times after the previous one's
        np.multiply(thread, span, out=low, dtype=np.int64)
        low -= base
    else:
        low[:] = -base
    high[:] = low
    low += start
    high += end
    key <<= 1
    low += 1  # ends (0) before starts (1) at one time
    order = np.argsort(key, kind="stable")
    if not by_thread:  # a long capture of many threads: times sorted first, then threads (a radix sort)
        order = order[np.argsort(np.concatenate([thread, thread])[order], kind="stable")]
    clock = np.take(key, order)
    if not by_thread:
        clock += np.repeat(np.arange(len(sizes), dtype=np.int64) * (2 * span), sizes)  # ties within a thread only
    same = clock[1:] == clock[:-1]
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
    clock >>= 1  # time - base + the thread's shift
    return order, clock, key


def _popped(local: np.ndarray, is_start: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Per element of an improperly nested walk, the event it pushes (a start) or pops (an end): the
    starts and ends of one level alternate (start, end) in walk order, thread after thread."""
    by_level = _by_level(level)
    popped = local.copy()
    popped[by_level[1::2]] = local[by_level[0::2]]
    return popped


def _enclosing(
    ended: np.ndarray,
    is_start: np.ndarray,
    level: np.ndarray,
    local: np.ndarray,
    place: np.ndarray,
    cpu: np.ndarray,
    pointer: np.ndarray,
) -> np.ndarray:
    """For ends ``ended`` (positions) of a properly nested walk: the event enclosing each one's event (row;
    -1 at the top level). An event's parent starts right before its first child; a later child starts
    right after its previous sibling's end. So each start points to its previous sibling's start, or is
    a first child; pointers are jumped (each to its pointer's pointer) until every one reaches a first
    child: as many rounds as the log of the longest run of siblings. ``pointer``: an int32 per position,
    free for use (only the starts below the top level are written and read)."""
    inner_starts = np.flatnonzero(is_start & (level > 1))
    pointer[inner_starts] = inner_starts  # a first child: itself
    later = inner_starts[~is_start[inner_starts - 1]]
    del inner_starts
    pointer[later] = place[local[later - 1]]
    while len(later):
        pointed = pointer[later]
        further = pointer[pointed]
        pointer[later] = further
        later = later[further != pointed]
    started = place[local[ended]]  # where each ended event started
    enclosing = np.full(len(ended), -1, dtype=np.int32)
    inner = level[started] > 1
    enclosing[inner] = _rows(cpu, local[pointer[started[inner]] - 1])
    return enclosing


def _enclosing_searched(
    ended: np.ndarray, is_start: np.ndarray, level: np.ndarray, local: np.ndarray, cpu: np.ndarray
) -> np.ndarray:
    """For ends ``ended`` (positions) of any walk: the event on top of the stack when each one's event
    started (row; -1 at the top level), that is the latest start one level up before the end (still
    open, the walk being balanced): starts and wanted ends by (level, walk), radix sorts by level keeping
    walk order, and one search."""
    enclosing = np.full(len(ended), -1, dtype=np.int32)
    inner = np.flatnonzero(level[ended] > 1)
    if not len(inner):
        return enclosing
    source = ended[inner]
    starts = np.flatnonzero(is_start)
    starts = starts[_by_level(level[starts])]
    key = level[starts].astype(np.int64) * len(level) + starts
    by_wanted = _by_level(level[source])
    wanted = (level[source[by_wanted]].astype(np.int64) - 1) * len(level) + source[by_wanted]
    enclosing[inner[by_wanted]] = _rows(cpu, local[starts[np.searchsorted(key, wanted) - 1]])
    return enclosing


def _by_level(level: np.ndarray) -> np.ndarray:
    """The stable order of ``level`` (small values: a radix sort)."""
    return np.argsort(level.astype(np.uint16) if len(level) and level.max() < 2**16 else level, kind="stable")
