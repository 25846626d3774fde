"""Duration statistics per group, defined exactly as nsys's summary reports define them.

nsys (``gpukernsum``, ``nvtxsum``, ``gpumemtimesum``, ...) reports per group: Total = sum of
durations, Instances = count, Avg, Med (mean of the two middle values for an even count), Min, Max,
StdDev (sample standard deviation, 0 for a single instance), and Time (%) = total / sum of all
groups' totals. It rounds Avg, Med, StdDev and Time (%) to one decimal with SQLite's ``round``, which
rounds halves away from zero (numpy's ``round`` rounds them to even: 0.25 -> 0.2 instead of 0.3).
tracekit keeps them unrounded (a notebook gets the exact figures); the renderer prints them for
people as nsys does: one decimal, halves away from zero (``render.tables``).

The core, ``grouped_stats``, works on integer group codes: it sorts one int64 array holding
(group, duration) packed together, so min, max and median fall out of the sorted order and memory
stays a few arrays of the table's length (a 10M-kernel trace summarizes in about 1 s and 300 MB).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

TIME_PCT = "Time (%)"
TOTAL = "Total Time (ns)"
INSTANCES = "Instances"
AVG = "Avg (ns)"
MED = "Med (ns)"
MIN = "Min (ns)"
MAX = "Max (ns)"
STDDEV = "StdDev (ns)"
STAT_COLUMNS = [TIME_PCT, TOTAL, INSTANCES, AVG, MED, MIN, MAX, STDDEV]
SHOWN_SHARE = 0.05  # a share (%) below this prints as 0.0: too small to name


def round_half_away(values, decimals: int = 1):
    """Round like SQLite's ``round(x, n)``: halves go away from zero."""
    scale = 10.0**decimals
    values = np.asarray(values, dtype=float)
    return np.sign(values) * np.floor(np.abs(values) * scale + 0.5) / scale


def percent_of_total(totals) -> np.ndarray:
    """Each total's share of their sum in percent, rounded to 0.1 as nsys does (0 when the sum is 0)."""
    totals = np.asarray(totals, dtype=float)
    grand = totals.sum()
    if grand == 0:
        return np.zeros(len(totals))
    return totals * 100.0 / grand


def grouped_stats(codes: np.ndarray, values: np.ndarray) -> pd.DataFrame:
    """nsys statistics of ``values`` (non-negative int64 ns) per group code; rows with code < 0 are left out.

    Returns one row per present code (the index), columns Total Time (ns) .. StdDev (ns), unrounded
    Avg/Med/StdDev as float; no Time (%). Excluded rows are not copied out first: their negative
    codes sort before every group and are sliced off.
    """
    codes = np.asarray(codes)
    values = np.asarray(values, dtype=np.int64)
    if len(values) == 0 or codes.max(initial=-1) < 0:
        return pd.DataFrame(columns=[TOTAL, INSTANCES, AVG, MED, MIN, MAX, STDDEV], index=pd.Index([], dtype=np.int64))
    group, ordered = _sort_by_group_then_value(codes, values)
    starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    index = group[starts]
    del group
    counts = np.diff(np.append(starts, len(ordered)))
    totals = np.add.reduceat(ordered, starts)
    means = totals / counts
    middle_low = ordered[starts + (counts - 1) // 2]
    middle_high = ordered[starts + counts // 2]
    minima, maxima = ordered[starts], ordered[starts + counts - 1]
    # Two passes (deviations from the group mean) keep the sample variance exact for long durations,
    # where sum-of-squares minus squared-sum would cancel catastrophically.
    deviations = ordered.astype(np.float64)
    del ordered
    deviations -= np.repeat(means, counts)
    deviations *= deviations
    squares = np.add.reduceat(deviations, starts)
    del deviations
    with np.errstate(invalid="ignore", divide="ignore"):
        stddev = np.where(counts > 1, np.sqrt(squares / np.maximum(counts - 1, 1)), 0.0)
    return pd.DataFrame(
        {
            TOTAL: totals,
            INSTANCES: counts,
            AVG: means,
            MED: (middle_low + middle_high) / 2.0,
            MIN: minima,
            MAX: maxima,
            STDDEV: stddev,
        },
        index=pd.Index(index, dtype=np.int64),
    )


DESCRIBE = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")


def grouped_describe(codes: np.ndarray, values: np.ndarray, groups: int) -> pd.DataFrame:
    """pandas' ``describe`` of ``values`` for each group code 0 .. ``groups`` - 1 (each present at least
    once), all groups at once (``groupby().describe()`` runs Python per group: 0.7 ms a group, 70 s for
    100k streams): count, mean, std (n - 1; NaN for one value), min, the quartiles (linear interpolation,
    numpy's and pandas' default, numpy's way of interpolating), max. Columns ``DESCRIBE``, a row per code."""
    order = np.lexsort((values, codes))
    ordered = np.asarray(values)[order].astype(np.float64)
    starts = np.searchsorted(np.asarray(codes)[order], np.arange(groups))
    counts = np.diff(np.append(starts, len(ordered)))
    means = np.add.reduceat(ordered, starts) / counts
    deviations = ordered - np.repeat(means, counts)
    squares = np.add.reduceat(deviations * deviations, starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = np.where(counts > 1, np.sqrt(squares / (counts - 1)), np.nan)
    columns = {"count": counts.astype(np.float64), "mean": means, "std": spread, "min": ordered[starts]}
    for name, fraction in (("25%", 0.25), ("50%", 0.5), ("75%", 0.75)):
        position = (counts - 1) * fraction  # numpy's "linear" method: a virtual index, then a lerp
        below = np.floor(position).astype(np.int64)
        weight = position - below
        low, high = ordered[starts + below], ordered[starts + np.minimum(below + 1, counts - 1)]
        difference = high - low
        columns[name] = np.where(weight >= 0.5, high - difference * (1 - weight), low + difference * weight)
    columns["max"] = ordered[starts + counts - 1]
    return pd.DataFrame(columns)


# Up to this many groups (kernel names, say), with at least ROWS_PER_GROUP rows each on average, rows are
# grouped by a radix sort of 16-bit codes and each group's median found by selection: linear, and faster
# than sorting every (group, value) pair (10M rows, 45 groups: 0.65 s against 0.85-1.2 s). With many small
# groups the per-group step's Python loop would cost more than the sort it saves.
FEW_GROUPS = 2**16 - 1
ROWS_PER_GROUP = 1000


def _sort_by_group_then_value(codes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group, value) pairs of rows with a code >= 0, ordered by group; within a group the values are in
    no particular order except that the minimum comes first, the maximum last and the two middle ones
    (the median's) sit in the middle, which is all ``grouped_stats`` reads."""
    groups = int(codes.max()) + 1 if len(codes) else 0
    if groups <= FEW_GROUPS and len(codes) >= ROWS_PER_GROUP * groups:
        return _grouped_by_selection(codes, values)
    span = int(values.max()) + 1 if len(values) else 1
    if int(codes.max()) < (2**62) // span:
        packed = codes.astype(np.int64) * span  # one int64 key: an in-place sort beats an argsort plus gathers
        packed += values
        packed.sort()
        kept = packed[np.searchsorted(packed, 0) :]  # code -1 packs below zero: the excluded rows come first
        group, ordered = np.divmod(kept, span)
        return group, ordered
    keep = codes >= 0
    codes, values = codes[keep], values[keep]
    order = np.lexsort((values, codes))
    return codes[order], values[order]


def _grouped_by_selection(codes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_sort_by_group_then_value`` for few groups: a stable sort of 16-bit codes is a radix sort in
    numpy (linear), then per group a partition puts min, the middle pair and max in place."""
    # Shifted by one so that -1 (rows left out) is 0: unsigned keys sort fastest (uint8 twice int8's speed).
    # clamped before narrowing (a code below -2^31 must not wrap); a new array; any negative code is "left out"
    shifted = np.maximum(codes, -1).astype(np.int32, copy=False)
    shifted += 1
    small = shifted.astype(np.uint8 if int(shifted.max()) < 2**8 else np.uint16)
    del shifted
    order = np.argsort(small, kind="stable")
    order = order[int(np.count_nonzero(small == 0)) :]  # the rows left out sort first
    group, ordered = small[order].astype(np.int32) - 1, values[order]
    del order, small
    starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1]))) if len(group) else np.empty(0, np.int64)
    ends = np.append(starts[1:], len(group))
    for start, end in zip(starts.tolist(), ends.tolist()):
        count = end - start
        if count > 1:
            # positions within the group: 0 (min), the middle pair, count - 1 (max)
            kth = sorted({0, (count - 1) // 2, count // 2, count - 1})
            ordered[start:end] = np.partition(ordered[start:end], kth)
    return group, ordered


def combine_codes(parts: Sequence[np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """Combine per-key integer codes (each 0..n-1, -1 for missing) into one code per row.

    Returns the combined codes (-1 where any part is missing) and the radix of each part, for
    ``split_codes`` to take a combined code apart again.
    """
    radices = [int(part.max()) + 1 if len(part) else 1 for part in parts]
    if len(parts) == 1:  # one key: a copy of its codes (callers may mark rows -1 in place)
        return np.array(parts[0], dtype=np.int32 if radices[0] < 2**31 else np.int64), radices
    combined = np.zeros(len(parts[0]), dtype=np.int64)
    missing = np.zeros(len(parts[0]), dtype=bool)
    for part, radix in zip(parts, radices):
        combined *= radix
        combined += part
        missing |= part < 0
    combined[missing] = -1
    return combined, radices


def split_codes(combined: np.ndarray, radices: list[int]) -> list[np.ndarray]:
    """Inverse of ``combine_codes`` for non-negative combined codes."""
    parts = []
    rest = np.asarray(combined, dtype=np.int64)
    for radix in reversed(radices):
        rest, part = np.divmod(rest, radix)
        parts.append(part)
    return parts[::-1]


def finish(
    table: pd.DataFrame,
    keys: Mapping[str, Sequence | np.ndarray],
    extra: Mapping[str, Sequence | np.ndarray] | None = None,
) -> pd.DataFrame:
    """Key columns, the statistics and Time (%) as nsys computes them (unrounded: the renderer rounds them
    for people as nsys prints them), then ``extra`` columns (aligned with ``table``'s rows); largest
    total first."""
    result = pd.DataFrame(
        {name: list(values) if not isinstance(values, np.ndarray) else values for name, values in keys.items()}
    )
    result[TIME_PCT] = percent_of_total(table[TOTAL].to_numpy())
    result[TOTAL] = table[TOTAL].to_numpy(np.int64)
    result[INSTANCES] = table[INSTANCES].to_numpy(np.int64)
    for column in (AVG, MED, STDDEV):
        result[column] = table[column].to_numpy(np.float64)
    result[MIN] = table[MIN].to_numpy(np.int64)
    result[MAX] = table[MAX].to_numpy(np.int64)
    for name, values in (extra or {}).items():
        result[name] = np.asarray(values)
    result = result.loc[:, list(keys) + STAT_COLUMNS + list(extra or {})]
    return sort_by_total(result, list(keys))


def sort_by_total(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Largest ``Total Time (ns)`` first; ties broken by the key columns (as text) for stable output."""
    tie_break = [frame[key].astype(str).to_numpy() for key in keys]
    order = np.lexsort([*reversed(tie_break), -frame[TOTAL].to_numpy()])
    return frame.iloc[order].reset_index(drop=True)
