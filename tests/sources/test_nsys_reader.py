"""The nsys SQLite reader on exports built in code (both schema generations) with known contents."""

from pathlib import Path

import numpy as np
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.small_export import GENERATIONS, build_small

from tracekit.model.nesting import nest_ranges
from tracekit.sources.nsys.export import read_nsys_export


@pytest.mark.parametrize("generation", GENERATIONS)
def test_gpu_ops_have_exact_values(tmp_path, generation):
    trace = read_nsys_export(build_small(generation, tmp_path / "t.sqlite"))
    ops = trace.gpu_ops.sort_values("start").reset_index(drop=True)
    assert ops["kind"].tolist() == ["kernel", "kernel", "memcpy", "memcpy", "memset"]
    assert ops["duration"].tolist() == [300, 50, 400, 100, 10]
    assert ops["name"].tolist() == [
        "void gemm_kernel<float>(float*)",
        "elementwise_kernel",
        "[CUDA memcpy HtoD]",
        "[CUDA memcpy DtoD]",
        "[CUDA memset]",
    ]
    assert ops["short_name"].tolist()[0] == "gemm_kernel"
    assert ops.loc[0, ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]].tolist() == [2, 3, 4, 128, 2, 1]
    assert ops["device"].tolist() == [0, 1, 0, 0, 0]
    assert ops["stream"].tolist()[:2] == [7, 13]
    # pid is masked out of a global id whose hardware/VM bits are set, as in real files
    assert set(ops["pid"]) == {4242}
    assert ops["bytes"].tolist() == [0, 0, 4096, 512, 64]


@pytest.mark.parametrize("generation", GENERATIONS)
def test_launches_and_metadata(tmp_path, generation):
    trace = read_nsys_export(build_small(generation, tmp_path / "t.sqlite"))
    launches = trace.launches.sort_values("start")
    assert launches["start"].tolist() == [900, 1_950, 2_990]
    assert launches["tid"].tolist() == [4243, 4242, 4242]
    assert launches["name"].tolist()[0] == "cudaLaunchKernel_v7000"
    ops = trace.gpu_ops
    # every launch correlates with exactly one GPU op
    assert set(launches["correlation_id"]) <= set(ops["correlation_id"])
    meta = trace.meta
    assert meta.tool_version == ("2022.4.2.1" if generation == "2022.4" else "2026.2.1.210")
    assert meta.schema_version == ("3.0.0" if generation == "2022.4" else "3.25.0")
    described = ["id", "name", "sm_count", "memory_bytes", "compute_capability"]
    assert meta.gpus.loc[:, described].to_dict("records") == [
        {
            "id": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "sm_count": 132,
            "memory_bytes": 85_000_000_000,
            "compute_capability": "9.0",
        }
    ]
    # the export records no clock, bandwidth or occupancy limits: unknown, not invented
    assert meta.gpus.drop(columns=described).isna().all(axis=None)
    assert meta.session_start_utc_ns == 1763820000000000000


@pytest.mark.parametrize("column", ["deviceId", None])
def test_a_gpu_table_without_an_id_column(cli, tmp_path, column):
    """nsys of about 2021, exported without EXPORT_META_DATA: TARGET_INFO_GPU names its GPUs by
    deviceId, with no id column (every command ended in a TypeError); without either, by row."""
    import sqlite3

    export = build_small("2022.4", tmp_path / "t.sqlite")
    with sqlite3.connect(export) as connection:
        connection.execute("DROP TABLE EXPORT_META_DATA")
        if column:
            connection.execute(f"ALTER TABLE TARGET_INFO_GPU RENAME COLUMN id TO {column}")
        else:
            connection.execute("ALTER TABLE TARGET_INFO_GPU DROP COLUMN id")
    trace = read_nsys_export(export)
    assert trace.meta.gpus.loc[:, ["id", "name", "sm_count"]].to_dict("records") == [
        {"id": 0, "name": "NVIDIA H100 80GB HBM3", "sm_count": 132}
    ]
    assert trace.meta.tool_version is None
    for command in ("kernels", "ranges", "breakdown", "idle", "steps", "launches", "report"):
        args = ["-o", tmp_path / f"report-{column}"] if command == "report" else []
        result = cli(command, export, *args)
        assert result.exit_code == 0 and "Traceback" not in result.output, (command, result.output)


@pytest.mark.parametrize("generation", GENERATIONS)
def test_ranges_are_named_nested_and_closed(tmp_path, generation):
    trace = read_nsys_export(build_small(generation, tmp_path / "t.sqlite"))
    ranges = trace.ranges.set_index("name")
    assert sorted(ranges.index) == ["NCCL:allreduce", "data", "forward", "step", "unclosed"]
    assert ranges.loc["step", "duration"] == 4_900  # registered name (textId) resolved
    assert ranges.loc["NCCL:allreduce", "domain"] == "NCCL"  # non-default domain prefixed as nsys does
    assert ranges.loc["unclosed", "end"] == 6_000  # closed at the last NVTX timestamp
    assert ranges.loc["data", "style"] == "startend"
    assert ranges.loc["data", "end_tid"] == 4250
    # nesting: step > forward > allreduce; the cross-thread start/end range is outside the nesting
    ids = trace.ranges.set_index("name")["range_id"]
    assert ranges.loc["step", ["depth", "parent"]].tolist() == [0, -1]
    assert ranges.loc["forward", ["depth", "parent"]].tolist() == [1, ids["step"]]
    assert ranges.loc["NCCL:allreduce", ["depth", "parent"]].tolist() == [2, ids["forward"]]
    assert ranges.loc["data", ["depth", "parent"]].tolist() == [0, -1]


def test_cpu_only_export_reads_as_empty_gpu_tables(tmp_path):
    b = ExportBuilder("2022.4")
    b.push_pop(0, 10, "step")
    trace = read_nsys_export(b.write(tmp_path / "cpu.sqlite"))
    assert trace.gpu_ops.empty and trace.launches.empty
    assert trace.ranges["name"].tolist() == ["step"]
    assert list(trace.gpu_ops.columns)[:4] == ["start", "end", "duration", "kind"]


def test_reads_in_chunks_across_threads(tmp_path, monkeypatch):
    """Many rows, small chunks: the columnar reader must keep rows aligned and in order."""
    from tracekit.sources.nsys import sqlite_columns

    monkeypatch.setattr(sqlite_columns, "CHUNK_ROWS", 7)
    b = ExportBuilder("2026.2")
    for i in range(100):
        b.kernel(i * 100, i * 100 + i, f"k{i % 3}", grid=(i + 1, 1, 1))
    trace = read_nsys_export(b.write(tmp_path / "many.sqlite"))
    ops = trace.gpu_ops
    assert ops["duration"].tolist() == list(range(100))
    assert ops["grid_x"].tolist() == list(range(1, 101))
    assert ops["name"].tolist() == [f"k{i % 3}" for i in range(100)]


@pytest.mark.parametrize("sparse", [False, True, "beyond int64"])
def test_chunks_read_into_their_slots_keep_every_selected_row(tmp_path, monkeypatch, sparse):
    """Each chunk writes its rows into its own slot of the output; a WHERE that leaves out rows (some
    chunks keep none, one keeps all) must still give the selected rows, in rowid order, with nothing
    from the unwritten slack; a table with far-apart rowids takes the joining path."""
    import sqlite3

    from tracekit.sources.nsys import sqlite_columns

    monkeypatch.setattr(sqlite_columns, "CHUNK_ROWS", 10)
    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, value INTEGER, name TEXT)")
        ids = [i * (2**40 if sparse else 1) + 1 for i in range(95)]
        if sparse == "beyond int64":  # rowids spanning more than int64 holds: the slots must not wrap
            ids = [-(2**62)] + ids[1:-1] + [2**63 - 1]
        connection.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, n * 7, f"n{n % 4}") for n, i in enumerate(ids)])
    keep = [n for n in range(95) if (n // 10) % 3 == 1 or n % 10 == 3]  # chunks 1, 4, 7 whole; one row elsewhere
    where = " OR ".join(["(value / 7 / 10) % 3 = 1", "(value / 7) % 10 = 3"])
    columns = sqlite_columns.read_columns(
        path,
        "t",
        {"value": "value", "small": "value / 7"},
        texts={"name": "name"},
        where=where,
        dtypes={"small": "int16"},
    )
    assert columns["value"].tolist() == [n * 7 for n in keep]
    assert columns["small"].dtype == np.int16 and columns["small"].tolist() == keep
    codes, names = columns["name"]
    assert [names[code] for code in codes] == [f"n{n % 4}" for n in keep]


def test_nesting_of_partially_overlapping_and_equal_ranges():
    from tracekit.model.nesting import nest_ranges

    thread = np.array([1, 1, 1, 1, 2, 2])
    start = np.array([0, 10, 20, 50, 0, 5])
    end = np.array([100, 60, 30, 70, 10, 10])
    parent, depth = nest_ranges(thread, start, end)
    # [50,70] overlaps [10,60] partially: its tightest encloser is [0,100]
    assert parent.tolist() == [-1, 0, 1, 0, -1, 4]
    assert depth.tolist() == [0, 1, 2, 1, 0, 1]


def test_nesting_on_many_threads_over_a_long_capture():
    """1,027 threads over 2^53 ns: per-thread keys (thread index * span) would wrap int64, so ranks keep
    the order; a range inside another on the last thread must still find its parent."""
    rows = [(1, 0, 1), (2, 2**53 - 10, 2**53 - 1)]  # (thread, start, end): the smallest and the largest end
    rows += [(thread, 100, 200) for thread in range(3, 1_025)]
    rows += [(1_026, 0, 5_000), (1_026, 10, 500)]  # outer, inner: thread index 1,024 in key order
    thread, start, end = (np.array(column, dtype=np.int64) for column in zip(*rows))
    parent, depth = nest_ranges(thread, start, end)
    assert parent[-1] == len(rows) - 2 and depth[-1] == 1 and depth[-2] == 0
    assert (parent[:-1] == -1).all()


@pytest.mark.parametrize("seed", range(40))
def test_nesting_equals_the_definition(seed):
    """The tightest encloser of a range is the nearest earlier range on its thread (ordered by start, then
    longest first) that ends no earlier; depth counts the ancestors. Random tables, ties and zero-length
    ranges included, against that definition row by row; ineligible ranges are nobody's parent."""
    from tracekit.model.nesting import nest_ranges

    rng = np.random.default_rng(seed)
    count = 0 if seed < 2 else int(rng.integers(1, 60))  # empty tables too (with and without a mask)
    thread = rng.integers(0, 3, count).astype(np.int64)
    start = rng.integers(0, 40, count).astype(np.int64)
    end = start + rng.integers(0, 25, count)
    eligible = None if seed % 2 else rng.random(count) < 0.8
    parent, depth = nest_ranges(thread, start, end, eligible)
    usable = np.ones(count, bool) if eligible is None else eligible
    order = sorted(np.flatnonzero(usable).tolist(), key=lambda row: (thread[row], start[row], -end[row], row))
    expected_parent = np.full(count, -1)
    for position, row in enumerate(order):
        for earlier in reversed(order[:position]):
            if thread[earlier] == thread[row] and end[earlier] >= end[row]:
                expected_parent[row] = earlier
                break
    expected_depth = np.zeros(count, int)
    for row in range(count):
        above = expected_parent[row]
        while above >= 0:
            expected_depth[row] += 1
            above = expected_parent[above]
    assert parent.tolist() == expected_parent.tolist() and depth.tolist() == expected_depth.tolist()
    assert parent.dtype == np.int64 and depth.dtype == np.int32


def test_a_forked_process_reads_with_threads_of_its_own(tmp_path):
    """The reading threads are shared in a process; a child forked after they started has none of them
    and must start its own rather than queue chunks for threads that do not exist there."""
    import multiprocessing

    from tracekit.session import current

    b = ExportBuilder("2026.2")
    for i in range(20):
        b.kernel(i * 100, i * 100 + i, "k")
    path = b.write(tmp_path / "fork.sqlite")
    assert read_nsys_export(path).gpu_ops["duration"].sum() == sum(range(20))  # the pool now runs here
    assert "read_pool" in current().resources
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_durations_in_child, (str(path),)).get(timeout=60) == sum(range(20))


def _durations_in_child(path: str) -> int:
    return int(read_nsys_export(Path(path)).gpu_ops["duration"].sum())


def test_reads_loaded_behind_wait_for_the_others():
    """On the shared reading threads, a read started inside reading_later runs after every read of
    urgency NOW that is waiting, whenever it was asked for; equal urgencies keep their order."""
    import itertools
    import queue
    import threading

    from tracekit.model.reading import reading_later
    from tracekit.sources.nsys import read_pool

    pool = read_pool.ReadPool.__new__(read_pool.ReadPool)  # one thread, started by hand
    pool.queue, pool.order = queue.PriorityQueue(), itertools.count()
    release, ran = threading.Event(), []

    def submit(label: str, later: bool) -> threading.Thread:
        def run() -> None:
            if later:
                with reading_later():
                    pool.map(ran.append, [label])
            else:
                pool.map(ran.append, [label])

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    blocker = threading.Thread(target=lambda: pool.map(lambda _: release.wait(), [None]))
    blocker.start()
    threads = [submit("later 1", True), submit("later 2", True)]
    while pool.queue.qsize() < 3:  # the blocker and both later reads queued
        pass
    threads.append(submit("now", False))
    while pool.queue.qsize() < 4:
        pass
    worker = threading.Thread(target=pool._work, daemon=True)
    worker.start()
    release.set()
    for thread in [blocker, *threads]:
        thread.join(timeout=10)
    assert ran == ["now", "later 1", "later 2"]


def test_reading_leaves_no_warning_filter_and_no_thread_holding_the_exit(tmp_path, monkeypatch):
    """Chunks parse on two threads at once: no process-wide warning filter may be switched on the way
    (warnings.catch_warnings is not per thread: two threads inside it left every later warning raised as
    an error), also where a value is not an integer; and the idle reading threads are daemons."""
    import sqlite3
    import threading
    import warnings

    from tracekit.sources.nsys import sqlite_columns

    def switched(*args, **kwargs):
        raise AssertionError("a process-wide warning filter switched while reading")

    class Warnings:  # the reader's view of the warnings module: switching a filter fails the read
        catch_warnings = simplefilter = filterwarnings = staticmethod(switched)

    before = list(warnings.filters)
    monkeypatch.setattr(sqlite_columns, "warnings", Warnings)
    monkeypatch.setattr(sqlite_columns, "CHUNK_ROWS", 3)
    b = ExportBuilder("2026.2")
    for i in range(40):
        b.kernel(i * 100, i * 100 + i, "k")
    path = b.write(tmp_path / "w.sqlite")
    assert read_nsys_export(path).gpu_ops["duration"].sum() == sum(range(40))
    with sqlite3.connect(path) as connection:  # a REAL start: its chunk is read again with checks
        connection.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 150.5 WHERE start = 100")
    assert read_nsys_export(path).gpu_ops["duration"].sum() == sum(range(40)) - 1
    assert warnings.filters == before
    readers = [thread for thread in threading.enumerate() if thread.name.startswith("tracekit-read")]
    assert readers and all(thread.daemon for thread in readers)  # so the program's quick exit may go ahead


@pytest.mark.parametrize("generation", GENERATIONS)
def test_processes_and_threads_have_their_recorded_names(tmp_path, generation):
    """PROCESSES by globalPid, ThreadNames by globalTid (hardware bits above the pid ignored); a thread named
    twice keeps its last name; an export without those tables has no names."""
    b = ExportBuilder(generation)
    b.runtime(10, 20, "cudaLaunchKernel_v7000", correlation=1, pid=100, tid=101)
    b.process(100, "python3")
    b.thread_name(100, 101, "python3")
    b.thread_name(100, 101, "pt_autograd_0")
    b.thread_name(100, 100, "python3")
    names = read_nsys_export(b.write(tmp_path / "named.sqlite")).optional("thread_names")
    assert names is not None
    assert list(zip(names["pid"], names["tid"], names["name"].astype(str), strict=True)) == [
        (100, -1, "python3"),
        (100, 101, "pt_autograd_0"),
        (100, 100, "python3"),
    ]
    bare = read_nsys_export(build_small(generation, tmp_path / "bare.sqlite")).optional("thread_names")
    assert bare is not None and len(bare) == 0
