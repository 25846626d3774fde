"""A stretch of a trace as a trace of its own: what the host did in a window of time and the GPU work it
launched there, so any analysis can judge a steady state without knowing it was cut.

Kept, for a window [start, end) in ns: the API calls that began in it; the GPU ops launched by those calls
(an op with no recorded launch: one that began in it); the ranges and Python calls that overlap it (so a
range's or call's ancestors, which contain it, are kept with it); the optional tables' rows that belong to
kept rows (their ``op`` and ``row`` references renumbered) or that began in the window. The metadata is the trace's own.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.joins import op_launches
from tracekit.model.trace import Trace

TIMED_OPTIONAL = ("copies", "profiler_overhead", "gpu_syncs")  # rows kept by when they began
OP_KEYED = ("copy_rates", "occupancy_estimates")  # rows of gpu_ops by "op"


def trace_window(trace: Trace, start: int, end: int) -> Trace:
    """``trace`` cut to [start, end) ns (see the module)."""
    ops, calls, ranges = trace.gpu_ops, trace.launches, trace.ranges
    launches = op_launches(trace)
    when = np.where(launches.found, launches.start, ops["start"].to_numpy())
    kept_ops = (when >= start) & (when < end)
    call_start = calls["start"].to_numpy()
    kept_calls = (call_start >= start) & (call_start < end)
    kept_ranges = (ranges["start"].to_numpy() < end) & (ranges["end"].to_numpy() > start)
    renumber = np.full(len(ops), -1, dtype=np.int64)
    renumber[kept_ops] = np.arange(int(kept_ops.sum()))
    range_ids = ranges["range_id"].to_numpy()[kept_ranges]
    frames = {
        "gpu_ops": ops.loc[kept_ops].reset_index(drop=True),
        "launches": calls.loc[kept_calls].reset_index(drop=True),
        "ranges": ranges.loc[kept_ranges].reset_index(drop=True),
    }
    loaders: dict[str, Callable[[], pd.DataFrame]] = {table: _returning(frame) for table, frame in frames.items()}
    for table in (
        "copies",
        "profiler_overhead",
        "gpu_syncs",
        *OP_KEYED,
        "op_shapes",
        "collective_args",
        "thread_names",
        "python_calls",
    ):
        if table in trace.loaders:
            loaders[table] = _optional_loader(trace, table, start, end, renumber, range_ids)
    return Trace(trace.meta, loaders)


def _returning(frame: pd.DataFrame) -> Callable[[], pd.DataFrame]:
    return lambda: frame


def _optional_loader(trace: Trace, table: str, start: int, end: int, renumber: np.ndarray, range_ids: np.ndarray):
    """A loader of ``table``'s rows that belong to the window (read when asked, as the trace's own)."""

    def load() -> pd.DataFrame:
        frame = trace.optional(table)
        if frame is None:
            return pd.DataFrame()
        if table in TIMED_OPTIONAL:
            began = frame["start"].to_numpy()
            return frame.loc[(began >= start) & (began < end)].reset_index(drop=True)
        if table in OP_KEYED:
            op = renumber[frame["op"].to_numpy()]
            return frame.loc[op >= 0].assign(op=op[op >= 0]).reset_index(drop=True)
        if table == "python_calls":  # as ranges: a call's callers contain it, and are kept with it
            overlaps = (frame["start"].to_numpy() < end) & (frame["end"].to_numpy() > start)
            return frame.loc[overlaps].reset_index(drop=True)
        if table == "thread_names":  # names, not events: every process and thread keeps its name
            return frame
        if table == "op_shapes":
            return frame.loc[np.isin(frame["range_id"].to_numpy(), range_ids)].reset_index(drop=True)
        # collective_args: a range's range_id, or a GPU op's row
        on_op = (frame["source"].astype(str) == "gpu_op").to_numpy()
        row = frame["row"].to_numpy()
        mapped = np.where(on_op, renumber[np.clip(row, 0, max(len(renumber) - 1, 0))] if len(renumber) else -1, row)
        keep = np.where(on_op, mapped >= 0, np.isin(row, range_ids))
        return frame.loc[keep].assign(row=mapped[keep]).reset_index(drop=True)

    return load
