"""Two traces side by side: where GPU time moved between them (fp32 vs bf16, eager vs compiled,
before vs after an optimisation).

Time per (phase, category) is summed kernel time, as ``tracekit kernels --by category`` and
``breakdown`` count it; the whole-trace rows equal the difference of the two ``--by category``
tables. Kernels are matched by name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.breakdown import WHOLE, phase_intervals
from tracekit.analysis.categories import CATEGORIES, categorize_ops
from tracekit.analysis.kernels import NAME, NAME_COLUMNS, kernel_rows, summarize_kernels
from tracekit.analysis import stats
from tracekit.trace import Trace

MS = 1e6


def category_times(trace: Trace, phases: list[str], ops: str = "kernels", same_thread: bool = False) -> pd.DataFrame:
    """Summed GPU time (ns) per (Phase, Category): the whole trace, then each phase that has ranges."""
    intervals = phase_intervals(trace, phases, same_thread)  # loads the tables together: first
    rows = kernel_rows(trace, ops)
    selected = np.ones(len(trace.kernels), dtype=bool) if rows is None else rows
    categories = categorize_ops(trace.kernels).codes.astype(np.int64)
    durations = trace.kernels["duration"].to_numpy()
    masks = {WHOLE: selected}
    for phase, (instances, interval) in intervals.items():
        if instances:
            masks[phase] = selected & (interval >= 0)
    records = []
    for phase, mask in masks.items():
        totals = np.bincount(categories[mask], weights=durations[mask], minlength=len(CATEGORIES)).astype(np.int64)
        records += [(phase, category, total) for category, total in zip(CATEGORIES, totals)]
    return pd.DataFrame(records, columns=["Phase", "Category", "Time (ns)"])


def _compare(a: pd.Series, b: pd.Series, scale: float) -> pd.DataFrame:
    both = pd.concat([a.rename("A"), b.rename("B")], axis=1).fillna(0)
    table = pd.DataFrame({"A (ms)": both["A"] / scale, "B (ms)": both["B"] / scale})
    table["Delta (ms)"] = table["B (ms)"] - table["A (ms)"]
    with np.errstate(divide="ignore", invalid="ignore"):
        table["Ratio"] = np.where(table["A (ms)"] > 0, table["B (ms)"] / table["A (ms)"], np.nan)
    return table


def diff_categories(
    a: Trace, b: Trace, phases: list[str], ops: str = "kernels", same_thread: bool = False
) -> pd.DataFrame:
    """Per phase and category: A (ms), B (ms), Delta (ms) = B - A, Ratio = B / A. Rows where both are
    zero are left out; phases present in only one trace show zeros for the other."""
    times_a = category_times(a, phases, ops, same_thread).set_index(["Phase", "Category"])["Time (ns)"]
    times_b = category_times(b, phases, ops, same_thread).set_index(["Phase", "Category"])["Time (ns)"]
    table = _compare(times_a, times_b, MS)
    table = table[(table["A (ms)"] > 0) | (table["B (ms)"] > 0)]
    order = {phase: number for number, phase in enumerate([WHOLE, *phases])}
    table = table.reset_index()
    table["order"] = table["Phase"].map(order)
    table = table.sort_values(
        ["order", "Delta (ms)"], key=lambda column: column if column.name == "order" else -column.abs(), kind="stable"
    )
    return table.drop(columns="order").reset_index(drop=True)


def diff_kernels(a: Trace, b: Trace, top: int = 15, name: str = "short", ops: str = "kernels") -> pd.DataFrame:
    """The kernels whose total time changed most: Name, A (ms), B (ms), Delta (ms), Ratio,
    A Instances, B Instances; largest absolute delta first."""

    def totals(trace: Trace) -> pd.DataFrame:
        table = summarize_kernels(trace.kernels, name=name, rows=kernel_rows(trace, ops))
        return table.set_index(NAME)[[stats.TOTAL, stats.INSTANCES]]

    if name not in NAME_COLUMNS:
        raise ValueError(name)
    left, right = totals(a), totals(b)
    table = _compare(left[stats.TOTAL], right[stats.TOTAL], MS)
    table["A Instances"] = left[stats.INSTANCES].reindex(table.index).fillna(0).astype(np.int64)
    table["B Instances"] = right[stats.INSTANCES].reindex(table.index).fillna(0).astype(np.int64)
    table = table.reindex(table["Delta (ms)"].abs().sort_values(ascending=False, kind="stable").index)
    table.index.name = NAME
    return table.head(top).reset_index()


def diff_memory(a, b, top: int = 10) -> pd.DataFrame | None:
    """The memory peaks of two run folders that both hold a snapshot (``memory.compare``), else None."""
    from pathlib import Path

    from tracekit.analysis.memory import compare
    from tracekit.runs import MEMORY
    from tracekit.sources.snapshot import load_snapshot

    snapshots = [Path(path) / MEMORY for path in (a, b)]
    if not all(path.is_file() for path in snapshots):
        return None
    return compare(*(load_snapshot(path) for path in snapshots)).head(top)
