"""Which GPU each device of a trace is (``hardware.gpu_peaks``' table, a user's entries first): its peaks,
link and limits, or why unknown. Shared by the questions that hold work against the hardware
(efficiency's roofline, collectives' links)."""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.analysis.hardware.gpu_peaks import GpuPeaks, match_gpu
from tracekit.model.trace import Trace


@dataclass(frozen=True)
class DevicePeaks:
    """Per device of a trace: its GPU's peaks (None: unknown GPU) and why unknown."""

    peaks: dict[int, GpuPeaks | None]
    unknown: dict[int, str]


def device_peaks(trace: Trace, user: list[GpuPeaks] | None = None) -> DevicePeaks:
    """The peaks of each GPU the trace describes (after its GPU ops loaded: a trace may describe its GPUs
    after its events)."""
    trace.gpu_ops  # noqa: B018  (completes the metadata)
    peaks: dict[int, GpuPeaks | None] = {}
    unknown: dict[int, str] = {}
    for gpu in trace.meta.gpus.to_dict("records"):
        found = match_gpu(
            gpu.get("name"), gpu.get("sm_count"), gpu.get("memory_bytes"), gpu.get("compute_capability"), user
        )
        peaks[int(gpu["id"])] = found
        if found is None:
            name = gpu.get("name")
            unknown[int(gpu["id"])] = (
                f"unknown GPU {name!r} (give its peaks with a peaks file)"
                if isinstance(name, str)
                else f"the trace records no name for GPU {int(gpu['id'])}: its peaks are unknown"
            )
    return DevicePeaks(peaks, unknown)
