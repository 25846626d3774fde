"""Nsight Systems SQLite export -> normalized ``Trace``.

Works on every export schema seen so far (2022.4's schema 3.0.0 with ``EXPORT_META_DATA`` to 2026's
3.25 with ``META_DATA_EXPORT``): columns are read by name, and tables that are absent (nsys writes a
table only when it has rows) read as empty. Integer columns come through the columnar reader
(``sqlite_columns``), so a table of millions of rows never becomes millions of Python objects.
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Collection

import numpy as np
import pandas as pd

from tracekit.errors import InvalidTraceError, NotAnExportError
from tracekit.sources.cache import TableCache
from tracekit.sources.nesting import nest_ranges
from tracekit.sources.sqlite_columns import (
    connect_readonly,
    present_ids,
    read_columns,
    read_int_columns,
    read_strings,
    table_columns,
)
from tracekit.trace import (
    GPU_OP_KINDS,
    KERNEL_COLUMNS,
    LAUNCH_COLUMNS,
    RANGE_COLUMNS,
    RANGE_STYLES,
    Trace,
    TraceMeta,
    empty_kernels,
    empty_launches,
    empty_ranges,
    is_pattern,
    names_matching,
    select_named,
)

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
GPU_TABLES = (KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE)

# NVTX_EVENTS.eventType values (ENUM_NSYS_EVENT_TYPE); 70/71 are ranges imported from NVTXT files.
NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND, NVTX_DOMAIN_CREATE = 59, 60, 70, 71, 75
RANGE_EVENT_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND)

# Short copy directions nsys prints ("[CUDA memcpy HtoD]"), by ENUM_CUDA_MEMCPY_OPER id.
MEMCPY_DIRECTIONS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "Unified HtoD",
    12: "Unified DtoH",
    13: "Unified DtoD",
}

# Low 24 bits of a global thread id are the tid, the next 24 the pid; the top 16 bits (hardware,
# VM) are non-zero in real files, so mask rather than shift alone.
ID_BITS = 0xFFFFFF
PID_TID_MASK = (1 << 48) - 1


def read_nsys_export(path: str | Path) -> Trace:
    """Open an nsys SQLite export. Checks that it is one now; reads its tables on first use."""
    path = Path(path)
    tables = _check_export(path)
    meta = _read_meta(path, tables)
    loaders = {
        "kernels": lambda: read_gpu_ops(path, tables),
        "launches": lambda: read_launches(path, tables),
        "ranges": lambda: read_ranges(path, tables),
        "ranges_named": lambda names: read_ranges(path, tables, names),
    }
    cache = TableCache.for_export(path)
    if cache is not None:
        for table in ("kernels", "launches", "ranges"):
            loaders[table] = cache.wrap(table, loaders[table])
        loaders["ranges_named"] = lambda names: _cached_selection(cache, path, tables, names)
    return Trace(meta, loaders)


def _cached_selection(cache: TableCache, path: Path, tables: frozenset[str], patterns) -> pd.DataFrame:
    """Named ranges on a cached export: from the whole cached range table when there is one (a
    filter beats a scan of SQLite), else from a cached earlier selection of the same patterns, else
    a filtered read that is cached for next time (a breakdown's phases are asked for again)."""
    if cache.has("ranges"):
        return select_named(cache.load("ranges"), patterns)
    key = "ranges_named-" + hashlib.sha1("\0".join(sorted(patterns)).encode()).hexdigest()[:16]
    return cache.wrap(key, lambda: read_ranges(path, tables, patterns))()


def _check_export(path: Path) -> frozenset[str]:
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


def _read_meta(path: Path, tables: frozenset[str]) -> TraceMeta:
    with closing(connect_readonly(path)) as connection:
        export = {}
        for table in ("EXPORT_META_DATA", "META_DATA_EXPORT"):  # 2022.4 name, 2024+ name
            if table in tables:
                export.update(connection.execute(f"SELECT name, value FROM {table}").fetchall())
        start = None
        if "TARGET_INFO_SESSION_START_TIME" in tables:
            row = connection.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            start = row[0] if row else None
        gpus = _read_gpus(connection, tables)
    return TraceMeta(
        source=str(path),
        tool="nsys",
        tool_version=export.get("EXPORT_PRODUCT_VERSION"),
        schema_version=export.get("EXPORT_SCHEMA_VERSION"),
        session_start_utc_ns=start,
        gpus=gpus,
        tables=tables,
    )


def _read_gpus(connection: sqlite3.Connection, tables: frozenset[str]) -> pd.DataFrame:
    """GPU descriptions: TARGET_INFO_GPU (2021.3+), else TARGET_INFO_CUDA_DEVICE (2026) / _CUDA_GPU (old)."""
    columns = ["id", "name", "sm_count", "memory_bytes", "compute_capability"]
    if "TARGET_INFO_GPU" in tables:
        have = set(table_columns(connection, "TARGET_INFO_GPU"))
        pick = {
            "id": "id",
            "name": "name",
            "sm_count": "smCount",
            "memory_bytes": "totalMemory",
            "major": "computeMajor",
            "minor": "computeMinor",
        }
        select = ", ".join(f"{source if source in have else 'NULL'} AS {alias}" for alias, source in pick.items())
        frame = pd.read_sql_query(f"SELECT DISTINCT {select} FROM TARGET_INFO_GPU ORDER BY id", connection)
        frame["compute_capability"] = [
            f"{major}.{minor}" if pd.notna(major) else None for major, minor in zip(frame["major"], frame["minor"])
        ]
        return frame[columns]
    for table, id_column, sm_column in (
        ("TARGET_INFO_CUDA_DEVICE", "cudaId", "numMultiprocessors"),
        ("TARGET_INFO_CUDA_GPU", "cudaId", "smCount"),
    ):
        if table in tables:
            have = set(table_columns(connection, table))
            ids = id_column if id_column in have else "rowid"
            sms = sm_column if sm_column in have else "NULL"
            names = "name" if "name" in have else "NULL"
            frame = pd.read_sql_query(
                f"SELECT DISTINCT {ids} AS id, {names} AS name, {sms} AS sm_count FROM {table} ORDER BY 1", connection
            )
            frame["memory_bytes"] = None
            frame["compute_capability"] = None
            return frame[columns]
    return pd.DataFrame(columns=columns)


def _pid(global_id: np.ndarray) -> np.ndarray:
    return (global_id >> 24) & ID_BITS


def _categorical_from_ids(
    ids: np.ndarray, strings: dict[int, str], extra: list[str] | None = None, extra_codes: np.ndarray | None = None
) -> pd.Categorical:
    """StringIds ids -> Categorical of their values, without a Python object per row.

    ``extra`` categories (e.g. memcpy labels) with their own codes are appended after the rows of
    ``ids``, so kernels and other GPU operations share one Categorical without recoding either.
    """
    present = present_ids(ids)
    values = [strings.get(int(i), f"<string {i}>") for i in present]
    # Two ids may hold the same text, and categories must be unique: map ids to text codes.
    value_codes, categories = pd.factorize(pd.Series(values + (extra or []), dtype=object))
    id_to_code = np.full(int(present[-1]) + 1 if len(present) else 0, -1, dtype=np.int32)
    id_to_code[present] = value_codes[: len(present)]
    if not len(ids):
        codes = np.empty(0, np.int32)
    elif (ids < 0).any():  # -1 marks "no id" (e.g. an NVTX range named by text)
        codes = np.where(ids >= 0, id_to_code[np.maximum(ids, 0)], -1).astype(np.int32)
    else:
        codes = id_to_code[ids]
    if extra:
        codes = np.concatenate([codes, value_codes[len(present) :].astype(np.int32)[extra_codes]])
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype=object))


def read_gpu_ops(path: Path, tables: frozenset[str]) -> pd.DataFrame:
    """Kernels, memcpys and memsets as one table of GPU operations (columns: trace.KERNEL_COLUMNS).

    Built column by column, each array narrowed as it is read, so that the peak memory of a 10M-row
    export stays near the size of the table itself.
    """
    # Few, short values per row: SQLite formats every value as text for the columnar reader, so the
    # pid is taken out of the 15-digit global id, and small ids share one value (unpacked in numpy).
    common = {
        "start": "start",
        "end": "end",
        "device_stream": "(deviceId << 32) | streamId",
        "correlation_id": "ifnull(correlationId, -1)",
        "pid": f"(ifnull(globalPid, 0) >> 24) & {ID_BITS}",
    }
    parts: dict[str, dict[str, np.ndarray]] = {}
    if KERNEL_TABLE in tables:
        parts["kernel"] = read_int_columns(
            path,
            KERNEL_TABLE,
            {
                **common,
                "name_ids": "(demangledName << 32) | shortName",
                "grid": "(gridX << 32) | (gridY << 16) | gridZ",
                "block": "(blockX << 32) | (blockY << 16) | blockZ",
            },
        )
        _unpack_launch_config(parts["kernel"])
    if MEMCPY_TABLE in tables:
        parts["memcpy"] = read_int_columns(
            path, MEMCPY_TABLE, {**common, "bytes": "bytes", "copy_kind": "copyKind"}, dtypes={"copy_kind": "int32"}
        )
    if MEMSET_TABLE in tables:
        parts["memset"] = read_int_columns(path, MEMSET_TABLE, {**common, "bytes": "bytes"})
    for columns in parts.values():
        packed = columns.pop("device_stream")
        columns["device"], columns["stream"] = (packed >> 32).astype(np.int16), (packed & 0xFFFFFFFF).astype(np.int32)
        columns["pid"] = columns["pid"].astype(np.int32)
    if not parts:
        return empty_kernels()

    lengths = {kind: len(columns["start"]) for kind, columns in parts.items()}
    names, short_names = _gpu_op_names(path, parts)
    frame = pd.DataFrame(index=pd.RangeIndex(sum(lengths.values())))
    for column in ("start", "end", "device", "stream", "correlation_id", "pid", *LAUNCH_CONFIG, "bytes"):
        pieces = [columns.pop(column, None) for columns in parts.values()]
        dtype = next((piece.dtype for piece in pieces if piece is not None), np.dtype("int32"))
        # Columns a kind does not have (grid for memcpy, bytes for kernels) are 0 for it.
        frame[column] = np.concatenate(
            [piece if piece is not None else np.zeros(length, dtype) for piece, length in zip(pieces, lengths.values())]
        )
        del pieces
    frame["duration"] = frame["end"] - frame["start"]
    frame["kind"] = pd.Categorical.from_codes(
        np.concatenate([np.full(length, GPU_OP_KINDS.index(kind), np.int8) for kind, length in lengths.items()]),
        categories=GPU_OP_KINDS,
    )
    frame["name"] = names
    frame["short_name"] = short_names
    _check_intervals(frame, path, "GPU operation")
    return frame[KERNEL_COLUMNS]


LAUNCH_CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


def _unpack_launch_config(columns: dict[str, np.ndarray]) -> None:
    """x << 32 | y << 16 | z -> three int32 columns (CUDA caps y and z of grids and blocks below 2^16)."""
    for axis in ("grid", "block"):
        packed = columns.pop(axis)
        columns[f"{axis}_x"] = (packed >> 32).astype(np.int32)
        columns[f"{axis}_y"] = ((packed >> 16) & 0xFFFF).astype(np.int32)
        columns[f"{axis}_z"] = (packed & 0xFFFF).astype(np.int32)


def _gpu_op_names(path: Path, parts: dict[str, dict[str, np.ndarray]]) -> tuple[pd.Categorical, pd.Categorical]:
    """Name and short name of every GPU op, in the order kernel, memcpy, memset rows.

    memcpys are named by direction ("[CUDA memcpy HtoD]") and memsets "[CUDA memset]", as nsys's
    reports name them; name and short name are the same for both.
    """
    labels: list[str] = []
    label_codes = []
    if "memcpy" in parts:
        directions = parts["memcpy"].pop("copy_kind")
        used = np.unique(directions)
        labels += [f"[CUDA memcpy {MEMCPY_DIRECTIONS.get(int(kind), f'kind {kind}')}]" for kind in used]
        label_codes.append(np.searchsorted(used, directions).astype(np.int32))
    if "memset" in parts:
        labels.append("[CUDA memset]")
        label_codes.append(np.full(len(parts["memset"]["start"]), len(labels) - 1, np.int32))
    extra_codes = np.concatenate(label_codes) if label_codes else None
    kernel = parts.get("kernel", {})
    packed = kernel.pop("name_ids", np.empty(0, np.int64))
    name_ids, short_ids = (packed >> 32).astype(np.int32), (packed & 0xFFFFFFFF).astype(np.int32)
    del packed
    strings = read_strings(path, name_ids, short_ids) if len(name_ids) else {}
    names = _categorical_from_ids(name_ids, strings, labels, extra_codes)
    del name_ids
    short_names = _categorical_from_ids(short_ids, strings, labels, extra_codes)
    return names, short_names


def _check_intervals(frame: pd.DataFrame, path: Path, what: str) -> None:
    bad = frame["end"].to_numpy() < frame["start"].to_numpy()
    if bad.any():
        raise InvalidTraceError(f"{path}: {int(bad.sum())} {what} rows end before they start; the export is damaged")


def read_launches(path: Path, tables: frozenset[str]) -> pd.DataFrame:
    """CUDA runtime API calls (columns: trace.LAUNCH_COLUMNS)."""
    if RUNTIME_TABLE not in tables:
        return empty_launches()
    columns = read_int_columns(
        path,
        RUNTIME_TABLE,
        {
            "start": "start",
            "end": "end",
            # name id and correlation id (32-bit in CUPTI) in one value; pid and tid without the HW/VM bits
            "name_correlation": "(nameId << 32) | (ifnull(correlationId, 4294967295) & 4294967295)",
            "thread": f"ifnull(globalTid, 0) & {PID_TID_MASK}",
        },
    )
    packed = columns.pop("name_correlation")
    columns["name_id"] = (packed >> 32).astype(np.int32)
    correlation = packed & 0xFFFFFFFF
    columns["correlation_id"] = np.where(correlation == 0xFFFFFFFF, -1, correlation)
    thread = columns.pop("thread")
    columns["pid"], columns["tid"] = _pid(thread), thread & ID_BITS
    names = _categorical_from_ids(columns["name_id"], read_strings(path, columns["name_id"]))
    frame = pd.DataFrame(
        {
            "start": columns["start"],
            "end": columns["end"],
            "duration": columns["end"] - columns["start"],
            "name": names,
            "correlation_id": columns["correlation_id"],
            "pid": columns["pid"],
            "tid": columns["tid"],
        }
    )
    _check_intervals(frame, path, "CUDA API")
    return frame[LAUNCH_COLUMNS]


def read_ranges(path: Path, tables: frozenset[str], names: Collection[str] | None = None) -> pd.DataFrame:
    """NVTX push/pop and start/end ranges, named and nested as nsys does (columns: trace.RANGE_COLUMNS).

    A name is built once per distinct (domain, text) pair, not once per row: PyTorch traces repeat
    a few hundred names over millions of ranges. With ``names``, only ranges of those names are read
    (filtered in SQL), and depth/parent describe the nesting among them.
    """
    if NVTX_TABLE not in tables:
        return empty_ranges()
    is_range = f"eventType IN ({','.join(str(t) for t in RANGE_EVENT_TYPES)})"
    wants_domains = names is None or any(_domain_part(name) for name in names)
    if names is not None:
        is_range += f" AND ({_name_filter(names)})"
        if not wants_domains:  # a range of a named domain is called "domain:text": none can match
            is_range += " AND ifnull(domainId, 0) = 0"
    columns = read_columns(
        path,
        NVTX_TABLE,
        {
            "range_id": "rowid",
            "start": "start",
            "end": "ifnull(end, -1)",
            "event_type": "eventType",
            "text_id": "ifnull(textId, -1)",
            "domain_id": "ifnull(domainId, 0)",
            # pid and tid only: the hardware/VM bits above them make every value 15 digits long
            "global_tid": f"ifnull(globalTid, 0) & {PID_TID_MASK}",
            "end_global_tid": f"ifnull(endGlobalTid & {PID_TID_MASK}, -1)",
        },
        texts={"text": "text"},
        where=is_range,
        dtypes={"event_type": "int16", "text_id": "int32"},
    )
    if len(columns["start"]) == 0:
        return empty_ranges()
    text_codes, texts = columns.pop("text")
    unclosed = columns["end"] < 0
    if unclosed.any():  # nsys closes an unclosed range at the last NVTX timestamp; do the same
        with closing(connect_readonly(path)) as connection:
            last = connection.execute(
                f"SELECT max(coalesce(max(start), 0), coalesce(max(end), 0)) FROM {NVTX_TABLE}"
            ).fetchone()[0]
        columns["end"][unclosed] = last
    domains = []
    if wants_domains and (columns["domain_id"] != 0).any():
        with closing(connect_readonly(path)) as connection:
            domains = connection.execute(
                f"SELECT globalTid, domainId, coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) "
                f"FROM {NVTX_TABLE} WHERE eventType = {NVTX_DOMAIN_CREATE} ORDER BY start"
            ).fetchall()

    global_tid = columns["global_tid"]
    pid = _pid(global_tid)
    domain_codes, domain_names = _domain_codes(pid, columns["domain_id"], domains)
    range_names = _range_names(path, columns.pop("text_id"), text_codes, texts, domain_codes, domain_names)
    if names is not None:  # the SQL filter matched texts; keep rows whose full "domain:text" name matches
        keep = names_matching(pd.Series(range_names), names)
        columns = {key: value[keep] for key, value in columns.items()}
        global_tid, pid, domain_codes, range_names = global_tid[keep], pid[keep], domain_codes[keep], range_names[keep]
    end_global = columns["end_global_tid"]
    same_thread = (end_global < 0) | (end_global == global_tid)
    parent_row, depth = nest_ranges(global_tid, columns["start"], columns["end"], same_thread)
    range_id = columns["range_id"]
    style_codes = np.isin(columns["event_type"], (NVTX_STARTEND, NVTXT_STARTEND)).astype(np.int8)
    frame = pd.DataFrame(
        {
            "range_id": range_id,
            "start": columns["start"],
            "end": columns["end"],
            "duration": columns["end"] - columns["start"],
            "name": range_names,
            "domain": pd.Categorical.from_codes(domain_codes, categories=pd.Index(domain_names, dtype=object)),
            "style": pd.Categorical.from_codes(style_codes, categories=RANGE_STYLES),
            "pid": pid,
            "tid": global_tid & ID_BITS,
            "end_tid": np.where(same_thread, global_tid, end_global) & ID_BITS,
            "depth": depth,
            "parent": np.where(parent_row >= 0, range_id[np.maximum(parent_row, 0)], -1),
        }
    )
    _check_intervals(frame, path, "NVTX range")
    return frame[RANGE_COLUMNS]


def _domain_part(name: str) -> str | None:
    """The domain of a "domain:text" name, or None. C++ names ("aten::mm") are not a domain split."""
    domain, colon, text = name.partition(":")
    return domain if colon and domain and text and not text.startswith(":") else None


def _name_filter(patterns: Collection[str]) -> str:
    """SQL condition on NVTX_EVENTS for ranges that may be named by ``patterns`` (names or globs;
    "domain:text" included). The exact match on full names follows in Python.

    Globs of only * and ? become LIKE patterns (the connection makes LIKE case-sensitive): SQLite
    evaluates LIKE about a third faster than GLOB on millions of rows.
    """
    texts = set()
    for pattern in patterns:
        texts.add(pattern)
        if _domain_part(pattern):  # "domain:text": the row's own text is after the first colon
            texts.add(pattern.split(":", 1)[1])
    exact = [_quote(text) for text in sorted(texts) if not is_pattern(text)]
    tests = [f"{{column}} IN ({', '.join(exact)})"] if exact else []
    for text in sorted(texts):
        if is_pattern(text):
            tests.append(
                f"{{column}} GLOB {_quote(text)}"
                if "[" in text
                else f"{{column}} LIKE {_quote(_like(text))} ESCAPE '\\'"
            )
    if not tests:
        return "0"
    on = lambda column: " OR ".join(test.format(column=column) for test in tests)  # noqa: E731
    return f"{on('text')} OR textId IN (SELECT id FROM StringIds WHERE {on('value')})"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _like(glob: str) -> str:
    """A glob of * and ? as a LIKE pattern with \\ escaping LIKE's own wildcards."""
    escaped = glob.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def _range_names(
    path: Path,
    text_ids: np.ndarray,
    text_codes: np.ndarray,
    texts: list[str],
    domain_codes: np.ndarray,
    domain_names: list[str],
) -> pd.Categorical:
    """nsys's range name: registered string (textId) else text, prefixed "domain:" outside the default domain."""
    registered = present_ids(text_ids)
    strings = read_strings(path, text_ids) if len(registered) else {}
    labels = [text or "(unnamed)" for text in texts] + [strings.get(int(i), f"<string {i}>") for i in registered]
    label = text_codes.astype(np.int64)
    if len(registered):
        id_to_label = np.zeros(int(registered[-1]) + 1, dtype=np.int64)
        id_to_label[registered] = len(texts) + np.arange(len(registered))
        has_id = text_ids >= 0
        label[has_id] = id_to_label[text_ids[has_id]]
    pairs, unique_pairs = pd.factorize(domain_codes.astype(np.int64) * len(labels) + label)
    pair_domain, pair_label = np.divmod(np.asarray(unique_pairs), len(labels))
    pair_names = [f"{domain_names[d]}:{labels[l]}" if d else labels[l] for d, l in zip(pair_domain, pair_label)]
    # Different pairs can spell the same name ("a:b" in the default domain, "b" in domain "a").
    name_codes, names = pd.factorize(pd.Series(pair_names, dtype=object))
    return pd.Categorical.from_codes(name_codes.astype(np.int32)[pairs], categories=pd.Index(names, dtype=object))


def _domain_codes(pid: np.ndarray, domain_id: np.ndarray, domains: list[tuple]) -> tuple[np.ndarray, list[str]]:
    """Per row, an index into the returned domain names ("" = the default domain), resolved per process."""
    codes = np.zeros(len(pid), dtype=np.int32)
    names = [""]
    custom = np.flatnonzero(domain_id != 0)
    if not domains or not len(custom):
        return codes, names
    created: dict[int, str] = {}
    for global_tid, domain, name in domains:  # ordered by time: the first creation of an id wins
        created.setdefault(((int(global_tid) >> 24) & ID_BITS) << 32 | int(domain), name or "")
    keys, unique_keys = pd.factorize(pid[custom] << 32 | domain_id[custom])
    known = [created.get(int(key)) for key in unique_keys]
    names_index = {name: index for index, name in enumerate(names)}
    key_to_code = np.array(
        [names_index.setdefault(name, len(names_index)) if name else 0 for name in known], dtype=np.int32
    )
    names = list(names_index)
    codes[custom] = key_to_code[keys]
    return codes, names
