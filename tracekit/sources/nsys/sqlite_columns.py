"""Columnar reads from SQLite, fast enough for traces of millions of rows.

Python's sqlite3 builds one Python object per value (about 140 ns each), so a million-row kernel
table with 14 columns costs 2 s that way. Here SQLite itself formats each column of a chunk of rows
into one separated string (``group_concat``, in C) and numpy parses it (in C): no Python object per
value. Text columns come back as codes into their distinct values, so a name repeated a million
times is one string (pyarrow splits and dictionary-encodes them in C++). SQLite releases the GIL while
it runs a query, so chunks read on two threads really run in parallel, as long as the SQL calls no
function per row that allocates (see ``TEXT_SEPARATOR``'s use). Every read shares the same two threads
(``read_pool``): the most urgent read's chunks first, then in the order asked. Measured on a 1M-row nsys kernel table, 14 columns: 0.85 s (fetchall:
2.0 s, ``pandas.read_sql``: 4.5 s).
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import threading
import warnings
from collections.abc import Mapping
from concurrent.futures import Future
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import numpy as np

from tracekit.session import current, in_this_context
from tracekit.sources.nsys.read_pool import chunk_pool

if TYPE_CHECKING:
    import pyarrow as pa

# numpy's notice when a parse stops early; _parse_integers detects that itself (a sentinel value).
warnings.filterwarnings("ignore", message="string or file could not be read to its end", category=DeprecationWarning)

# pandas and pyarrow load only for text columns: the kernel summary's reads start before pandas is imported
# (``read_ahead``).

# Rows per query: bounds the memory of one chunk's strings (about 12 bytes a value) while keeping
# the per-query overhead small.
CHUNK_ROWS = 500_000
# ASCII "unit separator": joins text values; no NVTX or kernel name contains it (checked per chunk).
TEXT_SEPARATOR = "\x1f"
DROPPED = "__dropped__"  # read_columns' count of rows with unusable values
MISSING = "__missing__"  # read_columns' list of optional columns the table lacks


def connect_readonly(path: str | Path) -> sqlite3.Connection:
    """Open an SQLite file read-only without taking locks (exports are never written while read)."""
    # No mmap: mapped pages of a multi-GB export would count as resident memory of the process.
    uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro&immutable=1"
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
    connection.execute("PRAGMA case_sensitive_like = ON")  # LIKE filters on names must match GLOB's rules
    # A name with bytes that are not UTF-8 (a damaged or foreign file) reads with U+FFFD in their place
    # rather than failing the whole read.
    connection.text_factory = lambda raw: raw.decode("utf-8", "replace")
    return connection


def rowid_bounds(connection: sqlite3.Connection, table: str) -> tuple[int | None, int | None]:
    # Two queries: SQLite answers a lone min() or max() of the rowid from the b-tree's ends, but
    # scans the whole table for both in one statement.
    low = connection.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0]
    high = connection.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    return low, high


# Beyond this many chunks of rowid span, rowids are checked for being sparse (see chunk_bounds).
DENSE_CHUNKS = 64


def chunk_bounds(
    connection: sqlite3.Connection, table: str, low: int | None, high: int | None
) -> list[tuple[int, int]]:
    """Inclusive rowid ranges of about CHUNK_ROWS rows each ([] for an empty table). nsys numbers rows
    1..n, so fixed steps of the rowid span do; a file whose rowids are sparse (one edited to 2^63 - 1)
    gets bounds from its actual rowids instead, so the number of chunks follows the rows, never the span."""
    if low is None or high is None:
        return []
    if (high - low) // CHUNK_ROWS <= DENSE_CHUNKS:
        return [(start, min(start + CHUNK_ROWS - 1, high)) for start in range(low, high + 1, CHUNK_ROWS)]
    starts = [
        rowid
        for (rowid,) in connection.execute(
            f"SELECT rowid FROM (SELECT rowid, row_number() OVER (ORDER BY rowid) - 1 AS n FROM {table}) "
            f"WHERE n % {CHUNK_ROWS} = 0"
        )
    ]
    return [(start, end - 1) for start, end in zip(starts, starts[1:])] + [(starts[-1], high)]


def read_ahead(path: str | Path, **arguments) -> None:
    """Start ``read_columns(path, **arguments)`` on a background thread: the same call made later takes
    its result instead of reading again. SQLite runs without the GIL, so a command reads its export while
    its own imports (pandas: ~0.45 s) are still loading on the other core."""
    key = _ahead_key(path, arguments)
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(_read_columns(path, **arguments))
        except BaseException as error:  # handed to the caller, who would have met it reading itself
            future.set_exception(error)

    session = current()
    with session.lock:
        if key in session.reads_ahead:
            return
        session.reads_ahead[key] = future
    threading.Thread(target=in_this_context(run), name="tracekit-read-ahead", daemon=True).start()


def _ahead_key(path: str | Path, arguments: Mapping) -> str:
    return repr((str(Path(path).resolve()), sorted((name, repr(value)) for name, value in arguments.items())))


def read_columns(path: str | Path, table: str, ints: Mapping[str, str], **arguments) -> dict:
    """``_read_columns``, or the result of the same read started ahead (``read_ahead``)."""
    arguments = {"table": table, "ints": ints, **arguments}
    session = current()
    with session.lock:
        started = session.reads_ahead.pop(_ahead_key(path, arguments), None)
    return started.result() if started is not None else _read_columns(path, **arguments)


def _read_columns(
    path: str | Path,
    table: str,
    ints: Mapping[str, str],
    texts: Mapping[str, str] | None = None,
    dtypes: Mapping[str, str] | None = None,
    where: str = "",
    guard: str = "",
    careful: str = "",
    careful_ints: Mapping[str, str] | None = None,
    optional: Mapping[str, str] | None = None,
) -> dict:
    """Read SQL expressions of the rows of ``table`` (rowid order) in one scan per chunk.

    ``ints`` maps an output name to an SQL expression yielding a non-NULL integer (wrap nullable
    columns in ``ifnull(col, -1)``: ``group_concat`` skips NULLs, which would misalign the arrays);
    they come back as numpy arrays, narrowed per ``dtypes`` (default int64). ``texts`` maps a name
    to a text expression; it comes back as (int32 codes, list of distinct values), NULL as "".
    ``where`` filters rows.

    Damaged values: SQLite keeps what it is given, REAL or TEXT even in an INTEGER column. A REAL or
    TEXT value read as it is makes the chunk's numbers unparseable; arithmetic on it (the packing of
    small ids) turns TEXT into 0, which ``guard`` catches: an SQL aggregate, true for a chunk that
    needs care (cheap: ``max`` over the row's ids is TEXT when one of them is). Such a chunk alone is
    read again without the rows failing ``careful`` (per-row typeof() and range tests, too costly for
    every read), and those are counted under the key DROPPED; there ``careful_ints`` may give other
    expressions for some of ``ints`` (per-row checked values that stand in for an unusable one rather than
    leave its row out). Checks of the values read (ranges, end >= start) are the caller's, in numpy.

    ``optional`` maps columns some exports lack (nullable in nsys's schema, or newer than an export)
    to the SQL value that stands for them; the names of those missing come back under the key MISSING.
    """
    texts = dict(texts or {})
    dtypes = dict(dtypes or {})
    int_names, text_names = list(ints), list(texts)
    with closing(connect_readonly(path)) as connection:
        have = set(table_columns(connection, table))
        missing = {column: value for column, value in (optional or {}).items() if column not in have}
        if missing:  # every expression reads the stand-in value instead
            ints = {name: stand_in(sql, missing) for name, sql in ints.items()}
            texts = {name: stand_in(sql, missing) for name, sql in texts.items()}
            careful_ints = {name: stand_in(sql, missing) for name, sql in (careful_ints or {}).items()}
            where, guard, careful = (stand_in(sql, missing) for sql in (where, guard, careful))
        low, high = rowid_bounds(connection, table)
        bounds = chunk_bounds(connection, table, low, high)
    if not bounds:  # an empty table: min and max are both NULL
        empty = {name: np.empty(0, dtype=dtypes.get(name, "int64")) for name in int_names}
        return {**empty, **{name: (np.empty(0, np.int32), []) for name in text_names}, DROPPED: 0, MISSING: []}

    # The separator as a literal, not char(31): a function call per row allocates a string each time,
    # and SQLite's allocator (memory statistics on) serializes the two reading threads on it: 4 chunks of
    # NVTX text took 0.64 s on two threads that way, 0.20 s with the literal.
    text_selects = [f"group_concat(ifnull(CAST({texts[name]} AS TEXT), ''), '{TEXT_SEPARATOR}')" for name in text_names]
    selects = ["count(*)", f"({guard or 0})"] + [f"group_concat({ints[name]})" for name in int_names] + text_selects
    checked = {**ints, **(careful_ints or {})}
    careful_selects = ["count(*)", "0"] + [f"group_concat({checked[name]})" for name in int_names] + text_selects
    selected = f" AND ({where})" if where else ""
    typed = selected + (f" AND ({careful})" if careful else "")
    total_query = f"SELECT count(*) FROM {table} WHERE rowid BETWEEN ? AND ?{selected}"

    def read_chunk(bound: tuple[int, int]) -> list:
        with closing(connect_readonly(path)) as connection:
            try:
                return parse(connection, selected, bound, counted=False)
            except ValueError:  # a REAL or TEXT value where an integer belongs
                if not (careful or careful_ints):
                    raise
                return parse(connection, typed, bound, counted=True)

    def parse(connection: sqlite3.Connection, condition: str, bound: tuple[int, int], counted: bool) -> list:
        columns = careful_selects if counted else selects
        sql = f"SELECT {', '.join(columns)} FROM {table} WHERE rowid BETWEEN ? AND ?{condition}"
        row = connection.execute(sql, bound).fetchone()
        count, flagged, values = row[0], row[1], list(row[2:])
        if flagged and not counted:
            raise ValueError(f"{table}: values of the wrong type or out of range")
        dropped = connection.execute(total_query, bound).fetchone()[0] - count if counted else 0
        for index, name in enumerate(int_names):
            dtype = dtypes.get(name, "int64")
            values[index] = _parse_integers(values[index], dtype) if count else np.empty(0, dtype)
            if len(values[index]) != count:
                raise ValueError(f"{table}.{name}: {len(values[index])} numbers for {count} rows")
        for offset, name in enumerate(text_names):
            index = len(int_names) + offset
            import pyarrow as pa

            strings = _split_text(values[index]) if count else pa.array([], pa.large_string())
            if len(strings) != count:  # a value held the separator: fetch this column row by row
                strings = pa.array(
                    [
                        r[0]
                        for r in connection.execute(
                            f"SELECT ifnull(CAST({texts[name]} AS TEXT), '') FROM {table} "
                            f"WHERE rowid BETWEEN ? AND ?{condition} "
                            "ORDER BY rowid",
                            bound,
                        )
                    ],
                    pa.large_string(),
                )
            encoded = strings.dictionary_encode()
            values[index] = (
                encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32),
                np.asarray(encoded.dictionary.to_pylist(), dtype=object),
            )
        return values + [dropped]

    # Each chunk's integers go straight into the output, each chunk in its own slot (its rowid span, which
    # holds at least its rows): the copies run on the reading threads, and a chunk's arrays are freed as soon
    # as it is parsed, not all kept for one join at the end (0.6 s on the main thread for 4.9M NVTX rows).
    # Slots of a sparse table's chunks could be vast: those are joined at the end instead.
    # (Spans added as Python integers: rowids may span more than int64 holds.)
    slots = list(itertools.accumulate((end - start + 1 for start, end in bounds), initial=0))
    out = (
        {name: np.empty(slots[-1], dtype=dtypes.get(name, "int64")) for name in int_names}
        if slots[-1] <= (DENSE_CHUNKS + 1) * CHUNK_ROWS
        else None
    )

    def read_into(number: int) -> list:
        values = read_chunk(bounds[number])
        if out is not None:
            for index, name in enumerate(int_names):
                out[name][slots[number] : slots[number] + len(values[index])] = values[index]
                values[index] = len(values[index])
        return values

    chunks = list(chunk_pool().map(read_into, range(len(bounds))))
    result = {}
    for index, name in enumerate(int_names):
        if out is not None:
            result[name] = _packed(out.pop(name), slots, [chunk[index] for chunk in chunks])
            continue
        result[name] = np.concatenate([chunk[index] for chunk in chunks]) if len(chunks) > 1 else chunks[0][index]
        for chunk in chunks:  # free each chunk's piece as soon as it is joined: halves the peak
            chunk[index] = None
    for offset, name in enumerate(text_names):
        result[name] = _join_text_chunks([chunk[len(int_names) + offset] for chunk in chunks])
    result[DROPPED] = sum(chunk[-1] for chunk in chunks)
    result[MISSING] = sorted(missing)
    return result


def _packed(values: np.ndarray, slots: list[int], counts: list[int]) -> np.ndarray:
    """The chunks' rows (``counts[i]`` of them at ``slots[i]``) moved together to the front of ``values``,
    in place; a copy when they fill less than half of it (the rest was reserved, never written)."""
    end = counts[0] if counts else 0
    for slot, count in zip(slots[1:], counts[1:]):
        if slot != end and count:  # rows a WHERE left out: move this chunk's rows down (numpy allows overlap)
            values[end : end + count] = values[slot : slot + count]
        end += count
    return values[:end].copy() if end < len(values) // 2 else values[:end]


def stand_in(sql: str, missing: Mapping[str, str]) -> str:
    """``sql`` with each missing column's name (as a whole word) replaced by its stand-in value."""
    for column, value in missing.items():
        sql = re.sub(rf"\b{re.escape(column)}\b", f"({value})", sql)
    return sql


def _parse_integers(joined: str | None, dtype: str) -> np.ndarray:
    """Comma-joined integers -> array; ValueError for anything else.

    numpy stops at the first value that is not an integer and only warns. A sentinel value after the
    last tells a complete parse from one that stopped early (a trailing "3x" would otherwise read as 3),
    with no warning filter changed: ``warnings.catch_warnings`` is process-wide, not per thread, and two
    reading threads entering it together left every later warning of the process raised as an error."""
    if joined is None:  # every value of the chunk was NULL (group_concat skips NULLs)
        raise ValueError("NULL where an integer belongs")
    values = np.fromstring(joined + ",0", dtype=np.int64, sep=",")
    if len(values) != joined.count(",") + 2:
        raise ValueError("a value that is not an integer")
    return values[:-1].astype(dtype, copy=False)


def _split_text(joined: str) -> pa.Array:
    """Split separator-joined values in C++ (pyarrow): no Python string per value."""
    # pyarrow.compute builds its kernel wrappers (split_pattern among them) at import time, so a static
    # checker does not see the name; it exists at runtime.
    import pyarrow as pa
    import pyarrow.compute as pc

    split = pc.split_pattern  # pyright: ignore[reportAttributeAccessIssue]
    return split(pa.array([joined], pa.large_string()), TEXT_SEPARATOR).flatten()


def read_int_columns(
    path: str | Path,
    table: str,
    columns: Mapping[str, str],
    dtypes: Mapping[str, str] | None = None,
    where: str = "",
    guard: str = "",
    careful: str = "",
    optional: Mapping[str, str] | None = None,
) -> dict:
    """Integer columns only (see ``read_columns``)."""
    return read_columns(
        path, table, columns, dtypes=dtypes, where=where, guard=guard, careful=careful, optional=optional
    )


def are_integers(*columns: str, nullable: tuple[str, ...] = ()) -> str:
    """SQL: every column holds an integer (the ``nullable`` ones may be NULL). typeof() rules out REAL and
    TEXT values, which SQLite keeps as given even in an INTEGER column."""
    tests = [f"typeof({column}) = 'integer'" for column in columns]
    tests += [f"({column} IS NULL OR typeof({column}) = 'integer')" for column in nullable]
    return " AND ".join(tests)


def text_among(*columns: str, nullable: tuple[str, ...] = ()) -> str:
    """SQL aggregate, true when some row holds TEXT (or a BLOB) in one of the columns: SQLite orders
    TEXT after every number, so the maximum over them is TEXT then. One call per row, unlike typeof()."""
    values = [*columns, *(f"ifnull({column}, 0)" for column in nullable)]
    return f"typeof(max({_per_row('max', values)})) NOT IN ('integer', 'null')"


def outside(columns: list[str], low: int, high: int) -> str:
    """SQL aggregate, true when some row has one of the columns outside [low, high), or TEXT in one of
    them (SQLite orders TEXT after every number)."""
    return f"max({_per_row('max', columns)}) >= {high} OR min({_per_row('min', columns)}) < {low}"


def _per_row(function: str, values: list[str]) -> str:
    """SQLite's scalar max()/min() of several values (of one value: the value itself)."""
    return f"{function}({', '.join(values)})" if len(values) > 1 else values[0]


def between(*columns: str, low: int = 0, high: int = 2**62) -> str:
    """SQL: every column's value lies in [low, high) (per row; for the careful read)."""
    return " AND ".join(f"{column} >= {low} AND {column} < {high}" for column in columns)


def _join_text_chunks(chunks: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, list[str]]:
    """Chunks were factorized separately: map each chunk's distinct values into one shared list."""
    import pandas as pd

    all_uniques = np.concatenate([uniques for _, uniques in chunks]) if chunks else np.empty(0, object)
    shared_codes, shared = pd.factorize(pd.Series(all_uniques, dtype=object))
    offsets = np.cumsum([0] + [len(uniques) for _, uniques in chunks])
    codes = [
        shared_codes[offset : offset + len(uniques)].astype(np.int32)[chunk_codes]
        for (chunk_codes, uniques), offset in zip(chunks, offsets)
    ]
    return (np.concatenate(codes) if codes else np.empty(0, np.int32)), list(shared)


def table_columns(connection: sqlite3.Connection, table: str) -> list[str]:
    """Column names of a table, in order (exports add columns between nsys versions)."""
    return [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
