"""The columns of ``events`` as Perfetto's protobuf trace (``TracePacket``s of ``TrackEvent``s), a chunk at a
time (``protobuf``: no Python object per event).

Each process and track is a ``TrackDescriptor`` (a (pid, tid) track a thread descriptor, as Perfetto's JSON
importer makes it). Each chunk's slices on one track form a packet sequence of their own: its first packet
clears the sequence's state and holds the names, categories, argument names and text values its slices use
(interned: each event refers to them by a small number), the track (``track_event_defaults``: no event
repeats it) and an incremental clock (each packet's timestamp is the ns since the previous packet's), so a
kernel is its begin and end packets of a few bytes each plus its arguments. A slice of zero duration is an
instant (Perfetto's slice of duration 0). Arrows are flow ids on the slices they join.

The packets are laid out a row per slice (``protobuf.Rows``: its begin, and its end when that is the next
event on the track) and written zlib-compressed, ~1 MiB of packets to a ``compressed_packets`` packet, as
Perfetto's own service writes them (its trace processor and UI inflate them): the repeated argument bytes
of a million kernels shrink ~10x.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import IO

import numpy as np

from tracekit.session import in_this_context
from tracekit.trace_events.events import Counters, Labels, Metadata, Slices, Track
from tracekit.trace_events.protobuf import Rows, deflated, field
from tracekit.trace_events.track_event_fields import opening_fields

BOOTTIME = 6  # Perfetto's default trace clock, which the file's ns are
INCREMENTAL = 64  # the first sequence-scoped clock id: each packet's time is a delta on its sequence
BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4
CLEARED = 1  # TracePacket.sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED
# packets as they are, or to compress: (bytes, packet ends), or those being made
Encoded = bytes | tuple[np.ndarray, np.ndarray] | Future
FEW_ARROWS = 4  # arrows leaving one slice that every row of a chunk makes room for


def packet(*fields: bytes) -> bytes:
    return field(1, b"".join(fields))  # Trace.packet


class PerfettoSink:
    """The protobuf file: descriptors as tracks appear, then every chunk's packets."""

    def __init__(self, handle: IO[bytes]):
        self.handle, self.size = handle, 0
        self.uuids: dict[tuple[int, int | None], int] = {}
        self.sequences = 0
        self.pool: ThreadPoolExecutor | None = None
        self.making_pool = threading.Lock()
        self.counters: dict[tuple[int, str], int] = {}  # (pid, track name) -> a counter track's uuid

    def header(self, fields: dict) -> None:
        pass  # torch.profiler's header fields have no place in the protobuf format

    def encode(self, item: Slices | Counters | Metadata) -> list[Encoded]:
        """The packets of ``item``: descriptors as they are, events as (bytes, each packet's end) that ``put``
        compresses (on the writing thread, while the next chunk is encoded)."""
        if isinstance(item, Metadata):
            return [b"".join(self._track(track) for track in item.tracks)]
        if isinstance(item, Counters):
            return self._counters(item)
        return self._slices(item)

    def put(self, encoded: list[Encoded]) -> None:
        """Write ``encoded`` in order, its event packets compressed on the pool."""
        for part in encoded:
            if isinstance(part, bytes):
                self.size += self.handle.write(part)
                continue
            packets, ends = part.result() if isinstance(part, Future) else part
            self.size += self.handle.write(deflated(packets, ends, self._pool().map))

    def _pool(self) -> ThreadPoolExecutor:
        """Threads (as many as the cores, up to 4) that make and compress packets while the next chunk is
        read and numbered."""
        with self.making_pool:  # the encoding thread and the writing thread both ask for it
            if self.pool is None:
                self.pool = ThreadPoolExecutor(min(4, os.cpu_count() or 1), thread_name_prefix="tracekit-packets")
            return self.pool

    def close(self) -> int:
        self.release()
        return self.size

    def release(self) -> None:
        """End the pool's threads, whether the file was completed or not (an error, Ctrl-C: what is queued
        is dropped, what runs ends before this returns)."""
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def _track(self, track: Track) -> bytes:
        """The descriptor of a process or of one of its tracks (its process described first)."""
        if (track.pid, track.tid) in self.uuids:
            return b""
        before = b"" if track.tid is None else self._track(Track(track.pid, None, "", 0))
        uuid = self.uuids[(track.pid, track.tid)] = len(self.uuids) + 1
        if track.tid is None:
            described = field(3, field(1, track.pid) + field(6, track.name or None) + field(3, track.order))
        else:
            thread = field(1, track.pid) + field(2, track.tid) + field(5, track.name or None) + field(3, track.order)
            described = field(5, self.uuids[(track.pid, None)]) + field(4, thread)
        return before + packet(field(60, field(1, uuid) + described))

    def _sequence(self, uuid: int, base: int, interned: bytes) -> tuple[int, bytes]:
        """A new sequence on track ``uuid`` whose clock starts at ``base`` ns: its id and first packet."""
        self.sequences += 1
        clocks = field(1, field(1, BOOTTIME) + field(2, base)) + field(
            1, field(1, INCREMENTAL) + field(2, base) + field(3, 1)
        )
        defaults = field(58, INCREMENTAL) + field(11, field(11, uuid))
        first = packet(
            field(8, base),
            field(58, BOOTTIME),
            field(10, self.sequences),
            field(13, CLEARED),
            field(6, clocks),
            field(59, defaults),
            field(12, interned) if interned else b"",
        )
        return self.sequences, first

    def _uuids(self, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """Each row's track, described first where it is new (a track no metadata named: a thread's)."""
        keys = pid.astype(np.int64) << 32 ^ tid.astype(np.int64)
        distinct, inverse = np.unique(keys, return_inverse=True)
        first = np.zeros(len(distinct), dtype=np.int64)
        first[inverse[::-1]] = np.arange(len(keys))[::-1]
        uuids = np.array([self._known(int(pid[row]), int(tid[row])) for row in first], dtype=np.int64)
        return uuids[inverse.reshape(-1)]

    def _known(self, pid: int, tid: int) -> int:
        if (pid, tid) not in self.uuids:
            self.pending += self._track(Track(pid, tid, "", 0))
        return self.uuids[(pid, tid)]

    def _slices(self, chunk: Slices) -> list[Encoded]:
        if not len(chunk):
            return []
        self.pending = b""
        track = self._uuids(chunk.pid, chunk.tid)
        events = _in_order(chunk, track)
        tracks = track[events.rows]
        starts = np.flatnonzero(np.diff(tracks, prepend=-1))  # each track's first event
        bounds = np.append(starts, len(events.rows))
        events.delta[starts] = 0
        heads, ids = [], np.zeros(len(starts), dtype=np.int64)
        names = [arg.name for arg in chunk.args]
        for index, first in enumerate(starts):
            interned = _interned(chunk, events.rows[first : bounds[index + 1]], names)
            ids[index], head = self._sequence(int(tracks[first]), int(events.time[first]), interned)
            heads.append(head)
        events.sequence[:] = np.repeat(ids, np.diff(bounds))
        descriptors = self.pending

        def assemble() -> tuple[np.ndarray, np.ndarray]:
            body, lengths = _events(chunk, events)
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            pieces = [np.frombuffer(descriptors, dtype=np.uint8)]
            sizes = [np.array([len(descriptors)], dtype=np.int64)]  # (descriptors: one piece, never cut)
            for index, head in enumerate(heads):
                pieces += [
                    np.frombuffer(head, dtype=np.uint8),
                    body[offsets[bounds[index]] : offsets[bounds[index + 1]]],
                ]
                sizes += [np.array([len(head)]), lengths[bounds[index] : bounds[index + 1]]]
            return np.concatenate(pieces), np.cumsum(np.concatenate(sizes))

        # the packets themselves (most of the work, numpy without the GIL much of the time) are made on the
        # pool, beside the next chunk's; what numbers the sequences and tracks stays in order, here
        return [self._pool().submit(in_this_context(assemble))]

    def _counters(self, counters: Counters) -> list[Encoded]:
        if not len(counters):
            return []
        pieces: list[Encoded] = []
        scale = 10.0**counters.decimals
        order = np.argsort(counters.times, kind="stable")
        times = counters.times[order]
        for name, values in counters.series.items():
            key = (counters.pid, f"{counters.name} {name}")
            uuid = self.counters.get(key)  # a counter's later chunks go on on its track
            if uuid is None:
                process = self._track(Track(counters.pid, None, "", 0))
                uuid = self.counters[key] = len(self.uuids) + 1
                self.uuids[(counters.pid, -uuid)] = uuid  # a counter track is no (pid, tid) track
                descriptor = field(1, uuid) + field(5, self.uuids[(counters.pid, None)]) + field(2, key[1])
                pieces.append(process + packet(field(60, descriptor + field(8, b""))))
            ids, head = self._sequence(uuid, int(times[0]), b"")
            packets = Rows(len(times))
            with packets.message(1):
                packets.varint(8, np.diff(times, prepend=times[0]))
                packets.varint(10, np.full(len(times), ids))
                with packets.message(11):
                    packets.varint(9, np.full(len(times), COUNTER))
                    packets.doubles(44, values[order] / scale)
            # the sequence's first packet compressed with its events
            body = np.concatenate([np.frombuffer(head, dtype=np.uint8), packets.encode()])
            pieces.append((body, np.cumsum(np.concatenate([[len(head)], packets.lengths]))))
        return pieces


@dataclass(frozen=True)
class EventRows:
    """A chunk's events in time order on each track, a row of the byte matrix each: ``rows`` (the slice),
    ``kind`` (begin, end or instant), ``delta`` (ns since the previous event on the track), ``after`` (ns to
    the slice's end where ``closes``: its end is the next event on its track, written in the same row),
    ``time`` (ns) and ``sequence`` (the packet sequence of its track, filled in by the sink)."""

    rows: np.ndarray
    kind: np.ndarray
    delta: np.ndarray
    after: np.ndarray
    closes: np.ndarray
    time: np.ndarray
    sequence: np.ndarray

    @classmethod
    def of(cls, rows, kind, delta, after, closes, time) -> EventRows:
        return cls(rows, kind, delta, after, closes, time, np.zeros(len(rows), dtype=np.int64))

    def __getitem__(self, mine: np.ndarray) -> EventRows:
        return EventRows(*(getattr(self, name.name)[mine] for name in fields(self)))


def _in_order(chunk: Slices, track: np.ndarray) -> EventRows:
    """The chunk's events (``EventRows``). Every slice is a begin and an end (an instant when it lasts 0 ns);
    at one time ends come before begins, the longer slice begun first, the later begun ended first."""
    flat = _flat_order(chunk, track)
    if flat is not None:  # each track's slices follow one another (a stream's ops, idle gaps): a row a slice
        time, duration = chunk.start[flat], chunk.duration[flat]
        previous_end = np.concatenate([time[:1], (time + duration)[:-1]])
        kind = np.where(duration > 0, BEGIN, INSTANT)
        return EventRows.of(flat, kind, time - previous_end, duration, duration > 0, time)
    has_end = chunk.duration > 0
    rows = np.concatenate([np.arange(len(chunk)), np.flatnonzero(has_end)])
    kind = np.concatenate([np.where(has_end, BEGIN, INSTANT), np.full(int(has_end.sum()), END)])
    end = chunk.start + chunk.duration
    time = np.where(kind == END, end[rows], chunk.start[rows])
    rank = np.select([kind == END, kind == INSTANT], [0, 1], 2)
    tie = np.where(kind == END, -chunk.start[rows], -end[rows])
    order = np.lexsort((tie, rank, time, track[rows]))
    rows, kind, time = rows[order], kind[order], time[order]
    delta = np.diff(time, prepend=0)
    # a slice ended by the next event on its track (slices that do not nest) is one row with its end
    closes = np.zeros(len(rows), dtype=bool)
    closes[:-1] = (kind[1:] == END) & (rows[1:] == rows[:-1])
    leads = np.ones(len(rows), dtype=bool)
    leads[1:] = ~closes[:-1]
    lead = np.flatnonzero(leads)
    after = np.append(delta[1:], 0)
    return EventRows.of(rows[lead], kind[lead], delta[lead], after[lead], closes[lead], time[lead])


def _flat_order(chunk: Slices, track: np.ndarray) -> np.ndarray | None:
    """The rows by track, then start, where no slice overlaps the next on its track; else None."""
    start = chunk.start
    if (np.diff(start) >= 0).all():  # in time order already (GPU ops, idle gaps): a stable sort by track
        keys = track.astype(np.uint16) if track.max() < 2**16 else track  # (16-bit keys: a radix sort)
        order = np.argsort(keys, kind="stable")
    else:
        order = np.lexsort((start, track))
    ordered, begins = track[order], start[order]
    ends = begins + chunk.duration[order]
    if ((ordered[1:] == ordered[:-1]) & (ends[:-1] > begins[1:])).any():
        return None
    return order


def _events(chunk: Slices, events: EventRows) -> tuple[np.ndarray, np.ndarray]:
    """The packets of ``events`` and each one's length. A slice leaving many arrows (a graph launch's call)
    widens every row of its byte matrix: such rows are laid out apart, grouped by their number of arrows
    to within 2x, and put back in order."""
    leaving = np.zeros(len(events.rows), dtype=np.int64)
    if chunk.flow_out is not None:
        leaving = np.where(events.kind != END, chunk.flow_out[0][events.rows], 0)
    group = np.where(leaving > FEW_ARROWS, np.ceil(np.log2(np.maximum(leaving, 1))), 0).astype(np.int64)
    if not group.any():
        return _packets(chunk, events)
    parts = [np.flatnonzero(group == value) for value in np.unique(group)]
    encoded = [_packets(chunk, events[mine]) for mine in parts]
    lengths = np.zeros(len(events.rows), dtype=np.int64)
    for mine, (_, part_lengths) in zip(parts, encoded):
        lengths[mine] = part_lengths
    starts = np.cumsum(lengths) - lengths
    body = np.empty(int(lengths.sum()), dtype=np.uint8)
    for mine, (part_body, part_lengths) in zip(parts, encoded):
        within = np.arange(len(part_body)) - np.repeat(np.cumsum(part_lengths) - part_lengths, part_lengths)
        body[np.repeat(starts[mine], part_lengths) + within] = part_body
    return body, lengths


def _packets(chunk: Slices, events: EventRows) -> tuple[np.ndarray, np.ndarray]:
    packets = Rows(len(events.rows))
    with packets.message(1):  # Trace.packet
        packets.varint(8, events.delta)
        packets.varint(10, events.sequence)
        with packets.message(11):  # its TrackEvent
            packets.varint(9, events.kind)
            opening_fields(packets, chunk, events.rows, events.kind != END)
    with packets.message(1, events.closes):  # the slice's end
        packets.varint(8, events.after)
        packets.varint(10, events.sequence)
        with packets.message(11):
            packets.varint(9, np.full(len(events.rows), END))
    return packets.encode(), packets.lengths


def _interned(chunk: Slices, rows: np.ndarray, names: list[str]) -> bytes:
    """The InternedData a sequence's events refer to: the names, categories and text values of ``rows``,
    every argument name."""

    def entries(number: int, labels: Labels, offset: int = 0, text: int = 2) -> bytes:
        codes = np.flatnonzero(np.bincount(labels.codes[rows], minlength=len(labels.table.texts)))
        return b"".join(
            field(number, field(1, int(code) + 1 + offset) + field(text, labels.table.utf8[code])) for code in codes
        )

    data = entries(2, chunk.name) + entries(1, chunk.category)
    data += b"".join(field(3, field(1, number) + field(2, name)) for number, name in enumerate(names, start=1))
    offset = 0
    for arg in chunk.args:
        if isinstance(arg.values, Labels):
            data += entries(29, arg.values, offset)
            offset += len(arg.values.table.texts)
    return data
