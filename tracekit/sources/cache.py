"""A cache of a large export's normalized tables, so that later commands skip SQLite.

The first command that loads a table (gpu_ops, launches, ranges) of an export of at least
``Settings.cache_min_bytes`` (32 MiB) writes it beside the export in ``<export>.tracekit-cache/<table>/``, or under
``$XDG_CACHE_HOME/tracekit`` when that folder is read-only (or ``Settings.beside_inputs`` is off). ``key.json`` records the export's identity
(device, inode, size, modification time and a checksum of its first and last pages, where SQLite keeps
its header and change counter) and the cache format: when any of it changes, the cache is thrown
away. A cache folder that is a symbolic link, or a folder of that name that is not a cache, is never
written to or deleted; a damaged cache is discarded, rebuilt, and said so. TRACEKIT_CACHE=0 turns it
off; TRACEKIT_CACHE_MIN_BYTES changes the size threshold.

Format: one ``.npy`` file per column, categoricals as their codes plus ``categories.json``. The
normalized tables are numbers and categories only, so ``np.load`` reads each column straight into
its final array: for 12.6M GPU ops, 0.5 s and no second copy, where Parquet needs 2.7 s of decoding
and Arrow IPC a converted copy (Parquet stays the format of ``tracekit export``, for notebooks).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import TracekitError
from tracekit.files import write_text
from tracekit.model.schema import OPTIONAL_TABLES, TRACE_TABLES
from tracekit.session import current, in_this_context

if TYPE_CHECKING:  # pandas loads when a table does: the command line asks the cache before importing it
    import pandas as pd

    from tracekit.model.range_specs import Pattern
    from tracekit.model.trace import Trace

TABLES = tuple(schema.table for schema in TRACE_TABLES)
# optional tables are cached too where their columns are numbers and categories (gpu_syncs)
SCHEMAS = {schema.table: schema for schema in (*TRACE_TABLES, *OPTIONAL_TABLES.values())}

FORMAT = 13  # 3: the GPU-op table is called gpu_ops; 4: unusable rows left out and counted (attrs); 5: some columns;
# 6: GPU ops keep their rows for unusable values other than times (read as unknown); 7: unknown counts with
# the columns they cover, unreadable processes -2; 8: a checksum per column, text args of torch.profiler
# traces read as numbers, ranges' domain notes apart; 9: optional tables (gpu_syncs, copy_rates, copies) and
# ROCm copies' bytes from their calls; 10: names whose string id resolves to nothing read as unknown (API calls
# and ranges keep their rows); 11: kernels' short names from their demangled names (sources.short_names); 12:
# kernels' registers and shared memory, the profiler's occupancy estimates, operators' recorded shapes; 13: the
# collectives' recorded args
SUFFIX = ".tracekit-cache"

_STORING = threading.Lock()  # tables load on several threads: one may not clear the folder another writes into


class TableCache:
    """Column files of one export's tables, valid while the export is unchanged."""

    def __init__(self, export: Path, folder: Path):
        self.export = export
        self.folder = folder
        self.damaged: list[str] = []  # tables whose cached copy could not be read (rebuilt)
        self._pending: dict[str, pd.DataFrame] = {}  # tables handed to a background write, until written
        stat = export.stat()
        self.key = {
            "format": FORMAT,
            "export": str(export.resolve()),
            "device": stat.st_dev,
            "inode": stat.st_ino,
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "pages_sha256": _edge_checksum(export),
        }

    @classmethod
    def for_export(cls, export: Path) -> TableCache | None:
        """The cache of ``export``, or None when caching is off or the export is small."""
        settings = current().settings
        if not settings.cache or export.stat().st_size < settings.cache_min_bytes:
            return None
        if settings.beside_inputs and os.access(export.parent, os.W_OK):
            folder = export.with_name(export.name + SUFFIX)
        else:
            digest = hashlib.sha1(str(export.resolve()).encode()).hexdigest()[:16]
            folder = Path(settings.cache_home) / "tracekit" / f"{export.stem}-{digest}"
        return cls(export, folder)

    def _valid(self) -> bool:
        try:
            return json.loads((self.folder / "key.json").read_text()) == self.key
        except (OSError, ValueError, RecursionError):
            return False

    def has(self, table: str) -> bool:
        return self._valid() and (self.folder / table / "columns.json").exists()

    def _ours(self) -> bool:
        """Whether the cache folder may be written and deleted: absent, or a real folder (not a link)
        that is empty or holds our key.json."""
        folder = self.folder
        if folder.is_symlink():
            return False
        if not folder.exists():
            return True
        return folder.is_dir() and ((folder / "key.json").is_file() or not any(folder.iterdir()))

    def cached_columns(self, table: str) -> list[str]:
        """The columns of ``table`` the cache holds ([] when none)."""
        pending = self._pending.get(table)
        if pending is not None:
            return list(pending.columns)
        if not self._ours() or not self.has(table):
            return []
        try:
            return [column for column, _ in json.loads((self.folder / table / "columns.json").read_text())["columns"]]
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return []

    def load(self, table: str, columns: Collection[str] | None = None) -> pd.DataFrame | None:
        """The cached ``table`` (only ``columns``, when given), or None when the cache lacks any of them."""
        import numpy as np
        import pandas as pd

        schema = SCHEMAS["ranges" if table.startswith("ranges_named-") else table]
        columns = schema.names if columns is None else columns
        pending = self._pending.get(table)
        if pending is not None:  # still being written: the frame itself is the cached table
            wanted = [column for column in pending.columns if column in set(columns)]
            return pending.loc[:, wanted] if set(columns) <= set(wanted) else None
        if not self._ours() or not self.has(table):
            return None
        folder = self.folder / table
        try:
            layout = json.loads((folder / "columns.json").read_text())
            held = {column: categories for column, categories in layout["columns"]}
            wanted = [column for column, _ in layout["columns"] if column in set(columns)]
            if not set(columns) <= set(held):
                return None
            arrays = {}
            for column in wanted:
                values = np.load(folder / f"{column}.npy", allow_pickle=False)
                categories = held[column]
                if len(values) != layout["rows"]:
                    raise ValueError(f"{column}: {len(values)} values for {layout['rows']} rows")
                if checksum(values) != layout.get("checksums", {}).get(column):  # a flipped byte changes it
                    raise ValueError(f"{column}: its checksum does not match")
                arrays[column] = (
                    values
                    if categories is None
                    else pd.Categorical.from_codes(values, categories=pd.Index(categories, dtype=object))
                )
            # copy=False: the arrays just loaded are the table's own (a copy of 10M rows costs 0.3 s)
            frame = pd.DataFrame(arrays, index=pd.RangeIndex(layout["rows"]), copy=False)
            frame.attrs.update(layout.get("attrs", {}))  # e.g. the count of rows the reader left out
            # The contract the reader's own table would meet: a cache that breaks it is damaged.
            return schema.check(frame, str(self.export), partial=True)
        # Whatever a damaged file provokes (a .npy header of garbage: tokenize.TokenError; one claiming a huge
        # shape: MemoryError; absurdly nested JSON: RecursionError; a broken contract: InvalidTraceError),
        # the cache is only a slower start: rebuilt from the export, and said so.
        except Exception:
            self.damaged.append(table)
            return None

    def store(self, table: str, frame: pd.DataFrame) -> None:
        """Write one table, on a background thread when the session writes behind (the command goes on with its
        analysis meanwhile, as numpy writes without the GIL: ranges of 4.9M rows take 0.6 s of writing off
        the critical path; the frame cannot change meanwhile, pandas copies on write). A cache we cannot
        write (or a column type it does not hold) is skipped."""
        import numpy as np
        import pandas as pd

        columns = []
        for column in frame.columns:
            dtype = frame[column].dtype
            if isinstance(dtype, pd.CategoricalDtype):
                columns.append((column, [str(value) for value in dtype.categories]))
            elif isinstance(dtype, np.dtype) and (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)):
                columns.append((column, None))
            else:
                return
        session = current()
        if not session.write_behind:
            with _STORING:
                self._store(table, frame, columns)
            return
        self._pending[table] = frame

        def write() -> None:
            try:
                with _STORING:  # tables load on several threads: one may not clear the folder another writes into
                    self._store(table, frame, columns)
            finally:
                if self._pending.get(table) is frame:
                    del self._pending[table]

        writer = threading.Thread(target=in_this_context(write), name=f"tracekit-cache-{table}")
        session.pending_writes.append(writer)
        writer.start()

    def _store(self, table: str, frame: pd.DataFrame, columns: list) -> None:
        import numpy as np

        if not self._ours():
            return
        partial = None
        try:
            if not self._valid():
                if self.folder.exists():
                    shutil.rmtree(self.folder)  # our own folder (see _ours), for an older export
                self.folder.mkdir(parents=True, exist_ok=True)
                os.chmod(self.folder, _mode_like(self.export))
                write_text(self.folder / "key.json", json.dumps(self.key))
            # a folder of this writer's own: another process may be writing the same table right now
            partial = self.folder / f".{table}.{uuid.uuid4().hex[:8]}.partial"
            partial.mkdir()
            checksums = {}
            for column, categories in columns:
                values = frame[column].cat.codes.to_numpy() if categories is not None else frame[column].to_numpy()
                np.save(partial / f"{column}.npy", values, allow_pickle=False)
                checksums[column] = checksum(values)
            attrs = {key: value for key, value in frame.attrs.items() if isinstance(value, (int, float, str))}
            layout = {"rows": len(frame), "columns": columns, "attrs": attrs, "checksums": checksums}
            (partial / "columns.json").write_text(json.dumps(layout))
            target = self.folder / table
            if target.is_symlink():  # not ours to follow: remove the link itself, never what it points at
                target.unlink()
            shutil.rmtree(target, ignore_errors=True)
            os.replace(partial, target)  # whole tables appear at once (another writer's, if it was first: kept)
        except (OSError, TracekitError):  # a cache that cannot be written is only a slower next start
            if partial is not None:
                shutil.rmtree(partial, ignore_errors=True)  # no half table left behind

    def wrap(self, table: str, loader: Callable[[], pd.DataFrame]) -> Callable[[], pd.DataFrame]:
        """A loader that reads the cached table when there is one, else loads and caches it."""

        def load() -> pd.DataFrame:
            cached = self.load(table)
            if cached is not None:
                return cached
            frame = loader()
            self.store(table, frame)
            return frame

        return load

    def wrap_columns(
        self, table: str, loader: Callable[[tuple[str, ...]], pd.DataFrame]
    ) -> Callable[[tuple[str, ...]], pd.DataFrame]:
        """A loader of some columns (``Trace.columns``) that reads them from the cache when it holds them
        all, else reads them together with the cached ones (a table's columns come from one read: see
        ``Trace.columns``) and caches that wider set in place of the narrower one."""

        def load(columns: tuple[str, ...]) -> pd.DataFrame:
            cached = self.load(table, columns)
            if cached is not None:
                return cached
            union = set(columns) | set(self.cached_columns(table))
            frame = loader(tuple(name for name in SCHEMAS[table].names if name in union))
            self.store(table, frame)
            return frame.loc[:, [name for name in frame.columns if name in set(columns)]]

        return load


def cached_trace(trace: Trace, export: Path) -> Trace:
    """``trace`` (read from ``export``) with its tables read from and written to the export's cache, or
    ``trace`` itself when the export is small or caching is off."""
    from tracekit.model.trace import Trace

    cache = TableCache.for_export(export)
    if cache is None:
        return trace
    loaders = dict(trace.loaders)
    cached = Trace(trace.meta, loaders)

    def noting(load: Callable) -> Callable:
        def run(*args):
            frame = load(*args)
            if cache.damaged:
                cached.note(
                    f"the table cache {cache.folder} was damaged ({', '.join(cache.damaged)}); rebuilt from the export"
                )
            return frame

        return run

    for table in TABLES:
        loaders[table] = noting(cache.wrap(table, trace.loaders[table]))
        if f"{table}:columns" in trace.loaders:
            loaders[f"{table}:columns"] = noting(cache.wrap_columns(table, trace.loaders[f"{table}:columns"]))
    for table in OPTIONAL_TABLES:
        if table in trace.loaders:
            loaders[table] = noting(cache.wrap(table, trace.loaders[table]))
    from tracekit.sources.derived_cache import DerivedCache

    cached.kept_values = DerivedCache(cache.folder, lambda: cache._ours() and cache._valid(), checksum, cache.key)
    if "ranges_named" in trace.loaders:
        loaders["ranges_named"] = noting(
            lambda patterns: _cached_selection(cache, trace.loaders["ranges_named"], patterns)
        )
    return cached


def checksum(values) -> str:
    """A checksum of a column's bytes, cheap enough to check on every read (12.6M int64 in about 30 ms):
    the byte count, the sum of its 8-byte words modulo 2^64 and their XOR. A changed byte changes both."""
    import numpy as np

    data = np.ascontiguousarray(values).view(np.uint8).ravel()
    whole = len(data) // 8 * 8
    words = data[:whole].view(np.uint64)
    tail = int.from_bytes(data[whole:].tobytes(), "little")
    with np.errstate(over="ignore"):
        plain = (int(words.sum(dtype=np.uint64)) + tail) % 2**64
    mixed = int(np.bitwise_xor.reduce(words)) ^ tail if len(words) else tail
    return f"{len(data)}:{plain:016x}:{mixed:016x}"


def _mode_like(export: Path) -> int:
    """The cache folder's mode: the user's umask, and no wider than the export (a copy of a private
    export's tables must not be readable by others)."""
    mask = os.umask(0o022)
    os.umask(mask)
    mode = 0o777 & ~mask
    readable = export.stat().st_mode
    if not readable & 0o004:
        mode &= ~0o007
    if not readable & 0o040:
        mode &= ~0o070
    return mode


def _edge_checksum(export: Path, page: int = 4096) -> str:
    """SHA-256 of the export's first and last ``page`` bytes: SQLite's header (with its change counter)
    and the tail, where appended pages land. Cheap, and it catches a rewrite that kept size and mtime."""
    digest = hashlib.sha256()
    with open(export, "rb") as handle:
        digest.update(handle.read(page))
        handle.seek(max(0, export.stat().st_size - page))
        digest.update(handle.read(page))
    return digest.hexdigest()


def _cached_selection(cache: TableCache, read_named: Callable, patterns: Collection[Pattern]) -> pd.DataFrame:
    """Named ranges on a cached export: from the whole cached range table when there is one (a
    filter beats a scan of SQLite), else from a cached earlier selection of the same patterns, else
    a filtered read that is cached for next time (a breakdown's phases are asked for again)."""
    from tracekit.model.range_names import select_named

    whole = cache.load("ranges")
    if whole is not None:
        return select_named(whole, patterns)
    key = "ranges_named-" + hashlib.sha1("\0".join(sorted(p.pattern for p in patterns)).encode()).hexdigest()[:16]
    return cache.wrap(key, lambda: read_named(patterns))()
