"""Attention micro-benchmark: forward and backward time of single-head attention over a grid of head
dimensions and sequence lengths, naive (explicit matmul, softmax, matmul; ``explicit`` also writes the
softmax out) against ``scaled_dot_product_attention``, eager against ``torch.compile``; out-of-memory
points are rows.

Inputs are (batch, sequence, head_dim) tensors created in the chosen dtype (native, not autocast: the
kernels under test see that dtype). Forward and backward are each timed over ``passes`` repetitions
after warm-up, with device synchronisation around each repetition. The memory allocated after a
forward is read with that pass's output and graph alive (CUDA only), as the published naive-attention
tables define it (CS336: "memory in use before the backward pass starts"). TFLOP/s, the bytes saved
for backward, the peak memory and the SDPA backend come from ``attention_probe`` (its docstring states
the FLOPs convention); the probes run on eager points (a compiled function's saved tensors are the
compiler's)."""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable, Sequence

import pandas as pd
import torch

from tracekit.model.result import Result
from tracekit.run_config import EAGER_FALLBACK
from workloads.attention_probe import attention_flops, peak_bytes, saved_bytes, sdpa_backend
from workloads.bench import (
    DTYPES,
    cv_pct,
    is_out_of_memory,
    noisy,
    release_memory,
    resolve_device,
    synchronize,
    tf32_allowed,
)
from workloads.compiled import CompileWatch, compile_function

HEAD_DIMS = (16, 32, 64, 128)
SEQUENCE_LENGTHS = (256, 1024, 4096, 8192, 16384)


def _masked_scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    """q k^T / sqrt(d), the future masked with -inf (an L x L bool mask, which masked_fill keeps for backward)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        length = q.shape[-2]
        scores = scores.masked_fill(
            torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1), float("-inf")
        )
    return scores


def naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return torch.softmax(_masked_scores(q, k, causal), dim=-1) @ v


def explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """Naive attention with the softmax written out, as from-scratch course code writes it (CS336's
    assignments): the row maximum subtracted, exp, divided by its sum. Autograd then keeps two L x L
    tensors (the exponentials and the weights) where torch.softmax keeps one, plus the maximum's int64
    indices and the sums (B L each): the memory of the published naive-attention tables."""
    scores = _masked_scores(q, k, causal)
    exps = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    return (exps / exps.sum(dim=-1, keepdim=True)) @ v


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


IMPLEMENTATIONS: dict[str, Callable] = {"naive": naive, "explicit": explicit, "sdpa": sdpa}


def time_attention(
    function: Callable,
    batch: int,
    length: int,
    head_dim: int,
    device: torch.device,
    causal: bool,
    warmup: int,
    passes: int,
    watch: CompileWatch | None = None,
    dtype: torch.dtype = torch.float32,
    probe: bool = False,
) -> dict:
    """Mean forward and backward ms over ``passes``; the memory allocated after a forward (bytes, CUDA):
    the output and its sum (the loss) alive, as before a backward, and the inputs' gradients from the
    earlier passes; and what stays allocated once the point's tensors are freed (``held``: cuBLAS and
    cuBLASLt workspaces, which the first figure includes). With ``watch`` (a compiled ``function``), the first, compiling forward and backward is timed apart;
    with ``probe``, also the bytes saved for backward, the peak memory and the SDPA backend."""
    q, k, v = (torch.randn(batch, length, head_dim, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    if watch is not None:
        watch.first_call(lambda: function(q, k, v, causal).sum().backward(), lambda: synchronize(device))
    for _ in range(warmup):
        function(q, k, v, causal).sum().backward()
    synchronize(device)
    probed = {}
    if probe:
        probed = {
            "saved": saved_bytes(function, q, k, v, causal),
            "peak": peak_bytes(function, q, k, v, causal),
            "backend": sdpa_backend(function, q, k, v, causal) if function is sdpa else None,
        }
    forward_ms = []
    for _ in range(passes):
        started = time.perf_counter()
        function(q, k, v, causal)
        synchronize(device)
        forward_ms.append((time.perf_counter() - started) * 1e3)
    backward_ms = []
    memory = None
    for _ in range(passes):
        output = function(q, k, v, causal)
        loss = output.sum()
        synchronize(device)
        if memory is None and device.type == "cuda":
            memory = torch.cuda.memory_allocated(device)
        started = time.perf_counter()
        loss.backward()
        synchronize(device)
        backward_ms.append((time.perf_counter() - started) * 1e3)
        del output, loss
    q = k = v = None  # (closures above share these names): what stays allocated is held apart
    timing = {
        "forward": statistics.fmean(forward_ms),
        "backward": statistics.fmean(backward_ms),
        "memory": memory,
        # What outlives the point's tensors (cuBLAS/cuBLASLt workspaces): part of the memory figure.
        "held": torch.cuda.memory_allocated(device) if device.type == "cuda" else None,
        "cv": max(cv_pct(forward_ms) or 0.0, cv_pct(backward_ms) or 0.0),  # the less steady; 0 for one pass
    }
    return {**timing, **probed}


def attention_grid(
    head_dims: Sequence[int] = HEAD_DIMS,
    lengths: Sequence[int] = SEQUENCE_LENGTHS,
    implementations: Sequence[str] = ("naive", "sdpa"),
    compiles: Sequence[bool] = (False,),
    batch: int = 8,
    passes: int = 100,
    warmup: int = 5,
    causal: bool = True,
    device: str = "auto",
    on_row: Callable[[dict], None] | None = None,
    tf32: bool = False,
    dtypes: Sequence[str] = ("fp32",),
) -> Result:
    """One row per (implementation, compiled, dtype, head dim, length): Status (ok | oom | error |
    eager-fallback), Forward/Backward (ms) and TFLOP/s, Saved For Backward and Peak Memory (MiB), SDPA
    Backend, Memory After Forward and Held Apart (MiB, CUDA: see ``time_attention``)."""
    target = resolve_device(device)
    setup = {"batch": batch, "passes": passes, "warmup": warmup, "causal": causal, "device": target, "tf32": tf32}
    rows = []
    with tf32_allowed(tf32):
        for name, compiled, dtype, head_dim, length in itertools.product(
            implementations, compiles, dtypes, head_dims, lengths
        ):
            rows.append(_point(name, compiled, dtype, head_dim, length, setup))
            if on_row:
                on_row(rows[-1])
    title = (
        f"Attention, batch {batch}, {passes} passes, inputs in the dtype shown (native, not autocast); TFLOP/s of the "
        f"useful {'causal ' if causal else ''}FLOPs (oom = out of memory)"
    )
    return Result.of("attention", pd.DataFrame(rows), title)


def _point(name: str, compiled: bool, dtype: str, head_dim: int, length: int, setup: dict) -> dict:
    """One row of the grid; failures become its Status and Error."""
    function = IMPLEMENTATIONS[name]
    watch = CompileWatch() if compiled else None  # per point: a sweep of shapes would hit the recompile limit
    row: dict = {
        "Implementation": name,
        "Compile": compiled,
        "Dtype": dtype,
        "Head Dim": head_dim,
        "Seq Len": length,
        "TF32": "on" if setup["tf32"] else "off",
        "Status": "ok",
        "Forward (ms)": None,
        "Backward (ms)": None,
        "Forward TFLOP/s": None,
        "Backward TFLOP/s": None,
        "Saved For Backward (MiB)": None,
        "Peak Memory (MiB)": None,
        "SDPA Backend": None,  # eager points only (compiled ones run the compiler's kernels)
        "Memory After Forward (MiB)": None,  # CUDA: allocated with the forward's output and graph alive
        "Held Apart (MiB)": None,  # CUDA: what the point's tensors did not hold (workspaces), included above
        "CV (%)": None,  # of the forward or backward pass times, whichever is less steady
        "Noisy": None,
        "Error": None,
    }
    batch, device, causal = setup["batch"], setup["device"], setup["causal"]
    try:
        if compiled:  # inside the try: a backend that cannot be built is this row's error
            function = compile_function(function)
        timing = time_attention(
            function,
            batch,
            length,
            head_dim,
            device,
            causal,
            setup["warmup"],
            setup["passes"],
            watch,
            DTYPES[dtype] or torch.float32,
            probe=not compiled,
        )
        forward_flops, backward_flops = attention_flops(batch, length, head_dim, causal)
        row.update(
            {
                "Forward (ms)": timing["forward"],
                "Backward (ms)": timing["backward"],
                "Forward TFLOP/s": forward_flops / (timing["forward"] / 1e3) / 1e12,
                "Backward TFLOP/s": backward_flops / (timing["backward"] / 1e3) / 1e12,
                "Saved For Backward (MiB)": timing["saved"] / 2**20 if "saved" in timing else None,
                "Peak Memory (MiB)": timing["peak"] / 2**20 if timing.get("peak") is not None else None,
                "SDPA Backend": timing.get("backend"),
                "Memory After Forward (MiB)": timing["memory"] / 2**20 if timing["memory"] else None,
                "Held Apart (MiB)": timing["held"] / 2**20 if timing["held"] is not None else None,
                "CV (%)": timing["cv"],
                "Noisy": noisy(timing["cv"]),
            }
        )
        if watch is not None:
            report = watch.report()
            row.update(report.columns())
            if report.fell_back:  # eager times are not shown as compiled ones
                row.update(
                    {
                        "Status": EAGER_FALLBACK,
                        "Forward (ms)": None,
                        "Backward (ms)": None,
                        "Forward TFLOP/s": None,
                        "Backward TFLOP/s": None,
                        "Error": report.note,
                    }
                )
    except Exception as error:
        row["Status"] = "oom" if is_out_of_memory(error) else "error"
        row["Error"] = f"{type(error).__name__}: {error}".splitlines()[0][:300]
    finally:
        release_memory(device)
    return row
