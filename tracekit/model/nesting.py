"""Nesting of NVTX ranges on a thread: each range's parent (tightest enclosing range) and depth.

A range j encloses range i when j.start <= i.start and j.end >= i.end on the same thread (nsys's
definition in its ``nvtxgpuproj`` report). Sorted by (thread, start ascending, end descending), the
enclosing ranges of i all come before it, and the tightest one is the nearest earlier range whose end
is >= i.end: the "previous greater-or-equal element" of the end times. We find it for all ranges at
once by pointer jumping (each round every unresolved range skips to its candidate's candidate), so
the cost is a few vector passes over the table instead of a Python loop over its rows.
"""

from __future__ import annotations

import numpy as np


def thread_key(pid, tid) -> np.ndarray:
    """One int64 per (process, thread): pid << 24 | tid (nsys's tids and pids fit in 24 bits)."""
    return (np.asarray(pid, dtype=np.int64) << 24) | np.asarray(tid, dtype=np.int64)


def nest_ranges(
    thread: np.ndarray, start: np.ndarray, end: np.ndarray, eligible: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Parent (row index, -1 for none) and depth of each range.

    ``thread`` is any int64 key identifying a thread (e.g. pid << 24 | tid). Ranges where
    ``eligible`` is False (start/end ranges closed on another thread) get depth 0, parent -1, and are
    nobody's parent.
    """
    count = len(start)
    parent = np.full(count, -1, dtype=np.int64)
    depth = np.zeros(count, dtype=np.int32)
    # Row positions fit int32 below 2^31 rows: half the memory of every index array here (millions of rows)
    index = np.int32 if count < 2**31 else np.int64
    if count == 0:
        return parent, depth
    if eligible is None or eligible.all():  # the usual case: no copies of the columns to sort them
        order = np.lexsort((-end, start, thread)).astype(index)
    else:
        rows = np.flatnonzero(eligible)
        if len(rows) == 0:
            return parent, depth
        order = rows[np.lexsort((-end[rows], start[rows], thread[rows]))].astype(index)
        del rows
    n = len(order)
    sorted_thread = thread[order]
    first_on_thread = np.ones(n, dtype=bool)
    first_on_thread[1:] = sorted_thread[1:] != sorted_thread[:-1]
    del sorted_thread
    sorted_end = end[order]
    # A range has no encloser when every earlier range on its thread ends before it does: a running
    # maximum of ends (restarted per thread by offsetting each thread's times) finds all roots at
    # once. Without this, a flat run of sibling ranges (every PyTorch op) makes long jump chains.
    thread_index = np.cumsum(first_on_thread, dtype=np.int64)
    thread_index -= 1
    low = int(sorted_end.min())
    width = int(sorted_end.max()) - low + 1
    if (int(thread_index[-1]) + 1) * width < 2**62:
        shifted = sorted_end - low
        thread_index *= width
    else:  # thousands of threads over a long capture would wrap int64: the ends' ranks keep every order
        shifted = np.unique(sorted_end, return_inverse=True)[1].reshape(-1).astype(np.int64)
        thread_index *= int(shifted.max()) + 1
    shifted += thread_index
    del thread_index
    running = np.maximum.accumulate(shifted)  # the latest end up to each range, on its thread
    root = first_on_thread
    root[1:] |= running[:-1] < shifted[1:]
    del running, shifted
    # Invariant: every range strictly between candidate[i] and i (in sorted order) ends before i ends,
    # so none of them can enclose i.
    candidate = np.arange(-1, n - 1, dtype=index)
    candidate[root] = -1
    del root
    unresolved = np.flatnonzero(candidate >= 0)
    unresolved = unresolved[sorted_end[candidate[unresolved]] < sorted_end[unresolved]]
    while len(unresolved):
        candidate[unresolved] = candidate[candidate[unresolved]]
        unresolved = unresolved[candidate[unresolved] >= 0]
        unresolved = unresolved[sorted_end[candidate[unresolved]] < sorted_end[unresolved]]
    del sorted_end, unresolved

    depth[order] = _depths(candidate)
    has_parent = np.flatnonzero(candidate >= 0)
    parent[order[has_parent]] = order[candidate[has_parent]]
    return parent, depth


def _depths(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of each node of a forest given as a parent array (list ranking)."""
    ancestor = parent.copy()
    distance = (parent >= 0).astype(np.int32)
    active = np.flatnonzero(ancestor >= 0)
    while len(active):
        above = ancestor[active]
        distance[active] += distance[above]
        ancestor[active] = ancestor[above]
        active = active[ancestor[active] >= 0]
    return distance
