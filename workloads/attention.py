"""Attention micro-benchmark: forward and backward time of single-head attention over a grid of head
dimensions and sequence lengths, naive (explicit matmul, softmax, matmul) against
``scaled_dot_product_attention``, eager against ``torch.compile``; out-of-memory points are rows.

Inputs are (batch, sequence, head_dim) float32 tensors. Forward and backward are each timed over
``passes`` repetitions after warm-up, with device synchronisation around each repetition; the memory
in use before backward is read with the graph of one forward pass alive (CUDA only).
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable, Sequence

import pandas as pd
import torch

from tracekit.model.result import Result
from workloads.bench import is_out_of_memory, release_memory, resolve_device, synchronize, tf32_allowed
from workloads.compiled import CompileWatch, compile_function
from workloads.config import EAGER_FALLBACK

HEAD_DIMS = (16, 32, 64, 128)
SEQUENCE_LENGTHS = (256, 1024, 4096, 8192, 16384)


def naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        length = q.shape[-2]
        scores = scores.masked_fill(
            torch.ones(length, length, dtype=torch.bool, device=q.device).triu(1), float("-inf")
        )
    return torch.softmax(scores, dim=-1) @ v


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


IMPLEMENTATIONS: dict[str, Callable] = {"naive": naive, "sdpa": sdpa}


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
) -> dict:
    """Mean forward and backward ms over ``passes``, and the memory in use before backward (bytes).
    With ``watch`` (a compiled ``function``), the first, compiling forward and backward is timed apart."""
    q, k, v = (torch.randn(batch, length, head_dim, device=device, requires_grad=True) for _ in range(3))
    if watch is not None:
        watch.first_call(lambda: function(q, k, v, causal).sum().backward(), lambda: synchronize(device))
    for _ in range(warmup):
        function(q, k, v, causal).sum().backward()
    synchronize(device)
    forward_ms = []
    for _ in range(passes):
        started = time.perf_counter()
        function(q, k, v, causal)
        synchronize(device)
        forward_ms.append((time.perf_counter() - started) * 1e3)
    backward_ms = []
    memory = None
    for _ in range(passes):
        loss = function(q, k, v, causal).sum()
        synchronize(device)
        if memory is None and device.type == "cuda":
            memory = torch.cuda.memory_allocated(device)
        started = time.perf_counter()
        loss.backward()
        synchronize(device)
        backward_ms.append((time.perf_counter() - started) * 1e3)
    return {"forward": statistics.fmean(forward_ms), "backward": statistics.fmean(backward_ms), "memory": memory}


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
) -> Result:
    """One row per (implementation, compiled, head dim, length). Columns: Implementation, Compile,
    Head Dim, Seq Len, Status (ok | oom | error), Forward (ms), Backward (ms), Memory Before Backward (MiB)."""
    target = resolve_device(device)
    with tf32_allowed(tf32):
        rows = _grid(head_dims, lengths, implementations, compiles, batch, passes, warmup, causal, target, on_row, tf32)
    return Result.of(
        "attention", pd.DataFrame(rows), f"Attention, batch {batch}, {passes} passes (oom = out of memory)"
    )


def _grid(head_dims, lengths, implementations, compiles, batch, passes, warmup, causal, target, on_row, tf32) -> list:
    rows = []
    for name, compiled, head_dim, length in itertools.product(implementations, compiles, head_dims, lengths):
        function = IMPLEMENTATIONS[name]
        watch = CompileWatch() if compiled else None  # per point: a sweep of shapes would hit the recompile limit
        if compiled:
            function = compile_function(function)
        row = {
            "Implementation": name,
            "Compile": compiled,
            "Head Dim": head_dim,
            "Seq Len": length,
            "TF32": "on" if tf32 else "off",
            "Status": "ok",
            "Forward (ms)": None,
            "Backward (ms)": None,
            "Memory Before Backward (MiB)": None,
            "Error": None,
        }
        try:
            timing = time_attention(function, batch, length, head_dim, target, causal, warmup, passes, watch)
            row.update(
                {
                    "Forward (ms)": timing["forward"],
                    "Backward (ms)": timing["backward"],
                    "Memory Before Backward (MiB)": timing["memory"] / 2**20 if timing["memory"] else None,
                }
            )
            if watch is not None:
                report = watch.report()
                row["Compile (ms)"] = report.compile_ms
                if report.fell_back:  # eager times are not shown as compiled ones
                    row.update({"Status": EAGER_FALLBACK, "Forward (ms)": None, "Backward (ms)": None,
                                "Error": report.note})  # fmt: skip
        except Exception as error:
            row["Status"] = "oom" if is_out_of_memory(error) else "error"
            row["Error"] = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        finally:
            release_memory(target)
        rows.append(row)
        if on_row:
            on_row(row)
    return rows
