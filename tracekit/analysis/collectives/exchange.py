"""Who sent how much to whom in all-to-all exchanges, where torch recorded the split: the rank-pair matrix.

torch.profiler's record of an ``all_to_all`` (``record_param_comms``) writes the input's split sizes, one per
peer of the group, in rows of dimension 0 ("In split size": ``[3, 5]``), and the input's element count. A
peer's share in bytes is its rows x (elements / all rows) x the element's size. Peers are the group's global
ranks where recorded ("Process Group Ranks"), else their positions in it. An even split (or none written:
``[]``) sends elements / peers to each.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

ALL_TO_ALL = ("all_to_all", "alltoall", "alltoall_base", "all_to_all_single", "all_to_allv")
EXCHANGE_COLUMNS = ["Sender", "Receiver", "Bytes", "Calls"]


def exchange_matrix(calls: pd.DataFrame) -> pd.DataFrame:
    """Per (sending rank, receiving rank): the bytes sent over every recorded all-to-all and how many calls
    (``EXCHANGE_COLUMNS``; empty when no all-to-all recorded its sizes). ``calls``: ``rank_record.CALL_COLUMNS``
    with a rank label."""
    recorded = calls["recorded"].astype(object).where(calls["recorded"].notna(), "").astype(str).str.lower()
    chosen = calls.loc[
        recorded.isin(ALL_TO_ALL).to_numpy()
        & (calls["in_elements"].to_numpy() >= 0)
        & (calls["dtype_bytes"].to_numpy() > 0)
    ]
    if chosen.empty:
        return pd.DataFrame(columns=EXCHANGE_COLUMNS)
    senders, receivers, sizes = [], [], []
    # a few distinct (split, ranks) texts: parsed once each
    splits = {text: _numbers(text) for text in pd.unique(chosen["in_split"].astype(str))}
    members = {text: _numbers(text) for text in pd.unique(chosen["group_ranks"].astype(str))}
    for (split_text, ranks_text, ranks), rows in chosen.groupby(
        [chosen["in_split"].astype(str), chosen["group_ranks"].astype(str), chosen["ranks"]], sort=False
    ):
        split, peers = splits[split_text], members[ranks_text]
        count = len(split) or len(peers) or int(ranks)
        if count <= 0:
            continue
        share = np.asarray(split, dtype=float) / sum(split) if split and sum(split) > 0 else np.full(count, 1 / count)
        targets = peers if len(peers) == len(share) else list(range(len(share)))
        total = rows["in_elements"].to_numpy(float) * rows["dtype_bytes"].to_numpy(float)
        senders.append(np.repeat(rows["rank"].to_numpy(object), len(share)))
        receivers.append(np.tile(np.asarray(targets, dtype=object), len(rows)))
        sizes.append(np.outer(total, share).reshape(-1))
    if not sizes:
        return pd.DataFrame(columns=EXCHANGE_COLUMNS)
    pairs = pd.DataFrame(
        {"Sender": np.concatenate(senders), "Receiver": np.concatenate(receivers), "Bytes": np.concatenate(sizes)}
    )
    table = pairs.groupby(["Sender", "Receiver"], sort=True).agg(Bytes=("Bytes", "sum"), Calls=("Bytes", "size"))
    table = table.reset_index()
    table["Bytes"] = table["Bytes"].round().astype(np.int64)
    return table


def imbalance(matrix: pd.DataFrame) -> str | None:
    """How unequal the exchange is, in words: the largest sender's bytes against the mean sender's, and the
    largest pair against the mean pair (None without a matrix)."""
    if matrix.empty:
        return None
    senders, which = np.unique(matrix["Sender"].to_numpy(object).astype(str), return_inverse=True)
    sent = np.bincount(which.reshape(-1), weights=matrix["Bytes"].to_numpy(float))
    pair = matrix["Bytes"].to_numpy(float)
    if sent.mean() <= 0 or pair.mean() <= 0:
        return None
    return (
        f"the largest sender ({senders[int(np.argmax(sent))]}) sent {sent.max() / sent.mean():,.2f}x the mean "
        f"rank's bytes, the largest pair {pair.max() / pair.mean():,.2f}x the mean pair's"
    )


def _numbers(text: str) -> list[int]:
    """ "[3, 5]" -> [3, 5]; anything else (None, "", not a list of whole numbers) -> []."""
    try:
        value = json.loads(text)
    except ValueError:
        return []
    if isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        return value
    return []
