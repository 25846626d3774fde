"""The trace's steps, and HolisticTraceAnalysis's step window.

Steps are ranges (CPU side): ``step_range`` when given, else torch.profiler's ``ProfilerStep#N`` in
whatever CPU-side domain it was recorded (torch 1.8 and 1.9 record it as a ``cpu_op``), else ranges
named ``step`` (tracekit's workloads and ``annotate.steps``). Every command takes its steps from here.

HTA leaves out, by default, the GPU work of the last profiler step (the last step of a torch.profiler
schedule is often cut short): when a trace holds two or more ``ProfilerStep#N`` names, only operations
whose launching call started before the last of those ranges (CPU or GPU side) starts count, and
operations with no launching call in the trace count nowhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.joins import op_launches
from tracekit.model.trace import Trace

PROFILER_STEP = re.compile(r"^(?:\w+:)?ProfilerStep#\d+$")  # "cpu_op:ProfilerStep#3" in torch 1.8
STEP_CHOICE_COLUMNS = ("name", "domain", "pid", "start")  # what ``step_rows`` reads to choose and order steps


def step_rows(trace: Trace, step_range: str | None = None, columns: Collection[str] | None = None) -> pd.DataFrame:
    """The trace's step ranges (CPU side), in (pid, start) order; empty when it has none. ``columns``: only
    these of the ranges' columns (and those that choose the steps), for a command that reads no other."""
    ranges = trace.ranges if columns is None else trace.columns("ranges", {*STEP_CHOICE_COLUMNS, *columns})
    if ranges.empty:
        return ranges
    # decided per distinct name and domain (a trace can hold millions of ranges, a few thousand names)
    cpu_side = _per_category(ranges["domain"], lambda domain: domain != "gpu")
    names = ranges["name"]
    if step_range:
        chosen = _per_category(names, lambda name: name == step_range)
    else:
        chosen = _per_category(names, lambda name: PROFILER_STEP.match(name) is not None) & cpu_side
        if not chosen.any():
            chosen = _per_category(names, lambda name: name == "step")
    return ranges.loc[chosen & cpu_side].sort_values(["pid", "start"], kind="stable")


def _per_category(column: pd.Series, test: Callable[[str], bool]) -> np.ndarray:
    """Per row of a categorical column: ``test`` of its value, decided once per category."""
    per_category = np.asarray([bool(test(str(value))) for value in column.cat.categories], dtype=bool)
    return np.append(per_category, False)[column.cat.codes.to_numpy()]  # code -1 (missing): never


def step_labels(steps: pd.DataFrame) -> np.ndarray:
    """Each step's label: its range's name, numbered per process when names repeat ("step #3")."""
    labels = steps["name"].astype(str).to_numpy()
    if len(set(labels.tolist())) < len(labels):  # "step" five times: numbered per process, as ProfilerStep#N are
        number = steps.groupby("pid", sort=False).cumcount().to_numpy() + 1
        labels = np.array([f"{label} #{index}" for label, index in zip(labels.tolist(), number.tolist())], dtype=object)
    return labels


STEP_NUMBER = re.compile(r"#\s*(\d+)$")  # "ProfilerStep#5", "step #3"


def step_numbers(steps: pd.DataFrame, labels: np.ndarray) -> np.ndarray:
    """Each step's number, as its label says it (``step_labels``: ProfilerStep#5 is 5, "step #3" 3; repeated
    names are numbered from 1 per process); a label without one: its position in its process, from 1."""
    position = steps.groupby("pid", sort=False).cumcount().to_numpy() + 1
    said = [STEP_NUMBER.search(str(label)) for label in labels.tolist()]
    return np.asarray(
        [int(found.group(1)) if found else int(at) for found, at in zip(said, position.tolist())], dtype=np.int64
    )


def step_of(steps: pd.DataFrame, pid: np.ndarray, time: np.ndarray) -> np.ndarray:
    """For each (pid, time): the row position in ``steps`` of the step of that process open at that time,
    or -1. One searchsorted per process (few), none per row."""
    found = np.full(len(time), -1, dtype=np.int64)
    step_pid, start, end = (steps[column].to_numpy() for column in ("pid", "start", "end"))
    for process in np.unique(step_pid):
        rows = np.flatnonzero(step_pid == process)
        mine = np.flatnonzero(pid == process)
        index = np.searchsorted(start[rows], time[mine], side="right") - 1
        inside = (index >= 0) & (time[mine] <= end[rows][np.maximum(index, 0)])
        found[mine[inside]] = rows[index[inside]]
    return found


def last_step_start(trace: Trace) -> int | None:
    """When the last ProfilerStep began (ns; the steps of ``step_rows``, CPU side): HTA's step
    window ends there; None with fewer than two distinct steps (HTA then counts everything)."""
    ranges = trace.ranges
    names = ranges["name"].astype(str)
    steps = (names.str.match(PROFILER_STEP.pattern) & (ranges["domain"].astype(str) != "gpu")).to_numpy()
    if len(set(names[steps])) < 2:
        return None
    return int(ranges["start"].to_numpy()[steps].max())


def launched_before_last_step(trace: Trace) -> tuple[np.ndarray | None, str]:
    """HTA's step window: a mask of the GPU ops it counts (None: all, fewer than two steps) and a note.
    Range instances that start at or after ``last_step_start`` are outside it too."""
    cutoff = last_step_start(trace)
    if cutoff is None:
        return None, "fewer than two ProfilerStep ranges: every GPU operation counts"
    launches = op_launches(trace)
    keep = launches.found & (launches.start < cutoff)
    return keep, (
        f"the last profiler step left out (as HolisticTraceAnalysis does): {int((~keep).sum()):,} GPU operations "
        "launched after its start, or without a launching call in the trace"
    )
