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
first), of equal ranks the later begun; the same on that lane, up to ``MAX_LANES``. Lane 0 is the track
itself. A slice of 0 ns is an instant and nests anywhere.

Whether a track's slices nest is found with columns only: its begins and ends in the order a viewer reads
them (by time, ends before begins, the longer slice begun first, the later begun ended first) take a stack
depth each (a running sum); an end closes the open slice at its depth, which is the event before it among
the events at that depth. Where that is another slice's begin, the two cross.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.trace_events.stream_lanes import LANE_STRIDE, MAX_LANES, stream_lanes

ROUNDS = 8  # passes over one lane (each moves every loser it finds; crossings left after them stay)
HOST_LANE_BASE = 2**31 - 2**24  # lane j of the host threads: tid HOST_LANE_BASE + j (above any OS's thread ids)
# ranks: which of two crossing slices keeps its track (the higher)
OP_RANK, RANGE_RANK, CALL_RANK, PYTHON_RANK = 3, 2, 1, 0


def nesting_lanes(
    track: np.ndarray, start: np.ndarray, end: np.ndarray, rank: np.ndarray, lane: np.ndarray | None = None
) -> np.ndarray:
    """Each slice's lane on its ``track`` (int64 keys) such that on every (track, lane) the slices nest;
    ``lane``: lanes already chosen (ops that overlap on a stream), kept or moved further; times in ns."""
    lane = np.zeros(len(start), dtype=np.int64) if lane is None else np.asarray(lane, dtype=np.int64).copy()
    opens = end > start
    track = pd.factorize(track)[0]
    for number in range(MAX_LANES - 1):
        rows = np.flatnonzero(opens & (lane == number))
        if not len(rows) and not (lane > number).any():
            break
        for _ in range(ROUNDS):
            # the tracks where something crosses (few, usually none), then who moves on them
            rows = rows[_on_crossing_tracks(track[rows], start[rows], end[rows])]
            if not len(rows):
                break
            losers = _losers(track[rows], start[rows], end[rows], rank[rows])
            lane[rows[losers]] = number + 1
            rows = rows[~losers]
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
    order = np.argsort(key, kind="stable")  # (runs: a table's rows come by start, mostly)
    _order_ties(order, key[order], slice_of, start, end, count)
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


def _order_ties(order: np.ndarray, keys: np.ndarray, slice_of: np.ndarray, start, end, count: int) -> None:
    """Events at one time on one track (sorted ``keys`` equal) in viewer order, in place: begins the longer
    first, ends the later begun first (identical slices keep the order their events were laid out in)."""
    tied = np.flatnonzero(keys[1:] == keys[:-1])
    if not len(tied):
        return
    members = np.unique(np.concatenate([tied, tied + 1]))
    events = order[members]
    rows = slice_of[events]
    tiebreak = np.where(events >= count, -start[rows], -end[rows])
    order[members] = events[np.lexsort((tiebreak, keys[members]))]


def _losers(track: np.ndarray, start: np.ndarray, end: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Of each two slices that cross on a track, the one that moves (the lower rank, else the later begun)."""
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
    crossed = closed != closing
    first, second_slice = closed[crossed], closing[crossed]
    later = (start[second_slice] > start[first]) | ((start[second_slice] == start[first]) & (second_slice > first))
    loses_second = (rank[second_slice] < rank[first]) | ((rank[second_slice] == rank[first]) & later)
    losers = np.zeros(count, dtype=bool)
    losers[np.where(loses_second, second_slice, first)] = True
    return losers


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
    device, stream = ops["device"].to_numpy(np.int64), ops["stream"].to_numpy(np.int64)
    op_start, op_end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
    range_start = ranges["start"].to_numpy(np.int64)
    range_end = range_start + ranges["duration"].to_numpy(np.int64)
    range_pid, range_tid = ranges["pid"].to_numpy(np.int64), ranges["tid"].to_numpy(np.int64)
    range_tids = range_tid.copy()

    gpu = np.flatnonzero(on_gpu)
    op_lane = stream_lanes(device, stream, op_start, op_end)
    # ops of one lane cannot cross each other (none overlaps another): only the streams with GPU-side ranges
    annotated = (range_pid[gpu] << 32) ^ range_tid[gpu]
    checked = np.flatnonzero(np.isin((device << 32) ^ stream, annotated))
    gpu_device = np.concatenate([device[checked], range_pid[gpu]])
    gpu_stream = np.concatenate([stream[checked], range_tid[gpu]])
    movable = (gpu_stream >= 0) & (gpu_stream < LANE_STRIDE)  # (a track id past the stride: left alone)
    lane = nesting_lanes(
        np.where(movable, (gpu_device << 32) ^ gpu_stream, -1 - np.arange(len(gpu_stream))),
        np.concatenate([op_start[checked], range_start[gpu]]),
        np.concatenate([op_end[checked], range_end[gpu]]),
        np.repeat([OP_RANK, RANGE_RANK - 1], [len(checked), len(gpu)]),
        np.concatenate([op_lane[checked], np.zeros(len(gpu), dtype=np.int64)]),
    )
    op_lane[checked] = lane[: len(checked)]
    range_tids[gpu] = gpu_stream[len(checked) :] + lane[len(checked) :] * LANE_STRIDE
    op_tids = stream + op_lane * LANE_STRIDE
    gpu_lanes = sorted(
        set(zip(device[op_lane > 0].tolist(), stream[op_lane > 0].tolist(), op_lane[op_lane > 0].tolist()))
        | set(zip(range_pid[gpu].tolist(), range_tid[gpu].tolist(), lane[len(checked) :].tolist()))
    )
    gpu_lanes = [(gpu_id, number + made * LANE_STRIDE, number, made) for gpu_id, number, made in gpu_lanes if made]

    host = np.flatnonzero(~on_gpu)
    parts = [
        (range_pid[host], range_tid[host], range_start[host], range_end[host], RANGE_RANK),
        *(
            (
                frame["pid"].to_numpy(np.int64),
                frame["tid"].to_numpy(np.int64),
                frame["start"].to_numpy(np.int64),
                frame["start"].to_numpy(np.int64) + frame["duration"].to_numpy(np.int64),
                rank,
            )
            for frame, rank in ((calls, CALL_RANK), (python_calls, PYTHON_RANK))
        ),
    ]
    pid, tid, start, end = (np.concatenate([part[column] for part in parts]) for column in range(4))
    sizes = [len(part[0]) for part in parts]
    thread = (pid << 32) ^ (tid & 0xFFFFFFFF)
    lane = nesting_lanes(thread, start, end, np.repeat([part[4] for part in parts], sizes))
    moved = np.flatnonzero(lane > 0)
    tids, host_lanes = tid.copy(), []
    if len(moved):
        made, kinds = pd.factorize(pd.MultiIndex.from_arrays([pid[moved], tid[moved], lane[moved]]), sort=True)
        tids[moved] = HOST_LANE_BASE + made
        host_lanes = [
            (int(made_pid), HOST_LANE_BASE + index, int(made_tid), int(made_lane))
            for index, (made_pid, made_tid, made_lane) in enumerate(kinds)
        ]
    ends = np.cumsum(sizes)
    range_tids[host] = tids[: ends[0]]
    return TrackLanes(op_tids, range_tids, tids[ends[0] : ends[1]], tids[ends[1] :], gpu_lanes, host_lanes)
