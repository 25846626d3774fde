"""Which group each GPU operation counts in (operator, kernel, phase, step), and for phases and steps their
wall time, from which the model FLOPs utilization (MFU) follows.

A phase or step counts the GPU work launched inside it. Its wall time covers the CPU range and the GPU work
launched in it (a step from the earlier of the two starts to the later of the two ends; a phase the longer of
its merged ranges' time and its work's GPU time), since the GPU often runs a step's work after the CPU has
left it. Its MFU is its FLOPs over that wall time over the dense peak of the precision and unit most of its
GPU time ran in: the share of the GPU's peak the whole stretch delivered, idle time included (a GEMM's
roofline share is over its own kernels' time only), never above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.analysis.efficiency.efficiency_command import EfficiencyOptions
from tracekit.analysis.efficiency.groups import GroupSums
from tracekit.analysis.efficiency.roofline import CUDA_CORES, DevicePeaks
from tracekit.analysis.primitives.attribution import interval_of_ops
from tracekit.analysis.primitives.intervals import merge_intervals
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.phases import choose_phases
from tracekit.analysis.primitives.selection import select_ranges
from tracekit.analysis.primitives.step_window import step_labels, step_of, step_rows
from tracekit.errors import NoGpuDataError, UsageError
from tracekit.model.options import named
from tracekit.model.trace import Trace


@dataclass
class Grouping:
    """``group``: per GPU op its group's code (-1: none); ``labels``: the groups; ``instance``: what Count counts
    per op (None: ops); ``wall``: per group its wall time (ns; None for operators and kernels)."""

    group: np.ndarray
    labels: np.ndarray
    instance: np.ndarray | None = None
    wall: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)


def group_rows(trace: Trace, work: pd.DataFrame, options: EfficiencyOptions) -> Grouping:
    """The grouping ``options.by`` asks for."""
    if options.by in ("kernel", "op"):
        column = work["kernel" if options.by == "kernel" else "operator"].cat
        instance = work["operator_row"].to_numpy() if options.by == "op" else None
        return Grouping(column.codes.to_numpy().astype(np.int64), np.asarray(column.categories, dtype=object), instance)
    launches = op_launches(trace)
    if options.by == "step":
        steps = step_rows(trace, options.step_range)
        if steps.empty:
            if options.step_range:
                raise UsageError(f"{trace.name}: no range named {options.step_range!r} to take for the steps")
            raise NoGpuDataError(
                f"{trace.name}: no step ranges (ProfilerStep#N, or 'step'; name yours with {named('step_range')})"
            )
        found = np.where(launches.found, step_of(steps, launches.pid, launches.start), -1)
        wall = _wall(steps["start"].to_numpy(), steps["end"].to_numpy(), work, found, len(steps))
        labels = np.asarray([str(label).removeprefix("cpu_op:") for label in step_labels(steps)], dtype=object)
        return Grouping(found, labels, wall=wall)
    phases = choose_phases(trace, options.phases)
    group = np.full(len(work), -1, dtype=np.int64)
    wall = np.zeros(len(phases.chosen), dtype=np.int64)
    for index, (_, spec) in enumerate(phases.chosen):
        try:
            ranges = select_ranges(trace, [spec])
        except UsageError:  # a phase the trace lacks: the others still group
            continue
        inside = interval_of_ops(trace, ranges) >= 0
        group[inside & (group < 0)] = index
        start, end = merge_intervals(ranges["start"].to_numpy(), ranges["end"].to_numpy())
        # the ranges' time, or the GPU time of the phase's work where the GPU ran behind the CPU (longer)
        wall[index] = max(int((end - start).sum()), int(work["duration"].to_numpy()[group == index].sum()))
    labels = np.asarray([label for label, _ in phases.chosen], dtype=object)
    return Grouping(group, labels, wall=wall, notes=[phases.note] if phases.note else [])


def _wall(start: np.ndarray, end: np.ndarray, work: pd.DataFrame, group: np.ndarray, count: int) -> np.ndarray:
    """Each step's wall time: from the earlier of its range's start and its first GPU op's start to the later
    of its range's end and its last GPU op's end (ns): the GPU may run a step's work after the CPU left it."""
    ops_start = work["start"].to_numpy() if "start" in work else None
    wall = (end - start).astype(np.int64)
    if ops_start is None:
        return wall
    ops_end = ops_start + work["duration"].to_numpy()
    inside = group >= 0
    first = np.full(count, np.iinfo(np.int64).max)
    last = np.full(count, np.iinfo(np.int64).min)
    np.minimum.at(first, group[inside], ops_start[inside])
    np.maximum.at(last, group[inside], ops_end[inside])
    has = last > np.iinfo(np.int64).min
    return np.where(has, np.maximum(end, last) - np.minimum(start, first), wall).astype(np.int64)


def with_walls(sums: GroupSums, grouping: Grouping, devices: DevicePeaks) -> GroupSums:
    """``sums`` with each group's wall time (ns) and its wall time times the dense peak of the precision and unit
    most of its GPU time ran in (FLOP): MFU is FLOPs over the latter, exactly over many traces too."""
    assert grouping.wall is not None
    wall = pd.Series(pd.Series(grouping.wall, index=pd.Index(grouping.labels, dtype=object)).groupby(level=0).sum())
    gpu = next((peaks for peaks in devices.peaks.values() if peaks is not None), None)
    labels = sums.sums.index
    top = {
        column: sums.shares.loc[(sums.shares["column"] == column).to_numpy()]
        .sort_values("time", ascending=False, kind="stable")
        .drop_duplicates("label")
        .set_index("label")["value"]
        .reindex(labels)
        for column in ("precision", "unit")
    }
    peak = np.asarray(
        [_peak(gpu, precision, unit) for precision, unit in zip(top["precision"], top["unit"])], dtype=float
    )
    frame = sums.sums.assign(wall=wall.reindex(labels).to_numpy(float))
    frame["peak_wall"] = frame["wall"].to_numpy() * 1e-9 * peak
    return GroupSums(frame, sums.shares)


def _peak(gpu, precision, unit) -> float:
    """The dense peak (FLOP/s) of a group's precision and unit on the GPU; FP32 on the CUDA cores where the
    group ran no matrix kernel; NaN on an unknown GPU."""
    if gpu is None:
        return np.nan
    rate = gpu.peak(precision, unit) if isinstance(precision, str) else None
    rate = rate if rate is not None else gpu.peak("FP32", CUDA_CORES)
    return float(rate) if rate is not None else np.nan
