"""Per-stream figures are computed for every stream at once (a Python loop over streams cost 0.7 ms
each in `queues`: 96 s for 100k streams). Whatever the number of streams, each stream's figures are
those of the stream on its own: here every stream's queue statistics and idle gaps, computed on the
whole trace, equal the same computed on a trace holding that stream's ops alone."""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder

from tracekit.analysis.waits.idle import idle_by_cause, idle_gaps
from tracekit.analysis.waits.idle_command import IdleOptions
from tracekit.analysis.waits.queues import queue_table
from tracekit.analysis.waits.queues_command import QueuesOptions
from tracekit.errors import NoGpuDataError
from tracekit.model.trace import Trace
from tracekit.sources import open_trace

US = 1_000


@pytest.fixture(scope="module")
def many_streams(tmp_path_factory) -> Trace:
    """60 streams on two GPUs (stream 7 of cuda:0 used by two processes: two streams), 1-12 ops each at
    random: overlapping and back-to-back ops, ops starting together, zero-length ones, ops with no
    launching call, launches early (queued) and late, blocking calls and stream waits between them."""
    rng = np.random.default_rng(38)
    b = ExportBuilder("2026.2")
    streams = [(device, stream, 100) for device in (0, 1) for stream in range(7, 37)] + [(0, 7, 200)]
    for device, stream, pid in streams:
        at = int(rng.integers(0, 50)) * US
        for _ in range(int(rng.integers(1, 13))):
            at += int(rng.choice([0, 2, 20, 60, 200])) * US - (5 * US if rng.random() < 0.15 else 0)
            length = int(rng.choice([0, 3, 10, 40])) * US
            launch = None if rng.random() < 0.1 else at - int(rng.choice([-30, 1, 50, 400])) * US
            b.kernel(
                max(at, 0),
                max(at, 0) + length,
                f"k{int(rng.integers(0, 4))}",
                device=device,
                stream=stream,
                pid=pid,
                tid=pid,
                launch_at=launch,
            )
            at = max(at, 0) + length
    for index, pid in enumerate(rng.choice([100, 200], size=40)):
        at = int(rng.integers(0, 2_000)) * US
        name = "cudaDeviceSynchronize_v3020" if index % 2 else "cudaStreamWaitEvent_v3020"
        b.runtime(at, at + int(rng.integers(1, 80)) * US, name, 10_000 + index, int(pid), int(pid))
    return open_trace(b.write(tmp_path_factory.mktemp("streams") / "streams.sqlite"))


def alone(trace: Trace, rows: np.ndarray) -> Trace:
    """The trace with the GPU ops at ``rows`` only (every host call kept)."""
    ops = trace.gpu_ops.iloc[rows].reset_index(drop=True)
    return Trace.from_frames(trace.meta, ops, trace.launches, trace.ranges)


def streams_of(trace: Trace) -> list[tuple[tuple[int, int, int], np.ndarray]]:
    """Each (device, stream, process) of the GPU ops, and its ops' rows."""
    keys = trace.gpu_ops.groupby(["device", "stream", "pid"], sort=True).indices
    return [(cast(tuple[int, int, int], key), np.sort(rows)) for key, rows in keys.items()]


def test_each_streams_queue_is_that_of_the_stream_alone(many_streams):
    options = QueuesOptions(max_queue=2, series=True)
    whole = queue_table(many_streams, options)
    table, series = whole["queues"], whole["series"]
    compared = 0
    for (device, stream, _), rows in streams_of(many_streams):
        if (device, stream) == (0, 7):
            continue  # two processes' stream 7: one queue here (HTA keys a queue by its stream alone)
        mine = table.loc[(table["GPU"] == f"cuda:{device}") & (table["Stream"] == stream)]
        if mine.empty:  # none of its ops has a launching call: no queue, on its own either
            with pytest.raises(NoGpuDataError):
                queue_table(alone(many_streams, rows), options)
            continue
        own = queue_table(alone(many_streams, rows), options)
        theirs = own["queues"]
        columns = [column for column in theirs.columns if column not in ("StdDev", "Of Trace (%)")]
        # Of Trace (%) is At Max Queue over the trace's span, which the stream alone does not have
        pd.testing.assert_frame_equal(mine[columns].reset_index(drop=True), theirs.loc[:, columns], check_exact=True)
        assert mine["StdDev"].to_numpy() == pytest.approx(theirs["StdDev"].to_numpy(), rel=1e-12, nan_ok=True)
        in_series = series.loc[(series["device"] == device) & (series["stream"] == stream)].reset_index(drop=True)
        pd.testing.assert_frame_equal(in_series, own["series"])
        compared += 1
    assert compared == len(table) - 1 and compared > 50


def test_each_streams_idle_gaps_are_those_of_the_stream_alone(many_streams):
    gaps = idle_gaps(many_streams, per_stream=True)
    assert "PID" in gaps  # stream 7 of cuda:0 is two processes' streams
    groups = 0
    for (device, stream, pid), rows in streams_of(many_streams):
        key = pid if (device, stream) == (0, 7) else 0
        mine = gaps.loc[(gaps["GPU"] == f"cuda:{device}") & (gaps["Stream"] == stream) & (gaps["PID"] == key)]
        own = idle_gaps(alone(many_streams, rows), per_stream=True)
        if own.empty:
            assert mine.empty
            continue
        for column in ("Previous Op", "Next Op"):  # positions in the stream alone: back to the whole trace
            own[column] = rows[own[column].to_numpy(np.int64)]
        columns = ["Start (ns)", "Idle (ns)", "Cause", "Previous Op", "Next Op"]
        pd.testing.assert_frame_equal(mine[columns].reset_index(drop=True), own.loc[:, columns], check_exact=True)
        groups += 1
    assert groups > 40 and len(gaps) > 200
    # the tables of gaps: each stream's row of the per-stream statistics is the stream's own
    intervals = idle_by_cause(many_streams, IdleOptions(per_stream=True))["intervals"]
    mine = intervals.loc[(intervals["GPU"] == "cuda:1") & (intervals["Stream"] == 9)].reset_index(drop=True)
    rows = dict(streams_of(many_streams))[(1, 9, 100)]
    theirs = idle_by_cause(alone(many_streams, rows), IdleOptions(per_stream=True))["intervals"]
    pd.testing.assert_frame_equal(mine.drop(columns=["PID", "StdDev (ns)"]), theirs.drop(columns=["StdDev (ns)"]))


def test_the_op_before_a_gap_is_the_last_to_start_before_it(tmp_path):
    """An op of no length at the very end of a busy interval starts as the gap begins, not before it: the
    stream wait between the launch of the op before (a) and the next op's (b) explains the gap."""
    b = ExportBuilder("2026.2")
    b.kernel(100 * US, 200 * US, "a", launch_at=50 * US)
    b.kernel(200 * US, 200 * US, "z", launch_at=100 * US)
    b.runtime(90 * US, 91 * US, "cudaStreamWaitEvent_v3020", 901)
    b.kernel(300 * US, 400 * US, "b", launch_at=150 * US)
    b.kernel(100 * US, 110 * US, "c", stream=8, launch_at=40 * US)  # another stream: a group of its own
    b.kernel(250 * US, 260 * US, "c", stream=8, launch_at=60 * US)
    gaps = idle_gaps(open_trace(b.write(tmp_path / "zero.sqlite")), per_stream=True)
    assert gaps[["Stream", "Start (ns)", "Idle (ns)"]].to_numpy().tolist() == [
        [7, 200 * US, 100 * US],
        [8, 110 * US, 140 * US],
    ]
    assert gaps["Cause"].tolist() == ["other stream or device", "dependency not in trace"]
    assert gaps["Previous Op"].tolist() == [1, 3] and gaps["Next Op"].tolist() == [2, 4]
