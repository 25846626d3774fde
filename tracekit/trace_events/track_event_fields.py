"""What a Perfetto TrackEvent's begin (or instant) carries, for a chunk's rows a column at a time: its name,
category, arguments (DebugAnnotations) and arrows; an end carries none.

What many rows share (a kernel's name, category, grid, block, ...: every argument not ``per_row``) is
encoded once per distinct combination and copied into each row whole (``Rows.gather``), the rest row by
row. Combinations are found by a hash of the columns' values (``_distinct``), checked value by value: rows a
hash cannot tell apart, or combinations too many to be worth sharing, are written field by field, the same
bytes either way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.trace_events.events import Arg, Labels, Slices
from tracekit.trace_events.protobuf import Rows


def opening_fields(packets: Rows, chunk: Slices, rows: np.ndarray, opening: np.ndarray) -> None:
    """What a begin (or instant) carries: name, category, arguments, arrows; an end carries none. What many
    rows share (a kernel's name, category, grid, block, ...: every argument not ``per_row``) is encoded once
    per distinct combination and copied into each row (``Rows.gather``); the rest row by row."""
    offsets = np.cumsum(
        [0] + [len(arg.values.table.texts) if isinstance(arg.values, Labels) else 0 for arg in chunk.args]
    )
    shared = [number for number, arg in enumerate(chunk.args, start=1) if not arg.per_row]
    distinct = _distinct(_shared_columns(chunk, rows, opening, shared))
    if distinct is None:
        _shared_fields(packets, chunk, rows, opening, shared, offsets)
    else:
        codes, first = distinct
        template = Rows(len(first))
        _shared_fields(template, chunk, rows[first], opening[first], shared, offsets)
        packets.gather(template, codes)
    for number, arg in enumerate(chunk.args, start=1):
        if arg.per_row:
            _annotation(packets, arg, number, rows, opening, int(offsets[number - 1]))
    if chunk.flow_in is not None:
        arrives = opening & (chunk.flow_in[rows] >= 0)
        packets.fixed64s(48, chunk.flow_in[rows][arrives], arrives.astype(np.int64))
    if chunk.flow_out is not None:
        counts, ids = chunk.flow_out
        first_flow = np.concatenate([[0], np.cumsum(counts)])
        leaving = np.where(opening, counts[rows], 0)
        picked = np.repeat(first_flow[rows], leaving) + (
            np.arange(int(leaving.sum())) - np.repeat(np.cumsum(leaving) - leaving, leaving)
        )
        packets.fixed64s(47, ids[picked], leaving)


def _shared_fields(
    packets: Rows, chunk: Slices, rows: np.ndarray, opening: np.ndarray, shared: list[int], offsets: np.ndarray
) -> None:
    packets.varint(10, chunk.name.codes[rows] + 1, opening)
    packets.varint(3, chunk.category.codes[rows] + 1, opening)
    for number in shared:
        _annotation(packets, chunk.args[number - 1], number, rows, opening, int(offsets[number - 1]))


def _annotation(packets: Rows, arg: Arg, number: int, rows: np.ndarray, opening: np.ndarray, offset: int) -> None:
    """A DebugAnnotation: the argument's interned name ``number`` and its value (a text: its interned id,
    past ``offset``, the ids of the arguments' texts before it)."""
    present = opening if arg.present is None else opening & arg.present[rows]
    values = arg.values
    with packets.message(4, present):
        packets.varint(1, np.full(len(rows), number))
        if isinstance(values, Labels):
            packets.varint(17, values.codes[rows] + 1 + offset)
        elif isinstance(values, tuple):
            for part in values:
                with packets.message(12):
                    packets.varint(4, part[rows])
        elif arg.decimals:
            packets.doubles(5, values[rows] / 10.0**arg.decimals)
        else:
            packets.varint(4, values[rows])


def _shared_columns(chunk: Slices, rows: np.ndarray, opening: np.ndarray, shared: list[int]) -> list[np.ndarray]:
    """The columns that decide what ``_shared_fields`` writes in each row."""
    columns = [opening, chunk.name.codes[rows], chunk.category.codes[rows]]
    for number in shared:
        arg = chunk.args[number - 1]
        if arg.present is not None:
            columns.append(arg.present[rows])
        values = arg.values
        if isinstance(values, Labels):
            columns.append(values.codes[rows])
        elif isinstance(values, tuple):
            columns += [part[rows] for part in values]
        else:
            columns.append(values[rows])
    return columns


def _distinct(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """Each row's combination of ``columns``' values as a code, and each code's first row; None when the
    combinations are too many to be worth sharing (over a fifth of the rows). Combinations are told apart
    by a hash of the values, then checked value by value (a collision: None, and rows are written one by one)."""
    count = len(columns[0])
    key = np.zeros(count, dtype=np.uint64)
    for column in columns:
        key = key * _MIX + np.asarray(column).astype(np.uint64)
    codes, uniques = pd.factorize(key)
    if len(uniques) > count // 5 + 1:
        return None
    first = np.empty(len(uniques), dtype=np.int64)
    first[codes[::-1]] = np.arange(count - 1, -1, -1)
    if not all(np.array_equal(np.asarray(column)[first][codes], column) for column in columns):
        return None
    return codes, first


_MIX = np.uint64(0x9E3779B97F4A7C15)  # an odd 64-bit multiplier (Fibonacci hashing): a key's bits all mix
