"""Slices that cross on one track, put on lanes beside it so that every track's slices nest.

A viewer draws a track's slices as a stack: Perfetto's protobuf importer ends the latest open slice at each
end event, and its JSON importer (like chrome://tracing) expects a slice that begins inside another to end
inside it too. Slices that cross (one begins inside another and ends after it) would be drawn with the wrong
durations, or left out. Real traces have them: torch.profiler begins a ``record_function`` range inside the
Python call that opens it (with_stack: ``_record_function_enter_new`` ends inside ``ProfilerStep#6``); its
GPU-side annotations are rounded to the microsecond while the kernels they span are not; NVTX
``nvtxRangeStart``/``End`` ranges need not nest at all.

The rule, on every track: of two slices that cross, the one of the lower rank moves one lane over (a GPU op
stays, an annotation moves; on a host thread a range stays, a CUDA API call moves before it, a Python call
first), of equal ranks the later begun, unless the one it lost to moves itself (of a chain of ranges each
begun before the last ends, every other one moves: two lanes hold them all); the same on that lane, up to
``MAX_LANES``. Lane 0 is the track itself. A slice of 0 ns is an instant and nests anywhere. A track still
crossing after ``ROUNDS`` passes (hundreds of slices crossing at once) keeps only its slices that overlap
no other: every lane but the last nests.

Whether a track's slices nest is found with columns only: its begins and ends in the order a viewer reads
them (by time, ends before begins, the longer slice begun first, the later begun ended first) take a stack
depth each (a running sum); an end closes the open slice at its depth, which is the event before it among
the events at that depth. Where that is another slice's begin, the two cross.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.trace_events.stream_lanes import LANE_STRIDE, MAX_LANES, overlaps_earlier, stream_lanes

ROUNDS = 8  # passes over one lane (each moves losers it finds); then a track still crossing keeps only
# the slices that overlap no other
HOST_LANE_BASE = 2**31 - 2**24  # lane j of the host threads: tid HOST_LANE_BASE + j (above any OS's thread ids)
# ranks: which of two crossing slices keeps its track (the higher). On a stream: an op, then a GPU-side
# annotation; on a host thread: a range (NVTX, record_function, a CPU operator), a CUDA API call, a Python call
OP_RANK, GPU_ANNOTATION_RANK = 1, 0
RANGE_RANK, CALL_RANK, PYTHON_RANK = 2, 1, 0


def nesting_lanes(
    track: np.ndarray, start: np.ndarray, end: np.ndarray, rank: np.ndarray, lane: np.ndarray | None = None
) -> np.ndarray:
    """Each slice's lane on its ``track`` (int64 keys) such that on every (track, lane) but the last the
    slices nest; ``lane``: lanes already chosen (ops that overlap on a stream), kept or moved further;
    ``rank``: which of two crossing slices stays (the higher); times in ns."""
    lane = np.zeros(len(start), dtype=np.int64) if lane is None else np.asarray(lane, dtype=np.int64).copy()
    opens = end > start
    track = pd.factorize(track)[0]
    for number in range(MAX_LANES - 1):
        rows = np.flatnonzero(opens & (lane == number))
        if not len(rows) and not (lane > number).any():
            break
        for round_number in range(ROUNDS + 1):
            # the tracks where something crosses (few, usually none), then who moves on them
            rows = rows[_on_crossing_tracks(track[rows], start[rows], end[rows])]
            if not len(rows):
                break
            if round_number < ROUNDS:
                moves = _losers(track[rows], start[rows], end[rows], rank[rows])
            else:  # crossings left after every round: each such track keeps only slices that overlap no other
                moves = overlaps_earlier(np.zeros(len(rows), dtype=np.int64), track[rows], start[rows], end[rows])
            if not moves.any():  # (none crosses: the keys did not fit, every track was named)
                break
            lane[rows[moves]] = number + 1
            rows = rows[~moves]
    return lane


def _on_crossing_tracks(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Whether each slice's track has slices that cross: a slice's begin and end at different depths (an end
    closes the open slice at its depth, so a slice ending at another depth than it began closes another's).
    The events in viewer order by one stable sort of (track, time, ends first), ties then put in order among
    themselves; where the keys do not fit in int64, every track (``_losers`` decides)."""
    count = len(start)
    if count < 2:
        return np.zeros(count, dtype=bool)
    low = int(min(start.min(), end.min()))
    span = int(max(start.max(), end.max())) - low + 1
    tracks = int(track.max()) + 1
    if tracks * span >= 2**61:
        return np.ones(count, dtype=bool)
    row = np.arange(count, dtype=np.int32 if count < 2**31 else np.int64)
    # begins in row order, ends in reverse row order: identical slices close innermost (last begun) first
    slice_of = np.concatenate([row, row[::-1]])
    base = track.astype(np.int64) * span - low
    key = np.concatenate([(base + start) * 2 + 1, ((base + end) * 2)[::-1]])
    # at one time on one track: begins the longer first, ends the later begun first
    tiebreak = lambda events: np.where(events >= count, -start[slice_of[events]], -end[slice_of[events]])
    order = stable_order(key, tiebreak)
    del key
    ending = order >= count
    depth = np.cumsum(np.where(ending, np.int8(-1), np.int8(1)), dtype=np.int32)
    # a begin's level is its depth once open, an end's the depth it closes (one more than after it): a
    # slice closes itself where the two are equal, the sum of +begin and -end levels 0
    signed = np.where(ending, -1 - depth, depth)
    balance = np.bincount(slice_of[order], weights=signed, minlength=count)
    crossing = np.zeros(tracks, dtype=bool)
    crossing[track[balance != 0]] = True
    return crossing[track]


def stable_order(keys: np.ndarray, tiebreak: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The positions of ``keys`` in order (a stable sort: fast on runs, as a table's rows by start), those of
    equal keys then ordered among themselves by ``tiebreak`` (given their positions, it gives each a second
    key; equal ones keep their order): one sort of all, another of the tied alone."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1])
    if len(tied):
        members = np.unique(np.concatenate([tied, tied + 1]))
        order[members] = order[members][np.lexsort((tiebreak(order[members]), ordered[members]))]
    return order


def _losers(track: np.ndarray, start: np.ndarray, end: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Of each two slices that cross on a track, the one that moves (the lower rank, else the later begun),
    where the one it loses to stays: a chain of slices each crossing the one before (NVTX ranges of a
    pipeline, each begun before the last ends) moves every other one, not all but the first."""
    count = len(start)
    if count < 2:
        return np.zeros(count, dtype=bool)
    row = np.arange(count)
    slice_of = np.concatenate([row, row])
    is_end = np.repeat([False, True], count)
    time = np.concatenate([start, end])
    # at one time: ends first; begins the longer first; ends the later begun first (the identical: by row)
    second = np.concatenate([-end, -start])
    third = np.concatenate([row, -row])
    order = np.lexsort((third, second, ~is_end, time, track[slice_of]))
    ending = is_end[order]
    depth = np.cumsum(np.where(ending, -1, 1))
    level = np.where(ending, depth + 1, depth)
    by_level = order[np.lexsort((np.arange(len(order)), level, track[slice_of[order]]))]
    closes = np.flatnonzero(is_end[by_level])  # every end follows the begin it closes, at its level
    closed, closing = slice_of[by_level[closes - 1]], slice_of[by_level[closes]]
    # the end closes a slice begun inside its own that ends after it: the two cross. (Past the first such
    # end on a track, an end may close one it does not cross, which decides nothing: the next round sees.)
    crossed = (start[closed] > start[closing]) & (start[closed] < end[closing]) & (end[closed] > end[closing])
    first, second_slice = closing[crossed], closed[crossed]  # the earlier begun, the later
    loses_second = rank[second_slice] <= rank[first]
    loser = np.where(loses_second, second_slice, first)
    # each loser below the one it lost to: it moves where that one stays, the root of a chain staying
    above = row.copy()
    above[loser] = np.where(loses_second, first, second_slice)
    return _odd_depth(above)


def _odd_depth(above: np.ndarray) -> np.ndarray:
    """Whether each node of a forest (``above``: its parent, a root its own) lies an odd number of steps
    below its root, by pointer jumping: log2 of the longest chain passes over the columns."""
    odd = above != np.arange(len(above))
    while True:
        higher = above[above]
        if (higher == above).all():
            return odd
        odd ^= odd[above]
        above = higher


@dataclass(frozen=True)
class TrackLanes:
    """Each slice's track for the writer (its own, or a lane's) and the lanes made: ``gpu_lanes`` (device, tid,
    stream, lane) and ``host_lanes`` (pid, tid, the thread's tid, lane)."""

    op_tids: np.ndarray
    range_tids: np.ndarray
    call_tids: np.ndarray
    python_tids: np.ndarray
    gpu_lanes: list[tuple[int, int, int, int]]
    host_lanes: list[tuple[int, int, int, int]]


def track_lanes(
    ops: pd.DataFrame, ranges: pd.DataFrame, calls: pd.DataFrame, python_calls: pd.DataFrame, on_gpu: np.ndarray
) -> TrackLanes:
    """The lanes of one input's slices: GPU ops (``stream_lanes`` first: ops of a stream cannot run at once)
    with the GPU-side ranges (``on_gpu``), and each host thread's ranges, CUDA API calls and Python calls."""
    range_tids = ranges["tid"].to_numpy(np.int64).copy()
    times = ranges.loc[:, ["pid", "tid", "start", "duration"]]  # (the columns used, not every range's name)
    op_tids, range_tids[on_gpu], gpu_lanes = _gpu_lanes(ops, times.loc[on_gpu])
    host_tids, host_lanes = _host_lanes(
        [(times.loc[~on_gpu], RANGE_RANK), (calls, CALL_RANK), (python_calls, PYTHON_RANK)]
    )
    range_tids[~on_gpu] = host_tids[0]
    return TrackLanes(op_tids, range_tids, host_tids[1], host_tids[2], gpu_lanes, host_lanes)


def _gpu_lanes(ops: pd.DataFrame, annotations: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list]:
    """Each op's and each GPU-side annotation's track (its stream + lane * ``LANE_STRIDE``), and the lanes
    made (device, track, stream, lane); an annotation's pid is its device, its tid its stream."""
    device, stream = ops["device"].to_numpy(np.int64), ops["stream"].to_numpy(np.int64)
    start, end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
    op_lane = stream_lanes(device, stream, start, end)
    at_device, at_stream = annotations["pid"].to_numpy(np.int64), annotations["tid"].to_numpy(np.int64)
    at_start = annotations["start"].to_numpy(np.int64)
    at_end = at_start + annotations["duration"].to_numpy(np.int64)
    # ops of one lane cannot cross each other (none overlaps another): only the streams with annotations
    checked = np.flatnonzero(np.isin((device << 32) ^ stream, (at_device << 32) ^ at_stream))
    both_device = np.concatenate([device[checked], at_device])
    both_stream = np.concatenate([stream[checked], at_stream])
    movable = (both_stream >= 0) & (both_stream < LANE_STRIDE)  # (a track id past the stride: left alone)
    lane = nesting_lanes(
        np.where(movable, (both_device << 32) ^ both_stream, -1 - np.arange(len(both_stream))),
        np.concatenate([start[checked], at_start]),
        np.concatenate([end[checked], at_end]),
        np.repeat([OP_RANK, GPU_ANNOTATION_RANK], [len(checked), len(annotations)]),
        np.concatenate([op_lane[checked], np.zeros(len(annotations), dtype=np.int64)]),
    )
    op_lane[checked] = lane[: len(checked)]
    at_lane = lane[len(checked) :]
    made = set(zip(device[op_lane > 0].tolist(), stream[op_lane > 0].tolist(), op_lane[op_lane > 0].tolist()))
    made |= set(zip(at_device[at_lane > 0].tolist(), at_stream[at_lane > 0].tolist(), at_lane[at_lane > 0].tolist()))
    lanes = [(gpu, number + k * LANE_STRIDE, number, k) for gpu, number, k in sorted(made)]
    return stream + op_lane * LANE_STRIDE, at_stream + at_lane * LANE_STRIDE, lanes


def _host_lanes(parts: list[tuple[pd.DataFrame, int]]) -> tuple[list[np.ndarray], list]:
    """Each slice's track in every (frame, rank) of ``parts`` (its tid, or a lane's: ``HOST_LANE_BASE`` + j),
    and the lanes made (pid, tid, the thread's tid, lane), together: slices of all of them share threads."""
    column = lambda name: np.concatenate([frame[name].to_numpy(np.int64) for frame, _ in parts])
    pid, tid, start = column("pid"), column("tid"), column("start")
    end = start + column("duration")
    sizes = [len(frame) for frame, _ in parts]
    lane = nesting_lanes((pid << 32) ^ (tid & 0xFFFFFFFF), start, end, np.repeat([rank for _, rank in parts], sizes))
    moved = np.flatnonzero(lane > 0)
    tids, lanes = tid.copy(), []
    if len(moved):
        made, kinds = pd.factorize(pd.MultiIndex.from_arrays([pid[moved], tid[moved], lane[moved]]), sort=True)
        tids[moved] = HOST_LANE_BASE + made
        lanes = [(int(p), HOST_LANE_BASE + j, int(t), int(k)) for j, (p, t, k) in enumerate(kinds)]
    return np.split(tids, np.cumsum(sizes)[:-1]), lanes
