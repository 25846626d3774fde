"""The traces under the server's roots, and what each is: an nsys SQLite export or report, a torch.profiler
trace, a CUDA memory snapshot, a run folder. Told by content (``sources.input_kind``: a file's first bytes),
not by name; a walk that stays under the roots (a link leading out is left out), skips hidden folders
and tracekit's caches, and stops after ``limit`` entries, saying so.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from tracekit.mcp.confine import Confinement, ConfinementError, resolved
from tracekit.sources import RUN_KIND, input_kind
from tracekit.sources.cache import SUFFIX as CACHE_SUFFIX
from tracekit.sources.input_paths import TRACE_SUFFIXES

KINDS = {
    "nsys-sqlite": "nsys SQLite export",
    "nsys-report": "Nsight Systems report (exported to SQLite on first read)",
    "kineto": "torch.profiler trace",
    "snapshot": "CUDA memory snapshot",
    RUN_KIND: "tracekit run folder",
}
CANDIDATE_SUFFIXES = (*TRACE_SUFFIXES, ".pickle", ".pickle.gz", ".pkl")
KINETO_MARK = b'"traceEvents"'
KINETO_PEEK = 2**20  # a torch.profiler trace names its events within its first MiB (its header is short)


def list_traces(confinement: Confinement, under: str | None = None, limit: int = 500) -> dict:
    """The traces and run folders under ``under`` (default: every root), each with its kind and size:
    ``{"traces": [{"path", "kind", "what", "bytes"}], "notes": [...]}``."""
    starts = [confinement.readable(under)] if under else list(confinement.roots)
    found: list[dict] = []
    notes: list[str] = []
    for start in starts:
        if not start.is_dir():
            raise ConfinementError(f"{under} is not a folder")
        for folder, names, files in os.walk(start):
            names[:] = sorted(name for name in names if not name.startswith(".") and not name.endswith(CACHE_SUFFIX))
            here = Path(folder)
            if here != start and _entry(confinement, here, found):
                names[:] = []  # a run folder's files are the run's
                continue
            for name in sorted(files):
                if name.endswith(CANDIDATE_SUFFIXES):
                    _entry(confinement, here / name, found)
            if len(found) >= limit:
                notes.append(f"the first {limit} traces listed; give a folder (under) to list one part")
                return {"traces": found[:limit], "notes": notes}
    return {"traces": found, "notes": notes}


def _entry(confinement: Confinement, path: Path, found: list[dict]) -> bool:
    """Add ``path`` to ``found`` when it is a trace, snapshot or run under the roots; whether it was."""
    real = resolved(path)
    if not any(real == root or root in real.parents for root in confinement.roots):
        return False
    try:
        kind = input_kind(real)
    except OSError:
        return False
    if kind is None or (kind == "kineto" and not _names_events(real)):
        return False
    size = (
        sum(entry.stat().st_size for entry in real.iterdir() if entry.is_file())
        if real.is_dir()
        else real.stat().st_size
    )
    found.append({"path": str(path), "kind": kind, "what": KINDS.get(kind, kind), "bytes": size})
    return True


def _names_events(path: Path) -> bool:
    """Whether a JSON file's first MiB names ``traceEvents`` (other JSON files are not traces)."""
    try:
        with open(path, "rb") as head:
            compressed = head.read(2) == b"\x1f\x8b"
        with gzip.open(path, "rb") if compressed else open(path, "rb") as stream:
            return KINETO_MARK in stream.read(KINETO_PEEK)
    except (OSError, EOFError, zlib.error):
        return False
