"""Interval algebra over int64 ns: unions of intervals, reductions over segments, peaks of a step function.

Intervals of many groups merge in one pass when keyed by group (``keyed_times``): groups never touch.
"""

from __future__ import annotations

import numpy as np


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end] intervals (keyed times: groups never touch), sorted and disjoint."""
    if len(start) == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    _, low, high = merge_sorted(start[order], end[order])
    return low, high


def merge_sorted(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of [start, end] intervals already sorted by start: the position of each merged interval's
    first interval, and the merged intervals' starts and ends."""
    reach = np.maximum.accumulate(end)
    first = np.flatnonzero(np.concatenate(([True], start[1:] > reach[:-1])))
    return first, start[first], np.maximum.reduceat(end, first)


def segment_reduce(reductions: list[tuple[np.ufunc, np.ndarray]], low: np.ndarray, high: np.ndarray) -> list:
    """For each (ufunc, values): ufunc.reduce over values[low[i]:high[i]] for every i (empty segments give
    values[low], ignore them). One ordering of the segments serves every reduction.

    ``reduceat`` over interleaved (low, high) indices: even results are the segments; sorting the
    segments by ``low`` keeps the odd, discarded stretches disjoint, so the cost stays O(n + total
    segment length).
    """
    length = len(reductions[0][1])
    if length == 0:
        return [np.zeros(len(low), dtype=values.dtype) for _, values in reductions]
    order = np.argsort(low, kind="stable")
    indices = np.empty(2 * len(low), dtype=np.int64)
    indices[0::2] = low[order]
    indices[1::2] = np.maximum(high[order], indices[0::2])
    np.minimum(indices, length, out=indices)
    results = []
    for ufunc, values in reductions:
        padded = np.append(values, values[-1])  # reduceat indices must be < len
        result = np.empty(len(low), dtype=values.dtype)
        result[order] = ufunc.reduceat(padded, indices)[0::2]
        results.append(result)
    return results


def column_peaks(time: np.ndarray, values: np.ndarray, origin: int, span: int, bins: int) -> list:
    """A step function (``values`` from each ``time`` on, ns, in time order) cut into ``bins`` columns of
    ``span`` ns from ``origin``: per column its largest value, or the value held from before it when it
    has no change (a peak narrower than a column still shows; a quiet column keeps its level)."""
    column = np.minimum(((time - origin) * bins) // span, bins - 1)
    most = np.full(bins, -1, dtype=values.dtype)
    np.maximum.at(most, column, values)
    last_in = np.full(bins, -1, dtype=np.int64)
    np.maximum.at(last_in, column, np.arange(len(values)))
    carried = np.maximum.accumulate(last_in)
    held = np.where(carried >= 0, values[np.maximum(carried, 0)], 0)
    return np.where(most >= 0, most, held).tolist()
