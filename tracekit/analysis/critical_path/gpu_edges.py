"""The GPU side of a window's graph, as HolisticTraceAnalysis 0.5 adds it, columnar.

HTA visits the window's GPU ops (by start) and syncs (by end) in one time order (ties in row order),
keeping each stream's last op and the op each stream-waiting op must wait for. Per op, in that order:
its own edge (start to end), then a SYNC_DEPENDENCY from the op a stream wait made it wait for, then
a launch edge from its call's start (its stream's queue empty at the launch, none behind it at its
start, and the stream's last op and the waited-for op ended before the launch) or else a kernel-kernel
edge from its stream's last op (unless the waited-for op ended later). Per sync: SYNC_DEPENDENCY edges
into its call's end from the synchronized stream's last op, from each stream of the device (a context
sync; streams in the order their first op came), or from the op an event sync's event recorded. Each
of these is a lookup in the ops sorted by (stream, visit order), so no op is visited in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.events import GPU, KERNEL_KERNEL, LAUNCH, OP, SYNC, SYNC_DEPENDENCY, Events
from tracekit.model.schema import SYNC_KINDS

STREAM_SYNC, CONTEXT_SYNC, EVENT_SYNC, STREAM_WAIT = (
    SYNC_KINDS.index(kind) for kind in ("stream_sync", "context_sync", "event_sync", "stream_wait_event")
)


@dataclass
class GpuEdges:
    """The window's GPU ops, stream after stream (each in visit order), two nodes each (start, end): per
    node its id and the chain edge into it (an op's start: the kernel-kernel edge, if any, kind -1
    otherwise; its end: its OPERATOR edge): weight (ns), kind, attributed event, place (the order HTA adds
    edges in: ``visit x 2^16 + n``). ``cross_*``: the other edges (launch and sync), as (source node,
    target node, weight, kind, place), in place order."""

    node: np.ndarray
    weight: np.ndarray
    kind: np.ndarray
    attributed: np.ndarray
    place: np.ndarray
    cross_source: np.ndarray
    cross_target: np.ndarray
    cross_weight: np.ndarray
    cross_kind: np.ndarray
    cross_place: np.ndarray


def gpu_edges(events: Events, rows: np.ndarray) -> GpuEdges:
    """The GPU edges of the window holding ``rows`` (ascending)."""
    gpu = rows[(events.role[rows] >= GPU) & (events.partner[rows] >= 0)]
    is_sync = events.role[gpu] == SYNC
    order = np.argsort(np.where(is_sync, events.end[gpu], events.start[gpu]), kind="stable")
    gpu, is_sync = gpu[order], is_sync[order]
    visit = np.flatnonzero(~is_sync)
    ops = gpu[visit]
    stream = _stream_codes(events, gpu)
    by_stream = np.lexsort((visit, stream[visit]))  # ops by (stream, visit)
    ops, visit = ops[by_stream], visit[by_stream]
    op_stream = stream[~is_sync][by_stream]
    first_of_stream = np.ones(len(ops), dtype=bool)
    first_of_stream[1:] = op_stream[1:] != op_stream[:-1]
    previous = np.where(first_of_stream, -1, np.concatenate([[-1], ops[:-1]]))
    cross = _Cross()

    # stream waits: the op each waiting op waits for (the last wait visited before the op names it)
    source = _waited_for(events, gpu, is_sync, ops, visit, rows)
    has_source = source >= 0
    source_end = np.where(has_source, events.end[np.maximum(source, 0)], 0)
    cross.add(2 * source[has_source] + 1, 2 * ops[has_source], 0, SYNC_DEPENDENCY, visit[has_source] * 2**16 + 1)

    call = events.partner[ops]
    call_time = events.start[call]
    previous_end = np.where(previous >= 0, events.end[np.maximum(previous, 0)], 0)
    launch = (
        (events.queue[call] == 1)
        & (events.queue[ops] == 0)
        & ((previous < 0) | (previous_end < call_time))
        & (~has_source | (source_end < call_time))
    )
    kernel_kernel = ~launch & (previous >= 0) & (~has_source | (source_end < previous_end))
    launch &= _in(rows, call)  # an op that ran in the window, launched before it (tracekit's): no edge from outside
    cross.add(
        2 * call[launch], 2 * ops[launch], (events.start[ops] - call_time)[launch], LAUNCH, visit[launch] * 2**16 + 2
    )
    _sync_edges(events, gpu, is_sync, ops, visit, op_stream, stream, rows, cross)

    count = len(ops)
    node = np.empty(2 * count, dtype=np.int32)
    node[0::2], node[1::2] = 2 * ops, 2 * ops + 1
    weight = np.zeros(2 * count, dtype=np.int64)
    weight[0::2] = np.where(kernel_kernel, events.start[ops] - previous_end, 0)
    weight[1::2] = events.end[ops] - events.start[ops]
    kind = np.empty(2 * count, dtype=np.int8)
    kind[0::2], kind[1::2] = np.where(kernel_kernel, KERNEL_KERNEL, -1), OP
    attributed = np.empty(2 * count, dtype=np.int32)
    attributed[0::2], attributed[1::2] = np.where(kernel_kernel, previous, -1), ops
    place = np.empty(2 * count, dtype=np.int64)
    place[0::2], place[1::2] = visit * 2**16 + 2, visit * 2**16
    return GpuEdges(node, weight, kind, attributed, place, *cross.arrays())


class _Cross:
    """Launch and sync edges as they are found, put in place order at the end."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(self, source: np.ndarray, target: np.ndarray, weight, kind: int, place: np.ndarray) -> None:
        size = len(source)
        self.parts.append(
            (
                source,
                target,
                np.broadcast_to(np.asarray(weight, dtype=np.int64), (size,)),
                np.full(size, kind, dtype=np.int8),
                place,
            )
        )

    def arrays(self) -> tuple[np.ndarray, ...]:
        source, target, weight, kind, place = (np.concatenate([part[i] for part in self.parts]) for i in range(5))
        order = np.argsort(place, kind="stable")
        return source[order], target[order], weight[order], kind[order], place[order]


def _stream_codes(events: Events, gpu: np.ndarray) -> np.ndarray:
    """Per GPU row, a code of its (device, stream)."""
    codes, _ = pd.factorize(events.device[gpu].astype(np.int64) * 2**32 + events.stream[gpu])
    return codes.astype(np.int64)


def _last_op_before(op_stream: np.ndarray, visit: np.ndarray, stream: np.ndarray, when: np.ndarray) -> np.ndarray:
    """For each (stream, visit position), the index in the ops (sorted by stream, visit) of the stream's
    last op visited before it, -1 for none."""
    key = op_stream * (2**32) + visit
    found = np.searchsorted(key, stream * (2**32) + when) - 1
    valid = found >= 0
    valid[valid] = op_stream[found[valid]] == stream[valid]
    return np.where(valid, found, -1)


def _waited_for(
    events: Events, gpu: np.ndarray, is_sync: np.ndarray, ops: np.ndarray, visit: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """Per op (``ops``' order), the op a stream wait made it wait for (in the window), -1 for none: of
    the waits visited before the op that name it (the first op launched to the waiting stream by the
    waiting thread after the wait), the last one's recorded op."""
    waits = np.flatnonzero(is_sync & (events.sync_kind[gpu] == STREAM_WAIT))
    waited = np.full(len(ops), -1, dtype=np.int64)
    if not len(waits) or not len(ops):
        return waited
    links = event_links(events)
    recorded, launched = links.lookup(gpu[waits])
    named = (recorded >= 0) & (launched >= 0)
    waits, recorded, target = waits[named], recorded[named], events.partner[np.maximum(launched[named], 0)]
    by_row = np.argsort(ops)
    at = np.searchsorted(ops[by_row], target)
    found = at < len(ops)
    found[found] = ops[by_row][at[found]] == target[found]
    index = by_row[np.minimum(at, len(ops) - 1)]
    before = found & (waits < visit[index])
    waits, recorded, index = waits[before], recorded[before], index[before]
    last = np.lexsort((waits, index))  # per op its waits in visit order: the last wins
    keep = np.ones(len(last), dtype=bool)
    keep[:-1] = index[last][1:] != index[last][:-1]
    waited[index[last][keep]] = recorded[last][keep]
    in_window = _in(rows, waited)
    return np.where(in_window, waited, -1)


def _in(rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Whether each of ``wanted`` is one of ``rows`` (ascending); -1 never is."""
    if not len(rows):
        return np.zeros(len(wanted), dtype=bool)
    at = np.minimum(np.searchsorted(rows, wanted), len(rows) - 1)
    return (wanted >= 0) & (rows[at] == wanted)


def _sync_edges(
    events: Events,
    gpu: np.ndarray,
    is_sync: np.ndarray,
    ops: np.ndarray,
    visit: np.ndarray,
    op_stream: np.ndarray,
    stream: np.ndarray,
    rows: np.ndarray,
    cross: _Cross,
) -> None:
    """The SYNC_DEPENDENCY edges into the calls that synchronized."""
    syncs = np.flatnonzero(is_sync)
    kind = events.sync_kind[gpu[syncs]]
    call_end = 2 * events.partner[gpu[syncs]] + 1
    stream_syncs = kind == STREAM_SYNC
    last = _last_op_before(op_stream, visit, stream[syncs][stream_syncs], syncs[stream_syncs])
    has = last >= 0
    cross.add(2 * ops[last[has]] + 1, call_end[stream_syncs][has], 0, SYNC_DEPENDENCY, syncs[stream_syncs][has] * 2**16)
    event_syncs = np.flatnonzero(kind == EVENT_SYNC)
    if len(event_syncs):
        recorded, _ = event_links(events).lookup(gpu[syncs[event_syncs]])
        has = _in(rows, recorded)
        cross.add(
            2 * recorded[has] + 1, call_end[event_syncs][has], 0, SYNC_DEPENDENCY, syncs[event_syncs][has] * 2**16
        )
    context = np.flatnonzero(kind == CONTEXT_SYNC)
    if not len(context) or not len(ops):
        return
    # each stream of the sync's device that had an op before it, in the order of the streams' first ops
    firsts = np.flatnonzero(np.concatenate([[True], op_stream[1:] != op_stream[:-1]]))
    firsts = firsts[np.argsort(visit[firsts], kind="stable")]
    device = events.device[gpu]
    pair_sync = np.repeat(context, len(firsts))
    pair_stream = np.tile(firsts, len(context))
    rank = np.tile(np.arange(len(firsts)), len(context))
    same_device = device[visit[pair_stream]] == device[syncs[pair_sync]]
    pair_sync, pair_stream, rank = pair_sync[same_device], pair_stream[same_device], rank[same_device]
    last = _last_op_before(op_stream, visit, op_stream[pair_stream], syncs[pair_sync])
    has = last >= 0
    cross.add(
        2 * ops[last[has]] + 1, call_end[pair_sync[has]], 0, SYNC_DEPENDENCY, syncs[pair_sync[has]] * 2**16 + rank[has]
    )


@dataclass
class Links:
    """Per event sync and stream wait of the trace (``rows``, ascending): the GPU op its event waited for
    (``recorded``) and, for a wait, the next queued call to the waiting stream (``next_launch``); -1 for
    none."""

    rows: np.ndarray
    recorded: np.ndarray
    next_launch: np.ndarray

    def lookup(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(recorded, next_launch) of each of the rows ``wanted``; -1 where it has none."""
        if not len(self.rows):
            none = np.full(len(wanted), -1, dtype=np.int64)
            return none, none.copy()
        at = np.minimum(np.searchsorted(self.rows, wanted), len(self.rows) - 1)
        found = self.rows[at] == wanted
        return np.where(found, self.recorded[at], -1), np.where(found, self.next_launch[at], -1)


def event_links(events: Events) -> Links:
    """For every event sync and stream wait of the trace: the op the event's record followed (the latest
    op launched to the recording stream at or before the cudaEventRecord call, on any thread) and, for a
    wait, the first op launched to the waiting stream by the waiting thread after the wait call. Found
    once per trace: launches are grouped by stream (and thread) once; each sync is then one binary
    search in its group."""
    if events.links is not None:
        return events.links
    syncs = np.flatnonzero((events.role == SYNC) & np.isin(events.sync_kind, [STREAM_WAIT, EVENT_SYNC]))
    syncs = syncs[(events.event_stream[syncs] >= 0) & (events.event_correlation[syncs] >= 0)]
    recorded = np.full(len(syncs), -1, dtype=np.int64)
    next_launch = np.full(len(syncs), -1, dtype=np.int64)
    events.links = Links(syncs, recorded, next_launch)
    if not len(syncs):
        return events.links
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
    for index, sync in enumerate(syncs.tolist()):
        record = record_at.get((int(events.pid[sync]), int(events.event_correlation[sync])))
        group = by_stream.get(int(events.device[sync]) * 2**32 + int(events.event_stream[sync]))
        if record is None or group is None:
            continue
        rows_of, starts = group
        before = int(np.searchsorted(starts, events.start[record], side="right"))
        if before == 0:
            continue
        recorded[index] = int(events.partner[rows_of[before - 1]])
        call = int(events.partner[sync])
        if events.sync_kind[sync] != STREAM_WAIT or call < 0:
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
            next_launch[index] = int(rows_of[after])
    return events.links


def _groups(rows: np.ndarray, key: np.ndarray, time: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per key, its rows and their times in time order (ties in row order)."""
    order = np.lexsort((rows, time, key))
    rows, key, time = rows[order], key[order], time[order]
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if len(key) else np.zeros(0, np.int64)
    bounds = np.append(first, len(key))
    return {int(key[low]): (rows[low:high], time[low:high]) for low, high in zip(bounds[:-1], bounds[1:], strict=True)}
