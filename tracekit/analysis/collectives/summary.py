"""Per operation, dtype and process group: how many collectives, the bytes they moved, their time, and the
bandwidths nccl-tests defines: algorithm bandwidth (bytes / time) and bus bandwidth (algorithm bandwidth x
NCCL's factor for the operation and the group's size: all-reduce 2(n-1)/n; all-gather, reduce-scatter,
all-to-all (n-1)/n, also for the SendRecv kernels NCCL runs a recorded all-to-all as; broadcast, reduce,
send/receive 1), comparable with the link's. Over the instances whose bytes are known; where none are, the
columns stay empty."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.collectives.exchange import ALL_TO_ALL
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
    # each call's bus factor: its operation's, an all-to-all's where torch recorded one (NCCL runs it as SendRecv
    # kernels, and a rank's share to itself crosses no link); NaN unknown
    factor = _call_factors(frame)
    frame["bus_moved"] = np.where(frame["sized"], frame["moved"] * np.nan_to_num(factor), 0)
    frame["unknown_factor"] = frame["sized"] & np.isnan(factor)
    grouped = frame.groupby(KEYS, sort=False, dropna=False)
    table = grouped.agg(
        Count=("duration", "size"),
        time=("duration", "sum"),
        median=("duration", "median"),
        moved=("moved", "sum"),
        bus_moved=("bus_moved", "sum"),
        unknown_factor=("unknown_factor", "sum"),
        sized=("sized", "sum"),
        sized_time=("sized_time", "sum"),
    ).reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        # bytes per ns = GB/s; none over no time (0 ns kernels, or all of it waiting)
        timed = table["sized_time"] > 0
        algorithm = np.where(timed, table["moved"] / table["sized_time"], np.nan)
        bus = np.where(timed & (table["unknown_factor"] == 0), table["bus_moved"] / table["sized_time"], np.nan)
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
                "Bus Bandwidth (GB/s)": bus,
            }
        )
        .sort_values(["Total Time (ns)", "Operation"], ascending=[False, True], kind="stable")
        .reset_index(drop=True)
    )


def _call_factors(frame: pd.DataFrame) -> np.ndarray:
    """Per call, NCCL's bus factor of its operation (an all-to-all's where torch recorded one) over its group's
    size; NaN where either is unknown. Read per distinct (operation, size): a few."""
    recorded = frame["recorded"] if "recorded" in frame else pd.Series(None, index=frame.index, dtype=object)
    all_to_all = recorded.astype(object).where(recorded.notna(), "").astype(str).str.lower().isin(ALL_TO_ALL)
    operation = np.where(all_to_all.to_numpy(), "AllToAll", frame["operation"].astype(str).to_numpy(object))
    pairs = pd.DataFrame({"operation": operation, "ranks": frame["ranks"].to_numpy(np.int64)})
    codes, distinct = pd.factorize(pd.MultiIndex.from_frame(pairs))
    factors = [bus_factor(str(op), int(n)) if op and n > 0 else None for op, n in distinct]
    return np.asarray([np.nan if value is None else value for value in factors], dtype=float)[codes]
