"""What reading a trace as HolisticTraceAnalysis 0.5 does reads the same here: its rounding of times, its
names of the calls that queue work on a stream.

``hta_rounded``: times rounded as HTA 0.5 reads them (each event shrunk inward to whole µs of its
float64 timestamp: start ceil(ts), end floor(ts + dur); a sub-µs event can end up with a duration of 0
or -1 µs), so a result can be compared with HTA's exactly. (Its step window: ``step_window``.)
"""

from __future__ import annotations

import re

import numpy as np

API_VERSION = re.compile(r"_v\d+$")  # nsys names runtime calls with their version: cudaLaunchKernel_v7000
# The calls whose ops join a stream's launch queue (HTA's list, as its queue length counts them).
QUEUED_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "runFunction - job_prep_and_submit_for_execution",
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipMemcpyAsync",
        "hipMemsetAsync",
        "hipMemcpyWithStream",
    }
)


def hta_rounded(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) in ns as HTA 0.5 reads a torch.profiler trace: ts and dur parsed as float64 µs, then
    start = ceil(ts), end = floor(ts + dur) in whole µs. ``start``/``end`` are exact ns on the trace's
    clock (absolute µs ~1.7e15: float64 holds them to 0.25 µs, so the rounding depends on the clock)."""
    whole, rest = np.divmod(start, 1000)
    ts = whole.astype(np.float64) + rest / 1000.0  # the float64 nearest the decimal µs, as a JSON parser reads it
    duration = (end - start) / 1000.0
    return np.ceil(ts).astype(np.int64) * 1000, np.floor(ts + duration).astype(np.int64) * 1000
