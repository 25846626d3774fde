"""Per operation, dtype and process group: how many collectives, the bytes they moved, their time, and the
bandwidths nccl-tests defines: algorithm bandwidth (bytes / time) and bus bandwidth (algorithm bandwidth x
NCCL's factor for the operation and the group's size: all-reduce 2(n-1)/n; all-gather, reduce-scatter,
all-to-all (n-1)/n; broadcast, reduce, send/receive 1), comparable with the link's. Over the instances
whose bytes are known; where none are, the columns stay empty."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.hardware.collective_names import bus_factor

KEYS = ["operation", "dtype", "group", "ranks"]


def collectives_summary(instances: pd.DataFrame) -> pd.DataFrame:
    """The table per (operation, dtype, group, ranks), most time first."""
    frame = instances.assign(
        **{
            key: instances[key].astype(object).where(pd.notna(instances[key]), "")
            for key in ("operation", "dtype", "group")
        },
        sized=instances["bytes"] >= 0,
    )
    frame["moved"] = np.where(frame["sized"], frame["bytes"], 0)
    frame["sized_time"] = np.where(frame["sized"], frame["duration"], 0)
    grouped = frame.groupby(KEYS, sort=False, dropna=False)
    table = grouped.agg(
        Count=("duration", "size"),
        time=("duration", "sum"),
        median=("duration", "median"),
        moved=("moved", "sum"),
        sized=("sized", "sum"),
        sized_time=("sized_time", "sum"),
    ).reset_index()
    factor = np.asarray(
        [bus_factor(str(op), int(n)) if op and n > 0 else None for op, n in zip(table["operation"], table["ranks"])],
        dtype=float,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        # bytes per ns = GB/s; none over no time (0 ns kernels, or all of it waiting)
        algorithm = np.where(table["sized_time"] > 0, table["moved"] / table["sized_time"], np.nan)
    return (
        pd.DataFrame(
            {
                "Operation": table["operation"].to_numpy(object),
                "Dtype": table["dtype"].to_numpy(object),
                "Group": table["group"].to_numpy(object),
                "Ranks": table["ranks"].to_numpy(np.int64),
                "Count": table["Count"].to_numpy(np.int64),
                "Sized": table["sized"].to_numpy(np.int64),
                "Bytes": np.where(table["sized"] > 0, table["moved"], np.nan),
                "Total Time (ns)": table["time"].to_numpy(np.int64),
                "Med (ns)": table["median"].to_numpy(float),
                "Algorithm Bandwidth (GB/s)": algorithm,
                "Bus Bandwidth (GB/s)": algorithm * factor,
            }
        )
        .sort_values(["Total Time (ns)", "Operation"], ascending=[False, True], kind="stable")
        .reset_index(drop=True)
    )
