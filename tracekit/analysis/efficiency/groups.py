"""The efficiency table of any grouping: sums per group over integer group codes (``np.bincount``, no
pandas groupby over text), and the measures built on them.

Sums are exact and additive (GPU time, FLOPs, bytes, roofline time over the rows where it is known), so a
group's "Roofline (%)" is its roofline time over the GPU time of its rows that have one: the share of that
time the hardware needed at its peak. It, and the bound, are shown where the rows with a roofline hold at
least half the group's time (not for a GEMM whose cuBLAS workspace memsets alone are known).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KNOWN_SHARE = 0.5  # of a group's GPU time with a roofline, for its share and bound to be shown
COLUMNS = [
    "Count",
    "Kernels",
    "GPU Time (ns)",
    "GFLOP",
    "GB",
    "TFLOP/s",
    "TB/s",
    "FLOP/Byte",
    "Precision",
    "Unit",
    "Bound",
    "Roofline (%)",
    "Occupancy (%)",
    "Not Known",
]


def summarize(
    work: pd.DataFrame, group: np.ndarray, labels: np.ndarray, instance: np.ndarray | None, key: str
) -> pd.DataFrame:
    """Per group (``group``: a code per row of ``work`` into ``labels``, -1 for none; ``instance``: what Count
    counts, distinct per group): the efficiency columns, most GPU time first."""
    chosen = group >= 0
    code = group[chosen]
    size = len(labels)
    duration = work["duration"].to_numpy()[chosen].astype(float)
    flops, moved = work["flops"].to_numpy()[chosen], work["bytes"].to_numpy()[chosen]
    roofline, occupancy = work["roofline"].to_numpy()[chosen], work["occupancy"].to_numpy()[chosen]

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(code, weights=values, minlength=size)

    time = total(duration)
    known_time = total(np.where(np.isnan(roofline), 0.0, duration))
    flop_time = total(np.where(np.isnan(flops), 0.0, duration))
    byte_time = total(np.where(np.isnan(moved), 0.0, duration))
    flop_sum, byte_sum = total(np.nan_to_num(flops)), total(np.nan_to_num(moved))
    roofline_sum = total(np.nan_to_num(roofline))
    occupied = total(np.where(np.isnan(occupancy), 0.0, duration))
    occupancy_sum = total(np.nan_to_num(occupancy) * duration)
    kernels = np.bincount(code, weights=(work["kind"] == "kernel").to_numpy()[chosen], minlength=size)
    if instance is None:  # each row its own instance
        count = np.bincount(code, minlength=size)
    else:
        stride = int(instance.max(initial=0)) + 2
        pairs = np.unique(code.astype(np.int64) * stride + instance[chosen] + 1)
        count = np.bincount(pairs // stride, minlength=size)
    covered = (known_time > 0) & (known_time >= KNOWN_SHARE * time)
    with np.errstate(divide="ignore", invalid="ignore"):
        table = pd.DataFrame(
            {
                key: pd.Series(labels, dtype=object),
                "Count": count.astype(np.int64),
                "Kernels": kernels.astype(np.int64),
                "GPU Time (ns)": time.astype(np.int64),
                "GFLOP": np.where(flop_time > 0, flop_sum / 1e9, np.nan),
                "GB": np.where(byte_time > 0, byte_sum / 1e9, np.nan),
                "TFLOP/s": np.where(flop_time > 0, flop_sum / flop_time * 1e9 / 1e12, np.nan),
                "TB/s": np.where(byte_time > 0, byte_sum / byte_time * 1e9 / 1e12, np.nan),
                "FLOP/Byte": np.where((flop_time > 0) & (byte_sum > 0), flop_sum / byte_sum, np.nan),
                "Precision": _most_time(code, work["precision"].cat, chosen, duration, size),
                "Unit": _most_time(code, work["unit"].cat, chosen, duration, size),
                "Bound": _most_time(code, work["bound"].cat, chosen, duration, size, covered),
                "Roofline (%)": np.where(covered, 100 * roofline_sum * 1e9 / known_time, np.nan),
                "Occupancy (%)": np.where(occupied > 0, 100 * occupancy_sum / occupied, np.nan),
                "Not Known": _reasons(code, work["why"].cat, chosen, duration, size, time),
            }
        )
    table = table.loc[time > 0] if len(table) else table
    return table.sort_values(["GPU Time (ns)", key], ascending=[False, True], kind="stable").reset_index(drop=True)


def _time_by(code: np.ndarray, values, chosen: np.ndarray, duration: np.ndarray, size: int) -> np.ndarray:
    """GPU time per (group, value): a groups x values matrix (values are few: precisions, units, reasons)."""
    value = np.asarray(values.codes)[chosen]
    width = len(values.categories)
    have = value >= 0
    flat = np.bincount(code[have] * width + value[have], weights=duration[have], minlength=size * width)
    return flat.reshape(size, width)


def _most_time(
    code: np.ndarray, values, chosen: np.ndarray, duration: np.ndarray, size: int, shown: np.ndarray | None = None
) -> pd.Series:
    """Per group, the value holding most of its GPU time (None where none is known, or not ``shown``)."""
    matrix = _time_by(code, values, chosen, duration, size)
    best = matrix.argmax(axis=1) if matrix.shape[1] else np.zeros(size, dtype=np.int64)
    labels = np.asarray(values.categories, dtype=object)
    has = matrix.max(axis=1, initial=0) > 0 if matrix.shape[1] else np.zeros(size, dtype=bool)
    if shown is not None:
        has &= shown
    return pd.Series([labels[index] if ok else None for index, ok in zip(best, has)], dtype=object)


def _reasons(
    code: np.ndarray, values, chosen: np.ndarray, duration: np.ndarray, size: int, time: np.ndarray
) -> pd.Series:
    """Per group, what was not known for most of its time, with the share of its time that holds it."""
    matrix = _time_by(code, values, chosen, duration, size)
    labels = np.asarray(values.categories, dtype=object)
    said = []
    for index in range(size):
        row = matrix[index] if matrix.shape[1] else np.zeros(0)
        if not len(row) or row.max() <= 0:
            said.append(None)
            continue
        top = int(row.argmax())
        said.append(f"{labels[top]} ({100 * row[top] / max(time[index], 1):.0f}% of time)")
    return pd.Series(said, dtype=object)
