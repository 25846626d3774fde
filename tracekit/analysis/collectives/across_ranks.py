"""Every rank's collectives side by side: the tables of ``tracekit collectives``.

Given each rank's collective kernels (``rank_record``) under one rank label each, the instances are
matched (``matching``), each kernel's time split into wait and transfer, and each part's exposed time
found from what computation covered on that rank (``exposure``). Tables, ns throughout:
- collectives: per operation, dtype, group and group size over every rank: count, bytes, total and
  median time (the sums of the collective kernels), wait, transfer and their exposed parts, per step,
  algorithm and bus bandwidth over the transfer time (the time once every rank was there; a kernel not
  matched counts whole), and the link the bus bandwidth is held against;
  A kernel that matched no peer counts whole as transfer (a wait cannot be seen without the peers).
- ranks: per rank and operation, the same split, how often it arrived last, and how long it made the
  others wait;
- late: per matched instance with the most waiting, who arrived last, by how much, and why (it launched
  late: the host; or it launched in time and queued behind its GPU's work: the kernel before it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tracekit.analysis.collectives.exposure import CoveredPieces
from tracekit.analysis.collectives.matching import INSTANCE, LAST, SKEW, TRANSFER, WAIT, match_ranks
from tracekit.analysis.collectives.summary import KEYS, collectives_summary

EXPOSED_WAIT, EXPOSED_TRANSFER = "Exposed Wait (ns)", "Exposed Transfer (ns)"
MADE_WAIT = "Made Others Wait (ns)"
HOST, GPU = "host: launched late", "GPU: queued behind its work"


@dataclass
class Compared:
    """The calls of every rank, matched and split (``calls``: one row per collective kernel, with rank,
    instance, skew, wait, transfer, last, exposed_wait, exposed_transfer), and notes."""

    calls: pd.DataFrame
    notes: list[str]


def compare_ranks(calls: pd.DataFrame, covered: CoveredPieces) -> Compared:
    """Match ``calls`` (``rank_record.CALL_COLUMNS`` and a rank label, ``covered`` owned by its rows) across
    ranks and split each kernel's time into wait and transfer, with the exposed part of each."""
    framed = calls.reset_index(drop=True).assign(row=np.arange(len(calls)))
    codes, labels = pd.factorize(framed["rank"], sort=False)
    matched, notes = match_ranks(framed.assign(rank=codes))
    matched = matched.assign(rank=np.asarray(labels, dtype=object)[matched["rank"].to_numpy()])
    start = matched["start"].to_numpy(np.int64)
    duration = matched["duration"].to_numpy(np.int64)
    wait = np.where(matched[WAIT].to_numpy() >= 0, matched[WAIT].to_numpy(), 0)
    # pieces are owned by the input rows: put them in the matched order
    where = np.empty(len(matched), dtype=np.int64)
    where[matched["row"].to_numpy()] = np.arange(len(matched))
    pieces = CoveredPieces(where[covered.owner], covered.start, covered.end)
    split = start + wait
    matched[EXPOSED_WAIT] = pieces.exposed(start, split)
    matched[EXPOSED_TRANSFER] = pieces.exposed(split, start + duration)
    return Compared(matched.drop(columns=["row"]), notes)


def ranks_steps(calls: pd.DataFrame, keys: list[str], steps: dict[Any, int]) -> pd.DataFrame:
    """Per distinct ``keys`` of ``calls`` (keys filled, as ``_keyed`` does): the steps of the ranks that ran its
    calls added, NaN where one of them recorded no steps (a rate per step and rank is then unknown). ``steps``:
    per rank label, its steps (0 or absent: none)."""
    ran = pd.DataFrame(calls[[*keys, "rank"]]).drop_duplicates()
    counts = pd.Series(ran["rank"]).map(steps).fillna(0).to_numpy(float)
    per = ran.assign(steps=counts).groupby(keys, sort=False, dropna=False)["steps"].agg(["sum", "min"])
    return per.assign(steps=np.where(per["min"] > 0, per["sum"], np.nan))[["steps"]].reset_index()


def summary_table(compared: Compared, steps: dict[Any, int]) -> pd.DataFrame:
    """Per operation, dtype, group and size over every rank (see the module); ``steps``: per rank label, its steps
    (a row's rate per step and rank is over the steps of the ranks that ran it)."""
    calls = compared.calls
    matched = calls[INSTANCE].to_numpy() >= 0
    # the bandwidth's time: once every rank was there (a kernel not matched: its whole duration)
    timed = calls.assign(duration=np.where(matched, calls[TRANSFER], calls["duration"]))
    table = collectives_summary(timed).drop(columns=["Total Time (ns)", "Med (ns)"])
    frame = _keyed(calls)
    sums = (
        frame.groupby(KEYS, sort=False, dropna=False)
        .agg(
            total=("duration", "sum"),
            median=("duration", "median"),
            wait=("wait_known", "sum"),
            transfer=("transfer_known", "sum"),
            exposed_wait=(EXPOSED_WAIT, "sum"),
            exposed_transfer=(EXPOSED_TRANSFER, "sum"),
            unmatched=("unmatched_flag", "sum"),
        )
        .reset_index()
        .merge(ranks_steps(frame, KEYS, steps), on=KEYS, how="left")
    )
    sums.columns = ["Operation", "Dtype", "Group", "Ranks", *sums.columns[4:]]
    joined = table.merge(sums, on=["Operation", "Dtype", "Group", "Ranks"], how="left")
    return pd.DataFrame(
        {
            "Operation": joined["Operation"],
            "Dtype": joined["Dtype"],
            "Group": joined["Group"],
            "Ranks": joined["Ranks"].where(joined["Ranks"] > 0).astype("Int64"),  # <NA>: the group's size not recorded
            "Count": joined["Count"],
            "Per Step per Rank": joined["Count"] / joined["steps"],  # NaN: a rank with no steps
            "Bytes": joined["Bytes"].round().astype("Int64"),  # <NA>: not recorded
            "Total Time (ns)": joined["total"].astype(np.int64),
            "Med (ns)": joined["median"],
            "Wait (ns)": joined["wait"].astype(np.int64),
            "Transfer (ns)": joined["transfer"].astype(np.int64),
            EXPOSED_WAIT: joined["exposed_wait"].astype(np.int64),
            EXPOSED_TRANSFER: joined["exposed_transfer"].astype(np.int64),
            "Unmatched": joined["unmatched"].astype(np.int64),
            "Algorithm Bandwidth (GB/s)": joined["Algorithm Bandwidth (GB/s)"],
            "Bus Bandwidth (GB/s)": joined["Bus Bandwidth (GB/s)"],
        }
    ).sort_values(["Total Time (ns)", "Operation"], ascending=[False, True], kind="stable", ignore_index=True)


def rank_table(compared: Compared) -> pd.DataFrame:
    """Per rank and operation: count, time, wait, transfer, their exposed parts, unmatched kernels, how often
    it arrived last and the waiting that cost the other ranks (ns)."""
    calls = _keyed(compared.calls)
    made = _made_wait(compared.calls)
    calls = calls.assign(made=calls[INSTANCE].map(made).fillna(0).to_numpy() * calls[LAST].to_numpy())
    table = (
        calls.groupby(["rank", "operation"], sort=False)
        .agg(
            Count=("duration", "size"),
            time=("duration", "sum"),
            wait=("wait_known", "sum"),
            transfer=("transfer_known", "sum"),
            exposed_wait=(EXPOSED_WAIT, "sum"),
            exposed_transfer=(EXPOSED_TRANSFER, "sum"),
            unmatched=("unmatched_flag", "sum"),
            last=("late", "sum"),
            made=("made", "sum"),
        )
        .reset_index()
    )
    return pd.DataFrame(
        {
            "Rank": table["rank"],
            "Operation": table["operation"],
            "Count": table["Count"].astype(np.int64),
            "Time (ns)": table["time"].astype(np.int64),
            "Wait (ns)": table["wait"].astype(np.int64),
            "Transfer (ns)": table["transfer"].astype(np.int64),
            EXPOSED_WAIT: table["exposed_wait"].astype(np.int64),
            EXPOSED_TRANSFER: table["exposed_transfer"].astype(np.int64),
            "Unmatched": table["unmatched"].astype(np.int64),
            "Arrived Last": table["last"].astype(np.int64),
            MADE_WAIT: table["made"].astype(np.int64),
        }
    )


def late_table(compared: Compared, top: int) -> pd.DataFrame:
    """The ``top`` matched instances whose ranks waited longest in all, each with its last rank, how late it
    was against the median arrival, where it was late (the host launched it late, or it queued behind its
    GPU's work) and the kernel before it on that rank."""
    calls = compared.calls.loc[compared.calls[INSTANCE].to_numpy() >= 0]
    if calls.empty:
        return pd.DataFrame(columns=LATE_COLUMNS)
    by = calls.groupby(INSTANCE, sort=False)
    total_wait = by[WAIT].sum()
    worst = total_wait.loc[total_wait > 0].sort_values(ascending=False, kind="stable").head(top)
    if worst.empty:
        return pd.DataFrame(columns=LATE_COLUMNS)
    chosen = calls.loc[calls[INSTANCE].isin(worst.index)]
    median_start = chosen.groupby(INSTANCE)["start"].median()
    launched = chosen.loc[chosen["launch"].to_numpy() >= 0]
    median_launch = launched.groupby(INSTANCE)["launch"].median()
    last = chosen.loc[chosen[LAST].to_numpy()].set_index(INSTANCE).reindex(worst.index)
    late_by = last["start"].to_numpy() - median_start.reindex(worst.index).to_numpy()
    launch_late = last["launch"].to_numpy() - median_launch.reindex(worst.index).to_numpy()
    known = (last["launch"].to_numpy() >= 0) & ~np.isnan(launch_late)
    # late mostly because its launch came late (the host), or launched in time and queued on its GPU
    cause = np.where(~known, "unknown (no launch recorded)", np.where(launch_late >= late_by / 2, HOST, GPU))
    return pd.DataFrame(
        {
            "Operation": last["operation"].to_numpy(object),
            "Group": last["group"].to_numpy(object),
            "Step": last["step"].to_numpy(object),
            "Bytes": pd.array(np.where(last["bytes"].to_numpy() >= 0, last["bytes"].to_numpy(), np.nan)).astype(
                "Int64"
            ),
            "Last Rank": last["rank"].to_numpy(object),
            "Late By (ns)": late_by.astype(np.int64),
            "Max Skew (ns)": by[SKEW].max().reindex(worst.index).to_numpy(np.int64),
            "Others' Wait (ns)": worst.to_numpy(np.int64),
            "Transfer (ns)": last[TRANSFER].to_numpy(np.int64),
            "Cause": cause.astype(object),
            "Kernel Before": last["before"].to_numpy(object),
        }
    )


LATE_COLUMNS = [
    "Operation",
    "Group",
    "Step",
    "Bytes",
    "Last Rank",
    "Late By (ns)",
    "Max Skew (ns)",
    "Others' Wait (ns)",
    "Transfer (ns)",
    "Cause",
    "Kernel Before",
]


def _made_wait(calls: pd.DataFrame) -> pd.Series:
    """Per matched instance: the other ranks' wait added (ns): what its last rank cost them."""
    matched = calls.loc[calls[INSTANCE].to_numpy() >= 0]
    return matched.groupby(INSTANCE)[WAIT].sum()


def _keyed(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls with the summary's keys filled ("" for unknown) and the per-row sums' columns."""
    matched = calls[INSTANCE].to_numpy() >= 0
    skewed = calls.groupby(INSTANCE)[SKEW].transform("max").to_numpy() > 0
    return calls.assign(
        **{key: calls[key].astype(object).where(pd.notna(calls[key]), "") for key in ("operation", "dtype", "group")},
        wait_known=np.where(matched, calls[WAIT], 0),
        # a kernel matched with no peer: its wait cannot be seen, so all of it counts as transfer
        transfer_known=np.where(matched, calls[TRANSFER], calls["duration"]),
        unmatched_flag=~matched,
        late=calls[LAST].to_numpy() & matched & skewed,
    )
