"""What moving FP32 GEMMs from the CUDA cores to the tensor cores can give back, bounded by the roofline.

On the new unit a GEMM of F FLOPs and B bytes needs at least max(F / P_new, B / W) (``efficiency``'s
roofline): what it can give back is its time less that, never more. Where the trace records the GEMMs'
shapes this bound is per kernel; where it does not, half their time is the estimate (said so). The new unit is TF32
on compute capability 8.0 and later (``set_float32_matmul_precision('high')``), FP16 on 7.x (autocast).
On a GPU tracekit has no peaks for, half their time is the estimate, as before these were measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analysis.efficiency.roofline import trace_peaks
from tracekit.analysis.efficiency.work import gpu_work
from tracekit.model.trace import Trace

UNKNOWN_GPU_SHARE = 0.5  # of their time, where the GPU's peaks are unknown: the estimate before peaks
# of their time, where their FLOPs are unknown: reviewers kept it on real traces; the peak ratio (8x on a V100)
# would promise what small convolution GEMMs do not give
UNKNOWN_SHAPES_SHARE = 0.5


@dataclass(frozen=True)
class Recoverable:
    """Nanoseconds the GEMMs can give back, how that was bounded (one sentence), and the share of the FP32
    peak they reached where their FLOPs are known (None)."""

    ns: int
    how: str
    reached: float | None


def fp32_gemm_recoverable(trace: Trace, rows: np.ndarray, capability: float | None) -> Recoverable:
    """For the GEMM kernels at ``rows`` (a mask over ``gpu_ops``) running FP32 on the CUDA cores."""
    work = gpu_work(trace)
    devices = trace_peaks(trace)
    target = "TF32" if capability is None or capability >= 8.0 else "FP16"
    duration = work["duration"].to_numpy().astype(float)
    flops, moved = work["flops"].to_numpy(), work["bytes"].to_numpy()
    device = work["device"].to_numpy()
    total = float(duration[rows].sum())
    saved = 0.0
    needed_ns = 0.0
    rates = ""
    counted_ns = 0.0
    counted_flops = 0.0
    fp32_rates = []
    estimated = unknown = False
    for index in np.unique(device[rows]).tolist():
        mine = rows & (device == index)
        gpu = devices.peaks.get(int(index))
        new = gpu.peak(target, "tensor cores") if gpu else None
        old = gpu.peak("FP32", "CUDA cores") if gpu else None
        if gpu is None or new is None or old is None:
            saved += UNKNOWN_GPU_SHARE * duration[mine].sum()
            unknown = True
            continue
        known = mine & ~np.isnan(flops)
        need = np.fmax(flops[known] / new, np.nan_to_num(moved[known] / gpu.memory_bandwidth)) * 1e9
        saved += np.clip(duration[known] - need, 0, None).sum()
        needed_ns += np.minimum(need, duration[known]).sum()
        rates = f" ({new / 1e12:g} TFLOP/s; FP32 on the CUDA cores: {old / 1e12:g})"
        counted_ns += duration[known].sum()
        counted_flops += flops[known].sum()
        fp32_rates.append(old)
        guessed = mine & np.isnan(flops)
        if guessed.any():
            saved += duration[guessed].sum() * UNKNOWN_SHAPES_SHARE
            estimated = True
    reached = counted_flops / (counted_ns * 1e-9) / max(fp32_rates) if counted_ns and fp32_rates else None
    parts = []
    if counted_ns:
        parts.append(
            f"the roofline: at the {target} tensor cores' dense peak{rates} their FLOPs and bytes need at least "
            f"{needed_ns / 1e6:,.3f} ms of the {counted_ns / 1e6:,.3f} ms they took"
        )
    if estimated:
        parts.append(
            "half the time of kernels whose shapes are not recorded (an estimate; record shapes for the roofline's "
            "bound)"
        )
    if unknown:
        parts.append("half the time of kernels on a GPU without known peaks (an estimate)")
    how = "bound by " + "; ".join(parts) if counted_ns else "estimate: " + "; ".join(parts)
    return Recoverable(int(round(min(saved, total))), how, reached)
