"""`tracekit timeline -o t.pftrace`: Perfetto's protobuf format, decoded with Perfetto's own protos, holds
exactly the slices, names, arguments, arrows, counters and tracks of the JSON timeline (built traces and
every real trace in ../shared), smaller; several inputs share one clock."""

from __future__ import annotations

import sqlite3
import zlib

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.perfetto_decode import from_json, from_protobuf
from helpers.snapshot_builder import SnapshotBuilder, stack

import tracekit
from tracekit.trace_events.tracks import GPU_BASE, IDLE_TID
from tracekit.trace_events.writer import timeline as write_timeline

from .test_timeline import ADD, EPOCH_US, GEMM, MIB, REAL, two_steps
from .test_track_lanes import crossings

pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2", reason="pip install -e '.[test]'")


def both(inputs, folder, **options) -> tuple[dict, dict]:
    return (
        from_protobuf(tracekit.timeline(inputs, folder / "t.pftrace", **options)),
        from_json(tracekit.timeline(inputs, folder / "t.json", **options)),
    )


def test_the_protobuf_file_holds_what_the_json_holds(tmp_path):
    export = two_steps(tmp_path / "steps.sqlite")
    protobuf, text = both(export, tmp_path)
    assert protobuf == text
    gemm = [row for row in protobuf["slices"] if row[5] == GEMM]
    assert [(pid, tid, start, duration) for pid, tid, start, duration, *_ in gemm] == [
        (GPU_BASE, 7, 1_001_001, 1_234),
        (GPU_BASE, 7, 1_011_001, 1_234),
    ]
    args = dict(gemm[0][6])
    assert args["grid"] == (1, 1, 1) and args["block"] == (128, 1, 1) and args["category"] == "matmul"
    assert args["device"] == 0 and args["stream"] == 7
    assert len(protobuf["flows"]) == 6  # every op with its launching call
    assert protobuf["names"][(GPU_BASE, None)] == "GPU 0" and protobuf["names"][(GPU_BASE, IDLE_TID)] == (
        "idle (by cause)"
    )
    idle = [row for row in protobuf["slices"] if row[4] == "tracekit_idle"]
    assert idle and {(pid, tid) for pid, tid, *_ in idle} == {(GPU_BASE, IDLE_TID)}


def test_a_perfetto_trace_suffix_is_the_protobuf_format_too(tmp_path):
    export = two_steps(tmp_path / "steps.sqlite")
    written = tracekit.timeline(export, tmp_path / "t.perfetto-trace")
    assert from_protobuf(written) == from_json(tracekit.timeline(export, tmp_path / "t.json"))


def test_nested_ranges_zero_durations_and_a_call_launching_several_ops(tmp_path):
    """Ranges that start together nest (the longer outside), a slice of 0 ns is an instant, and a call
    with two ops has an arrow to each."""
    b = ExportBuilder("2026.2")
    b.push_pop(1_000, 9_000, "outer")
    b.push_pop(1_000, 5_000, "inner")
    b.push_pop(5_000, 5_000, "empty")
    b.push_pop(5_000, 9_000, "second")
    b.kernel(2_000, 2_500, GEMM, launch_at=1_100)
    b.kernel(2_500, 2_500, ADD, launch_at=1_200)
    protobuf, text = both(b.write(tmp_path / "nested.sqlite"), tmp_path)
    assert protobuf == text
    ranges = {row[5]: (row[2], row[3]) for row in protobuf["slices"] if row[4] == "user_annotation"}
    assert ranges == {"outer": (1_000, 8_000), "inner": (1_000, 4_000), "empty": (5_000, 0), "second": (5_000, 4_000)}


def test_a_graph_launch_with_many_ops_has_an_arrow_to_each(tmp_path):
    """A call launching more ops than a row of the byte matrix makes room for (a CUDA graph's) is laid out
    apart and put back in order: every arrow and slice decodes as the JSON has it."""
    b = ExportBuilder("2026.2")
    b.kernel(1_500, 1_700, ADD, launch_at=1_000)
    graph = b.next_correlation
    b.runtime(2_000, 2_100, "cudaGraphLaunch_v10000", graph)
    for index in range(9):
        b.kernel(3_000 + index * 300, 3_200 + index * 300, GEMM)
        b.rows["CUPTI_ACTIVITY_KIND_KERNEL"][-1]["correlationId"] = graph
    b.kernel(6_000, 6_100, ADD, launch_at=5_000)
    protobuf, text = both(b.write(tmp_path / "graph.sqlite"), tmp_path)
    assert protobuf == text
    sources = [source for source, _ in protobuf["flows"]]
    assert sources.count((100, 100, 2_000)) == 9 and len(sources) == 11


def test_a_memory_counter_is_a_counter_track(tmp_path):
    export = two_steps(tmp_path / "steps.sqlite")
    snapshot = SnapshotBuilder()
    snapshot.segment_event("segment_alloc", 0x0, 64 * MIB, EPOCH_US + 1_000)
    snapshot.alloc(0x1000, 3 * MIB, EPOCH_US + 1_005, stack("model.py:3 forward"))
    snapshot.segment(0x0, 64 * MIB, [])
    protobuf, text = both(export, tmp_path, memory=snapshot.dump(tmp_path / "memory.pickle"))
    assert protobuf == text
    assert (GPU_BASE, "memory (MiB) allocated", 1_005_000, 3.0) in protobuf["counters"]


def _session_start(path, epoch_ns: int | None) -> None:
    with sqlite3.connect(path) as connection:
        if epoch_ns is None:
            connection.execute("DELETE FROM TARGET_INFO_SESSION_START_TIME")
        else:
            connection.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = ?", (epoch_ns,))


def test_several_ranks_share_the_wall_clock(tmp_path):
    """Rank 1's capture began 2 ms after rank 0's: its kernels land 2 ms later on the common clock; an
    input that does not say when it began is aligned on its first step, and said."""
    paths = [two_steps(tmp_path / f"job_rank{rank}.sqlite") for rank in (0, 1, 2)]
    _session_start(paths[1], EPOCH_US * 1000 + 2_000_000)
    _session_start(paths[2], None)
    written = write_timeline(paths, tmp_path / "job.pftrace")
    protobuf = from_protobuf(written.path)
    assert protobuf == from_json(tracekit.timeline(paths, tmp_path / "job.json"))
    first_gemm = {}
    for pid, _, start, _, _, name, _ in protobuf["slices"]:
        if name == GEMM:
            first_gemm[pid] = min(start, first_gemm.get(pid, start))
    rank0, rank1, rank2 = (first_gemm[GPU_BASE + 256 * rank] for rank in (0, 1, 2))
    assert rank0 == EPOCH_US * 1000 + 1_001_001 and rank1 - rank0 == 2_000_000 and rank2 == rank0
    assert any("rank 2: no absolute time base" in note for note in written.notes)


def test_the_events_are_compressed_packets(tmp_path):
    """Events go in zlib-compressed packets (TracePacket.compressed_packets, which Perfetto inflates),
    each holding whole packets; the descriptors of named tracks stay as they are, and so does a counter
    track's first packet (its clock and defaults: no event)."""
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    trace = pb.Trace()
    trace.ParseFromString(
        (write_timeline([two_steps(tmp_path / "steps.sqlite")], tmp_path / "t.pftrace")).path.read_bytes()
    )
    kinds = [packet.WhichOneof("data") for packet in trace.packet]
    assert set(kinds) == {"track_descriptor", "compressed_packets"}
    compressed = [packet for packet, kind in zip(trace.packet, kinds) if kind == "compressed_packets"]
    inner = pb.Trace()
    inner.ParseFromString(zlib.decompress(compressed[0].compressed_packets))
    assert inner.packet and all(
        packet.trusted_packet_sequence_id or packet.HasField("track_descriptor") for packet in inner.packet
    )


def test_zlib_deflates_the_same_packets_where_isal_is_missing(tmp_path, monkeypatch):
    """ISA-L compresses where its wheel exists; zlib (the fallback) writes a file that decodes alike."""
    from tracekit.trace_events import protobuf

    export = two_steps(tmp_path / "steps.sqlite")
    faster = from_protobuf(tracekit.timeline(export, tmp_path / "isal.pftrace"))
    used: list[int] = []

    def zlib_compress(data, level):
        used.append(level)
        return zlib.compress(data, level)

    monkeypatch.setattr(protobuf, "compress", zlib_compress)
    monkeypatch.setattr(protobuf, "DEFLATE_LEVEL", 1)
    assert from_protobuf(tracekit.timeline(export, tmp_path / "zlib.pftrace")) == faster
    assert used and set(used) == {1}


def test_the_protobuf_file_is_a_fraction_of_the_json(tmp_path):
    b = ExportBuilder("2026.2")
    name = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<AddFunctor<float>>>()"
    for index in range(2_000):
        b.kernel(10_000 + index * 1_000, 10_500 + index * 1_000, name, launch_at=9_000 + index * 1_000)
    export = b.write(tmp_path / "many.sqlite")
    protobuf = write_timeline([export], tmp_path / "t.pftrace")
    text = write_timeline([export], tmp_path / "t.json")
    assert protobuf.size * 4 < text.size and protobuf.size == protobuf.path.stat().st_size


@pytest.mark.shared
@pytest.mark.parametrize("path", REAL, ids=lambda path: path.name)
def test_every_real_trace_decodes_to_the_json_timeline(path, tmp_path):
    if not path.exists():
        pytest.skip(f"{path} is absent")
    source = tracekit.open_trace(path)
    written = tracekit.timeline(source, tmp_path / "t.pftrace")
    protobuf = from_protobuf(written)
    assert protobuf == from_json(tracekit.timeline(source, tmp_path / "t.json.gz"))
    assert not crossings(protobuf["slices"])  # every track's slices nest, as a viewer stacks them


def test_slices_of_kinds_touching_at_one_ns_keep_their_durations_as_perfetto_sorts(tmp_path):
    """Perfetto's trace processor takes every event of a file by timestamp, ties in file order. Written a
    kind at a time (calls, then ranges, then Python calls: a packet sequence each), an operator ending at
    the very ns a call begins was ended after the call began: the end closed the call, the operator took
    the call's end. In one stream by start, each touching slice keeps its own; on a stream too (a kernel
    beginning as the GPU-side annotation before it ends)."""
    b = KinetoBuilder()
    b.operator("aten::mm", 100, 100, dims=[[2, 2]], types=["float"])
    b.launch("cudaLaunchKernel", 200, 10, correlation=1)
    b.python_call("model.py(1): forward", 210, 40, python_id=1, parent=None)
    b.annotation("ProfilerStep#1", 250, 50)
    b.kernel("ampere_sgemm_128x64_nn", 300, 5, correlation=1)
    b.annotation("ProfilerStep#1", 290, 10, pid=0, tid=7, cat="gpu_user_annotation")
    summary = write_timeline([b.write(tmp_path / "touching.pt.trace.json")], tmp_path / "t.pftrace")
    written = summary.path
    decoded = from_protobuf(written)  # (as Perfetto sorts)
    assert decoded == from_protobuf(written, sorted_by_time=False)
    # written in one stream, each kind still counted as itself
    kinds = {kind: summary.events[kind] for kind in ("gpu ops", "api calls", "ranges", "python calls", "flows")}
    assert kinds == {"gpu ops": 1, "api calls": 1, "ranges": 3, "python calls": 1, "flows": 2}
    assert decoded == from_json(tracekit.timeline(tmp_path / "touching.pt.trace.json", tmp_path / "t.json"))
    durations = {(row[4], row[5]): (row[2], row[3]) for row in decoded["slices"]}
    assert durations[("cpu_op", "aten::mm")] == (100_000, 100_000)
    assert durations[("cuda_runtime", "cudaLaunchKernel")] == (200_000, 10_000)
    assert durations[("python_function", "model.py(1): forward")] == (210_000, 40_000)
    assert durations[("user_annotation", "ProfilerStep#1")] == (250_000, 50_000)
    assert durations[("gpu_user_annotation", "ProfilerStep#1")] == (290_000, 10_000)
    assert durations[("kernel", "ampere_sgemm_128x64_nn")] == (300_000, 5_000)


@pytest.mark.parametrize("where", ["making events", "writing packets"])
def test_a_failed_write_leaves_no_packet_threads_and_no_file(tmp_path, monkeypatch, where):
    """The threads that make and compress packets (the pool, the encoder running ahead) end when the writing
    fails (an error, Ctrl-C), not only when it completes: none is left behind in the process, and no file,
    whole or partial."""
    import threading

    from tracekit.errors import TracekitError
    from tracekit.trace_events import tracks
    from tracekit.trace_events.perfetto import PerfettoSink

    export = two_steps(tmp_path / "steps.sqlite")

    def failing(*args, **kwargs):
        raise TracekitError("the events could not be made")

    if where == "making events":  # after the GPU ops' packets were handed to the pool
        monkeypatch.setattr(tracks, "gap_events", failing)
    else:  # on the writing thread, while the next chunks are being made
        put = PerfettoSink.put
        monkeypatch.setattr(
            PerfettoSink, "put", lambda self, encoded: failing() if self.sequences else put(self, encoded)
        )
    with pytest.raises(TracekitError, match="could not be made"):
        tracekit.timeline(export, tmp_path / "t.pftrace")
    running = [thread.name for thread in threading.enumerate()]
    assert [name for name in running if name.startswith(("tracekit-packets", "tracekit-trace-events"))] == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["steps.sqlite"]
