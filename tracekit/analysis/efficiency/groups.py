"""The efficiency table of any grouping: sums per group over integer group codes (``np.bincount``, no
pandas groupby over text), and the measures built on them.

Every figure is built from sums that add across groups and across traces (``GroupSums``: GPU time, FLOPs,
bytes, roofline time over the rows where it is known, ...; and the GPU time per group of each precision,
unit, bound and unknown reason), so many inputs merge exactly by adding them. A group's "Roofline (%)" is its
roofline time over the GPU time of its rows that have one: the share of that time the hardware needed at its
peak. It, and the bound, are shown where the rows with a roofline hold at least half the group's time (not
for a GEMM whose cuBLAS workspace memsets alone are known).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

KNOWN_SHARE = 0.5  # of a group's GPU time with a roofline, for its share and bound to be shown
SUMS = (
    "count",
    "kernels",
    "time",
    "known_time",
    "flop_time",
    "byte_time",
    "flops",
    "bytes",
    "roofline",
    "occupied",
    "occupancy",
    "both_flops",
    "both_bytes",
)
SHARED = ("precision", "unit", "bound", "why")  # per group: GPU time by value


@dataclass
class GroupSums:
    """Per group (the index: its label): ``sums`` (columns ``SUMS``; times in ns, roofline in s) and ``shares``
    (label, column, value, time: the GPU time of each value of ``SHARED`` columns)."""

    sums: pd.DataFrame
    shares: pd.DataFrame

    @staticmethod
    def merged(parts: list[GroupSums]) -> GroupSums:
        """The sums of several traces' groups: added by label (and value)."""
        sums = pd.concat([part.sums for part in parts]).groupby(level=0, sort=False).sum()
        shares = pd.concat([part.shares for part in parts], ignore_index=True)
        shares = shares.groupby(["label", "column", "value"], sort=False, as_index=False)["time"].sum()
        return GroupSums(pd.DataFrame(sums), pd.DataFrame(shares))


def group_sums(work: pd.DataFrame, group: np.ndarray, labels: np.ndarray, instance: np.ndarray | None) -> GroupSums:
    """The sums of ``work``'s rows per group (``group``: a code per row into ``labels``, -1 for none;
    ``instance``: what Count counts, distinct per group; None: rows)."""
    chosen = group >= 0
    code = group[chosen]
    size = len(labels)
    duration = work["duration"].to_numpy()[chosen].astype(float)
    flops, moved = work["flops"].to_numpy()[chosen], work["bytes"].to_numpy()[chosen]
    roofline, occupancy = work["roofline"].to_numpy()[chosen], work["occupancy"].to_numpy()[chosen]

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(code, weights=values, minlength=size)

    if instance is None:  # each row its own instance
        count = np.bincount(code, minlength=size)
    else:
        stride = int(instance.max(initial=0)) + 2
        pairs = np.unique(code.astype(np.int64) * stride + instance[chosen] + 1)
        count = np.bincount(pairs // stride, minlength=size)
    sums = pd.DataFrame(
        {
            "count": count.astype(float),
            "kernels": total((work["kind"] == "kernel").to_numpy()[chosen].astype(float)),
            "time": total(duration),
            "known_time": total(np.where(np.isnan(roofline), 0.0, duration)),
            "flop_time": total(np.where(np.isnan(flops), 0.0, duration)),
            "byte_time": total(np.where(np.isnan(moved), 0.0, duration)),
            "flops": total(np.nan_to_num(flops)),
            "bytes": total(np.nan_to_num(moved)),
            "roofline": total(np.nan_to_num(roofline)),
            "occupied": total(np.where(np.isnan(occupancy), 0.0, duration)),
            "occupancy": total(np.nan_to_num(occupancy) * duration),
            # arithmetic intensity over the rows where both are known (not one's sum over the other's)
            "both_flops": total(np.where(np.isnan(moved), 0.0, np.nan_to_num(flops))),
            "both_bytes": total(np.where(np.isnan(flops), 0.0, np.nan_to_num(moved))),
        },
        index=pd.Index(labels, dtype=object),
    )
    sums = sums.loc[sums["time"].to_numpy() > 0]
    shares = [_time_by(code, work[column].cat, chosen, duration, labels, column) for column in SHARED]
    return GroupSums(sums, pd.concat(shares, ignore_index=True))


def _time_by(code, values, chosen: np.ndarray, duration: np.ndarray, labels: np.ndarray, column: str) -> pd.DataFrame:
    """GPU time per (group, value) where positive: values are few (precisions, units, reasons)."""
    value = np.asarray(values.codes)[chosen]
    width = max(len(values.categories), 1)
    have = value >= 0
    flat = np.bincount(code[have] * width + value[have], weights=duration[have], minlength=len(labels) * width)
    where = np.flatnonzero(flat > 0)
    names = np.asarray(values.categories, dtype=object)
    return pd.DataFrame(
        {
            "label": pd.Series(labels[where // width], dtype=object),
            "column": column,
            "value": pd.Series(names[where % width] if len(names) else [], dtype=object),
            "time": flat[where],
        }
    )


def summary_table(sums: GroupSums, key: str) -> pd.DataFrame:
    """The efficiency columns per group, most GPU time first."""
    frame = sums.sums
    time, known_time = frame["time"].to_numpy(), frame["known_time"].to_numpy()
    flop_time, byte_time = frame["flop_time"].to_numpy(), frame["byte_time"].to_numpy()
    flops, moved = frame["flops"].to_numpy(), frame["bytes"].to_numpy()
    occupied = frame["occupied"].to_numpy()
    covered = (known_time > 0) & (known_time >= KNOWN_SHARE * time)
    labels = frame.index.to_numpy(object)
    with np.errstate(divide="ignore", invalid="ignore"):
        table = pd.DataFrame(
            {
                key: pd.Series(labels, dtype=object),
                "Count": frame["count"].to_numpy().astype(np.int64),
                "Kernels": frame["kernels"].to_numpy().astype(np.int64),
                "GPU Time (ns)": time.astype(np.int64),
                "GFLOP": np.where(flop_time > 0, flops / 1e9, np.nan),
                "GB": np.where(byte_time > 0, moved / 1e9, np.nan),
                "TFLOP/s": np.where(flop_time > 0, flops / flop_time * 1e9 / 1e12, np.nan),
                "TB/s": np.where(byte_time > 0, moved / byte_time * 1e9 / 1e12, np.nan),
                "FLOP/Byte": np.where(
                    frame["both_bytes"].to_numpy() > 0,
                    frame["both_flops"].to_numpy() / frame["both_bytes"].to_numpy(),
                    np.nan,
                ),
                "Precision": _most_time(sums.shares, "precision", labels),
                "Unit": _most_time(sums.shares, "unit", labels),
                "Bound": _most_time(sums.shares, "bound", labels, covered),
                "Roofline (%)": np.where(covered, 100 * frame["roofline"].to_numpy() * 1e9 / known_time, np.nan),
                "Occupancy (%)": np.where(occupied > 0, 100 * frame["occupancy"].to_numpy() / occupied, np.nan),
                "Not Known": _reasons(sums.shares, labels, time),
            }
        )
    if "wall" in frame:  # phases and steps: their wall time and MFU (``grouping.with_walls``)
        wall, peak_wall = frame["wall"].to_numpy(), frame["peak_wall"].to_numpy()
        table.insert(list(table.columns).index("GPU Time (ns)") + 1, "Wall (ns)", np.nan_to_num(wall).astype(np.int64))
        with np.errstate(divide="ignore", invalid="ignore"):
            mfu = np.where(peak_wall > 0, 100 * flops / peak_wall, np.nan)
        table.insert(list(table.columns).index("Roofline (%)") + 1, "MFU (%)", mfu)
    return table.sort_values(["GPU Time (ns)", key], ascending=[False, True], kind="stable").reset_index(drop=True)


def _top(shares: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per label, the value of ``column`` with the most GPU time (ties: the first recorded)."""
    mine = shares.loc[(shares["column"] == column).to_numpy()]
    return mine.sort_values("time", ascending=False, kind="stable").drop_duplicates("label").set_index("label")


def _most_time(shares: pd.DataFrame, column: str, labels: np.ndarray, shown: np.ndarray | None = None) -> pd.Series:
    """Per group, the value holding most of its GPU time (None where none is known, or not ``shown``)."""
    top = _top(shares, column)["value"].reindex(pd.Index(labels, dtype=object))
    values = [value if isinstance(value, str) else None for value in top.to_numpy(object)]
    if shown is not None:
        values = [value if ok else None for value, ok in zip(values, shown)]
    return pd.Series(values, dtype=object)


def _reasons(shares: pd.DataFrame, labels: np.ndarray, time: np.ndarray) -> pd.Series:
    """Per group, what was not known for most of its time, with the share of its time that holds it."""
    top = _top(shares, "why").reindex(pd.Index(labels, dtype=object))
    said = [
        f"{why} ({100 * spent / max(total, 1):.0f}% of time)" if isinstance(why, str) else None
        for why, spent, total in zip(top["value"].to_numpy(object), top["time"].to_numpy(float), time)
    ]
    return pd.Series(said, dtype=object)
