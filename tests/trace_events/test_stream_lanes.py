"""GPU ops that overlap on one stream go on lanes beside it, so every track's slices nest and the .pftrace
(where a slice's end closes the latest open slice of its track) keeps each op's own duration."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.perfetto_decode import from_json, from_protobuf

import tracekit
from tracekit.trace_events import stream_lanes
from tracekit.trace_events.stream_lanes import LANE_STRIDE
from tracekit.trace_events.tracks import GPU_BASE
from tracekit.trace_events.writer import timeline as write_timeline


def test_each_lane_holds_ops_that_do_not_overlap():
    # stream 7: A [0,100], B [10,20] inside A, C [15,30] across B's end, D [200,300] after all; stream 9: E
    # at the same times as A (another stream: no overlap); device 1 stream 7: F overlapping nothing of its own
    device = np.array([0, 0, 0, 0, 0, 1])
    stream = np.array([7, 7, 7, 7, 9, 7])
    start = np.array([0, 10, 15, 200, 0, 10])
    end = np.array([100, 20, 30, 300, 100, 20])
    lanes = stream_lanes.stream_lanes(device, stream, start, end)
    assert lanes.tolist() == [0, 1, 2, 0, 0, 0]
    order = np.argsort(start, kind="stable")
    table = stream_lanes.pd.DataFrame({"device": device, "stream": stream, "lane": lanes, "start": start, "end": end})
    for _, lane in table.iloc[order].groupby(["device", "stream", "lane"]):
        assert (lane["start"].to_numpy()[1:] >= lane["end"].to_numpy()[:-1]).all()


def test_the_running_maximum_without_room_to_lift_is_pandas():
    device, stream = np.zeros(5, dtype=np.int64), np.array([1, 1, 2, 2, 2])
    start, end = np.array([0, 5, 0, 3, 2**61]), np.array([10, 8, 4, 2**61 + 5, 2**61 + 9])
    assert stream_lanes.stream_lanes(device, stream, start, end).tolist() == [0, 1, 0, 1, 2]
    values, group = np.array([3, 1, 5, 2, 2**62]), np.array([0, 0, 1, 1, 1])
    assert stream_lanes._running_max(values, group).tolist() == [3, 3, 5, 5, 2**62]


@pytest.fixture
def overlapping(tmp_path):
    """Stream 7: a copy [10.0, 12.0] us and a kernel [11.0, 13.0] us that begins before the copy ends."""
    b = ExportBuilder("2026.2")
    b.memcpy(10_000, 12_000, size=1 << 20, launch_at=9_000)
    b.kernel(11_000, 13_000, "ampere_sgemm_128x64_nn", launch_at=9_500)
    b.kernel(14_000, 15_000, "ampere_sgemm_128x64_nn", launch_at=13_500)
    return b.write(tmp_path / "overlap.sqlite")


def test_an_op_overlapping_its_stream_keeps_its_duration_on_a_lane(overlapping, tmp_path):
    protobuf = from_protobuf(write_timeline([overlapping], tmp_path / "t.pftrace").path)
    text = from_json(write_timeline([overlapping], tmp_path / "t.json").path)
    assert protobuf == text
    gpu = [row[:4] for row in text["slices"] if row[0] == GPU_BASE and row[1] != 2**31 - 1]
    assert sorted(gpu, key=lambda row: row[2]) == [
        (GPU_BASE, 7, 10_000, 2_000),
        (GPU_BASE, 7 + LANE_STRIDE, 11_000, 2_000),
        (GPU_BASE, 7, 14_000, 1_000),
    ]
    assert text["names"][(GPU_BASE, 7 + LANE_STRIDE)] == "stream 7 · overlapping 1"
    back = tracekit.open_trace(tmp_path / "t.json").gpu_ops.sort_values("start")
    assert back["stream"].tolist() == [7, 7, 7]  # a lane is drawn apart; the op's stream is unchanged
