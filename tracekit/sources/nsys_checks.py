"""What an nsys export should not hold, and how reading leaves it out: the one definition of an
unusable row (the robustness rules build on it).

A row is left out when its times lie outside [0, TIME_LIMIT) or end before they start, when a size,
kind or id is negative or does not fit the column it goes to, or when a value is NULL, REAL or TEXT
where an integer belongs. Rows read as numbers are checked here in numpy (``keep_usable``); what the
packing of small ids into one number would hide (TEXT turned into 0 by arithmetic, a 16-bit field
overflowing into its neighbour) is caught per chunk by a cheap SQL ``guard``, and only such a chunk is
read again with the per-row ``careful`` tests. The count of rows left out travels with the table
(``frame.attrs["dropped"]``); ``Trace.warnings`` reports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


# Times stay below 2^62 ns: nsys export --ts-normalize gives times since the Unix epoch (~1.8e18 ns), so
# the limit cannot be tighter. Everything built on times subtracts the first one or falls back to ranks
# (keyed_times, nesting), and sums of durations are checked once per table (schema.DURATION_SUM_LIMIT).
TIME_LIMIT = 2**62
# The process id of GPU operations read from an export without globalPid (see attribution).
UNKNOWN_PID = -1
KERNEL_DIMS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")
# Columns an export may lack (nullable in nsys's schema, or not in every version or exporter), with the
# SQL value that stands for them and what their absence costs (said once per table in a note).
OP_OPTIONAL = {"globalPid": "NULL", "correlationId": "NULL", "streamId": "0"}
KERNEL_OPTIONAL = {
    **OP_OPTIONAL,
    **{column: "0" for column in KERNEL_DIMS},
    "shortName": "demangledName",
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
    "copyKind": "copy directions show as Unknown",
    "bytes": "sizes show as 0",
    "shortName": "the full kernel name stands for the short one",
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
    """Leave out, in place, the rows whose values cannot be right; returns how many. Times must lie in
    [0, TIME_LIMIT) with end >= start (a checked duration read alone is -1 otherwise); sizes, kinds and
    process ids (UNKNOWN_PID aside) must not be negative; ids packed two to a value must each fit their
    half (device int16, stream int32); name ids must fit int32."""
    if "start" in columns:
        start, end = columns["start"], columns["end"]
        usable = (start >= 0) & (end >= start) & (end < TIME_LIMIT)
    else:
        usable = columns["duration"] >= 0
    if "device_stream" in columns:
        high, low = np.divmod(columns["device_stream"], 2**32)
        usable &= (high >= 0) & (high < 2**15) & (low < 2**31)
    for name in ("bytes", "copy_kind", "pid", "thread"):
        if name in columns:
            usable &= columns[name] >= (UNKNOWN_PID if name == "pid" else 0)
    for name in ("name_id", "short_name_id"):
        if name in columns:
            usable &= (columns[name] >= 0) & (columns[name] < 2**31)
    return keep_rows(columns, usable)


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


def with_dropped(frame: pd.DataFrame, dropped: int) -> pd.DataFrame:
    """Record on the table how many rows were left out for unusable values (``Trace`` reports them)."""
    frame.attrs["dropped"] = dropped
    return frame
