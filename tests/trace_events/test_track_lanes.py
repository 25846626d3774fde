"""Slices that cross on one track (a record_function range begun inside the Python call that opens it, a
GPU-side annotation rounded to the microsecond around its kernels, NVTX start/end ranges) go on lanes beside
it: every track's slices nest in both formats, each keeps its own duration, and tracekit reads them back
on their thread or stream."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED
from helpers.perfetto_decode import from_json, from_protobuf
from hypothesis import given, settings
from hypothesis import strategies as st

import tracekit
from tracekit.trace_events import track_lanes
from tracekit.trace_events.stream_lanes import LANE_STRIDE, MAX_LANES
from tracekit.trace_events.track_lanes import HOST_LANE_BASE, nesting_lanes
from tracekit.trace_events.tracks import GPU_BASE
from tracekit.trace_events.writer import timeline as write_timeline


def crossings(slices) -> list[tuple]:
    """Pairs of slices (pid, tid, start, duration, ...) that cross on their track, found with a stack as a
    viewer reads them (by start, the longer first; a slice ending as another begins does not overlap it)."""
    tracks = defaultdict(list)
    for row in slices:
        if row[3] > 0:
            tracks[row[:2]].append(row)
    found = []
    for rows in tracks.values():
        stack: list = []
        for row in sorted(rows, key=lambda row: (row[2], -row[3])):
            while stack and stack[-1][2] + stack[-1][3] <= row[2]:
                stack.pop()
            if stack and row[2] + row[3] > stack[-1][2] + stack[-1][3]:
                found.append((stack[-1], row))
            stack.append(row)
    return found


def test_of_two_crossing_slices_the_lower_rank_moves_else_the_later_begun():
    # track 0: A [0,10) and B [5,15) of one rank cross: B (begun later) moves; C [20,30) crosses nothing.
    # track 1: a rank-0 slice [0,10) crosses a rank-2 one [5,15): the rank-0 slice moves, begun first or not
    track = np.array([0, 0, 0, 1, 1])
    start, end = np.array([0, 5, 20, 0, 5]), np.array([10, 15, 30, 10, 15])
    rank = np.array([2, 2, 2, 0, 2])
    assert nesting_lanes(track, start, end, rank).tolist() == [0, 1, 0, 1, 0]


def test_nested_touching_identical_and_instant_slices_stay():
    # an outer slice holding an inner one, one beginning as the inner ends, two identical slices, an
    # instant (0 ns) inside a slice, and one slice holding another that ends at its very end
    start = np.array([0, 10, 20, 40, 40, 55, 50, 70, 75])
    end = np.array([100, 20, 30, 50, 50, 55, 60, 90, 90])
    lanes = nesting_lanes(np.zeros(len(start), dtype=np.int64), start, end, np.zeros(len(start)))
    assert lanes.tolist() == [0] * len(start)


def test_a_chain_of_crossing_slices_takes_two_lanes():
    # twelve slices, each beginning inside the one before and ending after it (NVTX ranges of a pipeline):
    # the second loses to the first and moves, so the third crosses nothing left on the track, and so on
    start = np.arange(12) * 10
    lanes = nesting_lanes(np.zeros(12, dtype=np.int64), start, start + 15, np.zeros(12))
    assert lanes.tolist() == [0, 1] * 6


def test_slices_all_crossing_each_other_fill_the_lanes_and_the_last_keeps_the_rest():
    start = np.arange(12) * 10
    lanes = nesting_lanes(np.zeros(12, dtype=np.int64), start, start + 1000, np.zeros(12))
    assert lanes.tolist() == [*range(MAX_LANES), *[MAX_LANES - 1] * (12 - MAX_LANES)]


def test_a_slice_crossed_only_by_one_that_moves_stays():
    # a step range [0, 100) holding a range [20, 80); a Python call [50, 110) begins inside the inner one and
    # ends after both: it alone moves (the inner range nests in the step once it is gone)
    start, end = np.array([0, 20, 50]), np.array([100, 80, 110])
    rank = np.array([track_lanes.RANGE_RANK, track_lanes.RANGE_RANK, track_lanes.PYTHON_RANK])
    assert nesting_lanes(np.zeros(3, dtype=np.int64), start, end, rank).tolist() == [0, 0, 1]


def test_a_track_still_crossing_after_the_rounds_keeps_the_slices_that_overlap_no_other(monkeypatch):
    # three slices that cross one another take two rounds to part; with one round allowed, the track keeps
    # [0, 4) and [5, 14), which overlap nothing, and the two others move on (every lane but the last nests)
    monkeypatch.setattr(track_lanes, "ROUNDS", 1)
    track = np.zeros(4, dtype=np.int64)
    start, end = np.array([0, 5, 11, 7]), np.array([4, 14, 17, 16])
    lanes = nesting_lanes(track, start, end, np.zeros(4))
    assert lanes.tolist() == [0, 0, 2, 1]


def test_slices_that_nest_stay_where_times_are_too_far_apart_for_one_sort():
    # two tracks 2^62 ns apart: every track is checked pair by pair, and nested slices stay
    track = np.array([0, 0, 1, 1])
    start = np.array([0, 10, 2**62, 2**62 + 10])
    lanes = nesting_lanes(track, start, start + np.array([100, 20, 100, 20]), np.zeros(4))
    assert lanes.tolist() == [0, 0, 0, 0]


def test_lanes_chosen_before_are_kept_or_moved_further():
    # ops on lane 1 already (stream lanes); an annotation there crossing one of them moves to lane 2
    track = np.zeros(3, dtype=np.int64)
    start, end = np.array([0, 5, 8]), np.array([10, 15, 20])
    lanes = nesting_lanes(track, start, end, np.array([3, 3, 1]), lane=np.array([0, 1, 1]))
    assert lanes.tolist() == [0, 1, 2]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 25), st.integers(0, 3)),
        min_size=1,
        max_size=40,
    )
)
def test_every_lane_nests_and_a_slice_crossing_nothing_stays(rows):
    track, start, length, rank = (np.array(column, dtype=np.int64) for column in zip(*rows))
    lanes = nesting_lanes(track, start, start + length, rank)
    as_slices = [(int(t), int(lane), int(s), int(d)) for t, lane, s, d in zip(track, lanes, start, length)]
    assert not crossings([row for row in as_slices if row[1] < MAX_LANES - 1])  # (the last keeps the rest)
    # a slice that crosses no other of its track (one begins strictly inside the other, ends strictly after)
    for t, lane, s, d in as_slices:
        crosses = any(
            t == other_t and d and od and (s < os < s + d < os + od or os < s < os + od < s + d)
            for other_t, _, os, od in as_slices
        )
        if not crosses:
            assert lane == 0, (t, s, d)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 12), st.integers(0, 6)), min_size=1, max_size=30),
    st.booleans(),
)
def test_the_quick_check_finds_exactly_the_tracks_where_slices_cross(rows, far):
    """One sort (ties in viewer order) tells which tracks have crossings, as a pairwise check does; with
    times too far apart for its keys, it names every track."""
    track, start, length = (np.array(column, dtype=np.int64) for column in zip(*rows))
    if far:
        start = start + (track == 2) * 2**61
    crossed = {
        int(t)
        for t, s, d in zip(track, start, length)
        for other_t, os, od in zip(track, start, length)
        if t == other_t and d and od and s < os < s + d < os + od
    }
    opens = length > 0
    found = track_lanes._on_crossing_tracks(track[opens], start[opens], (start + length)[opens])
    if far and len(set(track[opens].tolist())) > 1 and 2 in set(track[opens].tolist()):
        assert found.all()
    else:
        assert {int(t) for t in track[opens][found]} == crossed


@pytest.fixture
def crossing_kineto(tmp_path):
    """tid 100: the Python call that opens "ProfilerStep#1" [100, 200) us, the step [150, 900) beginning
    inside it, an operator and its launch inside the step; stream 7: a kernel [300, 400.5) and the GPU-side
    annotation of the step [250, 400) that ends before it (rounded to the microsecond)."""
    b = KinetoBuilder()
    b.names("thread_name", 100, 100, "python3")
    b.python_call("torch/autograd/profiler.py(751): __enter__", 100, 100, python_id=1, parent=None)
    b.annotation("ProfilerStep#1", 150, 750)
    b.operator("aten::mm", 200, 100, dims=[[2, 2], [2, 2]], types=["float", "float"])
    b.launch("cudaLaunchKernel", 210, 20, correlation=1)
    b.kernel("ampere_sgemm_128x64_nn", "300", "100.5", correlation=1)
    b.annotation("ProfilerStep#1", 250, 150, pid=0, tid=7, cat="gpu_user_annotation")
    return b.write(tmp_path / "crossing.pt.trace.json")


def test_crossing_slices_keep_their_durations_on_lanes(crossing_kineto, tmp_path):
    text = from_json(write_timeline([crossing_kineto], tmp_path / "t.json").path)
    protobuf = from_protobuf(write_timeline([crossing_kineto], tmp_path / "t.pftrace").path)
    assert protobuf == text
    assert not crossings(text["slices"])
    where = {(row[5], row[4]): row[:4] for row in text["slices"]}
    host_lane = HOST_LANE_BASE
    assert where[("torch/autograd/profiler.py(751): __enter__", "python_function")] == (
        100,
        host_lane,
        100_000,
        100_000,
    )
    assert where[("ProfilerStep#1", "user_annotation")] == (100, 100, 150_000, 750_000)
    assert where[("ProfilerStep#1", "gpu_user_annotation")] == (GPU_BASE, 7 + LANE_STRIDE, 250_000, 150_000)
    assert where[("ampere_sgemm_128x64_nn", "kernel")] == (GPU_BASE, 7, 300_000, 100_500)
    assert text["names"][(100, host_lane)] == "python3 · overlapping 1"
    assert text["names"][(GPU_BASE, 7 + LANE_STRIDE)] == "stream 7 · overlapping 1"


def test_slices_on_lanes_read_back_on_their_thread_and_stream(crossing_kineto, tmp_path):
    back = tracekit.open_trace(write_timeline([crossing_kineto], tmp_path / "t.json").path)
    calls = back.optional("python_calls")
    assert calls is not None and calls["tid"].tolist() == [100]
    assert sorted(zip(back.ranges["domain"].astype(str), back.ranges["tid"].tolist())) == [
        ("", 100),  # the annotation (no domain)
        ("cpu_op", 100),
        ("gpu", 7),
    ]


def test_nvtx_start_end_ranges_that_cross_on_a_thread(tmp_path):
    b = ExportBuilder("2026.2")
    b.kernel(10_000, 11_000, "ampere_sgemm_128x64_nn", launch_at=9_000)
    b.start_end(1_000, 5_000, "load")
    b.start_end(3_000, 8_000, "compute")  # begins inside "load", ends after it
    b.push_pop(3_500, 4_000, "inner")
    export = b.write(tmp_path / "crossing.sqlite")
    text = from_json(write_timeline([export], tmp_path / "t.json").path)
    assert from_protobuf(write_timeline([export], tmp_path / "t.pftrace").path) == text
    assert not crossings(text["slices"])
    ranges = {row[5]: row[1:4] for row in text["slices"] if row[4] == "user_annotation"}
    assert ranges == {
        "load": (100, 1_000, 4_000),
        "compute": (HOST_LANE_BASE, 3_000, 5_000),
        "inner": (100, 3_500, 500),
    }


def test_nvtx_ranges_of_a_pipeline_take_one_lane(tmp_path):
    """Twelve start/end ranges, each begun before the last ends: every other one on the thread's lane, and
    every track nests in both formats."""
    b = ExportBuilder("2026.2")
    b.kernel(100_000, 101_000, "ampere_sgemm_128x64_nn", launch_at=99_000)
    for batch in range(12):
        b.start_end(1_000 + batch * 1_000, 2_500 + batch * 1_000, f"batch {batch}")
    export = b.write(tmp_path / "pipeline.sqlite")
    text = from_json(write_timeline([export], tmp_path / "t.json").path)
    assert from_protobuf(write_timeline([export], tmp_path / "t.pftrace").path) == text
    assert not crossings(text["slices"])
    ranges = sorted((row[2], row[1]) for row in text["slices"] if row[4] == "user_annotation")
    assert [tid for _, tid in ranges] == [100, HOST_LANE_BASE] * 6
    assert [time for time, _ in ranges] == [1_000 + batch * 1_000 for batch in range(12)]


QWEN = SHARED / "kineto" / "h100_qwen0.5b_inference.json.gz"


@pytest.mark.shared
def test_a_with_stack_trace_nests_on_every_track(tmp_path):
    """torch.profiler opens each record_function range inside Python calls (with_stack records them): the
    calls that hold a range's begin (or end) and end before it (after) move to the thread's lane."""
    if not QWEN.exists():
        pytest.skip(f"{QWEN} is absent")
    source = tracekit.open_trace(QWEN)
    text = from_json(write_timeline([source], tmp_path / "t.json").path)
    assert not crossings(text["slices"])
    moved = [row for row in text["slices"] if row[1] >= HOST_LANE_BASE and row[1] < 2**31 - 2**20]
    assert len(moved) == 8 and {row[4] for row in moved} == {"python_function"}
    assert sum("_record_function_enter_new" in row[5] for row in moved) == 1
    # the slices themselves are the source's: as many, at the same times
    calls = source.optional("python_calls")
    assert calls is not None
    assert sorted((row[2], row[3]) for row in text["slices"] if row[4] == "python_function") == sorted(
        zip(calls["start"].tolist(), calls["duration"].tolist())
    )


def test_a_lane_of_any_other_shape_is_no_lane_and_its_event_is_read(tmp_path):
    """Another file's "lane of" arg (a list, an object, a number no int64 holds) names no lane: the events
    carrying it are read as they are, the thread keeps its name and its slices their tid."""
    b = KinetoBuilder()
    b.raw(
        '{"name": "thread_name", "ph": "M", "ts": 1, "pid": 100, "tid": 200, "args": {"name": "loader", "lane of": [100]}}'
    )
    b.event("X", "user_annotation", "load", 100, 200, 100, 50, {"lane of": {"thread": 100}})
    b.raw(
        '{"ph": "X", "cat": "user_annotation", "name": "step", "pid": 100, "tid": 100, "ts": 100, "dur": 50, '
        '"args": {"lane of": 1e400}}'
    )
    trace = tracekit.open_trace(b.write(tmp_path / "other.json"))
    assert sorted(zip(trace.ranges["name"].astype(str), trace.ranges["tid"].tolist())) == [("load", 200), ("step", 100)]
    assert len(trace.launches) == 0 and not trace.warnings  # (no event left out as unreadable)
    names = trace.optional("thread_names")
    assert names is not None and names.loc[names["tid"] == 200, "name"].tolist() == ["loader"]


def test_a_thread_named_twice_is_beside_its_last_names_thread(tmp_path):
    """As a thread renamed keeps its last name, a lane named twice is beside the thread its last name says;
    the lane mapping touches only the (pid, tid) named: the same tid in another process stays."""
    b = KinetoBuilder()
    for pid, tid, lane_of in [(100, 200, 100), (100, 200, 300), (100, 300, 300)]:
        b.raw(
            f'{{"name": "thread_name", "ph": "M", "ts": 1, "pid": {pid}, "tid": {tid}, '
            f'"args": {{"name": "lane", "lane of": {lane_of}}}}}'
        )
    b.annotation("on the lane", 100, 50, pid=100, tid=200)
    b.annotation("another process", 100, 50, pid=101, tid=200)
    trace = tracekit.open_trace(b.write(tmp_path / "renamed.json"))
    assert sorted(zip(trace.ranges["name"].astype(str), trace.ranges["pid"], trace.ranges["tid"])) == [
        ("another process", 101, 200),
        ("on the lane", 100, 300),
    ]
