"""nsys's duration statistics over many files, merged from small per-file partials.

A file's partial holds, per group (a kernel name, a range name and style), the count, the total (int64
ns), min, max and M2 (the sum of squared deviations from the group mean). These merge exactly: counts,
totals, minima and maxima directly, M2 by Chan et al.'s pairwise formula
``M2 = sum(M2_i + n_i * (mean_i - mean)^2)``, so the merged mean (total / count) and sample standard
deviation are the ones a single file holding every sample would give (M2 in float64, as one file's).

The median does not merge from moments. A partial also keeps a group's sorted durations while the group
has at most ``limit`` instances, and always a quantile sketch: durations counted in logarithmic buckets
(DDSketch, Masson et al. 2019) of relative width ``ALPHA``, which merge by adding counts. The merged
median is exact while every file kept its samples and the merged count is within ``limit``; past that
it comes from the sketch, within ``ALPHA`` relative error, and is labelled approximate. Memory: at most
``limit`` samples per group plus a few hundred buckets per group, whatever the number of files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd

from tracekit.analysis import stats

ALPHA = 0.005  # the sketch's relative error bound on a quantile
GAMMA = (1 + ALPHA) / (1 - ALPHA)
ZERO_BUCKET = -1  # durations of 0 ns: log() is undefined there
DEFAULT_EXACT_LIMIT = 10_000  # samples kept per group for an exact median (12 bytes each)
COUNT, TOTAL, MIN, MAX, M2 = "count", "total", "min", "max", "m2"
MED_EXACT = "Med Exact"


@dataclass
class StatsPartial:
    """Mergeable statistics of one or more files.

    ``groups``: one row per group, the key columns then count, total, min, max (int64 ns), m2 (ns^2,
    float), then extra columns (summed when merged, except those in ``minimum``, which take the least).
    ``sample_groups``, ``sample_values``: (group row int32, duration int64) of the groups whose samples
    are all held, sorted by group then value (plain arrays: 12 bytes a sample).
    ``sketch``: (group row, bucket, count) for every group.
    """

    keys: list[str]
    groups: pd.DataFrame
    sample_groups: np.ndarray
    sample_values: np.ndarray
    sketch: pd.DataFrame
    minimum: tuple[str, ...] = ()

    @property
    def exact(self) -> np.ndarray:
        """Per group: whether its samples are all held (its median is exact)."""
        held = np.bincount(self.sample_groups, minlength=len(self.groups))
        return held == self.groups[COUNT].to_numpy()


def partial_of(
    codes: np.ndarray,
    durations: np.ndarray,
    table: pd.DataFrame,
    described: pd.DataFrame,
    keys: list[str],
    limit: int = DEFAULT_EXACT_LIMIT,
    minimum: tuple[str, ...] = (),
) -> StatsPartial:
    """The partial of one file: ``codes`` (int, -1 = left out) group ``durations`` (int64 ns); ``table``
    is ``stats.grouped_stats(codes, durations)`` and ``described`` its groups' columns, row by row: the
    ``keys`` and extra columns (summed when merged; those in ``minimum`` take the least)."""
    present = table.index.to_numpy()
    counts = table[stats.INSTANCES].to_numpy(np.int64)
    groups = described.loc[:, keys].reset_index(drop=True)
    groups[COUNT] = counts
    groups[TOTAL] = table[stats.TOTAL].to_numpy(np.int64)
    groups[MIN] = table[stats.MIN].to_numpy(np.int64)
    groups[MAX] = table[stats.MAX].to_numpy(np.int64)
    groups[M2] = table[stats.STDDEV].to_numpy(np.float64) ** 2 * np.maximum(counts - 1, 0)
    for column in described.columns:
        if column not in keys:
            groups[column] = described[column].to_numpy()
    row_of_code = np.full(int(present.max(initial=-1)) + 1, -1, dtype=np.int64)
    row_of_code[present] = np.arange(len(present))
    codes = np.asarray(codes)
    kept = codes >= 0
    rows, values = row_of_code[codes[kept]], np.asarray(durations, dtype=np.int64)[kept]
    small = (counts <= limit)[rows]
    sample_groups, sample_values = rows[small].astype(np.int32), values[small]
    order = np.lexsort((sample_values, sample_groups))
    sketch = _sketch(rows, values)
    return StatsPartial(list(keys), groups, sample_groups[order], sample_values[order], sketch, tuple(minimum))


def _sketch(rows: np.ndarray, values: np.ndarray) -> pd.DataFrame:
    """Counts per (group row, logarithmic bucket)."""
    with np.errstate(divide="ignore"):
        buckets = np.where(values > 0, np.ceil(np.log(np.maximum(values, 1)) / np.log(GAMMA)), ZERO_BUCKET)
    span = 1 << 20  # buckets of durations up to 2^63 ns stay below 2^14
    packed = rows.astype(np.int64) * span + (buckets.astype(np.int64) - ZERO_BUCKET)
    unique, counts = np.unique(packed, return_counts=True)
    return pd.DataFrame({"group": unique // span, "bucket": unique % span + ZERO_BUCKET, "count": counts})


def merge(parts: list[StatsPartial], limit: int = DEFAULT_EXACT_LIMIT) -> StatsPartial:
    """One partial of all ``parts`` (same keys and extras); groups ordered by first appearance."""
    first = parts[0]
    stacked = pd.concat([part.groups for part in parts], ignore_index=True)
    ids, uniques = pd.MultiIndex.from_frame(stacked[first.keys].astype(object)).factorize()
    offsets = np.cumsum([0] + [len(part.groups) for part in parts])
    extra = [column for column in stacked.columns if column not in first.keys + [COUNT, TOTAL, MIN, MAX, M2]]
    frame = stacked.drop(columns=first.keys)
    frame["id"] = ids
    grouped = frame.groupby("id", sort=True)
    how = {COUNT: "sum", TOTAL: "sum", MIN: "min", MAX: "max"}
    how.update({column: ("min" if column in first.minimum else "sum") for column in extra})
    merged = grouped.agg(how)
    count, total = merged[COUNT].to_numpy(np.int64), merged[TOTAL].to_numpy(np.int64)
    mean = total / np.maximum(count, 1)
    part_mean = frame[TOTAL].to_numpy(np.int64) / np.maximum(frame[COUNT].to_numpy(np.int64), 1)
    spread = frame[M2].to_numpy(np.float64) + frame[COUNT].to_numpy(np.int64) * (part_mean - mean[ids]) ** 2
    merged[M2] = np.bincount(ids, weights=spread, minlength=len(merged))
    groups = pd.DataFrame(list(uniques), columns=first.keys)
    for column in [COUNT, TOTAL, MIN, MAX, M2, *extra]:
        groups[column] = merged[column].to_numpy()

    def remapped(index: int, rows: np.ndarray) -> np.ndarray:
        return ids[offsets[index] + rows.astype(np.int64)]

    sketches = [
        part.sketch.assign(group=remapped(index, part.sketch["group"].to_numpy())) for index, part in enumerate(parts)
    ]
    sketch = pd.concat(sketches, ignore_index=True)
    sketch = cast(pd.DataFrame, sketch.groupby(["group", "bucket"], sort=True, as_index=False)["count"].sum())
    all_exact = np.ones(len(groups), dtype=bool)
    for index, part in enumerate(parts):
        all_exact[ids[offsets[index] : offsets[index + 1]][~part.exact]] = False
    keep = all_exact & (count <= limit)
    sample_groups = np.concatenate([remapped(index, part.sample_groups) for index, part in enumerate(parts)])
    sample_values = np.concatenate([part.sample_values for part in parts])
    kept = keep[sample_groups]
    sample_groups, sample_values = sample_groups[kept].astype(np.int32), sample_values[kept]
    order = np.lexsort((sample_values, sample_groups))
    return StatsPartial(first.keys, groups, sample_groups[order], sample_values[order], sketch, first.minimum)


def statistics(partial: StatsPartial) -> pd.DataFrame:
    """``stats.grouped_stats``'s columns (one row per group, in the partial's order) plus Med Exact."""
    groups = partial.groups
    count = groups[COUNT].to_numpy(np.int64)
    exact = partial.exact
    median = _sketch_median(partial.sketch, count)
    if len(partial.sample_values):
        starts = np.searchsorted(partial.sample_groups, np.arange(len(groups)))
        values = partial.sample_values
        low = values[np.minimum(starts + (count - 1) // 2, len(values) - 1)]
        high = values[np.minimum(starts + count // 2, len(values) - 1)]
        median = np.where(exact, (low + high) / 2.0, median)
    with np.errstate(invalid="ignore", divide="ignore"):
        stddev = np.where(count > 1, np.sqrt(groups[M2].to_numpy(np.float64) / np.maximum(count - 1, 1)), 0.0)
    return pd.DataFrame(
        {
            stats.TOTAL: groups[TOTAL].to_numpy(np.int64),
            stats.INSTANCES: count,
            stats.AVG: groups[TOTAL].to_numpy(np.int64) / np.maximum(count, 1),
            stats.MED: median,
            stats.MIN: groups[MIN].to_numpy(np.int64),
            stats.MAX: groups[MAX].to_numpy(np.int64),
            stats.STDDEV: stddev,
            MED_EXACT: exact,
        }
    )


def _sketch_median(sketch: pd.DataFrame, count: np.ndarray) -> np.ndarray:
    """Per group: the mean of the sketch's estimates of the two middle order statistics."""
    if not len(sketch):
        return np.zeros(len(count))
    cumulative = np.cumsum(sketch["count"].to_numpy())
    before = np.concatenate(([0], np.cumsum(count)))[:-1]  # samples of the groups before each group
    buckets = sketch["bucket"].to_numpy()
    estimate = np.where(buckets == ZERO_BUCKET, 0.0, 2 * GAMMA ** buckets.astype(np.float64) / (GAMMA + 1))

    def order_statistic(rank: np.ndarray) -> np.ndarray:
        found = np.searchsorted(cumulative, before + rank, side="right")
        return estimate[np.minimum(found, len(estimate) - 1)]

    return (order_statistic((count - 1) // 2) + order_statistic(count // 2)) / 2.0
