"""HolisticTraceAnalysis on a folder of traces, each folder's files parsed once per process: the parity tests
of several modules load the same real traces (HTA's parse of one is up to 6 s), and each gets its own copy
of the parsed traces, so what one analysis adds to them is not seen by the next.

Keyed by what HTA's reading depends on: every file of the folder (its name, and the identity and
modification time of what it is or links to) and HTA_DISABLE_NS_ROUNDING, which its parser reads."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

_parsed: dict[tuple, Any] = {}


def hta_analysis(folder: str | os.PathLike) -> Any:
    """``TraceAnalysis(trace_dir=folder)``, its parsed traces a copy of the first parse of the same files."""
    # Any: the lint step runs before HTA (the parity extra) is installed, so its types are unknown there
    from hta.configs import env_options  # pyright: ignore[reportMissingImports]  (optional: parity extra)
    from hta.trace_analysis import TraceAnalysis  # pyright: ignore[reportMissingImports]
    from hta.utils.utils import normalize_path  # pyright: ignore[reportMissingImports]

    folder = Path(folder)
    files = []
    for path in sorted(folder.iterdir()):
        stat = path.stat()
        files.append((path.name, os.path.realpath(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    key = (tuple(files), env_options.disable_ns_rounding())
    if key not in _parsed:
        _parsed[key] = TraceAnalysis(trace_dir=str(folder)).t
    analysis = TraceAnalysis.__new__(TraceAnalysis)
    analysis.t = copy.deepcopy(_parsed[key])
    # the copy's files as this folder's, as a parse of this folder names them
    trace = analysis.t
    trace.trace_path = normalize_path(str(folder))
    trace.trace_files = {
        rank: os.path.join(trace.trace_path, Path(name).name) for rank, name in trace.trace_files.items()
    }
    return analysis
