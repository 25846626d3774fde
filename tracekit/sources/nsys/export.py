"""Nsight Systems SQLite export -> normalized ``Trace``.

Works on every export schema seen so far (2022.4's schema 3.0.0 with ``EXPORT_META_DATA`` to 2026's
3.25 with ``META_DATA_EXPORT``): columns are read by name, and tables that are absent (nsys writes a
table only when it has rows) read as empty. Integer columns come through the columnar reader
(``sqlite_columns``), so a table of millions of rows never becomes millions of Python objects.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection
from contextlib import closing
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from tracekit.errors import InvalidTraceError, NotAnExportError
from tracekit.model.schema import GPU_OP_KINDS, GPU_OPS, LAUNCHES, UNKNOWN_PID
from tracekit.model.trace import Trace
from tracekit.sources.nsys.checks import (
    RUNTIME_OPTIONAL,
    keep_timed,
    keep_usable,
    low_bits,
    missing_notes,
    unknown_values,
    with_dropped,
    with_notes,
    with_unknown,
)
from tracekit.sources.nsys.gpu_reads import KERNEL_RESOURCE_COLUMNS, LAUNCH_CONFIG, gpu_op_reads
from tracekit.sources.nsys.meta import read_meta
from tracekit.sources.nsys.rule_tables import MEMCPY_DIRECTIONS, read_copies, read_profiler_overhead
from tracekit.sources.nsys.sqlite_columns import (
    DROPPED,
    MISSING,
    are_integers,
    connect_readonly,
    read_columns,
    read_int_columns,
    text_among,
)
from tracekit.sources.nsys.string_ids import categorical_from_ids, read_strings
from tracekit.sources.nsys.syncs import read_gpu_syncs
from tracekit.sources.nsys.thread_ids import ID_BITS, pid_of
from tracekit.sources.nsys.thread_names import read_thread_names
from tracekit.sources.short_names import short_name_column

T = TypeVar("T")
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
# The names of a kernel and of a CUDA API call whose name id is unusable or resolves to no string.
UNREADABLE_NAME = "[unreadable kernel name]"
UNREADABLE_CALL = "[unreadable call name]"


def read_nsys_export(path: str | Path) -> Trace:
    """Open an nsys SQLite export (uncached; ``sources.open_trace`` adds the cache). Checks that it is
    one now; reads its tables on first use."""
    from tracekit.sources.nsys.ranges import read_ranges

    path = Path(path)
    tables = check_export(path)
    meta = reading(path, "metadata", read_meta)(path, tables)
    loaders = {
        "gpu_ops": reading(path, "GPU activity", lambda: read_gpu_ops(path, tables)),
        "gpu_ops:columns": reading(path, "GPU activity", lambda columns: read_gpu_ops(path, tables, columns)),
        "launches": reading(path, "CUDA API calls", lambda: read_launches(path, tables)),
        "ranges": reading(path, "NVTX ranges", lambda: read_ranges(path, tables)),
        "ranges_named": reading(path, "NVTX ranges", lambda names: read_ranges(path, tables, names)),
        "copies": reading(path, "memory copies", lambda: read_copies(path, tables)),
        "profiler_overhead": reading(path, "profiler overhead", lambda: read_profiler_overhead(path, tables)),
        "gpu_syncs": reading(path, "synchronizations", lambda: read_gpu_syncs(path, tables)),
        "thread_names": reading(path, "process and thread names", lambda: read_thread_names(path, tables)),
    }
    return Trace(meta, loaders)


def reading(path: Path, what: str, read: Callable[..., T]) -> Callable[..., T]:
    """``read`` with SQLite's own errors (a damaged page, a column a required query lacks) turned into
    one line that names the file and what was being read."""

    def run(*args):
        try:
            return read(*args)
        except sqlite3.DatabaseError as error:
            if "no such column" in str(error):
                raise InvalidTraceError(
                    f"{path}: reading its {what} needs a column this export lacks ({error}); it was not written "
                    "by nsys export, or by a version tracekit does not know"
                ) from None
            raise InvalidTraceError(
                f"{path} is damaged: SQLite stopped reading its {what} ({error}); copy it again, or export the "
                "report again with `nsys export --type sqlite REPORT.nsys-rep`"
            ) from None

    return run


def check_export(path: Path) -> frozenset[str]:
    try:
        with closing(connect_readonly(path)) as connection:
            names = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    except sqlite3.DatabaseError as error:
        raise NotAnExportError(
            f"{path} is not an SQLite database ({error}); give an nsys SQLite export "
            "(`nsys export --type sqlite REPORT.nsys-rep`) or an .nsys-rep report"
        ) from None
    tables = frozenset(names)
    if "StringIds" not in tables:
        raise NotAnExportError(
            f"{path} is SQLite but not an Nsight Systems export: it has no StringIds table; "
            "export a report with `nsys export --type sqlite REPORT.nsys-rep`"
        )
    return tables


def read_gpu_ops(path: Path, tables: frozenset[str], columns: Collection[str] | None = None) -> pd.DataFrame:
    """Kernels, memcpys and memsets as one table of GPU operations (``schema.GPU_OPS``), with only
    ``columns`` (all by default; see ``nsys_gpu_reads``).

    Built column by column, each array narrowed as it is read, so that the peak memory of a 10M-row
    export stays near the size of the table itself.
    """
    wanted = [name for name in GPU_OPS.names if columns is None or name in set(columns)]
    parts: dict[str, dict[str, np.ndarray]] = {}
    dropped, notes, unknown = 0, [], {}
    for kind, read in gpu_op_reads(tables, wanted).items():
        part = read_columns(path, **read.arguments())
        dropped += int(part.pop(DROPPED))  # type: ignore[arg-type]
        missing = part.pop(MISSING)
        notes.append(missing_notes(read.table, missing, str(path)))  # type: ignore[arg-type]
        dropped += keep_timed(part)
        for name, count in unknown_values(part).items():
            unknown[name] = unknown.get(name, 0) + count
        if "globalPid" in missing and "pid" in part:
            part["pid"][:] = UNKNOWN_PID
        parts[kind] = part
    if not parts:
        return GPU_OPS.empty().loc[:, wanted]
    if not sum(len(next(iter(part.values()))) for part in parts.values()):
        frame = GPU_OPS.empty().loc[:, wanted]
    else:
        frame = _gpu_op_frame(path, parts, wanted, unknown)
    return with_notes(with_unknown(with_dropped(frame, dropped), unknown), notes)


def _gpu_op_frame(
    path: Path, parts: dict[str, dict[str, np.ndarray]], wanted: list[str], unknown: dict[str, int]
) -> pd.DataFrame:
    """The columns ``wanted`` of the GPU-op table from the kinds' columns as read (consumed on the way);
    name ids that resolve to no string are added to ``unknown``."""
    for kind, part in parts.items():
        if kind == "kernel" and "grid" in part:
            _unpack_launch_config(part)
        if "device_stream" in part:
            packed = part.pop("device_stream")
            part["device"], part["stream"] = (packed >> 32).astype(np.int16), (packed & 0xFFFFFFFF).astype(np.int32)
        if "pid" in part:
            part["pid"] = part["pid"].astype(np.int32)
        if "start" in part and "duration" in wanted:  # start and end are read together (nsys_gpu_reads)
            part["duration"] = part["end"] - part["start"]
    lengths = {kind: len(next(iter(part.values()))) for kind, part in parts.items()}
    names = _gpu_op_names(path, parts, "name" in wanted, "short_name" in wanted, unknown)
    numbers = ["start", "end", "duration", "device", "stream", "correlation_id", "pid", *LAUNCH_CONFIG]
    numbers += [*KERNEL_RESOURCE_COLUMNS, "bytes"]
    columns: dict[str, object] = {}
    for column in wanted:
        if column in names:
            columns[column] = names.pop(column)
        elif column == "kind":
            codes = [np.full(length, GPU_OP_KINDS.index(kind), np.int8) for kind, length in lengths.items()]
            columns[column] = pd.Categorical.from_codes(np.concatenate(codes), categories=GPU_OP_KINDS)
        elif column in numbers:
            dtype = np.dtype(GPU_OPS.column(column).dtype)
            pieces = [part.pop(column, None) for part in parts.values()]
            # Columns a kind does not have (grid for memcpy, bytes for kernels) are 0 for it.
            columns[column] = np.concatenate(
                [
                    piece.astype(dtype, copy=False) if piece is not None else np.zeros(length, dtype)
                    for piece, length in zip(pieces, lengths.values())
                ]
            )
            del pieces
    # copy=False: every array here is new and the table's own
    frame = pd.DataFrame(columns, index=pd.RangeIndex(sum(lengths.values())), copy=False)
    return frame


def _unpack_launch_config(columns: dict[str, np.ndarray]) -> None:
    """x << 32 | y << 16 | z -> three int32 columns (CUDA caps y and z of grids and blocks below 2^16)."""
    for axis in ("grid", "block"):
        packed = columns.pop(axis)
        columns[f"{axis}_x"] = (packed >> 32).astype(np.int32)
        columns[f"{axis}_y"] = ((packed >> 16) & 0xFFFF).astype(np.int32)
        columns[f"{axis}_z"] = (packed & 0xFFFF).astype(np.int32)


def _gpu_op_names(
    path: Path, parts: dict[str, dict[str, np.ndarray]], name: bool, short_name: bool, unknown: dict[str, int]
) -> dict[str, pd.Categorical]:
    """Name and short name (those asked for) of every GPU op, in the order kernel, memcpy, memset rows.

    memcpys are named by direction ("[CUDA memcpy HtoD]") and memsets "[CUDA memset]", as nsys's
    reports name them; name and short name are the same for both. A kernel whose name id is unusable
    (already counted in ``unknown``) or names no string (counted here) is UNREADABLE_NAME. A kernel's short
    name is made from its demangled name (``sources.short_names``), not read from shortName.
    """
    if not (name or short_name):
        return {}
    labels: list[str] = []
    label_codes = []
    if "memcpy" in parts:
        directions = parts["memcpy"].pop("copy_kind")
        used = np.unique(directions)
        labels += [f"[CUDA memcpy {MEMCPY_DIRECTIONS.get(int(kind), f'kind {kind}')}]" for kind in used]
        label_codes.append(np.searchsorted(used, directions).astype(np.int32))
    if "memset" in parts:
        labels.append("[CUDA memset]")
        label_codes.append(np.full(len(next(iter(parts["memset"].values()))), len(labels) - 1, np.int32))
    extra_codes = np.concatenate(label_codes) if label_codes else None
    ids = parts.get("kernel", {}).pop("name_id", np.empty(0, np.int64)).astype(np.int32)
    strings = read_strings(path, ids) if len(ids) else {}
    full, absent = categorical_from_ids(ids, strings, UNREADABLE_NAME, labels, extra_codes)
    if absent:
        unknown["name_id"] = unknown.get("name_id", 0) + absent
    names = {"name": full} if name else {}
    if short_name:  # kernels' rows come first
        names["short_name"] = short_name_column(full, np.arange(len(full)) < len(ids))
    return names


def read_launches(path: Path, tables: frozenset[str]) -> pd.DataFrame:
    """CUDA runtime API calls (``schema.LAUNCHES``). A call whose name id is unusable (NULL, negative, past
    int32) or names no string keeps its row (its launch still ties its GPU work to its thread), named
    UNREADABLE_CALL and counted."""
    if RUNTIME_TABLE not in tables:
        return LAUNCHES.empty()
    columns = read_int_columns(
        path,
        RUNTIME_TABLE,
        {
            "start": "start",
            "end": "end",
            "name_id": "ifnull(nameId, -1)",
            "correlation": "ifnull(correlationId, -1)",
            # pid and tid without the hardware/VM bits above them (arithmetic: see read_gpu_ops)
            "thread": low_bits("ifnull(globalTid, 0)", 48),
        },
        guard=text_among(nullable=("globalTid",)),
        careful=are_integers("start", "end", nullable=("nameId", "correlationId", "globalTid")),
        optional=RUNTIME_OPTIONAL,
    )
    notes = [missing_notes(RUNTIME_TABLE, columns.pop(MISSING), str(path))]
    dropped = int(columns.pop(DROPPED)) + keep_usable(columns)
    unknown = unknown_values({"name_id": columns["name_id"]})  # in place: an unusable id reads as -1
    columns["name_id"] = columns["name_id"].astype(np.int32)
    correlation = columns.pop("correlation")  # CUPTI's are 32-bit; -1: none
    columns["correlation_id"] = np.where(correlation < 0, -1, correlation & 0xFFFFFFFF)
    thread = columns.pop("thread")
    columns["pid"], columns["tid"] = pid_of(thread), thread & ID_BITS
    names, absent = categorical_from_ids(columns["name_id"], read_strings(path, columns["name_id"]), UNREADABLE_CALL)
    if absent:
        unknown["name_id"] = unknown.get("name_id", 0) + absent
    frame = pd.DataFrame(
        {
            "start": columns["start"],
            "end": columns["end"],
            "duration": columns["end"] - columns["start"],
            "name": names,
            "correlation_id": columns["correlation_id"],
            "pid": columns["pid"],
            "tid": columns["tid"],
        },
        copy=False,  # every array here is new and the table's own (a copy stacks millions of rows again)
    )
    return with_notes(with_unknown(with_dropped(frame, dropped), unknown), notes)
