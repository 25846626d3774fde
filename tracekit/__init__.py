"""tracekit: where a PyTorch training step's GPU time and memory go, from Nsight Systems and
torch.profiler traces and CUDA memory snapshots.

The Python API: ``open_trace`` and ``open_snapshot`` read inputs; one function per analysis command
(``tracekit.api``'s ``__all__`` lists them; a command another installed package declares is one too)
takes a trace, a path or several paths and the command's options as keywords, and returns a ``Result``
of DataFrames with raw values; ``timeline`` writes traces as a file for Perfetto::

    import tracekit
    result = tracekit.kernels("trace.sqlite", top=5)
    result["kernels"]        # pandas, Total Time (ns) as integers

``Session`` holds what is process-wide (settings, reading threads, inputs protected from being
written over); ``current_session()`` is the one in use in this thread or asyncio task. The names in
``__all__`` are the stable surface.
Importing tracekit loads neither pandas nor the analyses: they load when a function runs.

The package, lowest layer first:
``errors``, ``files``, ``signals``, ``session``, ``version``  used by every layer (errors, whole writes, signals,
Session, the version recorded in run folders and reports)
``model``      the column contract: Trace, MemoryTrace, Result, range specs, option declarations
``sources``    readers: nsys exports and reports, torch.profiler traces, memory snapshots; the cache
``analysis``   the analyses, by question; each command declared once beside its analysis (``*_command``)
``commands``   the registry of those commands, run alike from the API, the CLI, the report and workers
``render``     Results as tables, files, pictures and HTML
``report``     Markdown reports built from the commands' Results
``api``        the Python API below, re-exported here
``trace_events``  timelines: traces as a Chrome trace-event file (Perfetto, chrome://tracing), as a stream
``mcp``        ``tracekit mcp``: the commands as tools for coding agents (Model Context Protocol), confined
``cli``        the ``tracekit`` command line (also ``python -m tracekit``: ``__main__``)
``runs``, ``capture``, ``nsys_tool``, ``annotate``, ``export``  run folders, capturing under a profiler,
the nsys executable, marks for a user's script, Parquet export
``run_config``, ``activation_formula``  the run vocabulary (models and their sizes, RunConfig, result
columns) and the activation memory formula, without torch: tracekit never imports ``workloads``
"""

from typing import TYPE_CHECKING

from tracekit import api as _api
from tracekit.api import *  # noqa: F403  (the API's functions: api.__all__ names them once)
from tracekit.errors import TracekitError, UsageError
from tracekit.model.options import OptionError
from tracekit.session import Session, Settings
from tracekit.session import current as current_session
from tracekit.version import __version__

__all__ = [
    "OptionError",
    "Session",
    "Settings",
    "TracekitError",
    "UsageError",
    "__version__",
    "current_session",
]
__all__ += _api.__all__

if not TYPE_CHECKING:  # (type checkers would otherwise take any name for a function of tracekit)

    def __getattr__(name: str):
        """``tracekit.<name>``: the function of a command another installed package declares."""
        return _api.__getattr__(name)
