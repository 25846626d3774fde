"""Operators run on the CPU (or on meta tensors) under torch.profiler and under FlopCounterMode: what the
profiler records of each call (Input Dims, Input type, Concrete Inputs, through the Chrome trace it
exports) and what flop_counter counts for it. Needs torch (callers importorskip it)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode


@dataclass(frozen=True)
class RecordedOp:
    name: str
    dims: list
    types: list | None
    concrete: list | None


def recorded_ops(run: Callable[[], object]) -> list[RecordedOp]:
    """Every cpu_op the profiler records while ``run`` runs, in the order they started."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiler:
        run()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        profiler.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    return [
        RecordedOp(
            e["name"], e["args"].get("Input Dims"), e["args"].get("Input type"), e["args"].get("Concrete Inputs")
        )
        for e in ops
    ]


def flop_counts(run: Callable[[], object]) -> dict[str, int]:
    """flop_counter's FLOPs per op ("aten::mm": ...) over the calls ``run`` makes."""
    with FlopCounterMode(display=False) as counter:
        run()
    return {f"aten::{op.__name__.split('.')[0]}": int(n) for op, n in counter.get_flop_counts()["Global"].items()}


def meta(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """A tensor without data: CUDA-only operators run on it (their meta kernels), on any machine."""
    return torch.empty(shape, dtype=dtype, device="meta")
