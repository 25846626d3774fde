"""tracekit: where a PyTorch training step's GPU time and memory go, from Nsight Systems and
torch.profiler traces and CUDA memory snapshots.

The Python API: ``open_trace`` and ``open_snapshot`` read inputs; one function per analysis command
(``kernels``, ``ranges``, ``breakdown``, ``steps``, ``launches``, ``idle``, ``overlap``, ``syncs``,
``ranks``, ``compare``, ``diff``, ``memory``) takes a trace, a path or several paths and the
command's options as keywords, and returns a ``Result`` of DataFrames with raw values::

    import tracekit
    result = tracekit.kernels("trace.sqlite", top=5)
    result["kernels"]        # pandas, Total Time (ns) as integers

``Session`` holds what is process-wide (settings, reading threads, inputs protected from being
written over); ``session()`` is the one in use. The names in ``__all__`` are the stable surface.
Importing tracekit loads neither pandas nor the analyses: they load when a function runs.
"""

from tracekit.api import (
    Result,
    breakdown,
    compare,
    diff,
    idle,
    kernels,
    launches,
    memory,
    open_snapshot,
    open_trace,
    overlap,
    ranges,
    ranks,
    steps,
    syncs,
)
from tracekit.errors import TracekitError, UsageError
from tracekit.model.options import OptionError
from tracekit.session import Session, Settings
from tracekit.session import current as session

__version__ = "0.1.0"

__all__ = [
    "OptionError",
    "Result",
    "Session",
    "Settings",
    "TracekitError",
    "UsageError",
    "__version__",
    "breakdown",
    "compare",
    "diff",
    "idle",
    "kernels",
    "launches",
    "memory",
    "open_snapshot",
    "open_trace",
    "overlap",
    "ranges",
    "ranks",
    "session",
    "steps",
    "syncs",
]
