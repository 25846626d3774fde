"""The roofline of each piece of GPU work: the least time its FLOPs and bytes need on the GPU it ran on.

For work of F FLOPs and B bytes in precision p on unit u of a GPU with dense peak P(p, u) FLOP/s and memory
bandwidth W bytes/s, the roofline time is max(F / P, B / W): compute-bound when F / P is the larger. The
share of the roofline a group reached is its summed roofline time over its summed GPU time (the same as
achieved FLOP/s over attainable FLOP/s for one kernel, and time-weighted for many). Work whose precision
has no matrix unit (elementwise, reductions, copies) is held against the CUDA cores' peak of its precision.
Where only one of F and B is known the roofline uses that one and says so; with neither, nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.hardware.gpu_peaks import load_peaks_file
from tracekit.analysis.primitives.device_gpus import DevicePeaks, device_peaks
from tracekit.model.derived import per_trace
from tracekit.model.trace import Trace

CUDA_CORES = "CUDA cores"


@per_trace
def trace_peaks(trace: Trace, peaks: str | None = None) -> DevicePeaks:
    """``device_peaks`` with a user's peaks file (``peaks``: its path) read first."""
    return device_peaks(trace, load_peaks_file(peaks) if peaks else None)


def roofline_times(work: pd.DataFrame, devices: DevicePeaks) -> tuple[np.ndarray, pd.Categorical, np.ndarray]:
    """Per row of ``work`` (columns device, precision, unit as categoricals, flops, bytes): the roofline time
    (s; NaN unknown), the bound ("compute", "memory"; missing where unknown) and, where the GPU has no peak for
    the row's precision and unit, why (objects; None). One peak lookup per distinct (device, precision, unit)."""
    precision, unit = work["precision"].cat, work["unit"].cat
    device = work["device"].to_numpy(np.int64)
    precision_code, unit_code = precision.codes.to_numpy(), unit.codes.to_numpy()
    key = (device * (len(precision.categories) + 1) + precision_code + 1) * (len(unit.categories) + 1) + unit_code + 1
    # keys are small (devices x precisions x units): a table indexed by key, no sort of a million rows
    size = int(key.max(initial=-1)) + 1
    first = np.full(size, -1, dtype=np.int64)
    first[key[::-1]] = np.arange(len(key) - 1, -1, -1)  # the first row of each key (last write wins)
    present = np.flatnonzero(first >= 0)
    rates = np.full(size, np.nan)
    widths = np.full(size, np.nan)
    missing = np.full(size, None, dtype=object)
    for index, row in zip(present.tolist(), first[present].tolist()):
        gpu = devices.peaks.get(int(device[row]))
        if gpu is None:
            continue
        widths[index] = gpu.memory_bandwidth
        wanted = precision_code[row], unit_code[row]
        name = str(precision.categories[wanted[0]]) if wanted[0] >= 0 else None
        on = str(unit.categories[wanted[1]]) if wanted[1] >= 0 else None
        if name:  # a matrix kernel: its own precision's peak, or no roofline (not another unit's, far lower)
            rate = gpu.peak(name, on)
            if rate is None:
                missing[index] = f"no {name} {on or ''} peak known for the {gpu.key}".replace("  ", " ")
                widths[index] = np.nan
        else:  # work of no matrix unit: the CUDA cores' FP32 rate (its bound is memory anyway)
            rate = gpu.peak("FP32", CUDA_CORES)
        rates[index] = rate if rate is not None else np.nan
    peak, bandwidth = rates[key], widths[key]
    flops, moved = work["flops"].to_numpy(float), work["bytes"].to_numpy(float)
    compute = flops / peak
    memory = moved / bandwidth
    # unknown bytes leave only a matrix kernel's roofline known (its compute; a GEMM's bytes rarely bound it):
    # an elementwise op's FLOPs alone would call it compute-bound at a few percent, when memory bounds it
    compute[np.isnan(moved) & ((flops == 0) | (precision_code < 0))] = np.nan
    roofline = np.fmax(compute, memory)  # NaN only when both are
    bound_code = np.where(
        np.isnan(roofline), -1, np.where(np.nan_to_num(compute, nan=-1.0) >= np.nan_to_num(memory, nan=-1.0), 0, 1)
    )
    return roofline, pd.Categorical.from_codes(bound_code, categories=["compute", "memory"]), missing[key]
