"""The Python API: one function per analysis command, with the command's name and its options as keyword
arguments, returning a ``Result`` of DataFrames with raw values (``tracekit/__init__.py`` exports them).

``core``   reading inputs, ``Result``, and the commands on what ran: kernels, ranges, breakdown, steps,
           ranks, compare, diff, memory, timeline
``waits``  why the GPU waits and what to fix first: launches, idle, overlap, syncs, queues, ops, sequences,
           bandwidth, critical_path, advise
"""

from tracekit.api.core import (
    Result,
    breakdown,
    compare,
    diff,
    kernels,
    memory,
    open_snapshot,
    open_trace,
    ranges,
    ranks,
    steps,
    timeline,
)
from tracekit.api.waits import (
    advise,
    bandwidth,
    critical_path,
    idle,
    launches,
    ops,
    overlap,
    queues,
    sequences,
    syncs,
)

__all__ = [
    "Result",
    "advise",
    "bandwidth",
    "breakdown",
    "compare",
    "critical_path",
    "diff",
    "idle",
    "kernels",
    "launches",
    "memory",
    "open_snapshot",
    "ops",
    "open_trace",
    "overlap",
    "queues",
    "ranges",
    "ranks",
    "sequences",
    "steps",
    "syncs",
    "timeline",
]
