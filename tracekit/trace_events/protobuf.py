"""Protocol-buffer messages a column at a time: every row of a table becomes one message, built from numpy
arrays (no Python object per row). A message is a tree of parts; each part knows each row's length in bytes,
so one pass lays the rows out and each leaf writes its bytes straight into the one output buffer.

Wire format (protobuf's encoding guide): a field is its key (number << 3 | wire type) as a varint, then a
varint (type 0), 8 little-endian bytes (type 1), or a varint length and that many bytes (type 2). Negative
integers are 10-byte varints (two's complement), as protobuf writes int64. ``message`` and ``field`` encode
the few messages written once (descriptors, interned names) in plain Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

VARINT, FIXED64, BYTES = 0, 1, 2


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative: two's complement, 10 bytes
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(number: int, value: int | float | str | bytes | None) -> bytes:
    """One field of a message written once: an int (varint), a float (double), text or bytes (length)."""
    if value is None:
        return b""
    if isinstance(value, float):
        return key(number, FIXED64) + np.float64(value).tobytes()
    if isinstance(value, int):
        return key(number, VARINT) + varint(value)
    data = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return key(number, BYTES) + varint(len(data)) + data


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of each value as a varint (1 to 10)."""
    unsigned = np.asarray(values).astype(np.uint64)
    return np.searchsorted(_LIMITS, unsigned, side="right").astype(np.int64) + 1


_LIMITS = np.array([1 << shift for shift in range(7, 64, 7)], dtype=np.uint64)  # the first value of each size


class Part:
    """Bytes of each row (``lengths``, 0 where the row has none) and how to write them."""

    lengths: np.ndarray

    def write(self, buffer: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> None:
        raise NotImplementedError


def _present(count: int, present: np.ndarray | None) -> np.ndarray:
    return np.ones(count, dtype=bool) if present is None else np.asarray(present, dtype=bool)


class Varint(Part):
    """A varint field: key, then the value (``present``: the rows that have it)."""

    def __init__(self, number: int, values: np.ndarray, present: np.ndarray | None = None):
        self.key = np.frombuffer(key(number, VARINT), dtype=np.uint8)
        self.values = np.asarray(values).astype(np.uint64)
        self.present = _present(len(self.values), present)
        self.sizes = varint_sizes(self.values)
        self.lengths = np.where(self.present, len(self.key) + self.sizes, 0)

    def write(self, buffer: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> None:
        mine = self.present[rows]
        starts, rows = starts[mine], rows[mine]
        _constant(buffer, starts, self.key)
        _varints(buffer, starts + len(self.key), self.values[rows], self.sizes[rows])


class Fixed64(Part):
    """Repeated fixed64 fields: ``counts`` per row, ``values`` every row's in row order (or a double each,
    ``counts`` None)."""

    def __init__(self, number: int, values: np.ndarray, counts: np.ndarray | None = None, double: bool = False):
        self.key = np.frombuffer(key(number, FIXED64), dtype=np.uint8)
        self.values = np.asarray(values, dtype=np.float64 if double else np.uint64).view(np.uint64)
        self.counts = np.ones(len(self.values), dtype=np.int64) if counts is None else np.asarray(counts, np.int64)
        self.first = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)
        self.lengths = self.counts * (len(self.key) + 8)

    def write(self, buffer: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> None:
        counts = self.counts[rows]
        within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        at = np.repeat(starts, counts) + within * (len(self.key) + 8)
        values = self.values[np.repeat(self.first[rows], counts) + within]
        _constant(buffer, at, self.key)
        for byte in range(8):
            buffer[at + len(self.key) + byte] = (values >> np.uint64(8 * byte)).astype(np.uint8)


class Message(Part):
    """A length-delimited field holding ``parts`` in order (``number`` None: the parts alone, unframed)."""

    def __init__(self, number: int | None, parts: Sequence[Part], present: np.ndarray | None = None, rows: int = 0):
        self.parts = list(parts)
        count = len(self.parts[0].lengths) if self.parts else rows
        self.present = _present(count, present)
        self.inner = np.zeros(count, dtype=np.int64)
        for part in self.parts:
            self.inner += part.lengths
        self.key = np.frombuffer(key(number, BYTES), dtype=np.uint8) if number is not None else None
        if self.key is None:
            self.sizes = np.zeros(count, dtype=np.int64)
            self.lengths = np.where(self.present, self.inner, 0)
        else:
            self.sizes = varint_sizes(self.inner)
            self.lengths = np.where(self.present, len(self.key) + self.sizes + self.inner, 0)

    def write(self, buffer: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> None:
        mine = self.present[rows]
        starts, rows = starts[mine], rows[mine]
        if self.key is not None:
            _constant(buffer, starts, self.key)
            _varints(buffer, starts + len(self.key), self.inner[rows].astype(np.uint64), self.sizes[rows])
            starts = starts + len(self.key) + self.sizes[rows]
        for part in self.parts:
            part.write(buffer, starts, rows)
            starts = starts + part.lengths[rows]

    def encode(self) -> np.ndarray:
        """Every row's bytes, one after another."""
        ends = np.cumsum(self.lengths)
        buffer = np.zeros(int(ends[-1]) if len(ends) else 0, dtype=np.uint8)
        self.write(buffer, ends - self.lengths, np.arange(len(self.lengths)))
        return buffer


def _constant(buffer: np.ndarray, starts: np.ndarray, data: np.ndarray) -> None:
    for index, byte in enumerate(data):
        buffer[starts + index] = byte


def _varints(buffer: np.ndarray, starts: np.ndarray, values: np.ndarray, sizes: np.ndarray) -> None:
    for index in range(int(sizes.max()) if len(sizes) else 0):
        if index:  # the rows with a byte left (every row has the first)
            mine = np.flatnonzero(sizes > index)
            starts, values, sizes = starts[mine], values[mine], sizes[mine]
        seven = (values & np.uint64(0x7F)).astype(np.uint8)
        seven[sizes > index + 1] |= 0x80
        buffer[starts + index] = seven
        values = values >> np.uint64(7)
