"""A memory snapshot's allocated and reserved bytes on a trace's clock, for pictures that put memory
beside the trace's GPU work (the timeline file's counter track, report.html's memory lane)."""

from __future__ import annotations

import numpy as np

from tracekit.analysis.memory.replay import replay
from tracekit.model.memory import MemoryTrace
from tracekit.model.trace import TORCH_PROFILER, Trace


def memory_on_trace(snapshot: MemoryTrace, trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | str:
    """The snapshot's allocated and reserved bytes at each of its events, on the trace's clock: (times in
    ns, allocated, reserved, device), or why they cannot be placed (a string). Snapshots stamp events
    with the wall clock (µs since 1970); nsys anchors its time zero on it (the session's start), and
    torch.profiler traces are on it already (or anchored by baseTimeNanoseconds)."""
    memory = replay(snapshot)
    if not memory.has_time:
        return "the memory snapshot has no timestamps (torch 2.1 or older): no memory track"
    anchor = trace.meta.session_start_utc_ns
    if anchor is None and trace.meta.tool != TORCH_PROFILER:
        return "the trace does not say when it started on the wall clock: no memory track"
    timeline = memory.timeline.loc[memory.timeline["index"] >= 0]
    events = snapshot.events.loc[(snapshot.events["device"] == memory.device).to_numpy()]
    stamps = events["time_us"].to_numpy(dtype=np.float64)[timeline["index"].to_numpy()]
    # whole µs and the fraction apart: µs since 1970 times 1000 is past float64's exact integers
    whole = np.floor(stamps)
    times = whole.astype(np.int64) * 1000 + np.round((stamps - whole) * 1000).astype(np.int64) - (anchor or 0)
    if trace.gpu_ops.empty:
        return "the trace has no GPU work to place the memory track beside"
    first, last = int(trace.gpu_ops["start"].min()), int(trace.gpu_ops["end"].max())
    margin = 60 * 1_000_000_000  # a minute either side: a snapshot of another run is not this trace's memory
    if len(times) == 0 or times.max() < first - margin or times.min() > last + margin:
        return "the memory snapshot's times do not fall within the trace's: no memory track"
    return times, timeline["allocated"].to_numpy(), timeline["reserved"].to_numpy(), memory.device
