"""The registry of readers: whatever a user points at becomes a ``Trace`` or a ``MemoryTrace``.

``open_trace(path)`` chooses a reader by the file's content (its first bytes), not its name: an nsys
SQLite export, an Nsight Systems report (exported with nsys on first use, the export kept beside
it), a torch.profiler (Kineto) JSON trace, plain or gzip, or a tracekit run folder (its export or
report). Large exports are cached (``cache``): the
cache is the registry's, so every reader gets it. ``open_snapshot(path)`` reads a CUDA memory
snapshot or a run folder's. Anything else gets one line saying what it looks like and what is read.

``nsys/``      Nsight Systems SQLite exports (and reports, exported with nsys)
``kineto/``    torch.profiler (Kineto) JSON traces
``snapshot/``  CUDA memory snapshots
``cache``      column files of a large export's tables, valid while the export is unchanged
``derived_cache`` what analyses derive from those tables (launch join, categories, idle gaps), kept beside them
``short_names`` the short_name column from the name column, the same for every reader
``input_paths`` which files the inputs are: paths, globs and folders expanded; labels, ranks in names
``distinct``    inputs given twice (one file spelled or linked two ways, one trace) read once, and said
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import InputNotFoundError, NotAnExportError, SnapshotError
from tracekit.files import not_a_file, protect, require_file_or_folder
from tracekit.nsys_tool import REPORT_MAGIC
from tracekit.runs import Run

if TYPE_CHECKING:
    from tracekit.model.memory import MemoryTrace
    from tracekit.model.trace import Trace

SQLITE_MAGIC = b"SQLite format 3\x00"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
PICKLE_PROTOCOL_2_PLUS = b"\x80"
GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 64
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Reader:
    """One kind of input: how to recognise it from its first bytes, and how to open it."""

    kind: str
    describes: str
    sniff: Callable[[Path, bytes], bool]
    open: Callable[[Path, str | None], Trace]


def _open_nsys_sqlite(path: Path, nsys: str | None) -> Trace:
    from tracekit.sources.nsys.export import read_nsys_export

    return read_nsys_export(path)


def _open_nsys_report(path: Path, nsys: str | None) -> Trace:
    from tracekit import nsys_tool

    return _open_nsys_sqlite(nsys_tool.export_sqlite(path, nsys), nsys)


def _open_kineto(path: Path, nsys: str | None) -> Trace:
    from tracekit.sources.kineto.reader import read_kineto_trace

    return read_kineto_trace(path)


TRACE_READERS = [
    Reader("nsys-sqlite", "an nsys SQLite export (.sqlite)", lambda path, head: head.startswith(SQLITE_MAGIC),
           _open_nsys_sqlite),
    # A report is known by its first bytes; one named .nsys-rep without them goes to nsys too, whose
    # verdict on a damaged or foreign file is the most useful one.
    Reader("nsys-report", "an Nsight Systems report (.nsys-rep)",
           lambda path, head: head.startswith(REPORT_MAGIC) or path.suffix in REPORT_SUFFIXES, _open_nsys_report),
    # JSON, or gzip (whose content the reader checks: gzip of anything else gets its own one line) but a
    # compressed pickle (a memory snapshot kept as .pickle.gz).
    Reader("kineto", "a torch.profiler trace (.json, .json.gz)",
           lambda path, head: _is_json(head) and not _is_pickle(_content_head(path, head)), _open_kineto),
]  # fmt: skip
ACCEPTED = ", ".join(reader.describes for reader in TRACE_READERS) + " or a tracekit run folder"


def _head(path: Path) -> bytes:
    """The first bytes of ``path`` (a UTF-8 byte order mark left out: some tools write one before JSON),
    once it is known to be a regular file: opening a FIFO would wait for a writer forever."""
    require_file_or_folder(path)
    with open(path, "rb") as handle:
        return handle.read(HEAD_BYTES).removeprefix(UTF8_BOM)


def trace_file(path: str | Path) -> Path:
    """The file behind a trace argument: the file itself, or a run folder's export (else its report)."""
    path = require_file_or_folder(path)
    run = Run.at(path)
    if run is None:
        return path
    try:
        return run.require_trace()
    except InputNotFoundError as error:
        raise InputNotFoundError(f"{error}; tracekit reads {ACCEPTED}") from None


def open_trace(path: str | Path, nsys: str | None = None) -> Trace:
    """The trace at ``path`` (see the module docstring); ``nsys`` is the executable that exports reports."""
    from tracekit.sources.cache import cached_trace

    file = trace_file(path)
    protect(file)
    head = _head(file)
    for reader in TRACE_READERS:
        if reader.sniff(file, head):
            trace = reader.open(file, nsys)
            protect(trace.meta.source)  # a report's export too
            return cached_trace(trace, Path(trace.meta.source))
    what = _looks_like(file, head)
    if what in (NOT_SQLITE, EMPTY):
        what += " (export a report with `nsys export --type sqlite REPORT.nsys-rep`)"
    raise NotAnExportError(f"{file} {what}; tracekit reads {ACCEPTED}")


NOT_SQLITE, EMPTY = "is not an SQLite database", "is an empty file"


def _looks_like(file: Path, head: bytes) -> str:
    """What an input that is not a trace seems to be, so the error says what to do with it."""
    if file.suffix == ".qdstrm":
        return (
            "is a raw nsys capture stream, not a report: import it with QdstrmImporter "
            "(`tracekit capture` does this for you), then export the .nsys-rep"
        )
    if _is_pickle(_content_head(file, head)):
        return "is a pickle (a memory snapshot? read it with `tracekit memory`), not a trace"
    if head and file.name.lower().endswith((".json", ".json.gz")):  # JSON that is no trace: null, a number
        return 'is not a torch.profiler (Chrome) trace: its JSON is not an object with "traceEvents"'
    return EMPTY if not head else NOT_SQLITE


def _is_json(head: bytes) -> bool:
    return head.startswith(GZIP_MAGIC) or head.lstrip()[:1] in (b"{", b"[")


def _is_pickle(head: bytes) -> bool:
    return head.startswith(PICKLE_PROTOCOL_2_PLUS)


def _content_head(path: Path, head: bytes) -> bytes:
    """The first bytes of what ``path`` holds: ``head`` itself, or for a gzip file the first bytes it
    decompresses to (b"" where it does not decompress: its reader says why)."""
    if not head.startswith(GZIP_MAGIC):
        return head
    try:
        with gzip.open(path, "rb") as stream:
            return stream.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return b""


def open_snapshot(path: str | Path) -> MemoryTrace:
    """A ``torch.cuda.memory._dump_snapshot`` pickle (plain or gzip-compressed, told by its content), or a
    run folder's memory.pickle, read without executing anything from it."""
    from tracekit.sources.snapshot.reader import load_snapshot

    path = require_file_or_folder(path)
    run = Run.at(path)
    file = run.require_snapshot() if run is not None else path
    protect(file)
    head = _head(file)
    if head.startswith(GZIP_MAGIC) and not _is_json(_content_head(file, head)):
        return load_snapshot(file)  # compressed, and not a trace: the reader says if it is no snapshot either
    trace_reader = next((reader for reader in TRACE_READERS if reader.sniff(file, head)), None)
    if trace_reader is not None:
        raise SnapshotError(
            f"{file} looks like {trace_reader.describes}, not a memory snapshot: `tracekit kernels` "
            "and `tracekit ranges` read it"
        )
    if not head:
        raise SnapshotError(
            f"{file} {_looks_like(file, head)}; a memory snapshot is the pickle that "
            "torch.cuda.memory._dump_snapshot() writes"
        )
    return load_snapshot(file)


def is_snapshot_file(path: str | Path) -> bool:
    """Whether ``path`` is a file holding a pickle (plain or gzip-compressed): a memory snapshot, not a
    trace (the snapshot's reader says whether it really is one). False for folders and missing paths."""
    file = Path(path)
    if not file.is_file():
        return False
    return _is_pickle(_content_head(file, _head(file)))


# What ``input_kind`` calls each kind of input: a reader's kind, or one of these.
SNAPSHOT_KIND, RUN_KIND = "snapshot", "run"


def input_kind(path: str | Path) -> str | None:
    """What ``path`` holds, told by content as ``open_trace`` and ``open_snapshot`` tell it: a reader's kind
    ("nsys-sqlite", "nsys-report", "kineto"), "snapshot", "run" (a run folder), or None for anything else
    (a folder that is no run, a FIFO, a file of none of these kinds). Reads at most a file's first bytes."""
    path = Path(path)
    if path.is_dir():
        return RUN_KIND if Run(path).is_run else None
    if not_a_file(path) is not None:
        return None
    head = _head(path)
    if _is_pickle(_content_head(path, head)):
        return SNAPSHOT_KIND
    return next((reader.kind for reader in TRACE_READERS if reader.sniff(path, head)), None)


def run_snapshot(path: str | Path) -> MemoryTrace | None:
    """The memory snapshot of a run folder, or None when ``path`` is not a run with one."""
    run = Run.at(path)
    return open_snapshot(run.folder) if run is not None and run.snapshot is not None else None


def run_snapshots(paths: list[str | Path]) -> tuple[list[MemoryTrace] | None, list[str]]:
    """The snapshots of run folders when every one has a readable one (else None), and a note for each
    snapshot that could not be read: a damaged snapshot loses its comparison, not the command."""
    snapshots, notes = [], []
    for path in paths:
        try:
            snapshot = run_snapshot(path)
        except SnapshotError as error:
            notes.append(f"no memory comparison: {error}")
            snapshot = None
        snapshots.append(snapshot)
    return (snapshots if all(snapshot is not None for snapshot in snapshots) else None), notes
