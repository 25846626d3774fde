"""AdamW step time for N parameters of S elements each, per implementation: single-tensor
(``foreach=False``), ``foreach`` (multi-tensor kernels), ``fused``, and a ``torch.compile``'d step.

Each cell is the mean ms per step over ``steps`` steps after warm-up, with device synchronisation
around the timed loop. An implementation the device does not support is reported as not available.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import TypedDict

import pandas as pd
import torch

from tracekit.model.result import Result
from workloads.bench import is_out_of_memory, release_memory, resolve_device, synchronize
from workloads.compiled import CompileReport, CompileWatch, compile_function

COUNTS = (1, 2, 4, 8, 16, 32)
SIZES = (16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024)
IMPLEMENTATIONS = ("single-tensor", "foreach", "fused", "compiled")


class AdamWOptions(TypedDict, total=False):
    """The keyword arguments of ``torch.optim.AdamW`` that pick its implementation."""

    foreach: bool
    fused: bool


def make_step(implementation: str, parameters: list[torch.Tensor]) -> Callable[[], None]:
    choices: dict[str, AdamWOptions] = {
        "single-tensor": {"foreach": False},
        "foreach": {"foreach": True},
        "fused": {"fused": True},
        "compiled": {"foreach": False},
    }
    options = choices[implementation]
    optimizer = torch.optim.AdamW(parameters, lr=1e-3, **options)
    if implementation == "compiled":
        return compile_function(optimizer.step)
    return optimizer.step


def time_step(
    implementation: str, count: int, size: int, device: torch.device, warmup: int, steps: int
) -> tuple[float, CompileReport | None]:
    """Mean ms of one AdamW step over ``count`` parameters of ``size`` float32 elements, and for
    ``compiled`` what dynamo did. Each cell builds a new optimizer, which dynamo would recompile for
    until its limit and then run eager: the compiler state is reset per cell (``CompileWatch``)."""
    parameters = [torch.randn(size, device=device, requires_grad=True) for _ in range(count)]
    for parameter in parameters:
        parameter.grad = torch.randn_like(parameter)
    watch = CompileWatch() if implementation == "compiled" else None
    step = make_step(implementation, parameters)
    if watch is not None:
        watch.first_call(step, lambda: synchronize(device))
    for _ in range(warmup):
        step()
    synchronize(device)
    started = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    return (time.perf_counter() - started) * 1e3 / steps, watch.report() if watch else None


def optimizer_grid(
    counts: Sequence[int] = COUNTS,
    sizes: Sequence[int] = SIZES,
    implementations: Sequence[str] = IMPLEMENTATIONS,
    warmup: int = 5,
    steps: int = 50,
    device: str = "auto",
    on_row: Callable[[dict], None] | None = None,
) -> Result:
    """One row per (count, size): Params, Elements Each, then "<implementation> (ms)" for each; cells
    that failed hold None and the reason goes to the Notes column."""
    target = resolve_device(device)
    rows = []
    for count, size in itertools.product(counts, sizes):
        row: dict[str, int | float | str | None] = {"Params": count, "Elements Each": size}
        notes = []
        for implementation in implementations:
            try:
                milliseconds, compiled = time_step(implementation, count, size, target, warmup, steps)
                row[f"{implementation} (ms)"] = milliseconds
                if compiled is not None:
                    row.update(compiled.columns())
                    if compiled.fell_back:  # an eager time is not shown as the compiled one
                        row[f"{implementation} (ms)"] = None
                        notes.append(f"{implementation}: {compiled.note}")
            except Exception as error:
                row[f"{implementation} (ms)"] = None
                reason = "out of memory" if is_out_of_memory(error) else f"{type(error).__name__}: {error}"
                notes.append(f"{implementation}: {reason.splitlines()[0][:120]}")
            finally:
                release_memory(target)
        row["Notes"] = "; ".join(notes) or None
        rows.append(row)
        if on_row:
            on_row(row)
    return Result.of("optimizer", pd.DataFrame(rows), "AdamW step (ms per iteration)")
