"""``steps``: one row per training step.

Steps are the ranges ``primitives.step_window.step_rows`` finds (every command takes its steps from
there). Per step, in ns:
- Wall: the step range's duration.
- Kernels, Kernel Time: the kernels launched while the step was open on its process (a launch call that
  started inside it), and their summed durations.
- per GPU ``cuda:N Busy``: the union of the GPU ops (kernels, copies, sets) launched in the step on that
  device; ``cuda:N Idle``: the step's length on that GPU's clock (from the step's first op to the next
  step's first op; the last step to its last op's end) minus Busy. The GPU often runs behind the CPU, so
  a step's GPU work is measured on the GPU's timeline, not inside the CPU range.
- per phase (``phases``: range specs; by default forward, backward, optimizer found by name, as
  ``phases`` finds them): the summed durations of the ranges it matches (outermost: one nested in another match counts once) that started inside the step
  on its process.
- Flag: "outlier" when the wall time is further from the median than 3 scaled MADs and 5 % of the
  median (a first step flagged this way is usually warm-up: "outlier (first)").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.busy import busy_span, known_devices
from tracekit.analysis.primitives.intervals import merge_intervals
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.phases import Phases, choose_phases
from tracekit.analysis.primitives.selection import select
from tracekit.analysis.primitives.step_window import step_labels, step_of, step_rows
from tracekit.analysis.ranges.steps_command import StepsOptions
from tracekit.errors import UsageError
from tracekit.model.options import named
from tracekit.model.range_names import inside_another
from tracekit.model.result import Chart, Result
from tracekit.model.trace import Trace

STEP, WALL, KERNELS, KERNEL_TIME, FLAG = "Step", "Wall (ns)", "Kernels", "Kernel Time (ns)", "Flag"


def step_table(trace: Trace, options: StepsOptions | None = None, outlier_mads: float = 3.0) -> Result:
    """One row per step (see the module docstring)."""
    options = options or StepsOptions()
    step_range = options.step_range
    steps = step_rows(trace, step_range)
    if steps.empty:
        wanted = f"no range named {step_range!r}" if step_range else "no ProfilerStep#N or step ranges"
        raise UsageError(
            f"{trace.name}: {wanted}; name the step range with {named('step_range')} (`tracekit ranges` lists them)"
        )
    steps = steps.reset_index(drop=True)
    count = len(steps)
    wall = steps["duration"].to_numpy()
    table = pd.DataFrame({STEP: step_labels(steps)})
    if steps["pid"].nunique() > 1:
        table["PID"] = steps["pid"].to_numpy()
    table[WALL] = wall
    ops = trace.gpu_ops
    launches = op_launches(trace) if len(ops) else None
    if launches is not None and launches.found.any():
        index = np.where(launches.found, step_of(steps, launches.pid, launches.start), -1)
        kernel = (ops["kind"] == "kernel").to_numpy() & (index >= 0)
        durations = ops["duration"].to_numpy()
        table[KERNELS] = np.bincount(index[kernel], minlength=count)
        table[KERNEL_TIME] = np.bincount(index[kernel], weights=durations[kernel], minlength=count).astype(np.int64)
        devices = ops["device"].to_numpy()
        for device in known_devices(devices[index >= 0]):
            mine = (index >= 0) & (devices == device)
            start, end, step = ops["start"].to_numpy()[mine], ops["end"].to_numpy()[mine], index[mine]
            busy, _ = busy_span(start, end, step)
            busy = np.pad(busy, (0, count - len(busy)))
            table[f"cuda:{int(device)} Busy (ns)"] = busy
            table[f"cuda:{int(device)} Idle (ns)"] = np.maximum(_gpu_windows(start, end, step, count) - busy, 0)
    phases = choose_phases(trace, options.phases, how=named("phases")) if options.phases else Phases(())
    unmatched: list[str] = []
    selection = select(trace, [spec for _, spec in phases.chosen]) if phases.chosen else None
    for phase, spec in phases.chosen:
        assert selection is not None
        matched = selection.matches[spec]
        if not matched.any():
            unmatched.append(phase)
            continue
        # a range nested in another of the same phase is part of its time already
        phase_ranges = selection.ranges.loc[matched & ~inside_another(selection.ranges, matched)]
        where = step_of(steps, phase_ranges["pid"].to_numpy(), phase_ranges["start"].to_numpy())
        inside = where >= 0
        totals = np.bincount(where[inside], weights=phase_ranges["duration"].to_numpy()[inside], minlength=count)
        table[f"{phase} (ns)"] = totals.astype(np.int64)
    table[FLAG] = _flags(wall, outlier_mads)
    charts = {}
    if launches is not None and launches.found.any():
        charts["timeline"] = timeline_chart(trace, steps)
    notes = ([phases.note] if phases.note else []) + list(trace.warnings)
    if unmatched:
        notes.append(f"no range matches {', '.join(repr(phase) for phase in unmatched)} in a step: no column")
    flagged = int((table[FLAG] != "").sum())
    if flagged:
        notes.append(
            f"{flagged} of {count} steps are outliers: wall time beyond {outlier_mads:g} scaled MADs "
            f"and 5% of the median {np.median(wall) / 1e6:,.3f} ms"
        )
    if launches is None or not launches.found.any():
        notes.append("no GPU work with its launching call in the trace: the GPU columns are left out")
    result = Result.of("steps", table, f"Steps: {trace.name}", notes)
    result.charts.update(charts)
    return result


def timeline_chart(trace: Trace, steps: pd.DataFrame, bins: int = 2000) -> Chart:
    """The steps' CPU ranges and each GPU's busy time on one time axis (ms from the first step). Each GPU
    row is ``bins`` columns across the span, each the share of its time the GPU was busy (0 to 1): the
    picture colours a column by that share, so idle time shows at any width, however thin each gap
    (a row drawn from merged intervals showed a nearly solid bar for a GPU idle 45 % of the time)."""
    origin = int(steps["start"].min())
    ops = trace.gpu_ops
    span = max(int(max(steps["end"].max(), ops["end"].max())) - origin, 1)
    rows: dict[str, tuple[np.ndarray, np.ndarray]] = {
        "CPU steps": ((steps["start"].to_numpy() - origin) / 1e6, steps["duration"].to_numpy() / 1e6)
    }
    busy: dict[str, np.ndarray] = {}
    devices = ops["device"].to_numpy()
    # Column edges in ns from the first step, not since the trace's time zero: at epoch times (~1.7e18 ns)
    # float64 steps 256 ns apart, so edges closer than that would collapse into columns of no width.
    edges = np.linspace(0.0, float(span), bins + 1)
    for device in known_devices(devices):
        mine = devices == device
        low, high = merge_intervals(ops["start"].to_numpy()[mine] - origin, ops["end"].to_numpy()[mine] - origin)
        busy[f"cuda:{int(device)}"] = np.diff(_busy_until(low, high, edges)) / np.diff(edges)
    return Chart(
        "step_timeline",
        "Steps (CPU) and GPU busy time: pale is idle",
        {"rows": rows, "busy": busy, "span_ms": span / 1e6},
    )


def _busy_until(low: np.ndarray, high: np.ndarray, times: np.ndarray) -> np.ndarray:
    """For each time, the busy ns before it (``low``/``high``: sorted, disjoint busy intervals)."""
    lengths = (high - low).astype(np.float64)
    before = np.concatenate(([0.0], np.cumsum(lengths)))  # busy ns of the intervals before interval k
    k = np.searchsorted(low, times, side="right") - 1  # the last interval starting at or before each time
    inside = np.clip(times - low[np.maximum(k, 0)], 0, lengths[np.maximum(k, 0)]) if len(low) else np.zeros_like(times)
    return np.where(k >= 0, before[np.maximum(k, 0)] + inside, 0.0)


def _gpu_windows(start: np.ndarray, end: np.ndarray, step: np.ndarray, count: int) -> np.ndarray:
    """Per step, its length on the GPU's clock: from its first op's start to the next step's first op's
    start (the last step: to its last op's end); 0 for a step without ops on this device."""
    first = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.zeros(count, dtype=np.int64)
    np.minimum.at(first, step, start)
    np.maximum.at(last, step, end)
    present = np.flatnonzero(first != np.iinfo(np.int64).max)
    window = np.zeros(count, dtype=np.int64)
    window[present[:-1]] = np.maximum(first[present][1:] - first[present][:-1], 0) if len(present) > 1 else 0
    window[present[-1:]] = last[present][-1:] - first[present][-1:]
    return window


def _flags(wall: np.ndarray, mads: float) -> list[str]:
    median = float(np.median(wall))
    spread = 1.4826 * float(np.median(np.abs(wall - median)))
    far = (np.abs(wall - median) > mads * spread) & (np.abs(wall - median) > 0.05 * median)
    return [("outlier (first)" if index == 0 else "outlier") if flag else "" for index, flag in enumerate(far)]
