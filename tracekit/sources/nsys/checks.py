"""What an nsys export should not hold, and how reading leaves it out: the one definition of an
unusable value (the robustness rules build on it).

A value is unusable when a time lies outside [0, TIME_LIMIT) or an end comes before its start, when a
size, kind or id is negative or does not fit the column it goes to, or when it is NULL, REAL or TEXT
where an integer belongs. A row whose times are unusable is left out (nothing about it can be placed in
time); the count travels with the table (``frame.attrs["dropped"]``). In the GPU-op table, which is read
column by column, any other unusable value is read as unknown instead (``UNKNOWN``: -1 for an id, 0 for a
size or a launch dimension, an unknown copy direction or name) and counted per column
(``frame.attrs["unknown"]``), so a command gets the same rows whichever columns it reads. ``Trace.warnings``
reports both. Rows read as numbers are checked here in numpy; what the packing of small ids into one
number would hide (TEXT turned into 0 by arithmetic, a 16-bit field overflowing into its neighbour) is
caught per chunk by a cheap SQL ``guard``, and only such a chunk is read again with per-row tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracekit.model.schema import UNREADABLE_PID

if TYPE_CHECKING:
    import pandas as pd


# Times stay below 2^62 ns: nsys export --ts-normalize gives times since the Unix epoch (~1.8e18 ns), so
# the limit cannot be tighter. Everything built on times subtracts the first one or falls back to ranks
# (keyed_times, nesting), and sums of durations are checked once per table (columns.DURATION_SUM_LIMIT).
TIME_LIMIT = 2**62
KERNEL_DIMS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")
KERNEL_RESOURCES = ("registersPerThread", "staticSharedMemory", "dynamicSharedMemory")
# Columns an export may lack (nullable in nsys's schema, or not in every version or exporter), with the
# SQL value that stands for them and what their absence costs (said once per table in a note).
OP_OPTIONAL = {"globalPid": "NULL", "correlationId": "NULL", "streamId": "0"}
KERNEL_OPTIONAL = {
    **OP_OPTIONAL,
    **{column: "0" for column in KERNEL_DIMS},
    **{column: "-1" for column in KERNEL_RESOURCES},
    "demangledName": "shortName",
}
MEMCPY_OPTIONAL = {**OP_OPTIONAL, "copyKind": "0", "bytes": "0"}
MEMSET_OPTIONAL = {**OP_OPTIONAL, "bytes": "0"}
RUNTIME_OPTIONAL = {"globalTid": "NULL", "correlationId": "NULL"}
NVTX_OPTIONAL = {"text": "NULL", "textId": "NULL", "domainId": "NULL", "globalTid": "NULL", "endGlobalTid": "NULL"}
WITHOUT = {
    "globalPid": "GPU operations are matched to their launching calls by correlation id alone (one process assumed)",
    "correlationId": "these rows cannot be tied to their launching calls, so no range owns their GPU work",
    "streamId": "streams show as 0",
    **{column: "launch configurations show as 0" for column in KERNEL_DIMS},
    **{column: "kernels' registers and shared memory are unknown: no occupancy" for column in KERNEL_RESOURCES},
    "copyKind": "copy directions show as Unknown",
    "bytes": "sizes show as 0",
    "demangledName": "the short kernel name stands for the full one",
    "globalTid": "no thread is known: ranges own GPU work by time within the process alone",
    "endGlobalTid": "start/end ranges are taken to end on the thread that started them",
    "domainId": "every range is in the default domain",
    "text": "ranges are named by their registered strings only",
    "textId": "ranges are named by their text only",
}


def missing_notes(table: str, missing: list[str], source: str) -> str:
    """One line per column ``table`` lacks, saying what that costs (``frame.attrs["notes"]``)."""
    return "\n".join(f"{source}: {table} has no {column} column: {WITHOUT[column]}" for column in missing)


def low_bits(expression: str, bits: int) -> str:
    """SQL for ``expression & (2**bits - 1)`` of a non-negative integer, in arithmetic (see ``common``)."""
    return f"({expression}) - ({expression}) / {2**bits} * {2**bits}"


def keep_usable(columns: dict[str, np.ndarray]) -> int:
    """Leave out, in place, the rows whose values cannot be right (a table read whole: the API calls);
    returns how many. Times as ``keep_timed``; thread ids must not be negative. (An unusable name id
    leaves its row in: ``unknown_values`` reads it as unknown.)"""
    usable = _usable_times(columns)
    if "thread" in columns:
        usable &= columns["thread"] >= 0
    return keep_rows(columns, usable)


def _usable_times(columns: dict[str, np.ndarray]) -> np.ndarray:
    if "start" in columns:
        start, end = columns["start"], columns["end"]
        return (start >= 0) & (end >= start) & (end < TIME_LIMIT)
    return columns["duration"] >= 0


@dataclass(frozen=True)
class Unknown:
    """How a GPU-op value read (a column of the SQL read) stands for unknown when it is unusable: the value
    it reads as, the label the note counts it under, and the contract columns it fills."""

    stands_for: int
    label: str
    covers: tuple[str, ...]


# By the column read (see ``unknown_values``); the per-row SQL of a careful read gives CAREFUL_SENTINEL
# instead, out of every column's range, so numpy finds and counts it.
UNKNOWN = {
    "device_stream": Unknown(-1, "device/stream", ("device", "stream")),
    "correlation_id": Unknown(-1, "correlation_id", ("correlation_id",)),
    "pid": Unknown(UNREADABLE_PID, "pid", ("pid",)),
    "grid": Unknown(0, "grid", ("grid_x", "grid_y", "grid_z")),
    "block": Unknown(0, "block", ("block_x", "block_y", "block_z")),
    "bytes": Unknown(0, "bytes", ("bytes",)),
    "registers_per_thread": Unknown(-1, "registers_per_thread", ("registers_per_thread",)),
    "shared_memory": Unknown(-1, "shared_memory", ("shared_memory",)),
    "copy_kind": Unknown(0, "name (copy kind)", ("name", "short_name")),
    "name_id": Unknown(-1, "name", ("name", "short_name")),  # the short name is the name's
    "text_id": Unknown(-2, "name", ("name",)),  # NVTX ranges' registered-name id (read by nsys.ranges)
}
CAREFUL_SENTINEL = -3


def keep_timed(columns: dict[str, np.ndarray]) -> int:
    """Leave out, in place, the rows whose times cannot be right; returns how many. Times must lie in
    [0, TIME_LIMIT) with end >= start (a checked duration read alone is -1 otherwise)."""
    return keep_rows(columns, _usable_times(columns))


def unknown_values(columns: dict[str, np.ndarray]) -> dict[str, int]:
    """Replace, in place, the unusable values of the GPU-op columns read (other than times) by what
    stands for unknown (``UNKNOWN``); returns how many per column. Ids packed two to a value must each
    fit their half (device int16, stream int32) and are unknown together; sizes, directions, launch
    dimensions and correlation ids must not be negative (-1: none), nor process ids (UNKNOWN_PID aside: the
    export does not record them; an unusable one becomes UNREADABLE_PID, which matches no launching
    call); name ids and copy kinds must fit int32."""
    counts = {}
    for name, unknown in UNKNOWN.items():
        values = columns.get(name)
        if values is None:
            continue
        if name == "device_stream":
            high, low = np.divmod(values, 2**32)
            bad = (high < 0) | (high >= 2**15) | (low >= 2**31)
        elif name in ("name_id", "copy_kind"):
            bad = (values < 0) | (values >= 2**31)
        elif name in ("grid", "block"):  # x << 32 | y << 16 | z, each in range (the SQL guard saw to it)
            bad = values < 0
        else:
            bad = values < (-1 if name in ("correlation_id", "pid", "registers_per_thread", "shared_memory") else 0)
        count = int(np.count_nonzero(bad))
        if count:
            values[bad] = unknown.stands_for
            counts[name] = count
    return counts


def keep_rows(columns: dict, usable: np.ndarray) -> int:
    """Keep, in place, the rows of every column (text columns as codes) where ``usable``; returns how many
    were left out."""
    bad = len(usable) - int(usable.sum())
    if bad:
        for name, values in columns.items():
            if isinstance(values, tuple):  # a text column: codes into its distinct values
                columns[name] = (values[0][usable], values[1])
            elif isinstance(values, np.ndarray) and len(values) == len(usable):
                columns[name] = values[usable]
    return bad


def with_notes(frame: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """Record on the table what its reader wants said (``Trace`` notes each line once)."""
    text = "\n".join(note for note in notes if note)
    if text:
        frame.attrs["notes"] = text
    return frame


def with_unknown(frame: pd.DataFrame, unknown: dict[str, int]) -> pd.DataFrame:
    """Record on the table how many values per column read were unusable and read as unknown: JSON, label ->
    [count, the contract columns it fills] (``Trace`` notes those of the columns it is handed)."""
    if unknown:
        import json

        counts = {UNKNOWN[name].label: [count, list(UNKNOWN[name].covers)] for name, count in unknown.items()}
        frame.attrs["unknown"] = json.dumps(counts, sort_keys=True)
    return frame


def with_dropped(frame: pd.DataFrame, dropped: int) -> pd.DataFrame:
    """Record on the table how many rows were left out for unusable values (``Trace`` reports them)."""
    frame.attrs["dropped"] = dropped
    return frame
