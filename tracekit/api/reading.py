"""Reading inputs for the Python API: ``open_trace``, ``open_snapshot``, and the types the API's functions
take (a path, an open trace, or several).

Nothing heavy is imported until a function runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeAlias

    from tracekit.model.memory import MemoryTrace
    from tracekit.model.trace import Trace

    Source: TypeAlias = str | os.PathLike | Trace  # a path, or a trace already open
    Sources: TypeAlias = Source | Sequence[Source]  # one, or several to merge
    SnapshotSource: TypeAlias = str | os.PathLike | MemoryTrace
    SnapshotSources: TypeAlias = SnapshotSource | Sequence[SnapshotSource]  # one, or two to compare
    Specs: TypeAlias = str | Sequence[str]  # range specs: "forward,backward" or ["forward", "backward"]


def open_trace(path: str | os.PathLike, nsys: str | None = None) -> Trace:
    """The trace at ``path``: an nsys SQLite export, an Nsight Systems report (exported with ``nsys``, the
    executable given or found, the export kept beside it), a torch.profiler trace (.json, .json.gz) or a
    tracekit run folder. Its tables (``gpu_ops``, ``launches``, ``ranges``) load when first used.

    Examples:
        >>> trace = tracekit.open_trace("trace.sqlite")
        >>> trace.gpu_ops.groupby("device")["duration"].sum()   # ns of GPU work per device
    """
    from tracekit.sources import open_trace as open_any

    return open_any(os.fspath(path), nsys)  # this call's nsys: the session's settings stay as they were


def open_snapshot(path: str | os.PathLike) -> MemoryTrace:
    """The CUDA memory snapshot at ``path`` (``torch.cuda.memory._dump_snapshot``'s pickle, read without
    executing anything from it) or a run folder's: its ``events``, ``segments`` and ``frames`` tables.

    Examples:
        >>> snapshot = tracekit.open_snapshot("memory.pickle")
        >>> snapshot.events["action"].value_counts()
    """
    from tracekit.sources import open_snapshot as open_any

    return open_any(os.fspath(path))
