"""Readers: whatever the user points at (export, report, run folder) becomes a ``Trace``."""

from __future__ import annotations

from pathlib import Path

from tracekit import nsys_cli
from tracekit.errors import InputNotFoundError, NotAnExportError
from tracekit.trace import Trace

RUN_TRACE_FILES = ("trace.sqlite", "trace.nsys-rep")
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


def resolve_trace_file(path: str | Path) -> Path:
    """The export or report behind a path: a file as given, or the trace of a run folder."""
    path = Path(path)
    if not path.exists():
        raise InputNotFoundError(f"{path}: no such file or folder")
    if path.is_dir():
        for name in RUN_TRACE_FILES:
            if (path / name).is_file():
                return path / name
        raise InputNotFoundError(
            f"{path} is a folder without trace.sqlite or trace.nsys-rep: not a tracekit run folder"
        )
    return path


def open_trace(path: str | Path, nsys: str | None = None) -> Trace:
    """Open an nsys SQLite export, an .nsys-rep (exported on the fly with nsys, export kept), or a run folder."""
    from tracekit.sources.nsys import read_nsys_export  # keeps `tracekit --help` free of pandas

    file = resolve_trace_file(path)
    if file.suffix == ".qdstrm":
        raise NotAnExportError(
            f"{file} is a raw capture stream, not a report: import it with QdstrmImporter "
            "(`tracekit capture` does this for you) and export the .nsys-rep"
        )
    if file.suffix in REPORT_SUFFIXES or nsys_cli.is_report(file):
        file = nsys_cli.export_sqlite(file, nsys)
    return read_nsys_export(file)
