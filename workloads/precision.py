"""Why mixed precision keeps float32 accumulators: 0.01 added 1,000 times in each combination of
accumulator and addend dtype, with the exact value each returns and the reason in one line.

The sum should be 10. Two different errors show: the addend itself (0.01 has no exact binary form;
fp16 stores 0.0100021362, bf16 0.0100097656), and the accumulator (once the running sum is large, an
fp16 or bf16 sum cannot represent "sum + 0.01" and rounds it back, so the sum grows too slowly or
stops). ``tracekit bench dtypes`` shows which dtype each tensor of a real training step has.
"""

from __future__ import annotations

import pandas as pd
import torch

from tracekit.model.result import Result

ADDEND, REPEATS = 0.01, 1000
# (accumulator dtype, addend dtype, why the result is what it is)
CASES = (
    (torch.float32, torch.float32, "fp32 keeps 24 bits: 0.01 is stored almost exactly; the 1.3e-4 is rounding in the running sum"),
    (torch.float16, torch.float16, "fp16 keeps 11 bits: past 8 the spacing is 0.0078, so each +0.01 rounds to +0.0078"),
    (torch.float32, torch.float16, "fp32 sums exactly; the error is fp16's 0.01 (0.0100021362) times 1,000"),
    (torch.bfloat16, torch.bfloat16, "bf16 keeps 8 bits: at 4 the spacing is 0.03125, so +0.01 rounds to +0 and the sum stops"),
    (torch.float32, torch.bfloat16, "fp32 sums exactly; the error is bf16's 0.01 (0.0100097656) times 1,000"),
)  # fmt: skip
NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def accumulate(accumulator: torch.dtype, addend: torch.dtype) -> float:
    """0.01 (stored as ``addend``) added REPEATS times into a sum kept in ``accumulator``."""
    total = torch.zeros((), dtype=accumulator)
    value = torch.tensor(ADDEND, dtype=addend)
    for _ in range(REPEATS):
        total += value  # in-place: the sum stays in the accumulator's dtype
    return float(total)


def precision_table() -> Result:
    """One row per case: Accumulator, Addend, 0.01 As Stored, Result, Error (exact values, not rounded)."""
    rows = []
    for accumulator, addend, why in CASES:
        result = accumulate(accumulator, addend)
        rows.append(
            {
                "Accumulator": NAMES[accumulator],
                "Addend": NAMES[addend],
                "0.01 As Stored": repr(float(torch.tensor(ADDEND, dtype=addend))),
                "Result": repr(result),
                "Error": repr(result - ADDEND * REPEATS),
                "Why": why,
            }
        )
    title = f"{ADDEND} added {REPEATS:,} times (should be {ADDEND * REPEATS:g})"
    return Result.of("precision", pd.DataFrame(rows), title)
