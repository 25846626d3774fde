"""Device names and peak arithmetic rates, for model FLOP utilization (MFU).

Peaks are dense (no sparsity) datasheet figures in FLOP/s. "fp32" is the plain float32 rate:
PyTorch does float32 matmuls without TF32 by default (torch.backends.cuda.matmul.allow_tf32 False).
"""

from __future__ import annotations

import platform

import torch

# Matched by substring of the device name, most specific first.
PEAK_FLOPS = [
    ("H200", {"bf16": 989.4e12, "fp16": 989.4e12, "fp32": 66.9e12}),
    ("H100 PCIe", {"bf16": 756.5e12, "fp16": 756.5e12, "fp32": 51.2e12}),
    ("H100", {"bf16": 989.4e12, "fp16": 989.4e12, "fp32": 66.9e12}),
    ("A100", {"bf16": 312e12, "fp16": 312e12, "fp32": 19.5e12}),
    ("L40S", {"bf16": 362.1e12, "fp16": 362.1e12, "fp32": 91.6e12}),
    ("L4", {"bf16": 121e12, "fp16": 121e12, "fp32": 30.3e12}),
    ("RTX 4090", {"bf16": 165.2e12, "fp16": 165.2e12, "fp32": 82.6e12}),
]


def device_name(device: torch.device) -> str:
    """ "NVIDIA H100 80GB HBM3", "Apple MPS", or the CPU model."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    return cpu_model()


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def peak_flops(name: str, dtype: str) -> float | None:
    """Datasheet peak of the named device for this dtype, or None when unknown (CPUs included)."""
    for key, peaks in PEAK_FLOPS:
        if key in name:
            return peaks.get(dtype)
    return None
