"""nsys's expert rules (``nsys analyze``): exact rows on built exports, and nsys's own rows on built and real
exports where nsys is installed."""

import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.nsys_stats import nsys_analyze
from helpers.paths import shared_export_paths

import tracekit
from tracekit.analysis.advice import nsys_rules
from tracekit.sources import open_trace

MS = 1_000_000
T0 = 1_000 * MS  # nsys's rules leave out ops that start at 0 or before
RULES: list[str] = list(nsys_rules.RULES)


def starved(tmp_path, overhead: bool = False, name: str = "starved.sqlite"):
    """GPU 0 busy 0-100 ms and 700-800 ms; GPU 1 busy 0-800 ms but for 100-300 ms; optionally the profiler's
    flush overhead 300-400 ms in the process."""
    b = ExportBuilder("2026.2")
    b.kernel(T0, T0 + 100 * MS, "a", launch_at=T0 - 1 * MS)
    b.kernel(T0 + 700 * MS, T0 + 800 * MS, "a", launch_at=T0 + 650 * MS)
    b.kernel(T0, T0 + 100 * MS, "b", device=1, launch_at=T0 - 1 * MS)
    b.kernel(T0 + 300 * MS, T0 + 800 * MS, "b", device=1, launch_at=T0 + 250 * MS)
    b.kernel(0, 50 * MS, "before", device=1)  # nsys's rules leave out ops that start at 0 (or before)
    if overhead:
        b.overhead(T0 + 300 * MS, T0 + 400 * MS)
        b.overhead(T0 + 350 * MS, T0 + 360 * MS, name="CUPTI Buffer flush")  # not one nsys counts
    return b.write(tmp_path / name)


def test_gpu_starvation_gaps_over_the_threshold(tmp_path):
    trace = open_trace(str(starved(tmp_path)))
    rows = nsys_rules.gpu_starvation(trace)
    assert rows.values.tolist() == [[600 * MS, T0 + 100 * MS, 100, 0]]
    rows = nsys_rules.gpu_starvation(trace, gap_ms=100)
    assert rows.values.tolist() == [[600 * MS, T0 + 100 * MS, 100, 0], [200 * MS, T0 + 100 * MS, 100, 1]]
    assert nsys_rules.gpu_starvation(trace, gap_ms=600).empty  # longer than, not as long as


def test_the_profilers_flush_overhead_counts_as_gpu_use(tmp_path):
    trace = open_trace(str(starved(tmp_path, overhead=True)))
    assert nsys_rules.gpu_starvation(trace).empty
    # on each GPU of the process, inside its span: GPU 0's 600 ms gap splits, GPU 1's gap ends before it
    rows = nsys_rules.gpu_starvation(trace, gap_ms=100)
    assert rows.values.tolist() == [
        [300 * MS, T0 + 400 * MS, 100, 0],
        [200 * MS, T0 + 100 * MS, 100, 0],
        [200 * MS, T0 + 100 * MS, 100, 1],
    ]


def test_gpu_low_utilization_chunks_merged_with_their_weighted_use(tmp_path):
    trace = open_trace(str(starved(tmp_path, overhead=True)))
    rows = nsys_rules.gpu_low_utilization(trace, chunks=8)
    # 100 ms chunks. GPU 0: 1-2 and 4-6 idle (3 is the overhead); GPU 1: 1-2 idle
    assert rows.values.tolist() == [
        [0.0, 200 * MS, T0 + 100 * MS, 100, 0],
        [0.0, 200 * MS, T0 + 100 * MS, 100, 1],
        [0.0, 300 * MS, T0 + 400 * MS, 100, 0],
    ]
    rows = nsys_rules.gpu_low_utilization(trace, chunks=3, threshold=70)
    # 266,666,667 ns chunks (rounded up; the last one clipped to 266,666,666): GPU 0 uses 100 ms of each
    # (the overhead in the second), 37.5 %, all three merged; GPU 1 uses 37.5, 87.5 and 100 %
    size = 266_666_667
    assert rows.values.tolist() == [[37.5, size, T0, 100, 1], [37.5, 800 * MS, T0, 100, 0]]


def test_nsys_2022_merges_empty_chunks_of_different_gpus(tmp_path):
    trace = open_trace(str(starved(tmp_path)))
    correct = nsys_rules.gpu_low_utilization(trace, chunks=8)
    assert correct.values.tolist() == [[0.0, 200 * MS, T0 + 100 * MS, 100, 1], [0.0, 600 * MS, T0 + 100 * MS, 100, 0]]
    quirk = nsys_rules.gpu_low_utilization(trace, chunks=8, as_nsys_2022=True)
    # chunks 1 and 2 are empty on both GPUs: nsys 2022.4 keeps them once, for GPU 0
    assert quirk.values.tolist() == [[0.0, 600 * MS, T0 + 100 * MS, 100, 0]]


def unequal_spans(tmp_path):
    """Two processes, one GPU each (as data-parallel ranks run), the lower pid on the higher device, with
    unequal spans. GPU 0 (pid 200), 0-1000 ms in 100 ms chunks: busy 0-200 and 700-1000. GPU 1 (pid
    100), 100-1700 ms in 160 ms chunks: chunk 0 busy, chunk 1 (260-420) 3.2 ms of use, 2-4 empty, 5
    (900-1060) 8 ms, 6 empty, 7-9 busy."""
    b = ExportBuilder("2026.2")
    b.kernel(T0, T0 + 200 * MS, "a", pid=200, launch_at=T0 - MS)
    b.kernel(T0 + 700 * MS, T0 + 1000 * MS, "a", pid=200, launch_at=T0 + 600 * MS)
    b.kernel(T0 + 100 * MS, T0 + 260 * MS, "b", device=1, launch_at=T0)
    b.kernel(T0 + 300 * MS, T0 + 300 * MS + 3_200_000, "b", device=1, launch_at=T0)
    b.kernel(T0 + 950 * MS, T0 + 958 * MS, "b", device=1, launch_at=T0)
    b.kernel(T0 + 1220 * MS, T0 + 1700 * MS, "b", device=1, launch_at=T0)
    return b.write(tmp_path / "unequal.sqlite")


def test_gpu_low_utilization_chunks_each_gpus_own_span(tmp_path):
    trace = open_trace(str(unequal_spans(tmp_path)))
    rows = nsys_rules.gpu_low_utilization(trace, chunks=10)
    # GPU 0: chunks 2-6 empty; GPU 1: chunks 1-6, (160 x 2.0 % + 160 x 5.0 %) / 960 = 1.17 %
    assert rows.values.tolist() == [[0.0, 500 * MS, T0 + 200 * MS, 200, 0], [1.2, 960 * MS, T0 + 260 * MS, 100, 1]]
    quirk = nsys_rules.gpu_low_utilization(trace, chunks=10, as_nsys_2022=True)
    # nsys 2022.4: chunks 2, 3, 4 and 6 are empty on both GPUs; its GROUP BY deviceId, pid order gives
    # them to GPU 0 (not to the lower pid), so GPU 1 keeps chunks 1 and 5 apart
    assert quirk.values.tolist() == [
        [0.0, 500 * MS, T0 + 200 * MS, 200, 0],
        [2.0, 160 * MS, T0 + 260 * MS, 100, 1],
        [5.0, 160 * MS, T0 + 900 * MS, 100, 1],
    ]


def test_sync_api_calls(tmp_path):
    b = ExportBuilder("2026.2")
    b.kernel(0, 10 * MS, "a", launch_at=-1 * MS)
    b.runtime(1 * MS, 9 * MS, "cudaStreamSynchronize_v3020", 900, tid=101)
    b.runtime(9 * MS, 9_500_000, "cudaDeviceSynchronize_v3020", 901)
    b.runtime(9 * MS, 9_200_000, "cudaEventSynchronize_v3020", 902)  # not one of nsys's two
    rows = tracekit.advise(b.write(tmp_path / "s.sqlite"))["cuda-sync-api"]
    assert rows.values.tolist() == [
        [8 * MS, 1 * MS, 100, 101, "cudaStreamSynchronize_v3020"],
        [500_000, 9 * MS, 100, 100, "cudaDeviceSynchronize_v3020"],
    ]


def test_rows_and_chunks_options(tmp_path):
    path = starved(tmp_path, overhead=True)
    result = tracekit.advise(path, gap_ms=100, rows=1, chunks=8)
    assert result["gpu-starv"].values.tolist() == [[300 * MS, T0 + 400 * MS, 100, 0]]
    assert len(result["gpu-low-util"]) == 1
    with pytest.raises(tracekit.OptionError, match="between 1 and 1000"):
        tracekit.advise(path, chunks=1001)


def same_rows(ours, theirs, rule: str) -> None:
    """tracekit's rows are nsys's (order within equal keys aside; nsys prints MB for bytes)."""
    assert len(ours) == len(theirs), rule
    if not len(ours):
        return
    theirs = theirs.rename(columns={"Device ID": "Device"})
    key = ["Duration (ns)", "Start (ns)"] + (["In-Use (%)"] if "In-Use (%)" in ours else [])
    columns = [column for column in ours.columns if column in theirs.columns]
    assert sorted(map(tuple, ours[columns].values.tolist())) == sorted(map(tuple, theirs[columns].values.tolist())), (
        rule
    )
    if "Bytes (MB)" in theirs:
        assert sorted((ours["Bytes"] / 1e6).round(3)) == sorted(theirs["Bytes (MB)"]), rule
    assert set(key) <= set(columns)


def compare_with_nsys(nsys, export, options: dict[str, str] | None = None, **ours_options) -> None:
    trace = open_trace(str(export))
    theirs = nsys_analyze(nsys, export, RULES, options)
    ours = {
        "gpu-starv": nsys_rules.gpu_starvation(trace, **{k: v for k, v in ours_options.items() if k == "gap_ms"}),
        "gpu-low-util": nsys_rules.gpu_low_utilization(
            trace, **{k: v for k, v in ours_options.items() if k in ("threshold", "chunks")}, as_nsys_2022=True
        ),
        "cuda-sync-api": nsys_rules.sync_api_calls(trace),
        "cuda-sync-memcpy": nsys_rules.sync_memcpy(trace),
        "cuda-sync-memset": nsys_rules.sync_memset(trace),
        "cuda-async-memcpy": nsys_rules.async_memcpy_pageable(trace),
    }
    for rule in RULES:
        same_rows(ours[rule], theirs[rule], rule)


@pytest.mark.nsys
def test_equal_to_nsys_on_built_exports(nsys, tmp_path):
    path = starved(tmp_path, overhead=True)
    compare_with_nsys(nsys, path, {"gpu-starv": ":gap=100"}, gap_ms=100)
    # the empty chunks 1-2 of both GPUs (nsys 2022.4 keeps them once), GPU 0's 3 the overhead's, 4-6 empty
    compare_with_nsys(nsys, path, {"gpu-low-util": ":chunks=8"}, chunks=8)
    compare_with_nsys(nsys, path, {"gpu-low-util": ":chunks=3:threshold=70"}, chunks=3, threshold=70)
    compare_with_nsys(nsys, path, {"gpu-low-util": ":chunks=7:threshold=90"}, chunks=7, threshold=90)
    unequal = unequal_spans(tmp_path)
    for chunks in (10, 7, 30):
        compare_with_nsys(nsys, unequal, {"gpu-low-util": f":chunks={chunks}"}, chunks=chunks)


def copies(tmp_path):
    """Copies and sets of every memory kind, issued by synchronous and asynchronous calls."""
    b = ExportBuilder("2022.4")
    b.kernel(T0, T0 + 10 * MS, "k", launch_at=T0 - MS)
    at = T0 + 10 * MS
    for kind, (src, dst) in enumerate([(0, 2), (1, 2), (2, 0), (2, 1), (2, 2), (4, 2)]):
        for api in ("cudaMemcpy_v3020", "cudaMemcpyAsync_v3020", "cudaMemcpy2DAsync_v3020"):
            for size in (64_000, 64_001):
                direction = 1 if dst == 2 and src != 2 else 2 if src == 2 and dst != 2 else 8
                b.memcpy(
                    at,
                    at + 1000 + size // 100 + kind,
                    copy_kind=direction,
                    size=size,
                    src_kind=src,
                    dst_kind=dst,
                    launch_at=at - 100,
                    api=api,
                )
                at += MS
    b.memcpy(
        at,
        at + 5000,
        copy_kind=8,
        src_kind=2,
        dst_kind=2,
        src_device=0,
        dst_device=0,
        launch_at=at - 100,
        api="cudaMemcpy_v3020",
    )  # within one device: left out
    for mem_kind in (1, 2, 4):
        for api in ("cudaMemset_v3020", "cudaMemsetAsync_v3020"):
            b.memset(at, at + 700 + mem_kind, mem_kind=mem_kind, launch_at=at - 100, api=api)
            at += MS
    return b.write(tmp_path / "copies.sqlite")


def test_copy_rules_on_built_copies(tmp_path):
    trace = open_trace(str(copies(tmp_path)))
    sync = nsys_rules.sync_memcpy(trace)
    # cudaMemcpy (not Async), not a small upload, not within a device: 6 kinds x 2 sizes, less the small uploads
    assert len(sync) == 12 - 3 and set(sync["API Name"]) == {"cudaMemcpy_v3020"}
    assert not ((sync["Bytes"] <= 64_000) & (sync["Src Kind"] != "Device")).any()
    pageable = nsys_rules.async_memcpy_pageable(trace)
    assert len(pageable) == 2 * 2 * 2  # (pageable -> device, device -> pageable) x 2 async APIs x 2 sizes
    assert set(zip(pageable["Src Kind"], pageable["Dst Kind"])) == {("Pageable", "Device"), ("Device", "Pageable")}
    memset = nsys_rules.sync_memset(trace)
    assert memset[["Duration (ns)", "Dst Kind"]].values.tolist() == [[704, "Managed"], [701, "Pinned"]]


@pytest.mark.nsys
def test_copy_rules_equal_to_nsys_on_built_copies(nsys, tmp_path):
    compare_with_nsys(nsys, copies(tmp_path))


@pytest.mark.nsys
@pytest.mark.parametrize("export", shared_export_paths(), ids=lambda path: path.name)
def test_equal_to_nsys_on_real_exports(nsys, shared_traces, export):
    compare_with_nsys(nsys, export)
