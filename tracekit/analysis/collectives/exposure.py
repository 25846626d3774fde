"""How much of each collective computation hid, split at any moment decided later (the last peer's
arrival, known only once every rank's trace is read).

On one rank, a collective's time is covered where a computation kernel (``kernel_types``: HTA's
computation type) ran on the same GPU; the rest is exposed, as ``tracekit overlap`` counts it. The pieces
of each collective that computation covered are what a rank contributes (a few per collective); any
split of the collective into a wait and a transfer then gets its exposed parts by clipping them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.intervals import merge_intervals
from tracekit.analysis.primitives.kernel_types import TYPES, op_types


@dataclass
class CoveredPieces:
    """The parts of collectives that computation covered: ``owner`` is the collective's position in the
    instances the pieces were made for; ``start``/``end`` in ns."""

    owner: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def exposed(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per collective: the time of [start, end) (ns, one window per owner) that no piece covers."""
        lengths = np.maximum(end - start, 0)
        if not len(self.owner):
            return lengths
        low = np.maximum(self.start, start[self.owner])
        high = np.minimum(self.end, end[self.owner])
        covered = np.bincount(self.owner, weights=np.maximum(high - low, 0), minlength=len(start))
        return lengths - covered.astype(np.int64)


def covered_pieces(ops: pd.DataFrame, instances: pd.DataFrame) -> CoveredPieces:
    """For each row of ``instances`` (start, duration, device): the pieces of it during which a computation
    kernel ran on its device. Per device, the computation kernels' union is merged once; each collective
    finds the merged intervals it overlaps by two binary searches."""
    types = op_types(ops)
    computing = types == TYPES.index("computation")
    devices = ops["device"].to_numpy()
    begin = instances["start"].to_numpy(np.int64)
    finish = begin + instances["duration"].to_numpy(np.int64)
    on = instances["device"].to_numpy()
    owners, starts, ends = [], [], []
    for device in np.unique(on):  # a few GPUs per trace
        mine = np.flatnonzero(on == device)
        rows = computing & (devices == device)
        union_start, union_end = merge_intervals(ops["start"].to_numpy()[rows], ops["end"].to_numpy()[rows])
        first = np.searchsorted(union_end, begin[mine], side="right")  # the first interval ending after it starts
        stop = np.searchsorted(union_start, finish[mine], side="left")  # intervals starting before it ends
        count = np.maximum(stop - first, 0)
        owner = np.repeat(mine, count)
        offsets = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
        interval = np.repeat(first, count) + offsets
        owners.append(owner)
        starts.append(np.maximum(union_start[interval], begin[owner]))
        ends.append(np.minimum(union_end[interval], finish[owner]))
    if not owners:
        return CoveredPieces(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    return CoveredPieces(np.concatenate(owners).astype(np.int64), np.concatenate(starts), np.concatenate(ends))
