"""Chrome trace-event JSON, a column at a time: every event of a table is built as text by Arrow's
string kernels (no Python loop over rows) and written straight from the Arrow buffer.

Times are integer nanoseconds written as decimal microseconds with three decimals ("1234.567"), made
from the integers (quotient and zero-padded remainder), never through a float: a float64 microsecond
is 0.25 µs coarse at epoch times, the text is exact.
"""

from __future__ import annotations

from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc  # pyright: ignore[reportMissingModuleSource]

# Arrow's compute functions are made at import time: type checkers do not see them.
_compute: Any = pc
SEPARATOR = ",\n"  # every event after the first starts with it: the buffer is the file's text as it is


def microseconds(ns: np.ndarray) -> pa.Array:
    """Integer ns as exact decimal µs text: 1234567 -> "1234.567", -5 -> "-0.005"."""
    values = np.asarray(ns, dtype=np.int64)
    magnitude = np.abs(values)
    whole = pc.cast(pa.array(magnitude // 1000), pa.string())
    fraction = _compute.utf8_lpad(pc.cast(pa.array(magnitude % 1000), pa.string()), width=3, padding="0")
    text = _compute.binary_join_element_wise(whole, fraction, ".")
    negative = values < 0
    if negative.any():
        text = _compute.if_else(pa.array(negative), _compute.binary_join_element_wise("-", text, ""), text)
    return text


def integers(values: np.ndarray) -> pa.Array:
    """Integers as decimal text."""
    return pc.cast(pa.array(np.asarray(values, dtype=np.int64)), pa.string())


def literal(value: str) -> pa.Array | pa.Scalar:
    return pa.scalar(value, type=pa.string())


def join(*pieces: pa.Array | pa.Scalar | str) -> pa.Array:
    """The pieces concatenated row by row, each event preceded by the separator; a str is the same text
    in every row."""
    parts = [literal(piece) if isinstance(piece, str) else piece for piece in (SEPARATOR, *pieces)]
    return _compute.binary_join_element_wise(*parts, literal(""))


def write_array(handle: IO[bytes], events: pa.Array, first: bool = False) -> int:
    """Write every event's text (a string array with no nulls) as it lies in the Arrow buffer; the
    number of bytes written. ``first``: these are the file's first events (no separator before them)."""
    if len(events) == 0:
        return 0
    if events.null_count:
        raise ValueError("an event's text is missing")  # a bug: every piece has a value
    offsets = np.frombuffer(events.buffers()[1], dtype=np.int32)[events.offset : events.offset + len(events) + 1]
    data = events.buffers()[2]
    assert data is not None
    begin, end = int(offsets[0]) + (len(SEPARATOR) if first else 0), int(offsets[-1])
    handle.write(memoryview(data)[begin:end])
    return end - begin
