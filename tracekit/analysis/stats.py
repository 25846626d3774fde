"""Duration statistics per group, defined exactly as nsys's summary reports define them.

nsys (``gpukernsum``, ``nvtxsum``, ``gpumemtimesum``, ...) reports per group: Total = sum of
durations, Instances = count, Avg, Med (mean of the two middle values for an even count), Min, Max,
StdDev (sample standard deviation, 0 for a single instance), and Time (%) = total / sum of all
groups' totals. It rounds Avg, Med, StdDev and Time (%) to one decimal with SQLite's ``round``, which
rounds halves away from zero (numpy's ``round`` rounds them to even: 0.25 -> 0.2 instead of 0.3).
"""

from __future__ import annotations

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


def round_half_away(values, decimals: int = 1):
    """Round like SQLite's ``round(x, n)``: halves go away from zero."""
    scale = 10.0 ** decimals
    values = np.asarray(values, dtype=float)
    return np.sign(values) * np.floor(np.abs(values) * scale + 0.5) / scale


def percent_of_total(totals: pd.Series) -> np.ndarray:
    """Each total's share of their sum in percent, rounded to 0.1 as nsys does (0 when the sum is 0)."""
    grand = float(totals.sum())
    if grand == 0:
        return np.zeros(len(totals))
    return round_half_away(totals.to_numpy(dtype=float) * 100.0 / grand, 1)


def duration_stats(frame: pd.DataFrame, keys: list[str], value: str = "duration") -> pd.DataFrame:
    """Per distinct ``keys``: the nsys summary statistics of ``value`` (ns), largest total first.

    Output columns: the keys, then Time (%), Total Time (ns), Instances, Avg (ns), Med (ns),
    Min (ns), Max (ns), StdDev (ns). Ties in total are ordered by the keys, so output is stable.
    """
    if frame.empty:
        return pd.DataFrame(columns=keys + STAT_COLUMNS)
    grouped = frame.groupby(keys, observed=True, sort=False, dropna=False)[value]
    stats = grouped.agg(["sum", "count", "mean", "median", "min", "max", "std"]).reset_index()
    result = stats[keys].copy()
    result[TOTAL] = stats["sum"].astype("int64")
    result[INSTANCES] = stats["count"].astype("int64")
    result[AVG] = round_half_away(stats["mean"])
    result[MED] = round_half_away(stats["median"])
    result[MIN] = stats["min"].astype("int64")
    result[MAX] = stats["max"].astype("int64")
    result[STDDEV] = round_half_away(stats["std"].fillna(0.0))
    result.insert(len(keys), TIME_PCT, percent_of_total(result[TOTAL]))
    return sort_by_total(result, keys)


def sort_by_total(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Largest ``Total Time (ns)`` first; ties broken by the key columns (as text) for stable output."""
    tie_break = [frame[key].astype(str) for key in keys]
    order = np.lexsort([*(column.to_numpy() for column in reversed(tie_break)), -frame[TOTAL].to_numpy()])
    return frame.iloc[order].reset_index(drop=True)
