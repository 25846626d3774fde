"""Start reading an export's GPU ops before the command has finished starting.

``tracekit kernels`` on a million kernels reads two values per kernel in ~0.25 s, but importing pandas
takes ~0.45 s first. SQLite runs without Python's lock (the GIL), so the command line starts the very
reads the reader will make (same SQL, ``sqlite_columns.read_ahead``) on a thread, then imports; the
reader takes their results. Only when it pays: an nsys export whose cache does not already hold the
columns. Anything unexpected here is left to the command, which reads (and reports) as usual.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from contextlib import closing
from pathlib import Path

from tracekit.model.schema import GPU_OPS
from tracekit.sources.cache import TableCache
from tracekit.sources.nsys.gpu_reads import gpu_op_reads
from tracekit.sources.nsys.sqlite_columns import connect_readonly, read_ahead

SQLITE_MAGIC = b"SQLite format 3\x00"


def read_gpu_ops_ahead(file: Path, columns: Collection[str]) -> None:
    """Start the reads ``read_gpu_ops(file, tables, columns)`` will make (with the cache's columns, as
    ``TableCache.wrap_columns`` asks for them); nothing when the cache holds them already."""
    try:
        with open(file, "rb") as handle:
            if not handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
                return
        with closing(connect_readonly(file)) as connection:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "StringIds" not in tables:
            return
        cache = TableCache.for_export(file)
        cached = cache.cached_columns("gpu_ops") if cache is not None else []
        if cache is not None and set(columns) <= set(cached):
            return
        union = set(columns) | set(cached)
        wanted = [name for name in GPU_OPS.names if name in union]
        for read in gpu_op_reads(tables, wanted).values():
            read_ahead(file, **read.arguments())
    except (OSError, sqlite3.Error):
        return  # the command's own read meets it and says what is wrong
