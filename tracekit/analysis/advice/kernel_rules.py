"""Findings about the kernels themselves:

- fp32 matmul: GEMM and convolution kernels running in FP32 on the CUDA cores, as the efficiency analysis
  reads kernel names (``primitives.kernel_hardware``: cuBLAS sgemm, xmma ffma GEMMs, cuDNN's implicit
  GEMM, dgrad, wgrad, Winograd, FFT and scudnn kernels, CUTLASS SIMT) on a GPU whose tensor cores would run
  them in TF32 (compute capability 8.0 and
  later) or FP16/BF16 (7.0 and later). Recoverable: bounded by the roofline on the tensor cores
  (``precision_bound``: exact where shapes are recorded, else the peak ratio; half their time on a GPU
  without known peaks);
- unfused optimizer: the optimizer phase (``phases``: found by name) launching ``MANY_OPTIMIZER_KERNELS``
  or more kernels per step, of median under ``SHORT_OPTIMIZER_KERNEL_NS``, none of them fused: a
  per-parameter loop where a fused or foreach optimizer runs the same math in a few launches.
  Recoverable: the GPU's idle time in the gaps before those kernels, on the GPU with most of it (these
  gaps then count in no idle finding): an estimate (a fused step also saves the kernels' own fixed costs);
- exposed communication (``communication_rules``).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.advice.communication_rules import exposed_communication
from tracekit.analysis.advice.finding import Finding, evidence, ms, worst
from tracekit.analysis.advice.precision_bound import fp32_gemm_recoverable
from tracekit.analysis.primitives.kernel_hardware import kernel_hardware
from tracekit.model.schema import compute_capability
from tracekit.model.trace import Trace

MANY_OPTIMIZER_KERNELS = 50  # per optimizer step
SHORT_OPTIMIZER_KERNEL_NS = 50_000
EVIDENCE_ROWS = 5


def kernel_findings(trace: Trace, origin: int) -> list[Finding]:
    """The kernel findings of ``trace`` (evidence times from ``origin``)."""
    found = []
    precision = _fp32_matmul(trace, origin)
    if precision is not None:
        found.append(precision)
    exposed = exposed_communication(trace, origin)
    if exposed is not None:
        found.append(exposed)
    return found


def unfused_optimizer(trace: Trace, origin: int) -> tuple[Finding | None, np.ndarray | None]:
    """The unfused-optimizer finding (None when it does not fire), and the ``idle_gaps`` rows it counts
    (the gaps before the optimizer's kernels: the idle findings leave them out)."""
    from tracekit.analysis.primitives.phases import choose_phases
    from tracekit.analysis.ranges.breakdown import breakdown_ops, phase_intervals
    from tracekit.analysis.waits.idle import gap_devices, idle_gaps

    spec = dict(choose_phases(trace, None).chosen).get("optimizer")
    if spec is None:
        return None, None
    starts, interval = phase_intervals(trace, None)["optimizer"]
    ops = breakdown_ops(trace)
    inside = (interval >= 0) & (ops["kind"] == "kernel").to_numpy()
    if not len(starts) or inside.sum() < MANY_OPTIMIZER_KERNELS * len(starts):
        return None, None
    durations = ops["duration"].to_numpy()[inside]
    names = pd.Series(ops["name"].astype(str).to_numpy(dtype=object)[inside])
    if float(np.median(durations)) >= SHORT_OPTIMIZER_KERNEL_NS or names.str.contains("fused", case=False).any():
        return None, None
    gaps = idle_gaps(trace)
    claimed = interval[gaps["Next Op"].to_numpy(np.int64)] >= 0 if len(gaps) else np.zeros(0, dtype=bool)
    if not claimed.any():
        return None, None
    device, idle = worst(gap_devices(gaps)[claimed], gaps["Idle (ns)"].to_numpy(np.int64)[claimed])
    counts = names.value_counts().head(EVIDENCE_ROWS)
    first = ops["start"].to_numpy()[inside]
    proof = evidence(
        [f"{name} x{count:,}" for name, count in counts.items()],
        [int(first[(names == name).to_numpy()].min()) - origin for name in counts.index],
        [int(durations[(names == name).to_numpy()].sum()) for name in counts.index],
        [f"optimizer ({spec.removeprefix('=')})"] * len(counts),
    )
    per_step = int(inside.sum()) // len(starts)
    foreach = names.str.contains("multi_tensor_apply").mean() > 0.5
    fix = (
        "the step is a foreach one already (multi_tensor_apply): fused=True runs it in one kernel per parameter "
        "group (torch.optim.AdamW(..., fused=True); apex.optimizers.FusedAdam)"
        if foreach
        else "use a fused or foreach optimizer: torch.optim.AdamW(..., fused=True), or foreach=True (the default on "
        "CUDA since torch 2.0 where the parameters allow it); apex.optimizers.FusedAdam"
    )
    return Finding(
        "unfused optimizer",
        f"the optimizer step ({spec.removeprefix('=')!r}) launches {per_step:,} kernels per step, of median "
        f"{float(np.median(durations)) / 1000:,.1f} us; cuda:{device} sits idle {ms(idle)} before them",
        idle,
        f"estimate: the idle time before the optimizer's kernels on cuda:{device} (a fused step also saves their "
        "fixed costs); these gaps count in no other finding",
        fix,
        proof,
    ), claimed


def _compute_capability(trace: Trace) -> tuple[float, str] | None:
    """The lowest compute capability among the trace's GPUs, as a number and as recorded ("8.0"); None
    when none is recorded."""
    recorded = [
        parsed for value in trace.meta.gpus["compute_capability"] if (parsed := compute_capability(value)) is not None
    ]
    if not recorded:
        return None
    major, minor = min(recorded)
    return float(f"{major}.{minor}"), f"{major}.{minor}"


def _fp32_matmul(trace: Trace, origin: int) -> Finding | None:
    names = " ".join(str(name) for name in trace.meta.gpus["name"] if isinstance(name, str))
    if re.search(r"AMD|Instinct|Radeon", names):
        return None  # ROCm: no sgemm/TF32 story, and its "compute capability" is a gfx version
    recorded = _compute_capability(trace)
    capability = recorded[0] if recorded is not None else None
    if capability is not None and capability < 7.0:
        return None  # no tensor cores: FP32 is what the GPU has
    ops = trace.columns("gpu_ops", ("start", "duration", "kind", "name", "device"))
    # every GEMM and convolution family the efficiency analysis reads (cuBLAS sgemm, cuDNN's implicit GEMM,
    # dgrad, wgrad, Winograd, FFT, scudnn, CUTLASS ...): FP32 on the CUDA cores
    hardware = kernel_hardware(trace)
    rows = (
        (hardware["precision"] == "FP32").to_numpy()
        & (hardware["unit"] == "CUDA cores").to_numpy()
        & (ops["kind"] == "kernel").to_numpy()
    )
    if not rows.any():
        return None
    chosen = ops.loc[rows]
    total = int(chosen["duration"].sum())
    per_name = (
        pd.DataFrame(
            {
                "name": chosen["name"].astype(str).to_numpy(dtype=object),
                "duration": chosen["duration"].to_numpy(),
                "start": chosen["start"].to_numpy(),
            }
        )
        .groupby("name", as_index=False)
        .agg(count=("duration", "size"), time=("duration", "sum"), first=("start", "min"))
        .sort_values("time", ascending=False, kind="stable")
        .head(EVIDENCE_ROWS)
    )
    # where each ran: the GPUs it ran on ("all GPUs" said nothing on a one-GPU trace)
    devices = (
        chosen.assign(name=chosen["name"].astype(str))
        .groupby("name")["device"]
        .agg(lambda ran: ", ".join(f"cuda:{int(device)}" for device in sorted(set(ran.tolist()))))
    )
    proof = evidence(
        [f"{name} x{count:,}" for name, count in zip(per_name["name"], per_name["count"])],
        per_name["first"].to_numpy() - origin,
        per_name["time"].to_numpy(),
        devices.loc[per_name["name"]].tolist(),
    )
    tf32 = (
        "allow TF32 (torch.set_float32_matmul_precision('high'), or torch.backends.cuda.matmul.allow_tf32 = True "
        "and torch.backends.cudnn.allow_tf32 = True) or train under torch.autocast('cuda', dtype=torch.bfloat16)"
    )
    fp16 = "train under torch.autocast('cuda', dtype=torch.float16) with a GradScaler"
    if capability is None:
        fix = f"on Ampere or later GPUs {tf32}; on Volta and Turing {fp16}"
        known = (
            " (the GPU's compute capability is not recorded: this assumes it has tensor cores, as V100 and later do)"
        )
    else:
        fix = tf32 if capability >= 8.0 else f"{fp16} (this GPU's tensor cores take FP16, not TF32)"
        known = f" (compute capability {recorded[1] if recorded else ''})"
    recoverable = fp32_gemm_recoverable(trace, rows, capability)
    reached = "" if recoverable.reached is None else f", at {100 * recoverable.reached:.0f}% of the FP32 peak"
    return Finding(
        "fp32 matmul",
        f"{int(rows.sum()):,} GEMM/convolution kernels ran in FP32 on the CUDA cores for {ms(total)}{reached}{known}",
        recoverable.ns,
        recoverable.how,
        fix,
        proof,
    )
