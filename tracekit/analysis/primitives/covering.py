"""The innermost range of a thread that covers a stretch of that thread's time: the range a blocking call
sat in, the operator that launched a kernel, the operator a kernel sequence came from.

Vectorized over the stretches: one ``searchsorted`` per thread finds the last range that started at or
before each stretch, then every stretch climbs its ranges' parents together (the nesting the reader
computed) until a range covers it; nesting is shallow (tens of levels), so a few vector passes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def parent_rows(ranges: pd.DataFrame) -> np.ndarray:
    """Per range: the row (in ``ranges``) of its parent, -1 for an outermost range (or a parent left out)."""
    ids = ranges["range_id"].to_numpy()
    if not len(ids):
        return np.zeros(0, dtype=np.int64)
    by_id = np.argsort(ids, kind="stable")
    wanted = ranges["parent"].to_numpy()
    at = np.minimum(np.searchsorted(ids[by_id], wanted), len(ids) - 1)
    return np.where((wanted >= 0) & (ids[by_id][at] == wanted), by_id[at], -1).astype(np.int64)


def covering_range(
    ranges: pd.DataFrame,
    pid: np.ndarray,
    tid: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    eligible: np.ndarray | None = None,
) -> np.ndarray:
    """Per stretch (``pid``, ``tid``, ``start``..``end`` in ns): the row in ``ranges`` of the innermost
    range of that thread that covers it whole (range start <= start, range end >= end) and is
    ``eligible`` (a mask over ``ranges``; default every range outside the "gpu" domain, whose rows are
    GPU-side annotations on streams, not threads); -1 where none does. A zero-length stretch asks which
    range was open at an instant."""
    count = len(start)
    found = np.full(count, -1, dtype=np.int64)
    if ranges.empty or not count:
        return found
    allowed = (ranges["domain"].astype(str) != "gpu").to_numpy() if eligible is None else eligible
    range_start, range_end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    parent = parent_rows(ranges)
    keys = _thread_keys(
        np.concatenate([ranges["pid"].to_numpy(np.int64), np.asarray(pid, dtype=np.int64)]),
        np.concatenate([ranges["tid"].to_numpy(np.int64), np.asarray(tid, dtype=np.int64)]),
    )
    thread, wanted = keys[: len(ranges)], keys[len(ranges) :]
    # only the threads asked about are sorted (a few blocking calls' threads among millions of ranges)
    asked = np.flatnonzero(np.isin(thread, np.unique(wanted)))
    if not len(asked):  # no thread asked about has a range
        return found
    # by thread, then start, then depth: of ranges that start together the innermost comes last, so the
    # climb from "the last range started" passes every range that covers the stretch
    depth = ranges["depth"].to_numpy()[asked] if "depth" in ranges else np.zeros(len(asked), dtype=np.int64)
    order = asked[np.lexsort((depth, range_start[asked], thread[asked]))]
    sorted_thread, sorted_start = thread[order], range_start[order]
    low = np.searchsorted(sorted_thread, wanted, side="left")
    high = np.searchsorted(sorted_thread, wanted, side="right")
    at = np.full(count, -1, dtype=np.int64)
    for key in np.unique(wanted[high > low]).tolist():  # threads are few: one searchsorted each
        mine = np.flatnonzero(wanted == key)
        lo, hi = int(low[mine[0]]), int(high[mine[0]])
        last = lo + np.searchsorted(sorted_start[lo:hi], start[mine], side="right") - 1
        at[mine] = np.where(last >= lo, last, -1)
    current = np.where(at >= 0, order[np.maximum(at, 0)], -1)
    while True:
        looking = np.flatnonzero(current >= 0)
        if not len(looking):
            return found
        rows = current[looking]
        covers = allowed[rows] & (range_start[rows] <= start[looking]) & (range_end[rows] >= end[looking])
        found[looking[covers]] = rows[covers]
        current[looking[covers]] = -1
        current[looking[~covers]] = parent[rows[~covers]]


def _thread_keys(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per (pid, tid), equal where the pairs are: packed when both fit 32 bits (the usual), else
    from the codes of each (nsys's thread ids, a JSON trace's any integers)."""
    if len(pid) == 0 or (pid.min() >= -(2**31) and pid.max() < 2**31 and tid.min() >= 0 and tid.max() < 2**32):
        return pid * 2**32 + tid
    pid_codes, pids = pd.factorize(pid)
    tid_codes, tids = pd.factorize(tid)
    return pid_codes.astype(np.int64) * len(tids) + tid_codes
