"""A Chrome-trace JSON document read as chunks of whole events, with bounded memory.

A torch.profiler trace is one JSON object whose ``traceEvents`` array holds millions of events; a
million kernels is 2-3 GB of text, where ``json.loads`` needs ~13 GB. ``decoded_chunks`` reads the
file (plain or gzip) in blocks of ``BLOCK_BYTES`` and hands the text of whole events, a block at a
time, to a typed decoder; everything outside the array (``deviceProperties``, ``distributedInfo``,
``baseTimeNanoseconds``, ...) is kept as a small document of its own (``Skeleton``).

Cutting a block: the last ``}`` + ``,`` + ``{`` of the block is almost always the boundary of two
events, and a cut anywhere else (inside a string, or between objects nested in an event) leaves the
first part unbalanced, which the decoder refuses. So the cheap cut is decoded first and, only when
that fails, the block is cut by ``exact_cut``: a vectorized scan that knows strings from structure
(a full scan costs about as much as decoding, so it is kept for the blocks that need it).
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from tracekit.errors import NotAnExportError

BLOCK_BYTES = 16 * 2**20
# One event (or the text outside the events) larger than this is refused: a cut of that much text by
# ``exact_cut`` holds ~20 bytes of arrays per byte.
MAX_EVENT_BYTES = 32 * 2**20
GZIP_MAGIC = b"\x1f\x8b"
QUOTE, BACKSLASH = 0x22, 0x5C
OPENERS, CLOSERS = (0x7B, 0x5B), (0x7D, 0x5D)  # { [   } ]
# Two events: "}" then "," then "{", with any white space between.
EVENT_SEPARATOR = re.compile(rb"\}\s*,\s*\{")
SEPARATOR_REST = re.compile(rb"\s*,?")
TAIL_WINDOW = 2**16
T = TypeVar("T")


UTF8_BOM = b"\xef\xbb\xbf"  # some tools write one before the JSON: read as leading space


class JsonTraceError(NotAnExportError):
    """The file is not a readable Chrome-trace JSON document."""


@dataclass
class Skeleton:
    """The document without its events: the bytes before the ``traceEvents`` array (with its "["),
    and those after it (from its "]")."""

    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    array_document: bool = False  # the document is the bare array of events (JSON Array Format)

    def document(self) -> bytes:
        """The document with an empty events array, for an ordinary JSON decoder (which a leading byte
        order mark would stop)."""
        return bytes(self.head).removeprefix(UTF8_BOM) + bytes(self.tail)


def open_binary(path: Path):
    """The file's bytes, decompressed when it is gzip."""
    with open(path, "rb") as handle:
        magic = handle.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")


def read_block(handle, path: Path, size: int | None = None) -> bytes:
    """Up to ``size`` bytes (default ``BLOCK_BYTES``); a damaged gzip stream becomes one line naming the file."""
    try:
        return handle.read(size or BLOCK_BYTES)
    except (OSError, EOFError, zlib.error) as error:  # BadGzipFile is an OSError
        reason = "ends early (truncated)" if isinstance(error, EOFError) else f"is not valid gzip ({error})"
        raise JsonTraceError(f"{path} {reason}; a torch.profiler trace is JSON, optionally gzip-compressed") from None


def structure(block: bytes | bytearray | memoryview, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the brackets outside strings in ``block``, which starts outside any string at
    nesting ``depth``; their characters, and the depth after each. Vectorized: a quote is escaped
    when an odd run of backslashes precedes it, and a bracket is in a string when an odd number of
    unescaped quotes precedes it."""
    data = np.frombuffer(block, dtype=np.uint8)
    quotes = np.flatnonzero(data == QUOTE)
    maybe_escaped = quotes[(quotes > 0) & (data[np.maximum(quotes - 1, 0)] == BACKSLASH)]
    if len(maybe_escaped):
        escaped = [position for position in maybe_escaped.tolist() if _backslashes_before(data, position) % 2]
        quotes = np.setdiff1d(quotes, np.asarray(escaped, dtype=quotes.dtype), assume_unique=True)
    brackets = np.flatnonzero((data == 0x7B) | (data == 0x7D) | (data == 0x5B) | (data == 0x5D))
    brackets = brackets[(np.searchsorted(quotes, brackets) & 1) == 0]
    chars = data[brackets]
    steps = np.where((chars == 0x7B) | (chars == 0x5B), np.int8(1), np.int8(-1))  # int8: less memory per byte
    return brackets, chars, depth + np.cumsum(steps, dtype=np.int64)


def _backslashes_before(data: np.ndarray, position: int) -> int:
    count = 0
    while position - count - 1 >= 0 and data[position - count - 1] == BACKSLASH:
        count += 1
    return count


def quick_cut(block: bytes | bytearray, searched: int = 0) -> int:
    """Offset just past the "}" of the last likely event boundary in ``block`` (0: none found), looking
    back from the end in growing windows but not before ``searched`` (where an earlier look found
    none): each byte of one huge event is searched about once, not once per block."""
    floor = max(0, searched - 64)  # a separator may straddle the end of the earlier look
    end, window = len(block), TAIL_WINDOW
    start = max(floor, end - window)
    while True:
        found = [match.start() for match in EVENT_SEPARATOR.finditer(block, start, end)]
        if found:
            return found[-1] + 1
        if start == floor:
            return 0
        end, window = start + 64, window * 4
        start = max(floor, start - window)


def exact_cut(block: bytes | bytearray, path: Path) -> tuple[int, int | None]:
    """For ``block`` starting inside the events array between events: offset just past the last whole
    event, and the offset of the array's closing "]" when the block holds it (else None)."""
    positions, chars, depth = structure(block, 1)
    closes = np.flatnonzero(depth == 0)
    if len(closes):  # the array ends in this block
        end = int(positions[closes[0]])
        if chars[closes[0]] != 0x5D:
            raise JsonTraceError(f"{path}: the traceEvents array is not well formed near byte offset {end}")
        return end, end
    ends = positions[(chars == 0x7D) & (depth == 1)]
    return (int(ends[-1]) + 1 if len(ends) else 0), None


def event_spans(chunk: bytes) -> list[tuple[int, int]]:
    """(start, end) of each top-level object of a chunk "[" + events + "]", by structure alone: for
    decoding events one at a time when the chunk as a whole does not decode."""
    positions, chars, depth = structure(memoryview(chunk)[1:], 1)
    starts = positions[(chars == 0x7B) & (depth == 2)] + 1
    ends = positions[(chars == 0x7D) & (depth == 1)] + 2
    return list(zip(starts.tolist(), ends.tolist(), strict=False))


def find_events(block: bytes | bytearray, path: Path) -> tuple[int, bool] | None:
    """Offset just past the "[" that opens the events array, and whether the document is a bare array;
    None when ``block`` (the document's start) does not reach it yet. A UTF-8 byte order mark before it
    (some tools write one) counts as leading space."""
    text = block.removeprefix(UTF8_BOM).lstrip()
    skipped = len(block) - len(text)
    if text[:1] == b"[":
        return skipped + 1, True
    if text[:1] != b"{":
        raise JsonTraceError(f"{path} is not a JSON object or array; a torch.profiler trace is a JSON object")
    positions, chars, depth = structure(block, 0)
    for index in np.flatnonzero((chars == 0x5B) & (depth == 2)).tolist():
        position = int(positions[index])
        before = bytes(block[max(0, position - 64) : position]).rstrip()
        if before.endswith(b":") and before[:-1].rstrip().endswith(b'"traceEvents"'):
            return position + 1, False
    if len(positions) and depth[-1] == 0:
        raise JsonTraceError(f'{path} is JSON without "traceEvents": not a torch.profiler (Chrome) trace')
    return None


def decoded_chunks(path: Path, skeleton: Skeleton, decode: Callable[[bytes], T | None]) -> Iterator[T]:
    """``decode`` applied to the events of the document, a block's worth at a time: it gets
    "[" + whole events + "]" and returns None when that is not well-formed JSON (then the block is cut
    exactly and decoded again). ``skeleton`` is filled with the rest of the document."""
    with open_binary(path) as handle:
        pending = bytearray(read_block(handle, path))
        while (found := find_events(pending, path)) is None:
            more = read_block(handle, path)
            if not more:
                raise JsonTraceError(f"{path} ends before its traceEvents array (truncated?)")
            if len(pending) > MAX_EVENT_BYTES:
                raise JsonTraceError(f'{path}: no "traceEvents" array in its first {MAX_EVENT_BYTES >> 20} MB')
            pending += more
        start, skeleton.array_document = found
        skeleton.head += pending[:start]
        del pending[:start]
        offset = start  # of pending's first byte in the document
        comma_due = False  # a cut fell at the end of what was read, before the "," that follows the event
        searched = 0  # pending[:searched] holds no quick cut
        while True:
            block = read_block(handle, path)
            pending += block
            if comma_due and (rest := SEPARATOR_REST.match(pending)) is not None:
                if rest.group().endswith(b","):
                    del pending[: rest.end()]
                    offset += rest.end()
                    comma_due = False
                elif pending[rest.end() : rest.end() + 1] not in (b"", b"]"):
                    raise JsonTraceError(f"{path}: malformed JSON (no comma between events) at byte {offset}")
            cut = quick_cut(pending, searched) if block else 0
            decoded = decode(_wrap(pending, cut)) if cut else None
            close = None
            # No boundary found and no "]" that could end the array: one event is still arriving.
            might_close = not block or pending.find(b"]", max(0, searched - 64)) >= 0
            if decoded is None and (cut or might_close):
                cut, close = exact_cut(pending, path)
                if cut:
                    decoded = decode(_wrap(pending, cut))
                    if decoded is None:
                        raise JsonTraceError(f"{path}: malformed JSON among the events after byte offset {offset}")
            searched = 0 if cut else len(pending)
            if decoded is not None:
                yield decoded
            if close is not None:
                skeleton.tail += pending[close:]
                _read_rest(handle, path, skeleton)
                return
            if not block:
                raise JsonTraceError(f"{path} ends inside its traceEvents array (truncated?)")
            if not cut and len(pending) > MAX_EVENT_BYTES:
                raise JsonTraceError(
                    f"{path} has an event larger than {MAX_EVENT_BYTES >> 20} MB; not a profiler trace"
                )
            rest = SEPARATOR_REST.match(pending, cut) if cut else None  # the "," after the last event goes too
            dropped = rest.end() if rest is not None else 0
            comma_due = comma_due or (rest is not None and not rest.group().endswith(b","))
            del pending[:dropped]
            offset += dropped


def _wrap(pending: bytearray, cut: int) -> bytes:
    with memoryview(pending) as view:  # one copy; the view is released before ``pending`` changes size
        return b"".join((b"[", view[:cut], b"]"))


def _read_rest(handle, path: Path, skeleton: Skeleton) -> None:
    while block := read_block(handle, path):
        skeleton.tail += block
        if len(skeleton.tail) > MAX_EVENT_BYTES:
            raise JsonTraceError(f"{path} holds more than {MAX_EVENT_BYTES >> 20} MB after its traceEvents array")
