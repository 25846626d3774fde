"""Collectives as timeline tracks: per GPU a track per process group, each kernel drawn as its wait for the last
peer then its transfer (exact times of a built two-GPU export), and the file still read back as the same trace."""

from __future__ import annotations

import json

from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.trace_events.collective_track import FIRST_TID
from tracekit.trace_events.tracks import GPU_BASE

ALL_REDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"


def test_wait_then_transfer_on_each_gpu(tmp_path):
    """GPU 0 starts at 1,000 us, GPU 1 at 1,900 us, both end at 2,000: GPU 0's slice is 900 us of wait then
    100 of transfer; GPU 1's is 100 of transfer; the tracks are named; the trace reads back the same."""
    export = ExportBuilder("2026.2")
    export.kernel(1_000_000, 2_000_000, ALL_REDUCE, device=0, pid=100, launch_at=990_000)
    export.kernel(1_900_000, 2_000_000, ALL_REDUCE, device=1, pid=200, launch_at=1_890_000)
    path = export.write(tmp_path / "job.sqlite")
    out = tmp_path / "timeline.json"
    tracekit.timeline(path, out)
    events = json.loads(out.read_text())["traceEvents"]
    slices = sorted(
        (event["pid"] - GPU_BASE, event["name"], event["ts"], event["dur"])
        for event in events
        if event.get("cat") == "tracekit_collective"
    )
    assert slices == [
        (0, "AllReduce", 1900, 100),
        (0, "wait: AllReduce", 1000, 900),
        (1, "AllReduce", 1900, 100),
    ]
    names = {
        (event["pid"], event["args"]["name"])
        for event in events
        if event.get("ph") == "M" and event["name"] == "thread_name" and event["tid"] == FIRST_TID
    }
    assert names == {(GPU_BASE, "collectives"), (GPU_BASE + 1, "collectives")}
    again = tracekit.open_trace(out)
    assert len(again.gpu_ops) == 2 and sorted(again.gpu_ops["duration"].tolist()) == [100_000, 1_000_000]
