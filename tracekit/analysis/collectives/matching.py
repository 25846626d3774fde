"""The same collective on every rank: instances paired across ranks, and who waited for whom.

Every rank of a process group calls the group's collectives in the same order (NCCL requires it), and
torch numbers them per group (``seq``). So a collective's kernels on the ranks are paired by (group,
seq) where every call of the group on every rank carries a distinct seq, else by (group, position): the
k-th collective of the group on each rank (said in a note). Collectives with no recorded group pair by
position too, over all of a rank's collective streams, or per stream where every rank ran them on as many
streams (one communicator each: a data-parallel all-reduce beside tensor- or pipeline-parallel traffic),
each stream told by the operations it runs and its first use.

A collective cannot finish on any rank before the last rank arrives, so its kernels end together and
begin when each rank got there. For each rank of a matched instance, in ns:
- skew: its start after the first rank's;
- wait: the time from its start until the last rank's start, at most its own duration;
- transfer: the rest of its duration (duration - wait).
The instance's transfer is the last-arriving rank's duration (TraceLens's latency: the time the
collective itself took once everyone was there). Times of different inputs are compared as recorded:
their clocks must agree (one node, or synchronised clocks); a kernel that ended before the last rank's
began shows they do not (or that the pairing broke), and is said.

An instance is matched when every rank of its group is present: the group's size where recorded, else
the number of ranks that ran the group's collectives (at least two: a collective has peers). Unmatched rows say why (a peer's trace is not
among the inputs, or is but records no call of the group, the trace windows differ, or the ranks disagree on the operation at that position:
the order broke, so position pairing stops meaning anything for that group).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.hardware.collective_names import POINT_TO_POINT

# Columns ``match_ranks`` adds.
INSTANCE, SKEW, WAIT, TRANSFER, LAST, WHY = "instance", "skew", "wait", "transfer", "last", "unmatched"
NO_PEERS = "its peers' traces are not among the inputs"
FEW_RAN = (
    "fewer of the given ranks ran its group than it has: a peer's trace is missing, or its record of the call names "
    "no group"
)
WINDOW = "the other ranks' traces end (or begin) before it: their windows differ"
ORDER = "the ranks ran different operations at this position: the group's order broke"


def match_ranks(calls: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``calls``: one row per collective kernel on a rank, with columns rank (int), group (str, "" unknown),
    ranks (group size, -1 unknown), seq (-1 unknown), operation, start and duration (ns), and optionally stream
    (which tells communicators apart where no group is recorded). Returns it with
    instance (int id, -1 unmatched), skew, wait, transfer (ns; -1 unmatched), last (bool: the rank that
    arrived last) and unmatched (why, "" when matched), and notes on how the pairing went."""
    frame = calls.reset_index(drop=True)
    frame = frame.assign(group=frame["group"].astype(object).where(pd.notna(frame["group"]), ""))
    notes: list[str] = []
    if frame.empty:
        return _with_columns(frame, np.full(0, -1), np.zeros(0), np.zeros(0, bool), np.full(0, "", object)), notes
    # each rank's communicators apart: the recorded group, else the stream (``_lanes``)
    frame["lane"], streams = _lanes(frame)
    # order within each (rank, lane): by start
    frame = frame.sort_values(["lane", "rank", "start"], kind="stable")
    position = frame.groupby(["lane", "rank"], sort=False).cumcount().to_numpy()
    seq = frame["seq"].to_numpy(np.int64)
    by_seq = _lanes_keyed_by_seq(frame)
    in_seq_group = frame["lane"].isin(by_seq).to_numpy()
    key = np.where(in_seq_group, seq, position)
    paired_by_order = sorted({str(group) for group in frame.loc[~in_seq_group, "group"].unique()})
    if paired_by_order and frame["rank"].nunique() > 1:
        apart = f" (each rank's {streams} collective streams apart, told by their operations and first use)"
        named = [
            f"group {group}" if group else "collectives with no recorded group" + (apart if streams else "")
            for group in paired_by_order
        ]
        notes.append(
            f"{', '.join(named)}: paired across ranks by their order on each rank (no distinct sequence numbers "
            "recorded); a rank that skipped or added a collective shifts the rest"
        )
    frame["key"] = key
    codes = frame.groupby(["lane", "key"], sort=False).ngroup().to_numpy()
    ranks_seen = frame.groupby("lane", sort=False)["rank"].transform("nunique").to_numpy()
    recorded = frame["ranks"].to_numpy(np.int64)
    # a group of unknown size seen on one rank: a collective has peers, and theirs are not here
    expected = np.where(recorded > 0, recorded, np.maximum(ranks_seen, 2))
    present = np.bincount(codes)[codes]
    operations = frame["operation"].astype(object).where(pd.notna(frame["operation"]), "?").astype(str)
    disagree = (operations.groupby(codes).transform("nunique").to_numpy() > 1) & ~in_seq_group
    # once the order breaks in a group, every later position in it is suspect
    broken_from = pd.Series(np.where(disagree, key, np.iinfo(np.int64).max)).groupby(frame["lane"].to_numpy())
    broken = (key >= broken_from.transform("min").to_numpy()) & ~in_seq_group
    matched = (present >= expected) & ~broken
    # the reason of each row, by its index into the few reasons (not a text built per row)
    few = ranks_seen < expected  # too few ranks ran the group: too few were given, or the others recorded it otherwise
    reason = np.select(
        [matched, broken, few & (frame["rank"].nunique() < expected), few],
        [0, 1, 2, 3],
        4,
    )
    why = np.asarray(["", ORDER, NO_PEERS, FEW_RAN, WINDOW], dtype=object)[reason]
    instance = np.full(len(frame), -1, dtype=np.int64)
    instance[matched] = np.unique(codes[matched], return_inverse=True)[1].reshape(-1)  # 0, 1, ... per match
    start, duration = frame["start"].to_numpy(np.int64), frame["duration"].to_numpy(np.int64)
    latest = pd.Series(start).groupby(codes).transform("max").to_numpy()
    first = pd.Series(start).groupby(codes).transform("min").to_numpy()
    wait = np.clip(latest - start, 0, duration)
    skew = start - first
    # the last arrival: the latest start; ties go to the rank given first (one row per instance)
    last_rank = (
        pd.DataFrame({"code": codes, "start": start, "rank": frame["rank"].to_numpy()})
        .sort_values(["code", "start", "rank"], ascending=[True, False, True], kind="stable")
        .drop_duplicates("code")
        .set_index("code")["rank"]
    )
    last = frame["rank"].to_numpy() == last_rank.reindex(codes).to_numpy()
    frame = frame.drop(columns=["key", "lane"])
    result = _with_columns(frame, instance, skew, last & matched, why)
    result[WAIT] = np.where(matched, wait, -1)
    result[TRANSFER] = np.where(matched, duration - wait, -1)
    result[SKEW] = np.where(matched, skew, -1)
    notes += _clock_note(matched, operations.isin(POINT_TO_POINT).to_numpy(), start + duration, latest)
    unmatched = int((~matched).sum())
    if unmatched:
        reasons = pd.Series(why[~matched]).value_counts()
        notes.append(
            f"{unmatched:,} of {len(frame):,} collective kernels matched no instance on every rank of their group: "
            + "; ".join(f"{count:,} as {reason}" for reason, count in reasons.items())
        )
    return result.sort_values(["rank", "start"], kind="stable").reset_index(drop=True), notes


def _clock_note(matched: np.ndarray, point_to_point: np.ndarray, end: np.ndarray, latest: np.ndarray) -> list[str]:
    """A note when matched kernels ended before the last rank's kernel of their collective began: no collective
    lets a rank leave before every rank arrived (a send may: NCCL buffers it), so the clocks of the inputs
    disagree or the pairing is wrong, and the waits clipped to those kernels' durations measure nothing."""
    early = matched & ~point_to_point & (end < latest)
    if not early.any():
        return []
    return [
        f"{int(early.sum()):,} of {int(matched.sum()):,} matched collective kernels ended before the last rank's "
        f"kernel of the same collective began (by up to {(latest - end)[early].max() / 1e6:,.3f} ms), which no "
        "collective allows: the inputs' clocks disagree (traces of different nodes), or the pairing went wrong; "
        "their waits, skews and the late table do not measure waiting"
    ]


def _lanes(frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Per call, the communicator it is paired within: its recorded group; with none recorded, the stream it ran
    on where every rank ran such calls on the same number (two or more) of streams, each told apart by the
    operations it runs and, among streams of the same operations, its first use (raw stream numbers differ
    across processes). Returns the lanes and that number of streams (0: not told apart)."""
    lanes = frame["group"].astype(str).to_numpy(object)
    unrecorded = lanes == ""
    if "stream" not in frame.columns or not unrecorded.any():
        return lanes, 0
    mine = frame.loc[unrecorded, ["rank", "stream", "start"]].assign(
        operation=frame.loc[unrecorded, "operation"]
        .astype(object)
        .where(lambda value: pd.notna(value), "?")
        .astype(str)
    )
    # a few streams per rank, each with its first start and its distinct operations as one text
    runs = (
        mine.drop_duplicates(["rank", "stream", "operation"])
        .sort_values("operation", kind="stable")
        .groupby(["rank", "stream"], sort=False)["operation"]
        .agg("+".join)
    )
    streams = mine.groupby(["rank", "stream"], sort=False)["start"].min().rename("first").to_frame()
    streams = streams.assign(runs=runs.reindex(streams.index).to_numpy(object))
    streams = streams.reset_index().sort_values(["rank", "runs", "first", "stream"], kind="stable")
    streams["lane"] = streams["runs"] + " #" + streams.groupby(["rank", "runs"]).cumcount().astype(str)
    per_rank = streams.groupby("rank")["lane"].agg(lambda names: tuple(sorted(names)))
    if per_rank.nunique() != 1 or len(per_rank.iloc[0]) < 2:
        return lanes, 0  # one stream each, or ranks that disagree: one order over all of them
    lane_of = streams.set_index(["rank", "stream"])["lane"]
    at = lane_of.index.get_indexer(pd.MultiIndex.from_frame(mine[["rank", "stream"]]))
    lanes[unrecorded] = "\0" + lane_of.to_numpy(object)[at]  # "\0": no recorded group's name
    return lanes, len(per_rank.iloc[0])


def _lanes_keyed_by_seq(frame: pd.DataFrame) -> set[str]:
    """The lanes whose every call on every rank carries a sequence number, distinct on each rank (grouped at once:
    a job may have many communicators)."""
    calls = pd.DataFrame(
        {"lane": frame["lane"].to_numpy(object), "rank": frame["rank"].to_numpy(), "seq": frame["seq"].to_numpy()}
    )
    numbered = (calls["seq"] >= 0).groupby(calls["lane"], sort=False).all()
    repeated = calls.duplicated(["lane", "rank", "seq"]).groupby(calls["lane"], sort=False).any()
    return {str(lane) for lane in numbered.index[numbered.to_numpy() & ~repeated.reindex(numbered.index).to_numpy()]}


def _with_columns(
    frame: pd.DataFrame, instance: np.ndarray, skew: np.ndarray, last: np.ndarray, why: np.ndarray
) -> pd.DataFrame:
    return frame.assign(
        **{
            INSTANCE: instance.astype(np.int64),
            SKEW: skew.astype(np.int64),
            WAIT: np.full(len(frame), -1, np.int64),
            TRANSFER: np.full(len(frame), -1, np.int64),
            LAST: last.astype(bool),
            WHY: why,
        }
    )
