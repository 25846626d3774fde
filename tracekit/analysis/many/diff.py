"""Traces side by side: whether B is faster, slower or the same as A (``verdict``), and where GPU time moved between them (fp32 vs bf16, eager vs compiled, before vs
after an optimisation), for two traces (``diff``) or more (``tracekit report`` of N runs).

Time per (phase, category) is summed GPU op time, as ``kernels`` by category counts it (kernels only;
``ops="all"`` adds copies and sets); the whole-trace rows equal the differences of the category
tables.
Kernels are matched by name. The first trace is the baseline: with two, Delta = B - A and
Ratio = B / A; with more, one "<label> - A (ns)" column per later trace. Times are ns, as in every
table; ``tracekit diff`` prints them in ms by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.kernels.summary import NAME, kernel_table
from tracekit.analysis.many.diff_command import DiffOptions
from tracekit.analysis.many.verdict import gate, verdict_table
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.analysis.primitives.op_selection import NAME_COLUMNS, kernel_mask
from tracekit.analysis.primitives.phases import WORDS
from tracekit.analysis.ranges.breakdown import WHOLE, phase_intervals, phase_notes
from tracekit.analysis.ranges.steps_command import StepsOptions
from tracekit.model.options import OptionError, named
from tracekit.model.result import Result, Table
from tracekit.model.schema import GPU_OPS
from tracekit.model.trace import Trace

if TYPE_CHECKING:
    from tracekit.model.memory import MemoryTrace


def letter_labels(count: int) -> list[str]:
    """A, B, C, ... for the inputs in order."""
    return [chr(65 + number) for number in range(count)]


def category_times(
    trace: Trace,
    phases: Sequence[str],
    which_ops: str = "kernels",
    same_thread: bool = False,
    domain: str | None = None,
) -> pd.Series:
    """Summed GPU time (ns) per (Phase, Category): the whole trace, then each phase that has ranges
    (of NVTX ``domain`` when given)."""
    intervals = phase_intervals(trace, phases, same_thread, domain)  # loads the tables together: first
    rows = kernel_mask(trace, which_ops)
    selected = np.ones(len(trace.gpu_ops), dtype=bool) if rows is None else rows
    categories = op_categories(trace)
    durations = trace.gpu_ops["duration"].to_numpy()
    masks = {WHOLE: selected}
    for phase, (starts, interval) in intervals.items():
        if len(starts):
            masks[phase] = selected & (interval >= 0)
    records = []
    for phase, mask in masks.items():
        totals = np.bincount(categories[mask], weights=durations[mask], minlength=len(CATEGORIES)).astype(np.int64)
        records += [(phase, category, total) for category, total in zip(CATEGORIES, totals)]
    frame = pd.DataFrame(records, columns=["Phase", "Category", "Time (ns)"])
    return frame.set_index(["Phase", "Category"])["Time (ns)"]


def _side_by_side(values: Sequence[pd.Series], labels: list[str]) -> pd.DataFrame:
    """One "<label> (ns)" column per input (0 where an input lacks the row), then the changes against
    the first: Delta (ns) and Ratio for two inputs, "<label> - A (ns)" for more."""
    both = pd.concat([series.rename(label) for series, label in zip(values, labels)], axis=1).fillna(0)
    table = pd.DataFrame({f"{label} (ns)": both[label] for label in labels})
    base = table[f"{labels[0]} (ns)"]
    if len(labels) == 2:
        table["Delta (ns)"] = table[f"{labels[1]} (ns)"] - base
        with np.errstate(divide="ignore", invalid="ignore"):
            table["Ratio"] = np.where(base > 0, table[f"{labels[1]} (ns)"] / base, np.nan)
    else:
        for label in labels[1:]:
            table[f"{label} - {labels[0]} (ns)"] = table[f"{label} (ns)"] - base
    return table


def _largest_change(table: pd.DataFrame, labels: list[str]) -> pd.Series:
    """Per row, the largest absolute change against the first input."""
    deltas = [column for column in table.columns if column == "Delta (ns)" or column.endswith(f" - {labels[0]} (ns)")]
    return table[deltas].abs().max(axis=1)


def compare_categories(
    traces: Sequence[Trace],
    phases: Sequence[str],
    which_ops: str = "kernels",
    same_thread: bool = False,
    domain: str | None = None,
) -> pd.DataFrame:
    """Per phase and category, each trace's time and the change against the first (see the module
    docstring). Rows zero in every trace are left out; a phase missing from a trace is 0 there."""
    labels = letter_labels(len(traces))
    table = _side_by_side([category_times(trace, phases, which_ops, same_thread, domain) for trace in traces], labels)
    table = table.loc[(table[[f"{label} (ns)" for label in labels]] > 0).any(axis=1)].reset_index()
    # given phases in their order; found ones (labelled by their word) in the words' order
    order = {phase: number for number, phase in enumerate(dict.fromkeys([WHOLE, *phases, *WORDS]))}
    table["order"] = table["Phase"].map(order)
    table["change"] = -_largest_change(table, labels)
    table = table.sort_values(["order", "change"], kind="stable")
    return table.drop(columns=["order", "change"]).reset_index(drop=True)


def compare_kernels(
    traces: Sequence[Trace], top: int = 15, name: str = "short", which_ops: str = "kernels"
) -> pd.DataFrame:
    """The kernels whose total time changed most: Name, each trace's time (ns), the change, and each
    trace's instance count; largest absolute change first."""
    if name not in NAME_COLUMNS:
        raise OptionError(f"{named('name')} {name!r} is not one of demangled, short")
    labels = letter_labels(len(traces))
    summaries = [kernel_table(trace, name=name, which_ops=which_ops).set_index(NAME) for trace in traces]
    table = _side_by_side([summary[stats.TOTAL] for summary in summaries], labels)
    for label, summary in zip(labels, summaries):
        table[f"{label} Instances"] = summary[stats.INSTANCES].reindex(table.index).fillna(0).astype(np.int64)
    table = table.loc[_largest_change(table, labels).sort_values(ascending=False, kind="stable").index]
    table.index.name = NAME
    return table.head(top).reset_index()


def compare_steps(a: Trace, b: Trace, step_range: str | None = None) -> pd.DataFrame:
    """Step by step (the i-th step of A against the i-th of B): wall and kernel time of each, and the
    change. Steps beyond the shorter trace are left out (a note in ``trace_diff`` says how many)."""
    from tracekit.analysis.ranges.steps import KERNEL_TIME, WALL, step_table

    first, second = (step_table(trace, StepsOptions(step_range=step_range)).frame for trace in (a, b))
    count = min(len(first), len(second))
    table = pd.DataFrame(
        {
            "Step": np.arange(count),
            "A Step": first["Step"].to_numpy()[:count],
            "B Step": second["Step"].to_numpy()[:count],
        }
    )
    for column, label in ((WALL, "Wall"), (KERNEL_TIME, "Kernel Time")):
        if column not in first or column not in second:
            continue
        before, after = first[column].to_numpy()[:count], second[column].to_numpy()[:count]
        table[f"A {label} (ns)"], table[f"B {label} (ns)"] = before, after
        table[f"Delta {label} (ns)"] = after - before
        with np.errstate(divide="ignore", invalid="ignore"):
            table[f"{label} Ratio"] = np.where(before > 0, after / np.maximum(before, 1), np.nan)
    return table


def _notes_of(a: Trace, b: Trace, first: tuple[list[str], list[str]] = ([], [])) -> list[str]:
    """Each trace's notes (``first``: each one's notes to put before its warnings), marked A or B (two
    traces often give notes alike but for their counts); a note both give word for word, once, marked
    A and B."""
    notes_a, notes_b = first[0] + a.warnings, first[1] + b.warnings
    both = [note for note in notes_a if note in notes_b]
    return (
        [f"A and B: {note}" for note in both]
        + [f"A: {note}" for note in notes_a if note not in both]
        + [f"B: {note}" for note in notes_b if note not in both]
    )


def trace_diff(
    a: Trace,
    b: Trace,
    options: DiffOptions | None = None,
    snapshots: Sequence[MemoryTrace] | None = None,
    labels: tuple[str, str] | None = None,
) -> Result:
    """``diff``: per phase and category (``by`` "category"), the kernels that changed most ("kernel"),
    or both, with the memory peaks of two snapshots when given; ``by`` "step": step by step. ``labels``
    name A and B in titles (default: the traces' files)."""
    options = options or DiffOptions()
    phases, by, top, which_ops, same_thread = (
        list(options.phases),
        options.by,
        options.top,
        options.ops,
        options.same_thread,
    )
    for trace in (a, b):  # categories, kernels and steps use most of the GPU-op table: one read of it all
        trace.need("gpu_ops", GPU_OPS.names)
    verdict, said = verdict_table(a, b, options.step_range)
    if options.fail_slower is not None:
        gate(verdict, options.fail_slower)
    # the verdict leads the whole diff; a table asked for alone (``by``) stays alone, the verdict in a note
    tables = [Table("verdict", verdict, "Faster, slower or the same: B against A")] if by is None else []
    if by == "step":
        table = compare_steps(a, b, options.step_range)
        notes = [said, *_notes_of(a, b)]
        from tracekit.analysis.primitives.step_window import step_rows

        counts = len(step_rows(a, options.step_range)), len(step_rows(b, options.step_range))
        if counts[0] != counts[1]:
            notes.append(f"A has {counts[0]} steps, B {counts[1]}: the first {min(counts)} are compared")
        return Result([*tables, Table("steps", table, "Step by step: A against B")], notes=notes)
    phase_said: tuple[list[str], list[str]] = ([], [])
    if by in (None, "category"):
        table = compare_categories([a, b], phases, which_ops, same_thread, options.domain)
        name_a, name_b = labels or (a.name, b.name)
        tables.append(Table("categories", table, f"GPU time by phase and category: A={name_a}  B={name_b}"))
        phase_said = (
            phase_notes(a, phases, options.domain, same_thread=same_thread),
            phase_notes(b, phases, options.domain, same_thread=same_thread),
        )
    if by in (None, "kernel"):
        tables.append(Table("kernels", compare_kernels([a, b], top, which_ops=which_ops), "Kernels that changed most"))
    if by is None and snapshots is not None:
        from tracekit.analysis.memory.tables import compare

        tables.append(Table("memory", compare(snapshots[0], snapshots[1]).head(10), "Memory at the peak"))
    return Result(tables, notes=[said, *_notes_of(a, b, phase_said)])
