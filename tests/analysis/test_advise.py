"""``tracekit advise``: each rule fires where it should, with exact figures, and stays quiet where it should
not (a healthy run is left alone)."""

import pytest
from helpers.nsys_builder import ExportBuilder

import tracekit

US, MS = 1_000, 1_000_000
GEMM_BF16 = "ampere_s16816gemm_bf16_128x64"


def findings(path, **options) -> dict[str, dict]:
    """The findings of a trace by kind: {kind: row}."""
    table = tracekit.advise(path, **options)["findings"]
    return {row["Finding"]: row for row in table.to_dict("records")}


def healthy(b: ExportBuilder, count: int = 400, device: int = 0, pid: int = 100) -> None:
    """Back-to-back 1 ms kernels with 10 us gaps, each launched well before the previous one ends."""
    for index in range(count):
        start = index * (MS + 10 * US)
        b.kernel(
            start,
            start + MS,
            "ampere_s16816gemm_bf16_128x64",
            device=device,
            pid=pid,
            launch_at=max(start - 500 * US, 0) - 100 * US,
        )


def test_a_healthy_run_gets_no_finding(tmp_path):
    b = ExportBuilder("2026.2")
    healthy(b)
    result = tracekit.advise(b.write(tmp_path / "healthy.sqlite"))
    assert result["findings"].empty  # 0.99 % idle in dispatch gaps, no NCCL: nothing to say
    assert result["evidence"].empty
    idle = tracekit.idle(tmp_path / "healthy.sqlite")["idle"]
    assert idle["Idle (ns)"].sum() == 399 * 10 * US  # the dispatch gaps are there, just not worth a finding
    assert any("no findings" in note for note in result.notes)


def test_blocking_sync_counts_at_most_the_calls_wait(tmp_path):
    b = ExportBuilder("2026.2")
    b.kernel(0, 10 * MS, "k", launch_at=-1 * MS)
    # the host waits 2..10.05 ms (8.05 ms), then works 4.95 ms before launching: a 5 ms gap, all of which the
    # host could have worked through while the GPU ran had it not waited
    b.runtime(2 * MS, 10_050 * US, "cudaStreamSynchronize_v3020", 900)
    b.kernel(15 * MS, 25 * MS, "k", launch_at=14_990 * US)
    # a short call before a long gap: only the call's 0.1 ms is the sync's; the other 19.9 ms are the host's
    b.runtime(24_950 * US, 25_050 * US, "cudaDeviceSynchronize_v3020", 901)
    b.kernel(45 * MS, 55 * MS, "k", launch_at=44_990 * US)
    found = findings(b.write(tmp_path / "sync.sqlite"))
    sync = found["blocking sync"]
    assert sync["Recoverable (ns)"] == 5 * MS + 100 * US
    assert sync["Of Span (%)"] == pytest.approx((5.1 * MS) * 100 / (55 * MS))
    assert sync["Severity"] == "warning"
    stall = found["host stall"]  # the 19.9 ms after the short call
    assert stall["Recoverable (ns)"] == 19_900 * US
    assert stall["Severity"] == "critical"
    evidence = tracekit.advise(tmp_path / "sync.sqlite")["evidence"]
    sync_rows = evidence.loc[(evidence["Rank"] == sync["Rank"]).to_numpy()]
    assert sync_rows["Evidence"].str.startswith(("cudaDeviceSynchronize x1", "cudaStreamSynchronize x1")).all()
    assert sorted(sync_rows["Start (ns)"]) == [2 * MS, 24_950 * US]


def test_launch_bound_short_kernels_with_dispatch_gaps(tmp_path):
    b = ExportBuilder("2026.2")
    for index in range(1000):  # 5 us kernels every 10 us: half the time idle in 5 us gaps
        start = index * 10 * US
        b.kernel(start, start + 5 * US, "vectorized_elementwise_kernel", launch_at=start - 2 * US)
    found = findings(b.write(tmp_path / "bound.sqlite"))
    assert list(found) == ["launch-bound"]
    row = found["launch-bound"]
    assert row["Recoverable (ns)"] == 999 * 5 * US
    assert row["Severity"] == "critical"
    assert "median 5.0 us" in row["What"] and "999 gaps" in row["What"]


def test_long_kernels_with_short_gaps_are_not_launch_bound(tmp_path):
    b = ExportBuilder("2026.2")
    for index in range(100):  # 100 us kernels, 20 us gaps: 17 % idle, but not launch-bound
        start = index * 120 * US
        b.kernel(start, start + 100 * US, "k", launch_at=start - 2 * US)
    assert "launch-bound" not in findings(b.write(tmp_path / "long.sqlite"))


def test_host_stall_names_the_range_the_launching_thread_was_in(tmp_path):
    b = ExportBuilder("2026.2")
    b.kernel(0, 10 * MS, "k", launch_at=-1 * MS)
    b.push_pop(5 * MS, 19_600 * US, "step")
    b.push_pop(9 * MS, 11 * MS, "log", tid=100)  # open when the gap began, but only 1 ms of it
    b.push_pop(12 * MS, 19 * MS, "dataloader.next")  # 7 ms of the gap
    b.push_pop(12 * MS, 19 * MS, "other thread", tid=101)
    b.kernel(20 * MS, 30 * MS, "k", launch_at=19_500 * US)
    result = tracekit.advise(b.write(tmp_path / "stall.sqlite"))
    row = result["findings"].iloc[0]
    assert (row["Finding"], row["Recoverable (ns)"], row["Severity"]) == ("host stall", 10 * MS, "critical")
    evidence = result["evidence"]
    assert evidence["Start (ns)"].tolist() == [10 * MS] and evidence["Duration (ns)"].tolist() == [10 * MS]
    # "step" covers 9.6 ms of the gap, "dataloader.next" inside it 7 ms: both over half, the inner one says more
    assert evidence["Evidence"].tolist() == ["gap of 10.000 ms while the launching thread was in 'dataloader.next'"]


def test_copies_pageable_synchronous_and_on_compute_streams(tmp_path):
    b = ExportBuilder("2026.2")
    b.kernel(0, 10 * MS, "k", launch_at=-1 * MS)
    # pageable upload by cudaMemcpyAsync on the compute stream between kernels: 2 ms, 0.5 ms of it alongside
    # a kernel on another stream
    b.memcpy(10 * MS, 12 * MS, copy_kind=1, size=8 << 20, src_kind=0, dst_kind=2, launch_at=9 * MS)
    b.kernel(10 * MS, 10_500 * US, "side", stream=9, launch_at=9 * MS)
    b.kernel(12 * MS, 20 * MS, "k", launch_at=11 * MS)
    # synchronous download to pinned memory by cudaMemcpy on a side stream: 1 ms
    b.memcpy(
        20 * MS,
        21 * MS,
        copy_kind=2,
        size=4 << 20,
        src_kind=2,
        dst_kind=1,
        stream=9,
        launch_at=19 * MS,
        api="cudaMemcpy_v3020",
    )
    # a small synchronous upload: nsys leaves it out (64,000 bytes or less, host to device)
    b.memcpy(
        21 * MS,
        21_100 * US,
        copy_kind=1,
        size=64_000,
        src_kind=1,
        dst_kind=2,
        stream=9,
        launch_at=20 * MS,
        api="cudaMemcpy_v3020",
    )
    # a synchronous set of managed memory: 0.5 ms; one of device memory is not flagged
    b.memset(22 * MS, 22_500 * US, mem_kind=4, stream=9, launch_at=21 * MS, api="cudaMemset_v3020")
    b.memset(23 * MS, 23_500 * US, mem_kind=2, stream=9, launch_at=22 * MS, api="cudaMemset_v3020")
    # a pinned upload on the compute stream between its kernels: 2 ms with nothing alongside
    b.memcpy(24 * MS, 26 * MS, copy_kind=1, size=8 << 20, src_kind=1, dst_kind=2, launch_at=23 * MS)
    b.kernel(26 * MS, 50 * MS, "k", launch_at=23 * MS)
    path = b.write(tmp_path / "copies.sqlite")
    found = findings(path)
    # each copy in one finding: the pageable upload between kernels is a pageable copy, not a serialized one
    assert found["pageable copies"]["Recoverable (ns)"] == 2 * MS
    assert found["synchronous copies"]["Recoverable (ns)"] == 1 * MS + 500 * US
    assert found["copies on compute streams"]["Recoverable (ns)"] == 2 * MS
    assert {row["Severity"] for row in found.values()} == {"info"}  # 3-4 % of the 50 ms
    result = tracekit.advise(path)
    memcpy = result["cuda-sync-memcpy"]
    assert memcpy[["Duration (ns)", "Bytes", "Src Kind", "Dst Kind", "API Name"]].values.tolist() == [
        [1 * MS, 4 << 20, "Device", "Pinned", "cudaMemcpy_v3020"]
    ]
    memset = result["cuda-sync-memset"]
    assert memset[["Duration (ns)", "Dst Kind"]].values.tolist() == [[500 * US, "Managed"]]
    pageable = result["cuda-async-memcpy"]
    assert pageable[["Duration (ns)", "Start (ns)", "Src Kind", "API Name"]].values.tolist() == [
        [2 * MS, 10 * MS, "Pageable", "cudaMemcpyAsync_v3020"]
    ]


def test_fp32_matmul_on_tensor_core_gpus_only(tmp_path):
    def built(name: str, capability: tuple[int, int] | None) -> dict:
        b = ExportBuilder("2026.2")
        if capability:
            b.gpu(0, "GPU", 108, 40 << 30, *capability)
        b.kernel(0, 10 * MS, name, launch_at=-1 * MS)
        b.kernel(10 * MS, 20 * MS, "other", launch_at=5 * MS)
        return findings(b.write(tmp_path / f"{len(list(tmp_path.iterdir()))}.sqlite"))

    row = built("ampere_sgemm_128x64_nn", (8, 0))["fp32 matmul"]
    assert row["Recoverable (ns)"] == 5 * MS and "set_float32_matmul_precision" in row["Fix"]
    assert "float16" in built("volta_sgemm_128x64_nn", (7, 0))["fp32 matmul"]["Fix"]
    assert "fp32 matmul" not in built("maxwell_sgemm_128x64_nn", (6, 0))  # no tensor cores
    assert "fp32 matmul" not in built("ampere_s16816gemm_fp16_128x64", (8, 0))  # on the tensor cores already
    xmma = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_execute_kernel"
    assert built(xmma, None)["fp32 matmul"]["Recoverable (ns)"] == 5 * MS


def test_exposed_communication_only_with_nccl(tmp_path):
    b = ExportBuilder("2026.2")
    b.kernel(0, 10 * MS, "gemm", launch_at=-1 * MS)
    b.kernel(5 * MS, 20 * MS, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", stream=9, launch_at=-1 * MS)
    found = findings(b.write(tmp_path / "nccl.sqlite"))
    row = found["exposed communication"]
    assert row["Recoverable (ns)"] == 10 * MS and "33.3 % of its communication hidden" in row["What"]
    b = ExportBuilder("2026.2")
    healthy(b, 50)
    assert "exposed communication" not in findings(b.write(tmp_path / "none.sqlite"))


def test_advise_on_a_torch_profiler_trace_reads_memory_kinds_from_names(tmp_path):
    from helpers.kineto_builder import KinetoBuilder

    k = KinetoBuilder()
    k.launch("cudaLaunchKernel", 0, 5, 1).kernel("gemm", 10, 100, 1)
    k.launch("cudaMemcpyAsync", 105, 5, 2).memcpy(110, 2, 2, size=4096)  # µs: a 2 us pageable upload
    k.launch("cudaMemcpyAsync", 106, 2, 3).memcpy(113, 3, 3, size=4096, name="Memcpy DtoH (Device -> Pinned)")
    k.launch("cudaLaunchKernel", 107, 1, 4).kernel("gemm", 120, 100, 4)
    result = tracekit.advise(k.write(tmp_path / "t.json"))
    pageable = result["cuda-async-memcpy"]
    assert pageable[["Duration (ns)", "Src Kind", "Dst Kind", "Bytes", "API Name"]].values.tolist() == [
        [2000, "Pageable", "Device", 4096, "cudaMemcpyAsync"]
    ]


def test_unfused_optimizer_steps(tmp_path):
    def built(name: str, kernels: int, kernel_name: str) -> dict:
        b = ExportBuilder("2026.2")
        b.kernel(0, 10 * MS, GEMM_BF16, launch_at=-1 * MS)
        b.push_pop(9 * MS, 9 * MS + kernels * 20 * US, "Optimizer.step#AdamW.step")
        for index in range(kernels):  # 5 us kernels launched every 20 us: 15 us idle between them
            at = 10 * MS + index * 20 * US
            b.kernel(at, at + 5 * US, kernel_name, launch_at=9 * MS + index * 20 * US)
        end = 10 * MS + kernels * 20 * US
        b.kernel(end, end + 20 * MS, GEMM_BF16, launch_at=end - 500 * US)  # after the step range closed
        return findings(b.write(tmp_path / name))

    row = built("loop.sqlite", 100, "vectorized_elementwise_kernel<AddFunctor>")["unfused optimizer"]
    assert row["Recoverable (ns)"] == 99 * 15 * US  # idle between the 100 kernels of the step
    assert "100 kernels per step" in row["What"] and "fused=True" in row["Fix"]
    assert "unfused optimizer" not in built("few.sqlite", 20, "multi_tensor_apply_kernel<AdamW>")
    assert "unfused optimizer" not in built("fused.sqlite", 100, "fused_adamw_kernel")


def test_a_copy_counts_once_and_hides_behind_no_more_kernel_time_than_there_is(tmp_path):
    b = ExportBuilder("2022.4")
    b.kernel(0, 1 * MS, "k", launch_at=-1 * MS)
    # a synchronous pageable download between kernels of its stream: synchronous, and nothing else
    b.memcpy(
        1 * MS, 48 * MS, copy_kind=2, size=1 << 30, src_kind=2, dst_kind=0, launch_at=500 * US, api="cudaMemcpy_v3020"
    )
    b.runtime(500 * US, 48 * MS, "cudaMemcpy", 2)  # nsys 2022.4 records the call twice, one correlation
    b.kernel(48 * MS, 49 * MS, "k", launch_at=47 * MS)
    # a pinned upload between kernels: 10 ms exposed, but 2 ms of kernels to hide behind
    b.memcpy(49 * MS, 59 * MS, copy_kind=1, size=1 << 30, src_kind=1, dst_kind=2, launch_at=48 * MS)
    b.kernel(59 * MS, 60 * MS, "k", launch_at=58 * MS)
    found = findings(b.write(tmp_path / "once.sqlite"))
    assert "pageable copies" not in found  # the download is pageable too, but counted as synchronous
    assert found["synchronous copies"]["Recoverable (ns)"] == 47 * MS  # once, though joined to two calls
    assert "1 synchronous" in found["synchronous copies"]["What"]
    assert found["copies on compute streams"]["Recoverable (ns)"] == 3 * MS  # three 1 ms kernels


def test_exposed_communication_per_step(tmp_path):
    b = ExportBuilder("2026.2")
    for step, exposed in ((1, 4), (2, 8)):
        at = (step - 1) * 20 * MS
        b.push_pop(at, at + 20 * MS, f"ProfilerStep#{step}")
        b.kernel(at + 1 * MS, at + 5 * MS, GEMM_BF16, launch_at=at + 500 * US)
        # NCCL from 3 ms: 2 ms under the GEMM, then `exposed` ms alone
        b.kernel(
            at + 3 * MS,
            at + (5 + exposed) * MS,
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            stream=9,
            launch_at=at + 600 * US,
        )
    result = tracekit.advise(b.write(tmp_path / "steps.sqlite"))
    row = result["findings"].set_index("Finding").loc["exposed communication"]
    assert row["Recoverable (ns)"] == 12 * MS and "6.000 ms per step over 2 steps" in row["What"]
    evidence = result["evidence"]
    steps = evidence.loc[(evidence["Rank"] == row["Rank"]).to_numpy()].head(2)
    assert steps["Evidence"].tolist() == [
        "ProfilerStep#2: 8.000 ms exposed of 10.000 ms of communication",
        "ProfilerStep#1: 4.000 ms exposed of 6.000 ms of communication",
    ]
    assert steps["Start (ns)"].tolist() == [19 * MS, -1 * MS]  # from the first GPU op, at 1 ms


def test_fp32_matmul_evidence_says_the_gpus_each_kernel_ran_on(tmp_path):
    """Each FP32 GEMM's evidence row names where it ran (it said "all GPUs", also on a one-GPU trace)."""
    b = ExportBuilder("2026.2")
    b.gpu(0, "GPU", 108, 40 << 30, 8, 0)
    b.gpu(1, "GPU", 108, 40 << 30, 8, 0)
    b.kernel(0, 10 * MS, "ampere_sgemm_128x64_nn", launch_at=-1 * MS)
    b.kernel(0, 10 * MS, "ampere_sgemm_128x64_nn", device=1, launch_at=-1 * MS)
    b.kernel(10 * MS, 14 * MS, "ampere_sgemm_64x32_tn", launch_at=9 * MS)
    result = tracekit.advise(b.write(tmp_path / "two_gpus.sqlite"))
    findings_table = result["findings"]
    rank = int(findings_table.loc[findings_table["Finding"] == "fp32 matmul", "Rank"].iloc[0])
    rows = result["evidence"].loc[result["evidence"]["Rank"] == rank]
    assert rows[["Evidence", "Duration (ns)", "Where"]].values.tolist() == [
        ["ampere_sgemm_128x64_nn x2", 20 * MS, "cuda:0, cuda:1"],
        ["ampere_sgemm_64x32_tn x1", 4 * MS, "cuda:0"],
    ]


def test_fp32_matmul_recoverable_is_bounded_by_the_roofline_where_shapes_are_recorded(tmp_path):
    """An FP32 4096^3 GEMM (emit_nvtx shapes) of 10 ms on an A100 SXM4 80GB: 2 x 4096^3 = 137.44 GFLOP, so it
    ran at 13.744 TFLOP/s, 70 % of the FP32 peak (19.5). On the TF32 tensor cores (156 TFLOP/s dense) it needs
    at least 137.44e9 / 156e12 = 0.881 ms (its 3 x 4096^2 x 4 bytes need 0.099 ms at 2,039 GB/s): it can give
    back 10 - 0.881 ms, not "half"."""
    b = ExportBuilder("2026.2")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108, 85_000_000_000, 8, 0)
    b.push_pop(0, 12 * MS, "aten::mm, seq = 1, op_id = 2, sizes = [[4096, 4096], [4096, 4096]]")
    b.kernel(1 * MS, 11 * MS, "ampere_sgemm_128x64_nn", launch_at=100 * US)
    row = findings(b.write(tmp_path / "t.sqlite"))["fp32 matmul"]
    flops = 2 * 4096**3
    assert row["Recoverable (ns)"] == round(10 * MS - flops / 156e12 * 1e9)
    assert f"at {100 * flops / 10e-3 / 19.5e12:.0f}% of the FP32 peak" in row["What"]
    assert "bound by the roofline" in row["Bound"] and "156 TFLOP/s" in row["Bound"]
