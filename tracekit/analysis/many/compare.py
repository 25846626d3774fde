"""``tracekit compare RUN...``: the phase x category breakdown of many runs in one table, ordered by a
configuration field (context length, dtype, compile, ...), and a picture of it.

One row per run and phase (the whole trace too): Instances (range instances of the phase), the kernel
time (summed, and per instance: comparable between runs of different step counts) and each category's
share of it, as ``tracekit breakdown`` computes them; with steps (``steps.step_rows``: ProfilerStep#N,
``step`` or ``step_range``), the time per step too. Runs are ordered by ``order_by`` from each run
folder's run.json config (numbers numerically, missing values last), else in the order given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.many.compare_command import CompareOptions
from tracekit.analysis.many.inputs import Accumulator, Part
from tracekit.analysis.primitives.categories import CATEGORIES
from tracekit.analysis.ranges.breakdown import PHASE, WHOLE, breakdown_times, phase_notes, time_column
from tracekit.model.result import Chart, Result, Table
from tracekit.model.trace import Trace

PER_INSTANCE, PER_STEP = "Per Instance (ns)", "Per Step (ns)"


def compare_part(trace: Trace, part: Part, options: CompareOptions, limit: int) -> Part:
    """One run's phase times by category, and its configuration."""
    from tracekit.analysis.primitives.step_window import step_rows

    times = breakdown_times(trace, options.phases, options.same_thread, options.ops, options.domain)
    steps = len(step_rows(trace, options.step_range))
    part.pieces.update(times=times, config=dict(part.config), steps=steps)
    part.rank = None  # runs of a sweep, not ranks of one job: always named by run
    part.notes += phase_notes(trace, options.phases, options.domain, same_thread=options.same_thread)
    if options.step_range and not steps:
        part.notes.append(f"no range named {options.step_range!r}: no time per step")
    part.notes += trace.warnings
    return part


class CompareMerger:
    """Every run's rows, ordered by a configuration field; the grouped-bars chart of them."""

    def __init__(self, options: CompareOptions, limit: int):
        self.which_ops = options.ops
        self.order_by = options.order_by
        self.runs: dict[int, tuple[pd.DataFrame, dict[str, Any]]] = {}
        self.steps: dict[int, int] = {}
        self.charts: dict[str, Chart] = {}  # the grouped bars, made with the table

    def add(self, index: int, pieces: dict[str, Any]) -> None:
        self.runs[index] = (pieces["times"], pieces["config"])
        self.steps[index] = int(pieces.get("steps", 0))

    def tables(self, labels: dict[int, Any], column: str) -> tuple[list[Table], list[str]]:
        order, notes = self._order(labels)
        total = time_column(self.which_ops)
        frames = []
        for index in order:
            times, config = self.runs[index]
            present = times.loc[(times["Instances"] > 0) | (times[PHASE] == WHOLE)].copy()
            present.insert(0, column, labels[index])
            present[PER_STEP] = present[total] / self.steps[index] if self.steps[index] else np.nan
            if self.order_by:
                present.insert(1, self.order_by, _text(config.get(self.order_by)))
            frames.append(present)
        table = pd.concat(frames, ignore_index=True)
        table.insert(
            list(table.columns).index(total) + 1, PER_INSTANCE, table[total] / table["Instances"].clip(lower=1)
        )
        per_step = table.pop(PER_STEP)
        if per_step.notna().any():  # beside the time per instance, for runs that have steps
            table.insert(list(table.columns).index(PER_INSTANCE) + 1, PER_STEP, per_step)
        category_times = table[[f"{category} (ns)" for category in CATEGORIES]].to_numpy(np.int64)
        totals = table[total].to_numpy()
        kept = [index for index, category in enumerate(CATEGORIES) if category_times[:, index].sum() > 0]
        for index in kept:
            table[f"{CATEGORIES[index]} (%)"] = [
                stats.percent_of_total(row)[index] if row_total else 0.0
                for row, row_total in zip(category_times, totals)
            ]
        chart = table.loc[:, [column, PHASE, PER_INSTANCE] + [f"{CATEGORIES[index]} (%)" for index in kept]]
        table = table.drop(columns=[f"{category} (ns)" for category in CATEGORIES])
        if table[total].sum() > 0:
            self.charts["compare"] = Chart(
                "compare_bars",
                "Kernel time per phase instance, by category",
                {"table": chart, "label": column, "categories": [CATEGORIES[index] for index in kept]},
            )
        return [Table("compare", table, "Phases x categories per run")], notes

    def _order(self, labels: dict[int, Any]) -> tuple[list[int], list[str]]:
        given = sorted(self.runs)
        if not self.order_by:
            return given, []
        values = {index: self.runs[index][1].get(self.order_by) for index in given}
        missing = [labels[index] for index in given if values[index] is None]
        numeric = all(isinstance(value, (int, float)) for value in values.values() if value is not None)

        def key(index: int):
            value = values[index]
            return (value is None, value if numeric or value is None else str(value), index)

        notes = (
            [f"no {self.order_by!r} in the run.json of {', '.join(map(str, missing))}: listed last"] if missing else []
        )
        return sorted(given, key=key), notes


def _text(value: Any) -> Any:
    return value if isinstance(value, (int, float, str)) or value is None else str(value)


def compare_traces(
    traces: list[Trace], labels: list[str], configs: list[dict[str, Any]], options: CompareOptions | None = None
) -> Result:
    """``compare`` of traces already open (the report's comparison): the same Result as the command."""
    options = options or CompareOptions()
    merger = CompareMerger(options, 0)
    accumulator = Accumulator(merger, "runs compared")
    for index, (trace, label, config) in enumerate(zip(traces, labels, configs)):
        accumulator.add(index, compare_part(trace, Part(trace.name, label, config=config), options, 0))
    return accumulator.result()
