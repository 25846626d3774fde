"""Who sent how much to whom in all-to-all exchanges, where torch recorded the split: the rank-pair matrix.

torch.profiler's record of an ``all_to_all`` (``record_param_comms``) writes the input's split sizes, one per
peer of the group, in rows of dimension 0 ("In split size": ``[3, 5]``), and the input's size (the call's
bytes). A peer's share is its rows / all rows of those bytes. Peers are the group's global ranks where
recorded ("Process Group Ranks"), else their positions in it. An even split (none written: ``[]``) sends
bytes / peers to each. A split that does not fit its group (another count of peers than the group has,
negative or unreadable sizes) is left out and said, never spread evenly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

ALL_TO_ALL = ("all_to_all", "alltoall", "alltoall_base", "all_to_all_single", "all_to_allv")
EXCHANGE_COLUMNS = ["Sender", "Receiver", "Bytes", "Calls"]
# non-negative whole numbers of at most 18 digits (within int64), as torch writes them
_LIST = re.compile(r"\[\s*(?:\d{1,18}\s*(?:,\s*\d{1,18}\s*)*)?\]")


def exchange_matrix(calls: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per (sending rank, receiving rank): the bytes sent over every recorded all-to-all and how many calls
    (``EXCHANGE_COLUMNS``; empty when no all-to-all recorded its sizes), and notes. ``calls``:
    ``rank_record.CALL_COLUMNS`` with a rank label. Columnar: the few distinct split and ranks texts are read
    once each, every call's peers laid out at once."""
    recorded = calls["recorded"].astype(object).where(calls["recorded"].notna(), "").astype(str).str.lower()
    chosen = calls.loc[recorded.isin(ALL_TO_ALL).to_numpy() & (calls["bytes"].to_numpy() >= 0)]
    if chosen.empty:
        return pd.DataFrame(columns=EXCHANGE_COLUMNS), []
    split_codes, split_texts = pd.factorize(chosen["in_split"].astype(str))
    peer_codes, peer_texts = pd.factorize(chosen["group_ranks"].astype(str))
    splits, peers = _Lists(split_texts), _Lists(peer_texts)
    split_count, peer_count = splits.count[split_codes], peers.count[peer_codes]
    size = chosen["ranks"].to_numpy(np.int64)
    # the group's size: recorded, else its ranks' count, else the split's
    group = np.where(size > 0, size, np.where(peer_count > 0, peer_count, split_count))
    count = np.where(split_count > 0, split_count, group)
    fits = (
        (split_count >= 0)  # readable, whole, not negative, and not all zero
        & (peer_count >= 0)
        & (count > 0)
        & ((size <= 0) | (count == size))
        & ((peer_count == 0) | (peer_count == count))
    )
    notes = []
    if not fits.all():
        first = int(np.flatnonzero(~fits)[0])
        notes.append(
            f"{int((~fits).sum()):,} of {len(fits):,} all-to-all calls with recorded sizes are left out of the "
            "exchange table: their split sizes or group ranks do not fit their group (as written: "
            f"{split_texts[split_codes[first]]} over {peer_texts[peer_codes[first]]})"
        )
    if not fits.any():
        return pd.DataFrame(columns=EXCHANGE_COLUMNS), notes
    count, split_codes, peer_codes = count[fits], split_codes[fits], peer_codes[fits]
    split_count, peer_count = split_count[fits], peer_count[fits]
    # every call's peers laid out: call i has count[i] of them, j = 0 .. count[i] - 1
    call = np.repeat(np.arange(len(count)), count)
    j = np.arange(len(call)) - np.repeat(np.cumsum(count) - count, count)
    written = split_count[call] > 0
    rows = splits.at(split_codes[call], j, written)
    share = np.where(written, rows / splits.total[split_codes[call]].clip(min=1), 1 / count[call])
    named = peer_count[call] > 0
    receiver = np.where(named, peers.at(peer_codes[call], j, named), j)
    pairs = pd.DataFrame(
        {
            "Sender": chosen["rank"].to_numpy(object)[fits][call],
            "Receiver": receiver.astype(np.int64),
            "Bytes": chosen["bytes"].to_numpy(float)[fits][call] * share,
        }
    )
    table = pairs.groupby(["Sender", "Receiver"], sort=True).agg(Bytes=("Bytes", "sum"), Calls=("Bytes", "size"))
    table = table.reset_index()
    table["Bytes"] = table["Bytes"].round().astype(np.int64)
    return table, notes


class _Lists:
    """Texts of lists of whole numbers ("[3, 5]"), read at once and laid out flat: ``count`` each one's length (-1:
    not such a list, a number of 19 digits or more, or all zero; 0: not written: "", "None", "[]"), ``total`` its sum, ``at``
    an item of each."""

    def __init__(self, texts: Iterable[object]):
        text = [str(value).strip() for value in texts]
        blank = np.asarray([value in ("", "None", "nan") for value in text], dtype=bool)
        listed = np.asarray([_LIST.fullmatch(value) is not None for value in text], dtype=bool) & ~blank
        inner = [value[1:-1].strip() if ok else "" for value, ok in zip(text, listed)]
        count = np.asarray([value.count(",") + 1 if value else 0 for value in inner], dtype=np.int64)
        # every number at once (at most 18 digits each: within int64)
        flat = np.fromstring(",".join(value for value in inner if value), dtype=np.int64, sep=",")
        total = np.bincount(np.repeat(np.arange(len(count)), count), weights=flat, minlength=len(count))
        self.count = np.where(blank, 0, np.where(listed & ((count == 0) | (total > 0)), count, -1))
        self.start = (np.cumsum(count) - count).astype(np.int64)
        self.flat = np.append(flat, 0)
        self.total = total

    def at(self, which: np.ndarray, j: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Item ``j`` of list ``which``, per element; 0 where not ``valid``."""
        return np.where(valid, self.flat[np.where(valid, self.start[which] + j, len(self.flat) - 1)], 0)


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
