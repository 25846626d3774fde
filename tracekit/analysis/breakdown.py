"""Phase x category: how a training step's GPU time splits into matmul, elementwise, softmax, ...
per phase (forward, backward, optimizer) and for the whole trace, with the GPU's idle time.

Per phase, its GPU ops are those launched while one of its ranges was open (see ``attribution``).
- Kernel time and the category shares sum op durations: ops on concurrent streams both count.
- GPU Busy is wall time with at least one of the phase's ops running (overlaps counted once);
  GPU Span runs from the first op's start to the last op's end of each phase instance, and
  GPU Idle = Span - Busy: the gaps where the GPU waited (launch overhead, synchronisation, CPU work).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.attribution import interval_of_ops, union_length
from tracekit.analysis.categories import CATEGORIES, op_categories
from tracekit.analysis.kernels import kernel_mask
from tracekit.errors import UsageError
from tracekit.model.result import Chart, Result
from tracekit.model.selection import select
from tracekit.model.trace import Trace

DEFAULT_PHASES = ("forward", "backward", "optimizer")
WHOLE = "(whole trace)"
PHASE = "Phase"


def breakdown_table(trace: Trace, phases: list[str] | None = None, same_thread: bool = False) -> pd.DataFrame:
    """Rows: each phase, then the whole trace. Columns: Phase, Instances, GPU Ops, Kernel Time (ns),
    GPU Busy (ns), GPU Span (ns), GPU Idle (ns), then "<category> (%)" of kernel time for every
    category that has time anywhere (matmul first: the headline).
    """
    phases = list(phases or DEFAULT_PHASES)
    intervals = phase_intervals(trace, phases, same_thread)  # loads the tables together: first
    kernel_mask(trace, ops="all")  # raises a clear error for a trace without GPU work
    ops = trace.gpu_ops
    categories = op_categories(trace)
    rows = []
    found_any = False
    for phase, (instances, interval) in intervals.items():
        found_any |= instances > 0
        rows.append(_phase_row(phase, instances, ops, categories, interval))
    if not found_any and phases != list(DEFAULT_PHASES):
        raise UsageError(f"no NVTX range matches {', '.join(phases)} in {trace.name}")
    whole = np.zeros(len(ops), dtype=np.int64)  # every op in one interval
    rows.append(_phase_row(WHOLE, 1, ops, categories, whole))
    table = pd.DataFrame(rows)
    shares = [f"{category} (%)" for category in CATEGORIES if table[f"{category} (%)"].sum() > 0]
    ordered = [PHASE, "Instances", "GPU Ops", "Kernel Time (ns)", "GPU Busy (ns)", "GPU Span (ns)", "GPU Idle (ns)"]
    return table.loc[:, ordered + shares]


def phase_intervals(trace: Trace, phases: list[str], same_thread: bool = False) -> dict[str, tuple[int, np.ndarray]]:
    """Per phase spec: its number of range instances, and for every GPU op the merged phase interval
    its launch fell in (-1 outside the phase). Reads only the ranges the specs name; computed once per
    trace for the same phases (breakdown and a report's comparison both ask)."""

    def compute() -> dict[str, tuple[int, np.ndarray]]:
        selection = select(trace, phases, load_too=["gpu_ops", "launches"])
        return {phase: (len(selection.of(phase)), interval_of_ops(trace, selection.of(phase), same_thread))
                for phase in phases}  # fmt: skip

    return trace.derived(f"phase_intervals:{same_thread}:" + "\0".join(phases), compute)


def _phase_row(phase: str, instances: int, ops: pd.DataFrame, categories: np.ndarray, interval: np.ndarray) -> dict:
    inside = interval >= 0
    durations = ops["duration"].to_numpy()
    by_category = np.bincount(categories[inside], weights=durations[inside], minlength=len(CATEGORIES))
    kernel_time = int(durations[inside].sum())
    row = {PHASE: phase, "Instances": instances, "GPU Ops": int(inside.sum()), "Kernel Time (ns)": kernel_time}
    if inside.any():
        owner = interval[inside]
        groups = int(owner.max()) + 1
        starts, ends = ops["start"].to_numpy()[inside], ops["end"].to_numpy()[inside]
        busy = int(union_length(starts, ends, owner, groups).sum())
        first = np.full(groups, np.iinfo(np.int64).max)
        last = np.full(groups, np.iinfo(np.int64).min)
        np.minimum.at(first, owner, starts)
        np.maximum.at(last, owner, ends)
        used = first <= last
        span = int((last[used] - first[used]).sum())
    else:
        busy = span = 0
    row.update({"GPU Busy (ns)": busy, "GPU Span (ns)": span, "GPU Idle (ns)": span - busy})
    shares = stats.round_half_away(by_category * 100.0 / kernel_time) if kernel_time else np.zeros(len(CATEGORIES))
    row.update({f"{category} (%)": share for category, share in zip(CATEGORIES, shares)})
    return row


def phase_breakdown(trace: Trace, phases: list[str] | None = None, same_thread: bool = False) -> Result:
    """``tracekit breakdown``: the phase x category table, and a chart of the shares of the phases found."""
    table = breakdown_table(trace, phases, same_thread)
    result = Result.of("breakdown", table, f"GPU time by phase and category: {trace.name}")
    present = table[(table["Instances"] > 0) | (table[PHASE] == WHOLE)]
    if present["Kernel Time (ns)"].sum() > 0:
        result.charts["categories"] = Chart(
            "category_bars", "Share of kernel time by category", {"table": present, "categories": CATEGORIES}
        )
    return result
