"""The timeline's counter tracks: each stream's launch-queue length and each GPU's copy bandwidth per direction,
with exact values in the JSON and in the decoded protobuf file, kept to the window, absent where a trace has no
queued launch or no copy; and equal to the counters HolisticTraceAnalysis's generate_trace_with_counters adds
to the torch.profiler traces in ../shared."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.hta_loaded import hta_analysis
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED
from helpers.perfetto_decode import from_json, from_protobuf

import tracekit
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.analysis.primitives.trace_window import OP_KEYED
from tracekit.model.trace import Trace
from tracekit.trace_events.tracks import GPU_BASE
from tracekit.trace_events.writer import timeline as write_timeline

KINETO = SHARED / "kineto"
# every real torch.profiler trace but the two ResNets, which HTA takes 8-14 s each to load (the suite's time;
# the readers they exercise are compared with HTA in tests/sources)
HTA_TRACES = (
    [
        path
        for path in sorted(KINETO.glob("*.json.gz"))
        + sorted((KINETO / "v100_dlrm_8ranks").glob("rank[04].pt.trace.json"))
        if "resnet" not in path.name
    ]
    if KINETO.is_dir()
    else []
)


def queued(path):
    """Stream 7: kernels launched at 1,000, 2,000 and 3,000 ns start at 2,500, 4,000 and 6,000; stream 9: an
    async copy launched at 1,500 runs 1,800..2,800; a synchronous cudaMemcpy's copy (not queued) on stream 7."""
    b = ExportBuilder("2026.2")
    for launch, start in ((1_000, 2_500), (2_000, 4_000), (3_000, 6_000)):
        b.kernel(start, start + 500, "gemm", launch_at=launch)
    b.memcpy(1_800, 2_800, copy_kind=1, size=3_000, stream=9, launch_at=1_500)
    b.memcpy(7_000, 7_500, copy_kind=2, size=1_000, launch_at=6_900, api="cudaMemcpy_v3020")
    return b.write(path)


def counters_of(decoded: dict, name: str) -> list[tuple[int, float]]:
    return [(time, value) for pid, track, time, value in decoded["counters"] if track == name]


def both(export, folder, **options) -> dict:
    """The timeline in both formats, decoded: they hold the same events."""
    protobuf = from_protobuf(tracekit.timeline(export, folder / "t.pftrace", **options))
    text = from_json(tracekit.timeline(export, folder / "t.json", **options))
    assert protobuf == text
    return text


def test_each_streams_queue_length_is_a_counter_track(tmp_path):
    decoded = both(queued(tmp_path / "q.sqlite"), tmp_path)
    assert counters_of(decoded, "stream 7 Queue Length") == [
        (1_000, 1),
        (2_000, 2),
        (2_500, 1),
        (3_000, 2),
        (4_000, 1),
        (6_000, 0),
    ]
    assert counters_of(decoded, "stream 9 Queue Length") == [(1_500, 1), (1_800, 0)]
    assert {pid for pid, *_ in decoded["counters"]} == {GPU_BASE}  # on the GPU's process


def test_each_gpus_copy_bandwidth_is_a_counter_track_per_direction(tmp_path):
    """GPU 0: HtoD copies of 1,000 bytes over 1 µs (1 GB/s) and 3,000 over 1 µs (3 GB/s) on two streams,
    overlapping by half; a set of 2,000 bytes over 500 ns (4 GB/s). GPU 1: a DtoH copy of 100 bytes over
    300 ns (0.333 GB/s: three decimals)."""
    b = ExportBuilder("2026.2")
    b.memcpy(10_000, 11_000, copy_kind=1, size=1_000, launch_at=9_000)
    b.memcpy(10_500, 11_500, copy_kind=1, size=3_000, stream=9, launch_at=9_100)
    b.memset(12_000, 12_500, size=2_000, launch_at=9_200)
    b.memcpy(13_000, 13_300, copy_kind=2, size=100, device=1, launch_at=9_300)
    decoded = both(b.write(tmp_path / "bw.sqlite"), tmp_path)
    bandwidth = {
        (pid, track): [(time, value) for p, t, time, value in decoded["counters"] if (p, t) == (pid, track)]
        for pid, track, *_ in decoded["counters"]
        if track.endswith("Memcpy BW")
    }
    assert bandwidth == {
        (GPU_BASE, "Memcpy HtoD Memcpy BW"): [(10_000, 1.0), (10_500, 4.0), (11_000, 3.0), (11_500, 0.0)],
        (GPU_BASE, "Memset Memcpy BW"): [(12_000, 4.0), (12_500, 0.0)],
        (GPU_BASE + 1, "Memcpy DtoH Memcpy BW"): [(13_000, 0.333), (13_300, 0.0)],
    }


def test_a_profiler_recorded_bandwidth_is_the_counters(tmp_path):
    """torch.profiler's "memory bandwidth (GB/s)" (from the copy's exact duration), not bytes over the whole
    µs the trace writes; the copy's async call makes a queue of one."""
    b = KinetoBuilder()
    b.launch("cudaMemcpyAsync", 18, 1, correlation=3)
    b.memcpy(20, 1, correlation=3, size=500, name="Memcpy DtoH (Device -> Pinned)", bandwidth=0.625)
    decoded = both(b.write(tmp_path / "t.pt.trace.json"), tmp_path)
    assert counters_of(decoded, "Memcpy DtoH Memcpy BW") == [(20_000, 0.625), (21_000, 0.0)]
    assert counters_of(decoded, "stream 7 Queue Length") == [(18_000, 1), (20_000, 0)]


def test_the_window_keeps_the_values_that_hold_within_it(tmp_path):
    """From 2,600 to 3,600 ns (1.6 to 2.6 µs after the first event): stream 7's length of 1 set at 2,500
    holds into it and is kept (at its own time), 2 at 3,000 is inside; so is the copy's 3 GB/s from 1,800
    to 2,800; stream 9's queue was last set at 1,800 (to 0, held long before the window): not in it; nor the
    synchronous copy at 7,000."""
    decoded = both(queued(tmp_path / "q.sqlite"), tmp_path, start_ms=0.0016, end_ms=0.0026)
    assert counters_of(decoded, "stream 7 Queue Length") == [(2_500, 1), (3_000, 2)]
    assert counters_of(decoded, "Memcpy HtoD Memcpy BW") == [(1_800, 3.0), (2_800, 0.0)]
    assert {track for _, track, *_ in decoded["counters"]} == {"stream 7 Queue Length", "Memcpy HtoD Memcpy BW"}


def test_a_track_only_where_there_is_a_queue_or_a_copy(tmp_path):
    """Kernels launched by cudaLaunchKernel on stream 7, one with no launching call and one by
    cudaGraphLaunch (not a queued call) on stream 9, no copy: stream 7's queue alone, no bandwidth track."""
    b = ExportBuilder("2026.2")
    b.kernel(1_000, 2_000, "gemm", launch_at=500)
    b.kernel(3_000, 4_000, "gemm", stream=9)  # no launching call
    b.kernel(5_000, 6_000, "gemm", stream=9, launch_at=4_500)
    b.rows["CUPTI_ACTIVITY_KIND_RUNTIME"][-1]["nameId"] = b.string("cudaGraphLaunch_v10000")
    written = write_timeline([b.write(tmp_path / "kernels.sqlite")], tmp_path / "t.pftrace")
    assert written.events["queue counters"] == 2 and written.events["bandwidth counters"] == 0
    decoded = from_protobuf(written.path)
    assert {track for _, track, *_ in decoded["counters"]} == {"stream 7 Queue Length"}
    assert counters_of(decoded, "stream 7 Queue Length") == [(500, 1), (1_000, 0)]


def counter_events(path) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """A JSON file's counter events: (name with its id if any, series) -> (µs, value) in file order, the
    time as the float HTA's parser reads from the same text."""
    data = Path(path).read_bytes()
    events = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)["traceEvents"]  # HTA gzips
    found: dict = {}
    for event in events:
        if event.get("ph") == "C":
            name = f"{event['name']} {event['id']}" if "id" in event else event["name"]
            for series, value in event["args"].items():
                found.setdefault((name, series), []).append((float(event["ts"]), float(value)))
    return found


def htas_ops(trace: Trace) -> Trace:
    """``trace`` with the GPU ops HTA counts alone: with two steps or more, those launched by a call in the
    trace before the last step began (its parser leaves the others out); the tables keyed by op renumbered."""
    keep, _ = launched_before_last_step(trace)
    if keep is None:
        return trace
    renumber = np.full(len(keep), -1, dtype=np.int64)
    renumber[keep] = np.arange(int(keep.sum()))

    def kept(table: str) -> pd.DataFrame:
        frame = trace.optional(table)
        assert frame is not None
        op = renumber[frame["op"].to_numpy()]
        return frame.loc[op >= 0].assign(op=op[op >= 0]).reset_index(drop=True)

    assert trace.optional("copies") is None  # torch.profiler traces: their copies are their GPU ops
    loaders = {table: load for table, load in trace.loaders.items() if table != "collective_args"}
    loaders["gpu_ops"] = lambda: trace.gpu_ops.loc[keep].reset_index(drop=True)
    loaders.update({table: (lambda table=table: kept(table)) for table in OP_KEYED if table in trace.loaders})
    return Trace(trace.meta, loaders)


def held(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A step function's value after the last change at each time, in time order: the same whatever order
    the changes at one time came in."""
    return sorted({time: value for time, value in points}.items())


@pytest.mark.skipif(not HTA_TRACES, reason=f"real traces not available: {KINETO}")
@pytest.mark.parametrize("path", HTA_TRACES, ids=lambda path: path.name)
def test_the_counters_equal_htas(path, tmp_path, monkeypatch):
    """HTA's generate_trace_with_counters, reading the trace's exact times (HTA_DISABLE_NS_ROUNDING: float
    µs, exact to its precision), against the timeline's counters of the ops HTA counts: each stream's queue
    length and each direction's bandwidth, at every time."""
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    logging.getLogger("hta").setLevel(logging.ERROR)
    (tmp_path / "hta").mkdir()
    (tmp_path / "hta" / path.name).symlink_to(path)
    analysis = hta_analysis(tmp_path / "hta")
    rank = analysis.t.get_ranks()[0]
    analysis.generate_trace_with_counters(ranks=[rank])
    theirs = counter_events(analysis.t.trace_files[rank].replace(".json", "_with_counters.json"))
    ours = counter_events(tracekit.timeline(htas_ops(tracekit.open_trace(path)), tmp_path / "t.json"))
    # HTA's "Queue Length" of stream N (its counter's id N) is the timeline's "stream N"
    renamed = {(name.replace("Queue Length", "stream"), series): points for (name, series), points in theirs.items()}
    assert renamed.keys() == {key for key in ours if key[1] in ("Queue Length", "Memcpy BW")}
    assert any(series == "Memcpy BW" for _, series in renamed) and any(name.startswith("stream") for name, _ in renamed)
    for key, points in renamed.items():
        expected, got = held(points), held(ours[key])
        assert len(got) == len(expected), key
        # HTA's times are floats: its ends (start + duration) may be a unit in the last place off
        assert all(abs(mine[0] - hta[0]) <= np.spacing(hta[0]) for mine, hta in zip(got, expected)), key
        if key[1] == "Memcpy BW" and not any(value for _, value in expected):
            # mi250: its GPU-side copies record no bytes, so HTA's bandwidth is 0; tracekit takes them from the
            # copy's call (hipMemcpyWithStream's size: 2,560 bytes each)
            assert path.name.startswith("mi250") and max(value for _, value in got) > 0
            continue
        tolerance = 0 if key[1] == "Queue Length" else 5e-4 + 1e-9  # GB/s written to three decimals
        assert all(abs(mine[1] - hta[1]) <= tolerance for mine, hta in zip(got, expected)), key


def test_a_counter_written_in_several_chunks_is_one_track(tmp_path, monkeypatch):
    """A stream's queue of 6 changes, 2 rows a chunk: one Perfetto counter track, not one per chunk."""
    from tracekit.trace_events import tracks

    monkeypatch.setattr(tracks, "ROWS", 2)
    path = tracekit.timeline(queued(tmp_path / "q.sqlite"), tmp_path / "t.pftrace")
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    names = [p.track_descriptor.name for p in trace.packet if p.HasField("track_descriptor")]
    assert names.count("stream 7 Queue Length") == 1
    assert len(counters_of(from_protobuf(path), "stream 7 Queue Length")) == 6
