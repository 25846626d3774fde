"""The roofline of each piece of GPU work: the least time its FLOPs and bytes need on the GPU it ran on.

For work of F FLOPs and B bytes in precision p on unit u of a GPU with dense peak P(p, u) FLOP/s and memory
bandwidth W bytes/s, the roofline time is max(F / P, B / W): compute-bound when F / P is the larger. The
share of the roofline a group reached is its summed roofline time over its summed GPU time (the same as
achieved FLOP/s over attainable FLOP/s for one kernel, and time-weighted for many). Work whose precision
has no matrix unit (elementwise, reductions, copies) is held against the CUDA cores' peak of its precision.
Where only one of F and B is known the roofline uses that one and says so; with neither, nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.hardware.gpu_peaks import GpuPeaks, match_gpu
from tracekit.analysis.hardware.occupancy import device_limits, theoretical_occupancy
from tracekit.model.trace import Trace

CUDA_CORES = "CUDA cores"


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
            unknown[int(gpu["id"])] = f"unknown GPU {gpu.get('name')!r} (give its peaks with a peaks file)"
    return DevicePeaks(peaks, unknown)


def roofline_times(work: pd.DataFrame, devices: DevicePeaks) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``work`` (columns device, precision, unit, flops, bytes): the roofline time (s; NaN
    unknown), the bound ("compute", "memory", or "" unknown), the peak FLOP/s held against (NaN) and the
    memory bandwidth (bytes/s; NaN)."""
    count = len(work)
    peak = np.full(count, np.nan)
    bandwidth = np.full(count, np.nan)
    keys = work[["device", "precision", "unit"]].astype(object).where(work[["device", "precision", "unit"]].notna())
    distinct = keys.drop_duplicates()
    for device, precision, unit in distinct.itertuples(index=False):
        gpu = devices.peaks.get(int(device)) if not pd.isna(device) else None
        if gpu is None:
            continue
        mine = (keys["device"] == device).to_numpy() & _same(keys["precision"], precision) & _same(keys["unit"], unit)
        bandwidth[mine] = gpu.memory_bandwidth
        precision = precision if isinstance(precision, str) else None
        unit = unit if isinstance(unit, str) else None
        rate = gpu.peak(precision, unit) if precision else None
        if rate is None and precision and unit != CUDA_CORES:
            rate = gpu.peak(precision, CUDA_CORES)
        if rate is None:
            rate = gpu.peak("FP32", CUDA_CORES)
        peak[mine] = rate if rate is not None else np.nan
    flops, moved = work["flops"].to_numpy(float), work["bytes"].to_numpy(float)
    compute = flops / peak
    memory = moved / bandwidth
    # no FLOPs and unknown bytes (a cat of unrecorded dtypes): nothing is known of its roofline
    compute[(flops == 0) & np.isnan(moved)] = np.nan
    roofline = np.fmax(compute, memory)  # NaN only when both are
    bound = np.where(
        np.isnan(roofline),
        "",
        np.where(np.nan_to_num(compute, nan=-1.0) >= np.nan_to_num(memory, nan=-1.0), "compute", "memory"),
    )
    return roofline, bound.astype(object), peak, bandwidth


def _same(column: pd.Series, value) -> np.ndarray:
    return column.isna().to_numpy() if pd.isna(value) else (column == value).to_numpy()


def kernel_occupancy(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Theoretical occupancy (0-1; NaN unknown) of the GPU ops at ``rows``, per device's limits."""
    ops = trace.gpu_ops
    result = np.full(len(rows), np.nan)
    gpus = {int(gpu["id"]): gpu for gpu in trace.meta.gpus.to_dict("records")}
    device = ops["device"].to_numpy()[rows]
    for index in np.unique(device).tolist():
        limits, _ = device_limits(gpus.get(index, {}))
        if limits is None:
            continue
        mine = device == index
        picked = rows[mine]
        block = np.prod([ops[f"block_{dim}"].to_numpy(np.int64)[picked] for dim in "xyz"], axis=0)
        result[mine] = theoretical_occupancy(
            limits,
            ops["registers_per_thread"].to_numpy()[picked],
            ops["shared_memory"].to_numpy()[picked],
            block,
        )
    return result
