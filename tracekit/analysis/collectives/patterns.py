"""Patterns in a job's collectives worth a finding, each with its evidence and the fix that follows its cause:

- a late rank: the others' waiting for one rank is most of all the waiting and a real part (a tenth or
  more) of their collective time (a straggler: the fix is on that rank, not on the link);
- unbucketed gradient sync: many small all-reduces per step (DDP without buckets, or a hand-written
  per-parameter all_reduce), their sizes recorded (DDP's buckets are many too): their count, median size,
  and how many buckets DDP's ``bucket_cap_mb`` (25 MiB by default) would make of the same bytes;
- all-to-all or point-to-point: most collective time in SendRecv kernels or all-to-all calls (embedding
  exchange, MoE dispatch, pipeline sends): bucketing does nothing for it; its time is its transfer (its
  waiting is a late rank's); with sizes recorded, how unequal the ranks' messages are;
- slow transfer: an operation whose bus bandwidth, over messages large enough to be bandwidth-bound
  (median 8 MiB or more) and matched on every rank (else its time holds waiting too), is under a quarter
  of the GPU's link.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracekit.analysis.collectives.across_ranks import MADE_WAIT, Compared, ranks_steps
from tracekit.analysis.collectives.exchange import ALL_TO_ALL, imbalance
from tracekit.analysis.collectives.matching import INSTANCE, TRANSFER
from tracekit.analysis.collectives.summary import KEYS
from tracekit.model.options import named

PATTERN_COLUMNS = ["Pattern", "Where", "Time (ns)", "Evidence", "Fix"]
LATE_SHARE = 0.5  # of all the waiting: one rank made the others wait this much of it
WAIT_SHARE = 0.1  # of the other ranks' collective time spent waiting for it
SMALL_BYTES = 4 * 2**20  # an all-reduce at most this large is a parameter's, not a bucket's
MANY_PER_STEP = 20
BUCKET_BYTES = 25 * 2**20  # DDP's bucket_cap_mb default
LARGE_BYTES = 8 * 2**20  # messages this large are bandwidth-bound
SLOW_SHARE = 0.25  # of the link's bandwidth


def collective_patterns(
    compared: Compared, ranks: pd.DataFrame, summary: pd.DataFrame, steps: dict[Any, int], matrix: pd.DataFrame
) -> pd.DataFrame:
    """The patterns found (``PATTERN_COLUMNS``), most time first. ``ranks``: ``rank_table``; ``summary``:
    ``summary_table`` with a "Link (GB/s)" column (NaN unknown); ``steps``: per rank label, its steps;
    ``matrix``: ``exchange.exchange_matrix``."""
    found = [*_late_rank(ranks), *_unbucketed(compared.calls, steps), *_all_to_all(compared.calls, matrix)]
    found += _slow_transfer(summary, compared.calls)
    table = pd.DataFrame(found, columns=PATTERN_COLUMNS)
    return table.sort_values("Time (ns)", ascending=False, kind="stable", ignore_index=True)


def _late_rank(ranks: pd.DataFrame) -> list[list]:
    per_rank = ranks.groupby("Rank", sort=False).agg(
        last=("Arrived Last", "sum"), made=(MADE_WAIT, "sum"), time=("Time (ns)", "sum")
    )
    total_made = float(per_rank["made"].sum())
    if len(per_rank) < 2 or total_made <= 0:
        return []
    late = per_rank.sort_values("made", ascending=False, kind="stable")
    rank = late.index[0]
    made, times_last = float(late["made"].iloc[0]), int(late["last"].iloc[0])
    others_time = float(per_rank["time"].drop(rank).sum())
    # one rank is most of the waiting, and the waiting is a real part of the others' collective time
    if made < LATE_SHARE * total_made or made < WAIT_SHARE * others_time:
        return []
    return [
        [
            "late rank",
            f"rank {rank}",
            int(made),
            f"rank {rank} arrived last at {times_last:,} of {int(per_rank['last'].sum()):,} collectives some rank "
            f"was late to; the others waited {made / 1e6:,.3f} ms for it ({100 * made / total_made:.0f} % of all "
            f"waiting, {100 * made / others_time:.0f} % of their collective time)",
            f"make rank {rank} arrive sooner: the late table of tracekit collectives says why (host: its CPU launched the collective late: "
            "data loading, logging, a sync; GPU: more work queued before it: unequal shards or inputs); the link "
            "is not the problem",
        ]
    ]


def _unbucketed(calls: pd.DataFrame, steps: dict[Any, int]) -> list[list]:
    reduces = calls.loc[(calls["operation"].astype(str) == "AllReduce").to_numpy()]
    if reduces.empty:
        return []
    sized = reduces["bytes"].to_numpy() >= 0
    reduces = reduces.assign(
        group=reduces["group"].astype(object).where(reduces["group"].notna(), ""),
        sized=sized,
        sized_bytes=np.where(sized, reduces["bytes"].to_numpy(float), np.nan),
    )
    # per group at once (a job may have many): its count, sizes, and the steps of its ranks (NaN: one has none)
    per = reduces.groupby("group", sort=False).agg(
        count=("duration", "size"),
        time=("duration", "sum"),
        sized=("sized", "sum"),
        median=("sized_bytes", "median"),
        moved=("sized_bytes", "sum"),
    )
    per = per.join(ranks_steps(reduces, ["group"], steps).set_index("group"))
    per["per_step"] = per["count"] / per["steps"]
    # many all-reduces are DDP's buckets too (25 MiB each: 100 per step for a 650M-parameter fp32 model):
    # only their sizes tell parameters from buckets, so with none recorded there is no verdict
    chosen = per.loc[(per["per_step"] >= MANY_PER_STEP) & (per["sized"] > 0) & (per["median"] <= SMALL_BYTES)]
    found = []
    for group, row in zip(chosen.index, chosen.to_dict("records")):  # the groups found: a few
        bucket = ""
        if row["sized"] == row["count"]:
            buckets = int(np.ceil(row["moved"] / row["steps"] / BUCKET_BYTES))
            bucket = f"; DDP's 25 MiB buckets would make {buckets:,} per step of the same bytes"
        found.append(
            [
                "unbucketed gradient sync",
                f"group {group}" if group else "all ranks",
                int(row["time"]),
                f"{row['per_step']:,.1f} all-reduces per step and rank (median {row['median'] / 2**20:,.2f} MiB)"
                f"{bucket}",
                "sync gradients in buckets: DistributedDataParallel (bucket_cap_mb) rather than an all_reduce per "
                "parameter, or torch.distributed's all_reduce_coalesced / a flattened buffer",
            ]
        )
    return found


def _all_to_all(calls: pd.DataFrame, matrix: pd.DataFrame) -> list[list]:
    operation = calls["operation"].astype(str)
    named = calls["recorded"].astype(object).where(calls["recorded"].notna(), "").astype(str).str.lower()
    recorded = named.isin(ALL_TO_ALL).to_numpy()
    exchange = (operation == "SendRecv").to_numpy() | recorded
    total = int(calls["duration"].sum())
    time = int(calls["duration"].to_numpy()[exchange].sum())
    if not total or time < total / 2:
        return []
    # what speeding up the exchange itself can give: its transfer (its waits are a late rank's)
    transfer = int(np.where(calls[INSTANCE] >= 0, calls[TRANSFER], calls["duration"])[exchange].sum())
    told_apart = bool((calls[INSTANCE].to_numpy()[exchange] >= 0).any())
    evidence = (
        f"{time / 1e6:,.3f} of {total / 1e6:,.3f} ms of collective time is in SendRecv kernels or all-to-all calls"
        + (
            f", {transfer / 1e6:,.3f} ms of it transfer"
            if told_apart
            else " (without the peers' traces its waiting is not told from its transfer)"
        )
    )
    matched = calls.loc[exchange & (calls[INSTANCE].to_numpy() >= 0) & (calls["bytes"].to_numpy() >= 0)]
    unequal = imbalance(matrix)
    if unequal:
        evidence += f"; {unequal} (the exchange table)"
    elif len(matched):
        sizes = matched.groupby(INSTANCE)["bytes"].agg(["max", "mean"])
        evidence += (
            f"; the largest rank's message is up to {float((sizes['max'] / sizes['mean']).max()):,.2f}x the mean"
        )
    else:
        evidence += " (per-rank sizes not recorded: imbalance unknown)"
    all_to_all = recorded.any()
    return [
        [
            "all-to-all exchange" if all_to_all else "point-to-point exchange",
            "all ranks",
            transfer,
            evidence,
            "not a gradient sync (DDP buckets do not apply): "
            + (
                "balance what each rank sends (embedding sharding, MoE capacity), overlap the exchange with compute "
                "(pipelined all-to-all), or send less (lower-precision payloads)"
                if all_to_all
                else "an all-to-all (embeddings, MoE): balance what each rank sends and overlap it with compute; "
                "sends and receives (pipeline or context parallelism): overlap them with compute (isend/irecv, "
                "more micro-batches)"
            ),
        ]
    ]


def _slow_transfer(summary: pd.DataFrame, calls: pd.DataFrame) -> list[list]:
    found = []
    # each summary row's median message: over its own sized calls (its operation, dtype, group and size)
    sized = calls.loc[calls["bytes"].to_numpy() >= 0]
    keyed = sized.assign(
        **{key: sized[key].astype(object).where(pd.notna(sized[key]), "") for key in ("operation", "dtype", "group")}
    )
    medians = keyed.groupby(KEYS, sort=False, dropna=False)["bytes"].median()
    for row in summary.to_dict("records"):
        link, bus = float(row.get("Link (GB/s)", np.nan)), float(row.get("Bus Bandwidth (GB/s)", np.nan))
        if not (link > 0 and bus == bus) or bus >= SLOW_SHARE * link or row["Unmatched"]:
            continue  # a kernel with no peer's trace beside it times its wait too: no verdict on the link
        key = (row["Operation"], row["Dtype"], row["Group"], -1 if pd.isna(row["Ranks"]) else int(row["Ranks"]))
        median = float(medians.get(key, np.nan))
        if not median >= LARGE_BYTES:
            continue  # small messages are latency-bound: no link is fast for them
        found.append(
            [
                "slow transfer",
                f"{row['Operation']} in group {row['Group']}" if row["Group"] else str(row["Operation"]),
                int(row["Transfer (ns)"]),
                f"bus bandwidth {bus:,.1f} GB/s against the link's {link:,.0f} GB/s ({100 * bus / link:.0f} %), "
                f"median message {median / 2**20:,.1f} MiB",
                "check the path NCCL took (NCCL_DEBUG=INFO: P2P/NVLink or through the host, the network between "
                "nodes), that each rank's GPU sits near its NIC, and NCCL_ALGO/NCCL_PROTO; give the real link "
                f"with {named('link_bandwidth')} when the job spans nodes",
            ]
        )
    return found
