"""Kernel types and their overlap, as HolisticTraceAnalysis (HTA) defines them.

HTA's ``get_gpu_kernel_breakdown`` splits GPU time three ways by name: communication (``^nccl.*Kernel``),
memory (memcpy and memset operations; HTA: names starting Memcpy, Memset or dma) and computation
(every other kernel whose name does not match ``^nccl.*Kernel``, ``.*Memcpy``, ``Memset`` or ``.*Sync``;
the few that do are HTA's "other" and count nowhere). Each type's operations are merged into a union
of intervals over all the trace's GPUs; the time where exactly one type runs is that type's row, and
the time where several run is an "X overlapping Y" row. So the rows add up to the time any counted
operation ran, and a type's own row is its time *not* hidden under another type.

HTA's step window (the last profiler step left out) is ``step_window``'s.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.intervals import merge_intervals

TYPES = ("computation", "communication", "memory")  # HTA's order: it names overlaps in this order
COMMUNICATION = re.compile(r"^nccl.*Kernel")
NOT_COMPUTATION = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
OTHER = -1
TYPE = "Type"
TIME = "Time (ns)"
SHARE = "Time (%)"


def op_types(ops: pd.DataFrame) -> np.ndarray:
    """Per GPU op: its index in ``TYPES``, or OTHER; decided once per distinct name."""
    names = ops["name"]
    per_name = np.asarray([_kernel_type(str(name)) for name in names.cat.categories], dtype=np.int64)
    types = per_name[names.cat.codes.to_numpy()] if len(per_name) else np.full(len(ops), OTHER)
    kind = ops["kind"]
    if isinstance(kind.dtype, pd.CategoricalDtype):  # decided per category, not per op's string
        not_kernel = np.append([str(value) != "kernel" for value in kind.cat.categories], True)[
            kind.cat.codes.to_numpy()
        ]
    else:
        not_kernel = kind.to_numpy() != "kernel"
    return np.where(not_kernel, TYPES.index("memory"), types)


def _kernel_type(name: str) -> int:
    if COMMUNICATION.match(name):
        return TYPES.index("communication")
    return OTHER if NOT_COMPUTATION.match(name) else TYPES.index("computation")


def type_segments(ops: pd.DataFrame, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The timeline cut where the set of running types changes: per segment, a bit mask of the types
    running (bit i: ``TYPES[i]``; segments where none runs are left out) and its duration in ns."""
    types = op_types(ops)
    if rows is not None:
        types = np.where(rows, types, OTHER)
    start, end = ops["start"].to_numpy(), ops["end"].to_numpy()
    times, steps = [], []
    for index in range(len(TYPES)):
        mine = types == index
        if mine.any():
            low, high = merge_intervals(start[mine], end[mine])
            times += [low, high]
            steps += [np.full(len(low), 1 << index), np.full(len(high), -(1 << index))]
    if not times:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    time, step = np.concatenate(times), np.concatenate(steps)
    order = np.argsort(time, kind="stable")
    time, running = time[order], np.cumsum(step[order])
    duration = np.diff(time)
    running = running[:-1]
    keep = (running > 0) & (duration > 0)
    return running[keep], duration[keep]


def type_label(mask: int) -> str:
    """ "computation", or "computation overlapping communication" for several types (HTA's wording)."""
    return " overlapping ".join(name for index, name in enumerate(TYPES) if mask & (1 << index))


def type_table(ops: pd.DataFrame, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Time per type and per overlap of types, largest first, with its share of the total."""
    masks, durations = type_segments(ops, rows)
    labels, inverse = np.unique(masks, return_inverse=True)
    totals = np.zeros(len(labels), dtype=np.int64)
    np.add.at(totals, inverse.reshape(-1), durations)  # integer sums: float weights lose ns past 2^53
    table = pd.DataFrame({TYPE: [type_label(int(mask)) for mask in labels], TIME: totals})
    table = table.sort_values(TIME, ascending=False, kind="stable", ignore_index=True)
    total = int(table[TIME].sum())
    table.insert(1, SHARE, 100 * table[TIME] / total if total else 0.0)
    return table
