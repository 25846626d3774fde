"""Protocol-buffer messages a column at a time: every row of a table becomes one message, built from numpy
arrays (no Python object per row).

The rows are laid out as a byte matrix, a block of columns per field: a field's key is the same bytes in
every row (one broadcast), its value is as many columns as its widest row needs, and a mask keeps, in each
row, the bytes that row has (a varint's own length, a field the row lacks none). A message's length is the
kept bytes between its start and end, written into the columns reserved before it. The file's bytes are
the kept bytes in row order: one boolean selection, whatever the number of fields.

Wire format (protobuf's encoding guide): a field is its key (number << 3 | wire type) as a varint, then a
varint (type 0), 8 little-endian bytes (type 1), or a varint length and that many bytes (type 2). Negative
integers are 10-byte varints (two's complement), as protobuf writes int64. ``message`` and ``field`` encode
the few messages written once (descriptors, interned names) in plain Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

try:  # ISA-L's deflate (python-isal): the same zlib stream, ~5x less CPU than zlib's fastest level
    from isal.isal_zlib import compress

    DEFLATE_LEVEL = 2  # ISA-L's levels are 0-3; 2 measured both the fastest and the smallest on these packets
except ImportError:  # a platform without its wheel (pyproject.toml names the ones it has)
    from zlib import compress

    DEFLATE_LEVEL = 1  # zlib's fastest: ~10x smaller packets; higher levels take 3-5x as long for ~1.5x less

VARINT, FIXED64, BYTES = 0, 1, 2
DEFLATE_INPUT = 1 << 20  # bytes of packets per compressed packet (Perfetto's service writes a few hundred KiB)


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


def varint_columns(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each value as a varint, a column each: (bytes, kept), ``width x rows`` (width: the largest value's
    size; a smaller value keeps its first bytes), and each value's size in bytes."""
    values = np.asarray(values).astype(np.uint64)
    width = len(varint(int(values.max()))) if len(values) else 1
    if width == 1:
        return values.astype(np.uint8)[None, :], np.ones((1, 1), dtype=bool), np.ones(1, dtype=np.int64)
    sizes = np.ones(len(values), dtype=np.int8)
    for shift in range(7, 7 * width, 7):
        sizes += values >= np.uint64(1 << shift)
    seven = np.empty((width, len(values)), dtype=np.uint8)
    for index in range(width):
        seven[index] = (values >> np.uint64(7 * index)).astype(np.uint8) & 0x7F
        seven[index] |= (sizes > index + 1).view(np.uint8) << 7  # a byte follows: the high bit
    return seven, np.arange(width, dtype=np.int8)[:, None] < sizes[None, :], sizes


class Rows:
    """Messages of ``count`` rows built field by field (in the order they are written), then ``encode``d.
    Blocks are field-major (``width x rows``: each field's bytes made a column at a time), turned to rows
    once, at the end. A block's ``kept`` may be one column, the same for every row it is in."""

    def __init__(self, count: int):
        self.count = count
        self.blocks: list[np.ndarray] = []
        self.kept: list[np.ndarray] = []
        self.rows_first: list[bool] = []
        self.lengths = np.zeros(count, dtype=np.int64)  # bytes kept so far, per row
        self.present: list[np.ndarray | None] = [None]  # the rows the innermost open message is in (None: all)

    def _add(
        self,
        block: np.ndarray,
        kept: np.ndarray,
        present: np.ndarray | None,
        at: int | None = None,
        sizes: np.ndarray | None = None,
        rows_first: bool = False,
    ) -> None:
        """``sizes``: each row's kept bytes where the caller knows them (a varint's sizes); ``rows_first``: the
        block and its kept are ``rows x width`` (a template's rows taken whole)."""
        outer = self.present[-1]
        mine = outer if present is None else present if outer is None else outer & present
        if mine is not None:
            kept = kept & (mine[:, None] if rows_first else mine[None, :])
        at = len(self.blocks) if at is None else at
        self.blocks.insert(at, block)
        self.kept.insert(at, kept)
        self.rows_first.insert(at, rows_first)
        if sizes is not None:
            self.lengths += sizes if mine is None else sizes * mine
        else:
            self.lengths += kept.sum(axis=0, dtype=np.int64) if len(kept) > 1 else kept[0]

    def constant(self, data: bytes, present: np.ndarray | None = None, at: int | None = None) -> None:
        block = np.broadcast_to(np.frombuffer(data, dtype=np.uint8)[:, None], (len(data), self.count))
        self._add(block, np.ones((len(data), 1), dtype=bool), present, at)

    def varint(self, number: int, values: np.ndarray, present: np.ndarray | None = None) -> None:
        """A varint field (``present``: the rows that have it)."""
        self.constant(key(number, VARINT), present)
        outer = self.present[-1]
        mine = outer if present is None else present if outer is None else outer & present
        # rows without the field hold no bytes of it: their values do not widen the block (-1 takes 10 bytes)
        block, kept, sizes = varint_columns(values if mine is None else np.where(mine, values, 0))
        self._add(block, kept, present, sizes=sizes)

    def doubles(self, number: int, values: np.ndarray, present: np.ndarray | None = None) -> None:
        self.constant(key(number, FIXED64), present)
        block = np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(self.count, 8).T
        self._add(block, np.ones((8, 1), dtype=bool), present)

    def fixed64s(self, number: int, values: np.ndarray, counts: np.ndarray) -> None:
        """A repeated fixed64 field: ``counts`` values in each row, ``values`` every row's in row order."""
        slots = int(counts.max()) if len(counts) else 0
        if not slots:
            return
        first = np.cumsum(counts) - counts
        slot = np.arange(slots)[:, None]
        held = slot < counts[None, :]
        data = np.asarray(values, dtype="<u8")[np.where(held, first[None, :] + slot, 0)] if len(values) else None
        data = np.zeros((slots, self.count), dtype="<u8") if data is None else data
        head = np.frombuffer(key(number, FIXED64), dtype=np.uint8)
        block = np.empty((slots, len(head) + 8, self.count), dtype=np.uint8)
        block[:, : len(head)] = head[None, :, None]
        block[:, len(head) :] = data.T.view(np.uint8).reshape(self.count, slots, 8).transpose(1, 2, 0)
        kept = np.repeat(held, len(head) + 8, axis=0)
        self._add(block.reshape(-1, self.count), kept, None)

    def gather(self, template: Rows, codes: np.ndarray) -> None:
        """Each row's bytes of ``template`` (rows encoded once each, for what many rows share): row
        ``template[codes[i]]`` becomes part of row i, one take of whole rows for every field it holds."""
        body, lengths = template.encode(), template.lengths
        width = int(lengths.max()) if len(lengths) else 0
        if not width:
            return
        starts = np.cumsum(lengths) - lengths
        table = np.zeros((len(lengths), width), dtype=np.uint8)
        table[np.repeat(np.arange(len(lengths)), lengths), np.arange(len(body)) - np.repeat(starts, lengths)] = body
        sizes = lengths[codes]
        kept = np.arange(width)[None, :] < sizes[:, None]
        self._add(table[codes], kept, None, sizes=sizes, rows_first=True)

    @contextmanager
    def message(self, number: int, present: np.ndarray | None = None) -> Iterator[None]:
        """A length-delimited field holding what is written inside the block (``present``: its rows)."""
        at, before = len(self.blocks), self.lengths.copy()
        outer = self.present[-1]
        mine = outer if present is None else present if outer is None else outer & present
        self.present.append(mine)
        try:
            yield
        finally:
            self.present.pop()
        block, kept, sizes = varint_columns(self.lengths - before)
        self._add(block, kept, mine, at, sizes)
        self.constant(key(number, BYTES), mine, at)

    def encode(self) -> np.ndarray:
        """Every row's bytes, one after another: the blocks side by side, a row each (field-major blocks
        stacked and turned to rows a run at a time), the kept bytes taken."""
        if not self.blocks:
            return np.zeros(0, dtype=np.uint8)
        datas, kepts, run = [], [], []
        for index, rows_first in enumerate([*self.rows_first, True]):
            if not rows_first:
                run.append(index)
                continue
            if run:
                datas.append(np.vstack([self.blocks[item] for item in run]).T)
                kepts.append(
                    np.vstack([np.broadcast_to(self.kept[item], (len(self.kept[item]), self.count)) for item in run]).T
                )
                run = []
            if index < len(self.blocks):
                datas.append(self.blocks[index])
                kepts.append(self.kept[index])
        data = np.ascontiguousarray(np.hstack(datas)) if len(datas) > 1 else np.ascontiguousarray(datas[0])
        kept = np.ascontiguousarray(np.hstack(kepts)) if len(kepts) > 1 else np.ascontiguousarray(kepts[0])
        return data[kept]


def deflated(packets: np.ndarray, ends: np.ndarray, mapped: Callable = map) -> bytes:
    """Whole ``Trace.packet`` fields (``ends``: where each ends in ``packets``) as ``compressed_packets``
    packets of about ``DEFLATE_INPUT`` bytes each, zlib-deflated, as Perfetto's own service writes them;
    ``mapped``: how the pieces are compressed (a thread pool's ``map``: zlib runs without the GIL)."""
    if not len(packets):
        return b""
    marks = np.arange(DEFLATE_INPUT, int(ends[-1]), DEFLATE_INPUT)
    cuts = np.unique(np.concatenate([[0], ends[np.minimum(np.searchsorted(ends, marks), len(ends) - 1)], ends[-1:]]))
    data = memoryview(packets.data)
    pieces = [data[start:end] for start, end in zip(cuts[:-1], cuts[1:])]
    return b"".join(field(1, field(50, piece)) for piece in mapped(_deflate, pieces))


def _deflate(piece: memoryview) -> bytes:
    return compress(piece, DEFLATE_LEVEL)  # either releases the GIL
