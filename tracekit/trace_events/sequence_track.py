"""The kernel sequences a trace repeats (``tracekit sequences``) as tracks of the timeline: per GPU, one
track for each of the most frequent sequences, a slice per occurrence from its first kernel's start to
its last kernel's end, named by the sequence. Occurrences of one sequence that overlap (a repeating
pattern's windows do) are drawn once: the first of them, then the next that starts after it ends.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.kernels.sequences import kernel_windows, ranked
from tracekit.model.trace import Trace
from tracekit.trace_events.events import Labels, Slices
from tracekit.trace_events.window import Window

SEQUENCE_LENGTH = 3  # kernels: tracekit sequences' default
FIRST_TID = 2**31 - 2  # sequence k's track on a GPU: FIRST_TID - k (the idle track is 2^31 - 1)
NAME_LIMIT = 200  # characters of a track's name (kernel names run to hundreds)


def sequence_slices(trace: Trace, count: int, window: Window, length: int = SEQUENCE_LENGTH) -> pd.DataFrame:
    """The occurrences of the ``count`` most frequent sequences of ``length`` kernels that the window
    holds: device, tid (the sequence's track), start, duration (ns) and name ("#1 A -> B -> C")."""
    columns = {"device": [], "tid": [], "start": [], "duration": [], "name": []}
    ops = trace.gpu_ops
    if count <= 0 or not (ops["kind"] == "kernel").any():
        return pd.DataFrame(columns)
    windows = kernel_windows(trace, length)
    top = ranked(trace, windows, 2, count)
    if top.empty:  # no sequence repeats: no track
        return pd.DataFrame(columns)
    starts, ends, devices = ops["start"].to_numpy(), ops["end"].to_numpy(), ops["device"].to_numpy()
    for rank, (sequence, text) in enumerate(zip(top["sequence"].tolist(), top["text"].tolist(), strict=True)):
        chosen = np.flatnonzero(windows.sequence == sequence)
        first, last = windows.rows(chosen, 0), windows.rows(chosen, length - 1)
        start, end, device = starts[first], ends[last], devices[first]
        keep = _first_of_overlapping(start, end, device)
        inside = window.overlapping(start[keep], end[keep])
        keep = keep if inside is None else keep[inside]
        columns["device"].append(device[keep])
        columns["tid"].append(np.full(len(keep), FIRST_TID - rank))
        columns["start"].append(start[keep])
        columns["duration"].append(end[keep] - start[keep])
        columns["name"].append(np.full(len(keep), f"#{rank + 1} {text}"[:NAME_LIMIT], dtype=object))
    return pd.DataFrame({name: np.concatenate(parts) for name, parts in columns.items()})


def _first_of_overlapping(start: np.ndarray, end: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Positions of the occurrences drawn on one GPU's track: by start, each that starts at or after the
    last drawn one ended (greedy: a loop over one sequence's occurrences, only when some overlap)."""
    order = np.lexsort((start, device))
    start, end, device = start[order], end[order], device[order]
    overlaps = np.zeros(len(order), dtype=bool)
    overlaps[1:] = (device[1:] == device[:-1]) & (start[1:] < end[:-1])
    if not overlaps.any():
        return order
    keep = np.ones(len(order), dtype=bool)
    drawn_end, drawn_device = end[0], device[0]
    for index in range(1, len(order)):
        if device[index] == drawn_device and start[index] < drawn_end:
            keep[index] = False
            continue
        drawn_end, drawn_device = end[index], device[index]
    return order[keep]


def sequence_events(
    slices: pd.DataFrame, gpu_pid, category: str = "tracekit_sequence", offset: int = 0
) -> list[Slices]:
    """The slices on their GPU's process (``gpu_pid``: device -> pid; ``offset``: ns added to the times)."""
    if slices.empty:
        return []
    return [
        Slices(
            Labels.constant(category, len(slices)),
            Labels.of(pd.Categorical(slices["name"].to_numpy())),
            gpu_pid(slices["device"].to_numpy()),
            slices["tid"].to_numpy().astype(np.int64),
            slices["start"].to_numpy().astype(np.int64) + offset,
            slices["duration"].to_numpy().astype(np.int64),
        )
    ]


def sequence_track_names(slices: pd.DataFrame) -> list[tuple[int, int, str]]:
    """(device, tid, name) of each sequence track that has slices."""
    distinct = slices.drop_duplicates(["device", "tid"])
    return [
        (int(device), int(tid), str(name))
        for device, tid, name in distinct[["device", "tid", "name"]].itertuples(index=False)
    ]
