"""Device names and peak arithmetic rates, for model FLOP utilization (MFU).

Peaks are dense (no sparsity) data-sheet figures in FLOP/s, per dtype: "fp32" is the plain float32
rate (CUDA cores), "tf32" the tensor-core rate float32 matmuls get when TF32 is allowed
(``torch.backends.cuda.matmul.allow_tf32``, off by default in PyTorch, ``--tf32 on`` here), "bf16" and
"fp16" the tensor-core rates with float32 accumulation (what PyTorch's matmuls use). Data sheets
quote sparse figures for tensor cores on newer parts; those are halved here.
"""

from __future__ import annotations

import functools
import platform
import subprocess

import torch

TERA = 1e12
# Matched by substring of the device name, most specific first ("H100 PCIe" before "H100", "A100"
# before "A10", "L40S" before "L40" before "L4").
PEAK_FLOPS = [
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5}),
    ("H100 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    ("H100", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),  # SXM5
    ("H800", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),  # SXM5, export variant of H100
    ("H200", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),  # SXM; same compute as H100 SXM
    ("GH200", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    ("B200", {"fp32": 75.0, "tf32": 1125.0, "bf16": 2250.0, "fp16": 2250.0}),  # HGX B200, per GPU
    ("A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),  # SXM4 and PCIe alike
    ("A10G", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),  # as A10 (AWS's data)
    ("A10", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05}),
    ("L40", {"fp32": 90.5, "tf32": 90.5, "bf16": 181.0, "fp16": 181.0}),
    ("L4", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    # RTX PRO 6000 Blackwell: the data sheet gives FP32 125 TFLOPS and 4,000 AI TOPS (FP4, sparse); dense
    # FP4 is half of that and each wider type half again (FP8 1000, BF16/FP16 500, TF32 250).
    ("RTX PRO 6000 Blackwell", {"fp32": 125.0, "tf32": 250.0, "bf16": 500.0, "fp16": 500.0}),
    ("RTX 6000 Ada", {"fp32": 91.1, "tf32": 182.1, "bf16": 364.2, "fp16": 364.2}),
    # GeForce: tensor cores run half rate with float32 accumulation (Ada whitepaper: 165.2 of 330.3)
    ("RTX 4090", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2}),
    ("RTX 3090", {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0}),
    ("V100", {"fp32": 15.7, "tf32": 15.7, "fp16": 125.0}),  # no bf16 or tf32 tensor cores: tf32 = fp32
    ("T4", {"fp32": 8.1, "tf32": 8.1, "fp16": 65.0}),
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


def peak_flops(name: str, dtype: str, tf32: bool = False) -> float | None:
    """Data-sheet peak (FLOP/s) of the named device for this dtype (fp32 with ``tf32``: the TF32 rate),
    or None when unknown (CPUs, GPUs not in the table, a dtype the part lacks)."""
    for key, peaks in PEAK_FLOPS:
        if key in name:
            rate = peaks.get("tf32" if dtype == "fp32" and tf32 else dtype)
            return rate * TERA if rate is not None else None
    return None


@functools.cache
def gpu_driver_version() -> str | None:
    """The NVIDIA driver's version ("550.54.15") from nvidia-smi, or None (no driver, no GPU)."""
    try:
        found = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = found.stdout.split()
    return lines[0] if found.returncode == 0 and lines else None


def environment(device_type: str) -> dict[str, str | None]:
    """What a row was measured with, so two result databases can be compared honestly."""
    from tracekit import __version__

    return {
        "torch_version": str(torch.__version__),
        "cuda_version": torch.version.cuda,  # the CUDA torch was built with (None for a CPU build)
        "gpu_driver": gpu_driver_version() if device_type == "cuda" else None,
        "python_version": platform.python_version(),
        "tracekit_version": __version__,
    }
