"""Times keyed by group: one int64 per (group code, time) that sorts by group, then time.

A key is ``code * span + offset(t)``. Normally the offset is ``t - t0`` (ns). When ``groups * span``
would not fit int64 (thousands of groups over a capture days long, or a hostile export), the offset
is the time's rank among all times given instead: ranks keep every order and every tie, which is all
that sorting, ``searchsorted`` and interval merging need, and ``split`` turns a key back into ns.

``stream_keys``: the group a GPU op's stream is, one int64 per (device, stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# Keys stay below this so that adding a span (or a rank) to a key cannot overflow either.
KEY_LIMIT = 2**62


class KeyedTimes:
    """Key the times of ``groups`` group codes; ``times`` lists every time that will be keyed (ns)."""

    def __init__(self, groups: int, times: list[np.ndarray]):
        present = [np.asarray(t, dtype=np.int64) for t in times if len(t)]
        self.t0 = min(int(t.min()) for t in present) if present else 0
        self.span = (max(int(t.max()) for t in present) - self.t0 + 2) if present else 1
        self.ranks: np.ndarray | None = None
        if max(groups, 1) * self.span >= KEY_LIMIT:
            self.ranks = np.unique(np.concatenate(present))
            self.span = len(self.ranks) + 1

    def key(self, code: np.ndarray, t: np.ndarray) -> np.ndarray:
        """int64 key per (code, time); ``t`` must be among the times given at construction."""
        key = np.asarray(code, dtype=np.int64) * self.span  # a new array: the offset is added in place
        if self.ranks is None:
            key -= self.t0  # first: code * span + t alone could pass int64 with epoch times
            key += t
        else:
            key += np.searchsorted(self.ranks, t)
        return key

    def split(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(code, time in ns) of each key."""
        code, offset = np.divmod(key, self.span)
        return code, (offset + self.t0 if self.ranks is None else self.ranks[offset])


def stream_keys(ops: pd.DataFrame) -> np.ndarray:
    """Per GPU op, one int64 for its (device, stream): equal where both are (stream ids are 32-bit)."""
    stream = ops["stream"].to_numpy().astype(np.int64) & 0xFFFFFFFF
    return ops["device"].to_numpy().astype(np.int64) * 2**32 + stream
