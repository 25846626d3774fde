"""The columns of ``events`` as Perfetto's protobuf trace (``TracePacket``s of ``TrackEvent``s), a chunk at a
time (``protobuf``: no Python object per event).

Each process and track is a ``TrackDescriptor`` (a (pid, tid) track a thread descriptor, as Perfetto's JSON
importer makes it). Each chunk's slices on one track form a packet sequence of their own: its first packet
clears the sequence's state and holds the names, categories, argument names and text values its slices use
(interned: each event refers to them by a small number), the track (``track_event_defaults``: no event
repeats it) and an incremental clock (each packet's timestamp is the ns since the previous packet's), so a
kernel is its begin and end packets of a few bytes each plus its arguments. A slice of zero duration is an
instant (Perfetto's slice of duration 0). Arrows are flow ids on the slices they join.
"""

from __future__ import annotations

from typing import IO

import numpy as np

from tracekit.trace_events.events import Counters, Labels, Metadata, Slices, Track
from tracekit.trace_events.protobuf import Fixed64, Message, Part, Varint, field

BOOTTIME = 6  # Perfetto's default trace clock, which the file's ns are
INCREMENTAL = 64  # the first sequence-scoped clock id: each packet's time is a delta on its sequence
BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4
CLEARED = 1  # TracePacket.sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED


def packet(*fields: bytes) -> bytes:
    return field(1, b"".join(fields))  # Trace.packet


class PerfettoSink:
    """The protobuf file: descriptors as tracks appear, then every chunk's packets."""

    def __init__(self, handle: IO[bytes]):
        self.handle, self.size = handle, 0
        self.uuids: dict[tuple[int, int | None], int] = {}
        self.sequences = 0

    def header(self, fields: dict) -> None:
        pass  # torch.profiler's header fields have no place in the protobuf format

    def encode(self, item: Slices | Counters | Metadata) -> bytes | np.ndarray:
        if isinstance(item, Metadata):
            return b"".join(self._track(track) for track in item.tracks)
        if isinstance(item, Counters):
            return self._counters(item)
        return self._slices(item)

    def put(self, encoded: bytes | np.ndarray) -> None:
        self.size += self.handle.write(encoded if isinstance(encoded, bytes) else encoded.data)

    def close(self) -> int:
        return self.size

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

    def _slices(self, chunk: Slices) -> np.ndarray:
        if not len(chunk):
            return np.zeros(0, dtype=np.uint8)
        self.pending = b""
        track = self._uuids(chunk.pid, chunk.tid)
        # every slice a begin and an end (an instant when it lasts 0 ns), in time order on each track: ends
        # before begins at one time, the longer slice begun first, the later begun ended first
        has_end = chunk.duration > 0
        rows = np.concatenate([np.arange(len(chunk)), np.flatnonzero(has_end)])
        kind = np.concatenate([np.where(has_end, BEGIN, INSTANT), np.full(int(has_end.sum()), END)])
        end = chunk.start + chunk.duration
        time = np.where(kind == END, end[rows], chunk.start[rows])
        rank = np.select([kind == END, kind == INSTANT], [0, 1], 2)
        tie = np.where(kind == END, -chunk.start[rows], -end[rows])
        order = np.lexsort((tie, rank, time, track[rows]))
        rows, kind, time = rows[order], kind[order], time[order]
        tracks = track[rows]
        starts = np.flatnonzero(np.diff(tracks, prepend=-1))  # each track's first event
        delta = np.diff(time, prepend=0)
        delta[starts] = 0
        opening = kind != END
        group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(rows))))
        heads, ids = [], np.zeros(len(starts), dtype=np.int64)
        names = [arg.name for arg in chunk.args]
        for index, first in enumerate(starts):
            mine = rows[group == index]
            interned = _interned(chunk, mine, names)
            ids[index], head = self._sequence(int(tracks[first]), int(time[first]), interned)
            heads.append(head)
        event = Message(11, [Varint(9, kind), *_opening_fields(chunk, rows, opening, names)])
        message = Message(1, [Varint(8, delta), Varint(10, ids[group]), event])
        packets = message.encode()
        ends = np.append(starts, len(rows))
        offsets = np.concatenate([[0], np.cumsum(message.lengths)])
        pieces = [np.frombuffer(self.pending, dtype=np.uint8)]
        for index, head in enumerate(heads):
            pieces += [np.frombuffer(head, dtype=np.uint8), packets[offsets[starts[index]] : offsets[ends[index + 1]]]]
        return np.concatenate(pieces)

    def _counters(self, counters: Counters) -> bytes | np.ndarray:
        if not len(counters):
            return b""
        pieces = []
        scale = 10.0**counters.decimals
        for name, values in counters.series.items():
            process = self._track(Track(counters.pid, None, "", 0))
            uuid = len(self.uuids) + 1
            self.uuids[(counters.pid, -uuid)] = uuid  # a counter track is no (pid, tid) track
            descriptor = (
                field(1, uuid) + field(5, self.uuids[(counters.pid, None)]) + field(2, f"{counters.name} {name}")
            )
            pieces.append(process + packet(field(60, descriptor + field(8, b""))))
            order = np.argsort(counters.times, kind="stable")
            times = counters.times[order]
            ids, head = self._sequence(uuid, int(times[0]), b"")
            delta = np.diff(times, prepend=times[0])
            event = Message(
                11, [Varint(9, np.full(len(times), COUNTER)), Fixed64(44, values[order] / scale, double=True)]
            )
            body = Message(1, [Varint(8, delta), Varint(10, np.full(len(times), ids)), event]).encode()
            pieces += [head, body.tobytes()]
        return b"".join(pieces)


def _opening_fields(chunk: Slices, rows: np.ndarray, opening: np.ndarray, names: list[str]) -> list[Part]:
    """What a begin (or instant) carries: name, category, arguments, arrows; an end carries none."""
    parts: list[Part] = [
        Varint(10, chunk.name.codes[rows] + 1, opening),
        Varint(3, chunk.category.codes[rows] + 1, opening),
    ]
    offset = 0
    for number, arg in enumerate(chunk.args, start=1):
        present = opening if arg.present is None else opening & arg.present[rows]
        values = arg.values
        name = Varint(1, np.full(len(rows), number))
        if isinstance(values, Labels):
            value: list[Part] = [Varint(17, values.codes[rows] + 1 + offset)]
            offset += len(values.table.texts)
        elif isinstance(values, tuple):
            value = [Message(12, [Varint(4, part[rows])]) for part in values]
        elif arg.decimals:
            value = [Fixed64(5, values[rows] / 10.0**arg.decimals, double=True)]
        else:
            value = [Varint(4, values[rows])]
        parts.append(Message(4, [name, *value], present))
    if chunk.flow_in is not None:
        arrives = opening & (chunk.flow_in[rows] >= 0)
        parts.append(Fixed64(48, chunk.flow_in[rows][arrives], arrives.astype(np.int64)))
    if chunk.flow_out is not None:
        counts, ids = chunk.flow_out
        first = np.concatenate([[0], np.cumsum(counts)])
        leaving = np.where(opening, counts[rows], 0)
        picked = np.repeat(first[rows], leaving) + (
            np.arange(int(leaving.sum())) - np.repeat(np.cumsum(leaving) - leaving, leaving)
        )
        parts.append(Fixed64(47, ids[picked], leaving))
    return parts


def _interned(chunk: Slices, rows: np.ndarray, names: list[str]) -> bytes:
    """The InternedData a sequence's events refer to: the names, categories and text values of ``rows``,
    every argument name."""

    def entries(number: int, labels: Labels, offset: int = 0, text: int = 2) -> bytes:
        codes = np.unique(labels.codes[rows])
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
