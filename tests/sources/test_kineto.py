"""The torch.profiler (Kineto) reader: built traces with exactly known numbers, and streaming edge cases."""

from __future__ import annotations

import gzip
import json
import time

import numpy as np
import pytest
from helpers.api_tables import records, said
from helpers.kineto_builder import KinetoBuilder

import tracekit
from tracekit.sources import open_trace
from tracekit.sources.kineto import json_stream

MATMUL = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def step_trace(rank: int | None = 0) -> KinetoBuilder:
    """Two steps; absolute fractional-µs times whose nanosecond digits a float64 cannot hold."""
    base = 1712195495519000
    built = KinetoBuilder(rank=rank, world_size=2)
    built.annotation("ProfilerStep#1", f"{base}.000", "100.000")
    built.annotation("forward", f"{base + 1}.500", "40.250")
    built.launch("cudaLaunchKernel", f"{base + 2}.001", "3.000", correlation=11)
    built.kernel(MATMUL, f"{base + 10}.047", "20.048", correlation=11, grid=(120, 2, 1), block=(256, 1, 1))
    built.launch("cudaLaunchKernel", f"{base + 6}.000", "1.999", correlation=12, tid=101)
    built.kernel(ADD, f"{base + 31}.000", "4.001", correlation=12)
    built.launch("cudaMemcpyAsync", f"{base + 50}.000", "2", correlation=13)
    built.memcpy(f"{base + 52}.250", "1.750", correlation=13, size=4096)
    built.annotation("ProfilerStep#2", f"{base + 200}.000", "100.000")
    built.launch("cuLaunchKernel", f"{base + 201}.000", "1.000", correlation=14, cat="cuda_driver")
    built.kernel(NCCL, f"{base + 205}.000", "50.000", correlation=14, stream=20)
    built.launch("cudaMemsetAsync", f"{base + 210}.000", "1.000", correlation=15)
    built.memset(f"{base + 211}.000", "0.999", correlation=15, size=512)
    built.annotation("forward", f"{base + 2}.000", "30.000", pid=0, tid=7, cat="gpu_user_annotation")
    built.flow(f"{base + 2}.001", 11)
    return built


def test_times_are_exact_nanoseconds_from_the_text(tmp_path):
    trace = open_trace(step_trace().write(tmp_path / "t.pt.trace.json"))
    kernels = trace.gpu_ops[trace.gpu_ops["kind"] == "kernel"].reset_index(drop=True)
    assert kernels["start"].tolist() == [1712195495519010047, 1712195495519031000, 1712195495519205000]
    assert kernels["duration"].tolist() == [20048, 4001, 50000]
    assert kernels["end"].tolist() == [1712195495519030095, 1712195495519035001, 1712195495519255000]
    # Through a float64 the first kernel would start 47 ns off: the test can tell the two apart.
    assert round(float("1712195495519010.047") * 1000) != 1712195495519010047


def test_tables_follow_the_contract(tmp_path):
    trace = open_trace(step_trace().write(tmp_path / "t.json.gz", compress=True))
    ops = trace.gpu_ops
    assert ops["kind"].tolist() == ["kernel", "kernel", "memcpy", "kernel", "memset"]
    assert ops["bytes"].tolist() == [0, 0, 4096, 0, 512]
    assert ops["stream"].tolist() == [7, 7, 7, 20, 7]
    assert ops["correlation_id"].tolist() == [11, 12, 13, 14, 15]
    assert ops["pid"].tolist() == [100] * 5  # from the launch call with the same correlation
    assert ops.loc[0, ["grid_x", "grid_y", "grid_z", "block_x"]].tolist() == [120, 2, 1, 256]
    assert ops.loc[2, ["grid_x", "block_x"]].tolist() == [0, 0]
    assert ops["short_name"].astype(str).tolist() == [
        "Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>",
        "vectorized_elementwise_kernel<CUDAFunctor_add>",
        "Memcpy HtoD (Pageable -> Device)",
        "ncclKernel_AllReduce_RING_LL_Sum_float",
        "Memset (Device)",
    ]  # a copy's and a set's: their names
    launches = trace.launches
    assert launches["name"].astype(str).tolist() == [
        "cudaLaunchKernel",
        "cudaLaunchKernel",
        "cudaMemcpyAsync",
        "cuLaunchKernel",
        "cudaMemsetAsync",
    ]
    assert launches["tid"].tolist() == [100, 101, 100, 100, 100]
    ranges = trace.ranges.sort_values("start", kind="stable")
    assert ranges["name"].astype(str).tolist() == ["ProfilerStep#1", "forward", "gpu:forward", "ProfilerStep#2"]
    assert ranges["depth"].tolist() == [0, 1, 0, 0]  # the GPU twin nests on its own (device, stream)
    assert trace.meta.rank == 0 and trace.meta.world_size == 2
    assert trace.meta.gpus["name"].tolist() == ["NVIDIA H100 80GB HBM3"] and trace.meta.tool == "torch.profiler"


def test_every_command_reads_a_built_trace(cli, tmp_path):
    path = step_trace().write(tmp_path / "t.pt.trace.json")
    assert tracekit.kernels(path)["kernels"]["Total Time (ns)"].tolist() == [50000, 20048, 4001]
    ranged = tracekit.kernels(path, ranges="forward")["kernels"]
    assert ranged["Total Time (ns)"].tolist() == [20048, 4001]  # the launch on thread 101 counts too
    types = records(tracekit.kernels(path, by="type", ops="all"))
    assert {row["Type"]: row["Time (ns)"] for row in types} == {  # the memset runs under the NCCL kernel
        "computation": 20048 + 4001,
        "communication": 50000 - 999,
        "memory": 1750,
        "communication overlapping memory": 999,
    }
    window = tracekit.kernels(path, drop_last_step=True)["kernels"]
    assert window["Total Time (ns)"].tolist() == [20048, 4001]  # launched after ProfilerStep#2 began
    ranges = records(tracekit.ranges(path))
    assert {row["Range"]: row["Instances"] for row in ranges}["forward"] == 1
    result = cli("ranges", path)
    assert "no NVTX domains" in result.output
    assert cli("breakdown", path, "--phases", "forward").exit_code == 0
    assert cli("diff", path, path).exit_code == 0
    assert cli("export", path, "--parquet", tmp_path / "tables").exit_code == 0
    assert json.loads((tmp_path / "tables" / "meta.json").read_text())["rank"] == 0
    assert (tmp_path / "tables" / "gpu_ops.parquet").exists()
    assert cli("report", path, "-o", tmp_path / "report").exit_code == 0
    assert "ncclKernel_AllReduce" in (tmp_path / "report" / "report.md").read_text()


def test_torch_1_8_categories_and_string_thread_ids(tmp_path):
    built = KinetoBuilder(old=True, devices=0)
    built.annotation("ProfilerStep#0", 10, 100, cat="Operator").annotation("aten::mm", 12, 20, cat="Operator")
    built.launch("cudaLaunchKernel", 13, 5, correlation=7, tid=1890023232)
    built.kernel(MATMUL, 20, 9, correlation=7, stream=7)
    trace = open_trace(built.write(tmp_path / "old.json"))
    assert trace.gpu_ops["stream"].tolist() == [7] and trace.gpu_ops["duration"].tolist() == [9000]
    assert trace.launches["tid"].tolist() == [1890023232]
    assert trace.ranges["name"].astype(str).tolist() == ["cpu_op:ProfilerStep#0", "cpu_op:aten::mm"]
    assert any("torch 1.8" in line for line in trace.range_notes)
    assert trace.meta.gpus["id"].tolist() == [0]  # no deviceProperties: the device the events name
    assert trace.meta.gpus["name"].tolist() == [None]


def test_bad_events_among_good_ones_are_left_out_and_counted(tmp_path):
    built = step_trace()
    built.kernel(MATMUL, '"soon"', 1, correlation=99)  # a time that is not a number
    built.kernel(MATMUL, 5, "-1", correlation=98)  # a negative duration
    built.kernel(MATMUL, "99999999999999999999", 1, correlation=97)  # past int64 nanoseconds
    built.raw('{"ph": "X", "cat": "kernel", "name": 12, "ts": 1, "dur": 1}')  # a name that is not text
    built.raw('{"ph": "X", "cat": "kernel", "name": "no times"}')
    result = tracekit.kernels(built.write(tmp_path / "t.json"))
    assert result["kernels"]["Instances"].sum() == 3
    assert "4 gpu_ops rows" in said(result)  # unusable values
    assert "1 event could not be read" in said(result)  # a name that is not text


def test_rocm_args_written_as_text_are_read(tmp_path):
    """HIP runtime calls carry ``"bytes": "128"`` and ``"stream": "0x0"``: every such event was left out
    ("366 events could not be read"), so the copies lost their launch calls and idle blamed the host."""
    built = KinetoBuilder(devices=1)
    built.kernel(ADD, 1_000, 10, correlation=1)
    built.event("X", "cuda_runtime", "hipLaunchKernel", 100, 100, 990, 5, {"correlation": 1, "stream": "0x0"})
    built.event(
        "X",
        "cuda_runtime",
        "hipMemcpyAsync",
        100,
        100,
        1_002,
        3,
        {"correlation": "2", "stream": "0x0", "bytes": "128", "kind": "1"},
    )
    built.event(
        "X",
        "gpu_memcpy",
        "Memcpy HtoD (Host -> Device)",
        0,
        7,
        1_070,
        2,
        {"device": "0", "stream": 7, "correlation": 2, "bytes": "128", "grid": ["1", 1, 1]},
    )
    path = built.write(tmp_path / "rocm.json")
    trace = open_trace(path)
    assert trace.launches["name"].astype(str).tolist() == ["hipLaunchKernel", "hipMemcpyAsync"]
    assert trace.launches["correlation_id"].tolist() == [1, 2]
    copy = trace.gpu_ops.loc[trace.gpu_ops["kind"] == "memcpy"]
    assert copy[["bytes", "device", "correlation_id"]].values.tolist() == [[128, 0, 2]]
    result = tracekit.idle(path)
    assert "could not be read" not in said(result)
    (gap,) = records(result, "gaps")
    assert (gap["Idle (ns)"], gap["Cause"]) == (60_000, "dependency not in trace")  # queued at 1,002 us


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "du', "truncated"),
        (b'{"schemaVersion": 1, "other": [1, 2]}', 'without "traceEvents"'),
        (gzip.compress(b"this is not json at all", mtime=0), "not a JSON object"),
        (b"\x1f\x8b\x08\x00garbage that is not deflate", "not valid gzip"),
        (gzip.compress(b'{"traceEvents": [{"ph": "X", "cat": "kernel"', mtime=0)[:-8], "truncated"),
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}}', "not well formed"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "k", "ts": 1, "dur": 1}]}', "has no CUDA kernels"),
        (b"[1, 2, 3]", "has no CUDA kernels"),
        (b'{"traceEvents": [{"ph": "X",, "cat": "kernel"}]}', "malformed JSON"),
    ],
)
def test_bad_files_get_one_line(cli, tmp_path, content, expected):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = cli("kernels", path)
    assert result.exit_code == 1
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_a_bare_array_of_events_reads(tmp_path):
    events = step_trace().events
    path = tmp_path / "array.json"
    path.write_text("[\n  " + ",\n  ".join(events) + "\n]\n")
    assert open_trace(path).gpu_ops["duration"].sum() == 20048 + 4001 + 1750 + 50000 + 999


def test_small_blocks_and_separators_inside_strings_read_the_same(tmp_path, monkeypatch):
    """Blocks of a few hundred bytes cut almost every event; names holding "}, {" make the quick cut
    land inside a string, so the exact cut must take over: the tables are those of one whole read."""
    built = step_trace()
    names = [f'weird }}, {{"ts": 1}}, {{ \\" {index} ' + "\\" for index in range(40)]  # separator, \", \\
    for index, name in enumerate(names):
        built.launch("cudaLaunchKernel", 300 + index, 1, correlation=1000 + index)
        built.kernel(name, f"{400 + index}.5", "1.25", correlation=1000 + index)
    path = built.write(tmp_path / "t.json")
    whole = open_trace(path).gpu_ops
    exact_cuts = []
    exact_cut = json_stream.exact_cut
    monkeypatch.setattr(json_stream, "exact_cut", lambda *args: exact_cuts.append(1) or exact_cut(*args))
    monkeypatch.setattr(json_stream, "TAIL_WINDOW", 64)
    for size in range(97, 1500, 61):  # blocks that end everywhere: in names, between "}" and ",", ...
        monkeypatch.setattr(json_stream, "BLOCK_BYTES", size)
        pieces = open_trace(path).gpu_ops
        assert len(pieces) == len(whole) == 45
        assert pieces["name"].astype(str).tolist() == whole["name"].astype(str).tolist()
        assert set(names) <= set(pieces["name"].astype(str))
        assert np.array_equal(pieces["start"].to_numpy(), whole["start"].to_numpy())
    assert len(exact_cuts) > 100  # the quick cut landed inside a name, often


def test_a_huge_event_is_refused_not_read(tmp_path, monkeypatch):
    monkeypatch.setattr(json_stream, "MAX_EVENT_BYTES", 1000)
    monkeypatch.setattr(json_stream, "BLOCK_BYTES", 256)
    built = step_trace()
    built.kernel("k" * 5000, 1, 1, correlation=5)
    with pytest.raises(json_stream.JsonTraceError, match="larger than"):
        open_trace(built.write(tmp_path / "t.json")).gpu_ops  # noqa: B018 (loading is the test)


@pytest.mark.parametrize("weird", [False, True])
def test_worker_processes_read_what_one_process_reads(tmp_path, monkeypatch, weird):
    """Chunks decoded on worker processes and merged give the tables of a one-process read; a name
    that fools the quick cut makes a worker refuse its chunk, and the file is read again exactly."""
    from tracekit.sources.kineto import parallel as kineto_parallel
    from tracekit.sources.kineto import reader as kineto

    built = step_trace(rank=None)
    for index in range(120):
        name = f'k{index % 7} }}, {{"x": 1}} \\' if weird else f"kernel_{index % 7}"
        built.launch("cudaLaunchKernel", 300 + index, 1, correlation=1000 + index, tid=100 + index % 3)
        built.kernel(name, f"{400 + index}.5", "1.25", correlation=1000 + index, stream=7 + index % 2)
        built.annotation(f"op{index % 5}", 300 + index, "0.5", cat="cpu_op")
    path = built.write(tmp_path / "t.json")
    monkeypatch.setenv("TRACEKIT_WORKERS", "0")
    alone = open_trace(path)
    alone.load_together(("gpu_ops", "launches", "ranges"))  # now, in one process
    monkeypatch.setenv("TRACEKIT_WORKERS", "2")
    monkeypatch.setenv("TRACEKIT_PARALLEL_MIN_BYTES", "0")
    monkeypatch.setattr(json_stream, "BLOCK_BYTES", 2048)
    outcomes = []

    def spy(*args):
        try:
            columns = parallel_columns(*args)
        except kineto_parallel.Refused:
            outcomes.append("refused")
            raise
        outcomes.append(sum(len(part) for part in columns.columns["gpu"]["start"]))
        return columns

    parallel_columns = kineto.parallel_columns
    monkeypatch.setattr(kineto, "parallel_columns", spy)
    together = open_trace(path)
    for table in ("gpu_ops", "launches", "ranges"):
        ours, theirs = getattr(together, table), getattr(alone, table)
        assert len(ours) > 100
        for column in ours.columns:
            assert ours[column].astype(str).tolist() == theirs[column].astype(str).tolist(), (table, column)
    # Refused and read again in one process, or merged from many chunks that came back from workers.
    assert outcomes == (["refused"] if weird else [120 + 5])  # gpu ops merged from the workers


def test_a_cached_reread_keeps_tables_notes_and_late_metadata(tmp_path, monkeypatch):
    """deviceProperties after the events (as re-serialized traces write them) reach the metadata, and a
    second read from the table cache brings them back without parsing the JSON again."""
    built = step_trace(rank=3)
    built.tail["deviceProperties"] = built.head.pop("deviceProperties")
    built.tail["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
    path = built.write(tmp_path / "late.json.gz", compress=True)
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")
    first = open_trace(path)
    assert first.meta.gpus.empty  # known only once the events are read
    first.load_together(("gpu_ops", "launches", "ranges"))
    assert first.meta.gpus["sm_count"].tolist() == [132] and first.meta.rank == 3
    assert (tmp_path / "late.json.gz.tracekit-cache" / "gpu_ops").is_dir()

    def no_parsing(*args):
        raise AssertionError("the JSON was parsed again")

    monkeypatch.setattr("tracekit.sources.kineto.reader._parse", no_parsing)
    again = open_trace(path)
    assert again.gpu_ops["start"].tolist() == first.gpu_ops["start"].tolist()
    assert again.meta.gpus["name"].tolist() == ["NVIDIA H100 80GB HBM3"]
    assert again.meta.session_start_utc_ns == 1_700_000_000_000_000_000
    assert again.ranges["name"].astype(str).tolist() == first.ranges["name"].astype(str).tolist()
    assert any("no NVTX domains" in line for line in again.range_notes)


def events_file(path, *events: str, after: str = "") -> str:
    path.write_text('{"traceEvents": [' + ",\n".join(events) + "]" + after + "}")
    return str(path)


KERNEL = '{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %s, "dur": 1, "args": {"device": %s, "stream": 7, "correlation": %s}}'
LAUNCH = '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": %s, "ts": %s, "dur": 1, "args": {"correlation": %s}}'
RANGE = '{"ph": "X", "cat": "user_annotation", "name": "%s", "pid": 100, "tid": %s, "ts": %s, "dur": %s}'


def test_hostile_values_are_left_out_and_said(cli, tmp_path):
    """Text that is not UTF-8, nesting deeper than the decoder goes, an exponent that would take
    minutes to expand, a device that does not fit int16: each such event is left out and counted,
    the rest reads, fast."""
    path = tmp_path / "t.json"
    path.write_bytes(
        b'{"traceEvents": ['
        + b",\n".join(
            [
                (KERNEL % ("good", 10, 0, 1)).encode(),
                (KERNEL % ("\xff\xfe", 10, 0, 2)).encode("latin-1"),
                (KERNEL % ("deep", 10, 0, 3)).replace('"dur": 1', '"dur": 1, "x": ' + "[" * 3000 + "]" * 3000).encode(),
                (KERNEL % ("huge", "1e900000", 0, 4)).encode(),
                (KERNEL % ("far", 10, 65536, 5)).encode(),
            ]
        )
        + b"]}"
    )
    started = time.perf_counter()
    result = cli("kernels", path, "--format", "json")
    assert result.exit_code == 0 and time.perf_counter() - started < 10
    assert [row["Name"] for row in json.loads(result.stdout)] == ["good"]
    assert "2 gpu_ops rows" in result.stderr and "2 events could not be read" in result.stderr


def test_large_correlation_ids_join_their_own_launch(tmp_path):
    """Correlation ids past 2^32 (a JSON trace can hold them) are not cut to 32 bits when joined."""
    path = events_file(
        tmp_path / "t.json",
        RANGE % ("early", 100, 0, 10),
        LAUNCH % (100, 1, 1),
        RANGE % ("late", 100, 50, 10),
        LAUNCH % (100, 51, 2**32 + 1),
        KERNEL % ("k", 60, 0, 2**32 + 1),
    )
    rows = {row["Range"]: row for row in records(tracekit.ranges(path))}
    assert rows["late"]["GPU Ops"] == 1 and rows["early"]["GPU Ops"] == 0


def test_thread_ids_do_not_depend_on_their_neighbours(tmp_path, monkeypatch):
    """The string tid "-1" is thread -1 in every block, whatever else the block holds."""
    events = [
        RANGE % ("outer", '"-1"', 0, 100),
        RANGE % ("inner", '"-1"', 10, 10),
        RANGE % ("x", '"main"', 0, 5),
        LAUNCH % ('"-1"', 12, 1),
        KERNEL % ("k", 20, 0, 1),
    ]
    path = events_file(tmp_path / "t.json", *events)
    for size in (64, 100, 150, 4096):
        monkeypatch.setattr(json_stream, "BLOCK_BYTES", size)
        ranges = open_trace(path).ranges.set_index(open_trace(path).ranges["name"].astype(str))
        assert ranges.loc["inner", "depth"] == 1 and ranges.loc["inner", "tid"] == -1, size


def test_damage_around_the_events(cli, tmp_path, monkeypatch):
    no_comma = events_file(tmp_path / "a.json", KERNEL % ("k", 1, 0, 1) + KERNEL % ("k", 2, 0, 2))
    for size in (40, 60, 80, 4096):
        monkeypatch.setattr(json_stream, "BLOCK_BYTES", size)
        result = cli("kernels", no_comma)
        assert result.exit_code == 1 and "malformed JSON" in result.stderr, size
    monkeypatch.setattr(json_stream, "BLOCK_BYTES", 4096)
    junk = events_file(tmp_path / "b.json", KERNEL % ("k", 1, 0, 1), after=', "deviceProperties": [{"id": 0, "na')
    result = cli("kernels", junk)
    assert result.exit_code == 0 and "the text after the events is damaged" in result.output
    monkeypatch.setenv("TRACEKIT_PARALLEL_MIN_BYTES", "64M")
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "lots")
    assert cli("kernels", junk).exit_code == 0  # a mistyped setting is its default, not a traceback


def test_devices_and_source_in_metadata_and_report(cli, tmp_path):
    built = step_trace()
    built.kernel(MATMUL, 500, 1, correlation=77, device=1)  # deviceProperties describes only GPU 0
    path = built.write(tmp_path / "t.json")
    trace = open_trace(path)
    trace.gpu_ops  # noqa: B018 (the metadata completes as the table loads)
    assert trace.meta.gpus["id"].tolist() == [0, 1]
    assert cli("report", path, "-o", tmp_path / "r").exit_code == 0
    text = (tmp_path / "r" / "report.md").read_text()
    assert "torch.profiler (export schema 1); GPUs: NVIDIA H100 80GB HBM3." in text


def test_a_kernel_with_launch_fields_of_another_shape_keeps_its_row(tmp_path):
    """grid as text, a nested block, registers as a list, shared memory as an object: the kernel stays, those
    values unknown (0 for the launch dimensions, -1 for the resources), as any unusable value reads."""
    trace = KinetoBuilder()
    trace.launch("cudaLaunchKernel", 1, 2, 1).kernel("k1", 10, 5, 1)
    odd = {"grid": "abc", "block": [[128], 1, 1], "registers per thread": [1], "shared memory": {"a": 1}}
    trace.event("X", "kernel", "k2", 0, 7, 20, 5, {"device": 0, "stream": 7, "correlation": 2, **odd})
    trace.launch("cudaLaunchKernel", 3, 2, 2)
    ops = open_trace(trace.write(tmp_path / "odd.json")).gpu_ops.set_index("name")
    assert list(ops.index) == ["k1", "k2"]
    assert ops.loc["k2", ["grid_x", "block_x", "registers_per_thread", "shared_memory"]].tolist() == [0, 0, -1, -1]


@pytest.mark.parametrize("old", [False, True])
def test_process_and_thread_names_from_the_metadata_events(tmp_path, old):
    """process_name (tid -1: the process's own) and thread_name events, their ids read as the events' (torch
    1.8's text tids as numbers); a thread renamed keeps its last name; events without a text name are left out."""
    built = KinetoBuilder(old=old)
    tid = "1890023232" if old else 1890023232
    built.launch("cudaLaunchKernel", "1000.000", "3.000", correlation=11, tid=1890023232)
    built.names("process_name", 100, 0, "python")
    built.names("thread_name", 100, tid, "thread 1 (python)")
    built.names("thread_name", 100, tid, "thread 1 (pt_autograd_0)")
    built.names("thread_name", 100, 7, "")
    built.raw('{"name": "thread_name", "ph": "M", "pid": 100, "tid": 8, "args": {"name": 3}}')
    names = open_trace(built.write(tmp_path / "t.json")).optional("thread_names")
    assert names is not None
    assert list(zip(names["pid"], names["tid"], names["name"].astype(str), strict=True)) == [
        (100, -1, "python"),
        (100, 1890023232, "thread 1 (pt_autograd_0)"),
    ]
