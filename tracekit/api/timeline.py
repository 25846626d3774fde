"""``timeline``: traces written as one Perfetto protobuf or Chrome trace-event file (Perfetto UI, chrome://tracing,
TensorBoard).

Nothing heavy is imported until it runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracekit.api.reading import Sources


def timeline(
    traces: Sources,
    output: str | os.PathLike | None = None,
    *,
    start_ms: float | None = None,
    end_ms: float | None = None,
    step: int | None = None,
    range: str | None = None,
    instance: int = 0,
    memory: str | os.PathLike | None = None,
    sequences: int = 0,
) -> Path:
    """Write ``traces`` as one Perfetto protobuf file (``.pftrace``) or Chrome trace-event file
    (``.json``/``.json.gz``), as ``output``'s suffix says, for Perfetto UI, chrome://tracing and TensorBoard
    (None: the first trace's name in the current folder, ``.pftrace`` above 100,000 GPU ops, else
    ``.json.gz``; never over an existing file): GPU ops per stream, idle gaps by cause, ranges and API calls per thread, launch arrows,
    steps, counters of each stream's launch queue and each GPU's copy bandwidth; ranks each a process group. A window: ``start_ms``/``end_ms`` from the first event, the
    ``step``-th step (from 1), or instance ``instance`` (from 0) of ``range``. ``memory``: a snapshot drawn
    as allocated and reserved MiB. ``sequences``: a track per GPU for each of that many kernel sequences seen
    most often (``sequences``'s windows of 3 kernels). Returns the file written, whole or not at all.

    Examples:
        >>> tracekit.timeline("trace.sqlite", "trace.json.gz", step=2)
    """
    from tracekit.trace_events.window import WindowOptions
    from tracekit.trace_events.writer import timeline as write

    options = WindowOptions(
        start_ms=start_ms, end_ms=end_ms, step=step, range=range, instance=instance, sequences=sequences
    )
    items = [traces] if isinstance(traces, (str, os.PathLike)) or not isinstance(traces, Sequence) else list(traces)
    return write(items, output, options, memory).path
