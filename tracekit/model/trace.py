"""``Trace``: one profile as the tables of ``schema`` (gpu_ops, launches, ranges) plus metadata.

Tables load on first use, so a command that needs only GPU kernels never reads NVTX events, and each
is checked against its schema as it loads: an analysis can rely on every column and dtype.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pandas as pd

from tracekit.errors import InvalidTraceError
from tracekit.model import schema
from tracekit.model.derived import frozen, handed_out
from tracekit.model.reading import reading_later
from tracekit.session import in_this_context

if TYPE_CHECKING:
    from tracekit.model.range_specs import Pattern

TORCH_PROFILER = "torch.profiler"  # ``TraceMeta.tool`` of a torch.profiler (Kineto) trace
TABLES = tuple(table.table for table in schema.TRACE_TABLES)
SCHEMAS = {table.table: table for table in schema.TRACE_TABLES}
T = TypeVar("T")
# Per command (``command_notes``) and per thread of it: each Trace's notes found by analyses (by ``id``).
_COMMAND_NOTES: ContextVar[dict[int, list[str]] | None] = ContextVar("tracekit_command_notes", default=None)


@contextmanager
def command_notes() -> Iterator[dict[int, list[str]]]:
    """One command's scope for what its analyses find in a trace (``Trace.note_found``): said by this command
    (and the command around it, if any), not by every later command on the same Trace, so a command's notes
    never depend on what ran before it on the Trace (other calls, other threads). Yields the scope's notes,
    per trace (by ``id``)."""
    outer = _COMMAND_NOTES.get()
    scope: dict[int, list[str]] = {}
    token = _COMMAND_NOTES.set(scope)
    try:
        yield scope
    finally:
        _COMMAND_NOTES.reset(token)
        if outer is not None:  # a command run by another (a report's sections): its notes are the outer's too
            for key, notes in scope.items():
                held = outer.setdefault(key, [])
                held += [note for note in notes if note not in held]


@dataclass
class TraceMeta:
    """What a trace says about itself.

    ``source`` is the file read; ``tool``/``tool_version``/``schema_version`` the profiler and its
    export format; ``session_start_utc_ns`` anchors time zero (None when unknown); ``gpus`` follows
    ``schema.GPUS``; ``rank``/``world_size`` are the distributed job's, where the trace records them.
    """

    source: str
    tool: str = "nsys"
    tool_version: str | None = None
    schema_version: str | None = None
    session_start_utc_ns: int | None = None
    gpus: pd.DataFrame = field(default_factory=schema.GPUS.empty)
    rank: int | None = None
    world_size: int | None = None

    def __post_init__(self):
        schema.GPUS.check(self.gpus, self.source)

    def complete(self, facts: dict) -> None:
        """Fill what is still unknown from ``facts`` (``as_dict``'s keys): a reader that finds part of its
        metadata only while reading the tables (a JSON trace's fields after its events) hands it over
        with the first table, so a table cache keeps it too."""
        for key in ("tool_version", "schema_version", "session_start_utc_ns", "rank", "world_size"):
            if getattr(self, key) is None and facts.get(key) is not None:
                setattr(self, key, facts[key])
        known = set(self.gpus["id"].tolist())
        records = [record for record in facts.get("gpus") or [] if record.get("id") not in known]
        if records:  # GPUs not described yet (or known only from the device ids the events use)
            import pandas as pd

            added = pd.DataFrame(
                {
                    column.name: pd.Series(
                        [record.get(column.name) for record in records],
                        dtype=object if column.dtype == "text" else column.dtype,
                    )
                    for column in schema.GPUS.columns
                }
            )
            self.gpus = schema.GPUS.check(
                added if self.gpus.empty else pd.concat([self.gpus, added], ignore_index=True), self.source
            )

    def as_dict(self) -> dict:
        """Plain JSON-friendly form (for run manifests and exports)."""
        gpus = self.gpus.astype(object).where(self.gpus.notna(), None)
        return {
            "source": self.source,
            "tool": self.tool,
            "tool_version": self.tool_version,
            "schema_version": self.schema_version,
            "session_start_utc_ns": self.session_start_utc_ns,
            "gpus": gpus.to_dict(orient="records"),
            "rank": self.rank,
            "world_size": self.world_size,
        }


class KeptValues(Protocol):
    """Where derived values are kept between commands (``sources.derived_cache.DerivedCache``)."""

    def load(self, key: Hashable) -> tuple[Any, list[str]] | None: ...

    def store(self, key: Hashable, value: Any, notes: list[str]) -> None: ...


class Trace:
    """A profile's tables and metadata.

    ``loaders`` maps each of ``TABLES`` to a zero-argument function returning that table; it may also
    hold "ranges_named", a function of a set of names/globs returning only those ranges (a reader that
    can filter at the source, as nsys's does in SQL, so that a phase breakdown of a trace with millions
    of NVTX ranges never loads the millions), and "<table>:columns", a function of a tuple of column
    names returning the table with only those columns (at least; a reader that reads a column store, as
    SQLite is read here, fetches only what the command uses: see ``columns``).
    """

    def __init__(self, meta: TraceMeta, loaders: dict[str, Callable]):
        self.meta = meta
        self.loaders = loaders
        self._derived: dict[Hashable, object] = {}
        self._derived_notes: dict[Hashable, list[str]] = {}  # per derived value, the notes its computing found
        # where values of ``model.derived.kept_per_trace`` accessors are kept between commands (a large
        # export's cache: ``sources.derived_cache``); None: computed in each process
        self.kept_values: KeptValues | None = None
        self._dropped: dict[str, int] = {}
        self._unknown: dict[str, dict[str, int]] = {}  # per table, values read as unknown per column
        self._notes: list[str] = []
        self._range_notes: list[str] = []  # what the ranges' names and domains mean (``range_notes``)
        self._partial: dict[str, pd.DataFrame] = {}  # tables read for some of their columns only
        self._needed: dict[str, set[str]] = {}  # columns a command said it will use (``need``)

    def note(self, text: str) -> None:
        """Something a reader wants the user told (a damaged cache rebuilt, say); once per text."""
        if text not in self._notes:
            self._notes.append(text)

    def note_found(self, text: str) -> None:
        """Something an analysis found in the tables (ops with no launching call, say): told by the command
        running now (``command_notes``), once; outside any command, by every later one, as ``note``."""
        scope = _COMMAND_NOTES.get()
        if scope is None:
            self.note(text)
            return
        held = scope.setdefault(id(self), [])
        if text not in held:
            held.append(text)

    def _load(self, table: str, frame: pd.DataFrame | None = None, partial: bool = False) -> pd.DataFrame:
        if frame is None and self._has_columns(table):  # the whole table through the column reader
            return self._partial_frame(table, tuple(SCHEMAS[table].names))
        frame = self.loaders[table]() if frame is None else frame
        frame = SCHEMAS[table].check(frame, self.meta.source, partial=partial)
        dropped = int(frame.attrs.get("dropped", 0))
        if dropped:
            self._dropped[table] = max(dropped, self._dropped.get(table, 0))
        if frame.attrs.get("unknown"):  # unusable values a reader kept the rows of: label -> [count, columns]
            held = self._unknown.setdefault(table, {})
            for label, (count, covers) in json.loads(frame.attrs["unknown"]).items():
                # only those in the columns handed over: a table cache may hold (and count) more than a
                # command reads, and the note must be the one a fresh read of these columns gives
                if set(covers) & set(frame.columns):
                    held[label] = max(int(count), held.get(label, 0))
        for line in str(frame.attrs.get("notes", "")).splitlines():  # what the reader could not provide
            self.note(line)
        for line in str(frame.attrs.get("range_notes", "")).splitlines():
            if line not in self._range_notes:
                self._range_notes.append(line)
        if isinstance(frame.attrs.get("meta"), str):  # metadata the reader found only while reading tables
            self.meta.complete(json.loads(frame.attrs["meta"]))
        return frame

    def dropped(self, table: str) -> int:
        """How many rows of ``table`` its reader left out for unusable values (0 before it loads)."""
        return self._dropped.get(table, 0)

    @property
    def warnings(self) -> list[str]:
        """One line per table whose reader left rows out for unusable values, with their count; one per
        table with values read as unknown, by column; then the readers' other notes."""
        dropped = [
            f"{count:,} {table} {'row' if count == 1 else 'rows'} of {self.name} {'was' if count == 1 else 'were'} "
            "left out: unusable values (end before start, negative or "
            "out-of-range numbers, or NULL, REAL or TEXT where integers belong)"
            for table, count in self._dropped.items()
        ]
        unknown = [
            f"{total:,} {table} {'value' if total == 1 else 'values'} of {self.name} {'is' if total == 1 else 'are'} "
            f"unusable and read as unknown ({', '.join(f'{column}: {count:,}' for column, count in sorted(counts.items()))}); "
            "their rows count in everything else"
            for table, counts in self._unknown.items()
            if (total := sum(counts.values()))
        ]
        found = (_COMMAND_NOTES.get() or {}).get(id(self), [])
        return dropped + unknown + self._notes + [note for note in found if note not in self._notes]

    @property
    def range_notes(self) -> list[str]:
        """What the reader says the ranges' names and domains mean (torch.profiler: which records are which
        domain): for the commands that list ranges or choose a domain, not for every command."""
        return list(self._range_notes)

    def _has_columns(self, table: str) -> bool:
        return f"{table}:columns" in self.loaders

    def columns(self, table: str, names: Collection[str]) -> pd.DataFrame:
        """``table`` with only the columns ``names`` (contract order): what a command declares it uses.

        A reader that can fetch columns separately (an nsys export; its cache) reads only these; others
        load the whole table once. Such a reader gives the same rows whatever the columns (only unusable
        times leave a row out; other unusable values read as unknown), so masks taken on a narrow read
        hold on a wider one. Asking later for more columns than the table holds reads them all again,
        together, so every column of the table comes from one read: a command says all it needs at once
        (``need``), which costs one read instead of two.
        """
        wanted = [name for name in SCHEMAS[table].names if name in set(names)]
        if table in self.__dict__ or not self._has_columns(table):  # the whole table (or no column reader)
            return getattr(self, table).loc[:, wanted]
        return self._partial_frame(table, tuple(wanted))

    def need(self, table: str, names: Collection[str]) -> None:
        """Say which columns of ``table`` the command will use, before it uses any: the first read
        fetches them all at once."""
        self._needed.setdefault(table, set()).update(names)

    def _partial_frame(self, table: str, wanted: tuple[str, ...]) -> pd.DataFrame:
        held = self._partial.get(table)
        if held is None or not set(wanted) <= set(held.columns):
            union = set(wanted) | self._needed.get(table, set()) | (set(held.columns) if held is not None else set())
            ordered = tuple(name for name in SCHEMAS[table].names if name in union)
            frame = self._load(table, self.loaders[f"{table}:columns"](ordered).loc[:, list(ordered)], partial=True)
            if held is not None and len(frame) != len(held):
                # Readers keep the same rows whatever the columns (only unusable times leave a row out),
                # so what was computed per row of the narrower table still lines up; a reader that broke
                # that would misalign every mask a command holds.
                raise InvalidTraceError(
                    f"{self.name}: reading more columns of {table} gave {len(frame):,} rows, not {len(held):,}; "
                    "the file changed while it was read"
                )
            self._partial[table] = held = frame
        if len(wanted) == len(SCHEMAS[table].names):
            self.__dict__[table] = held  # the whole table: later ``Trace.gpu_ops`` reads it as it is
        return held.loc[:, list(wanted)]

    @cached_property
    def gpu_ops(self) -> pd.DataFrame:
        """Kernels, memcpys and memsets (``schema.GPU_OPS``): select ``kind == "kernel"`` for kernels."""
        return self._load("gpu_ops")

    @cached_property
    def launches(self) -> pd.DataFrame:
        """Host API calls (``schema.LAUNCHES``)."""
        return self._load("launches")

    @cached_property
    def ranges(self) -> pd.DataFrame:
        """NVTX ranges (``schema.RANGES``)."""
        return self._load("ranges")

    def ranges_named(self, patterns: Collection[Pattern]) -> pd.DataFrame:
        """Only the ranges these patterns (of range specs) match, nested among themselves."""
        from tracekit.model.range_names import select_named

        patterns = set(patterns)
        if "ranges" not in self.__dict__ and "ranges_named" in self.loaders:
            return self._load("ranges", self.loaders["ranges_named"](patterns))
        return select_named(self.ranges, patterns)

    def load_together(
        self, tables: Collection[str], patterns: Collection[Pattern] | None = None
    ) -> pd.DataFrame | None:
        """Load several tables (and ``ranges_named(patterns)``) at once, on threads.

        Readers spend most of their time inside SQLite, which runs without the GIL, so reading the
        GPU ops, the API calls and the ranges side by side overlaps their Python parts. A table whose
        columns the command said it needs (``need``) loads only those. Returns the named ranges, or None
        without ``patterns``.
        """
        with ThreadPoolExecutor(max_workers=len(tables) + 1) as pool:
            # on the caller's session (a new thread would see the default one)
            loads = [pool.submit(in_this_context(self._load_needed), table) for table in tables]
            selection = pool.submit(in_this_context(self.ranges_named), patterns) if patterns is not None else None
            for load in loads:
                load.result()
            return selection.result() if selection is not None else None

    def load_behind(self, tables: Collection[str]) -> Callable[[], None]:
        """Start loading ``tables`` (the columns declared with ``need``) on a background thread, their reads
        queued behind every read the command waits on meanwhile (``reading.reading_later``): a command
        that loads one table, then works on it, has the others read on the idle core meanwhile. Returns a
        function that waits for them (raising what their loading raised); not called (the command gave
        up first), the thread finishes on its own and holds nothing up."""
        failure: list[BaseException] = []

        def load() -> None:
            try:
                with reading_later():
                    for table in tables:
                        self._load_needed(table)
            except BaseException as error:  # handed to whoever waits
                failure.append(error)

        thread = threading.Thread(target=in_this_context(load), name="tracekit-load-behind", daemon=True)
        thread.start()

        def wait() -> None:
            thread.join()
            if failure:
                raise failure[0]

        return wait

    def _load_needed(self, table: str) -> pd.DataFrame:
        needed = self._needed.get(table)
        if needed and table not in self.__dict__ and self._has_columns(table):
            return self.columns(table, needed)
        return getattr(self, table)

    def derived(self, key: Hashable, compute: Callable[[], T]) -> T:
        """Something analyses compute from the tables (the GPU-op-to-launch join, say), computed once
        per trace however many analyses of one command or report ask for it. The store behind
        ``model.derived.per_trace``, which keys it by the accessor and its inputs and freezes the value:
        an analysis declares an accessor there rather than calling this."""
        if key not in self._derived:
            kept = self.kept_values.load(key) if self.kept_values is not None else None
            if kept is not None:
                self._derived[key], self._derived_notes[key] = kept
            else:
                with command_notes() as found:  # what computing it found is said by every command that uses it
                    self._derived[key] = compute()
                self._derived_notes[key] = found.get(id(self), [])
                if self.kept_values is not None:
                    self.kept_values.store(key, self._derived[key], self._derived_notes[key])
        for note in self._derived_notes.get(key, ()):
            self.note_found(note)
        return self._derived[key]  # type: ignore[return-value]  # stored by this key's own compute

    def optional(self, table: str) -> pd.DataFrame | None:
        """A table only some readers provide (``schema.OPTIONAL_TABLES``: copies with their memory kinds,
        the profiler's own overhead), read once; None when this trace's reader has none."""
        if table not in self.loaders:
            return None
        declared = schema.OPTIONAL_TABLES[table]
        checked = lambda: frozen(declared.check(self.loaders[table](), self.meta.source))
        return handed_out(self.derived(("optional", table), checked))

    @property
    def name(self) -> str:
        return self.meta.source

    @classmethod
    def from_frames(
        cls,
        meta: TraceMeta,
        gpu_ops: pd.DataFrame | None = None,
        launches: pd.DataFrame | None = None,
        ranges: pd.DataFrame | None = None,
    ) -> Trace:
        """A trace over tables already in memory (tests, other readers); missing tables are empty."""
        given = {"gpu_ops": gpu_ops, "launches": launches, "ranges": ranges}
        loaders = {
            table: (lambda frame=frame, table=table: frame if frame is not None else SCHEMAS[table].empty())
            for table, frame in given.items()
        }
        return cls(meta, loaders)
