"""``tracekit efficiency``: hand-counted FLOPs, bytes and rooflines on built traces (torch.profiler shapes,
emit_nvtx shapes in an nsys export), the real traces' GEMMs recomputed from their raw JSON, and what is said
when something is not known."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers.h100 import BANDWIDTH, BF16, GEMM, H100_LIMITS, PEAK
from helpers.kineto_builder import KinetoBuilder
from helpers.paths import SHARED_KINETO

import tracekit
from tracekit.analysis.efficiency.efficiency import efficiency_table
from tracekit.analysis.efficiency.efficiency_command import EfficiencyOptions
from tracekit.sources import open_trace

ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"


def h100_trace(path: Path) -> Path:
    """Two profiler steps on an H100. Step 1: a 4096^3 BF16 aten::mm (one cuBLAS kernel, 200 us, and the
    workspace memset cuBLAS issues), an aten::add of two 1024x1024 BF16 tensors (5 us). Step 2: aten::linear
    around aten::addmm (2048x4096 @ 4096x4096 + bias, 100 us), and a kernel launched outside any operator."""
    trace = KinetoBuilder().device_limits(**H100_LIMITS)
    trace.annotation("ProfilerStep#1", 0, 1000).annotation("ProfilerStep#2", 1000, 1000)
    gemm = {"registers per thread": 168, "shared memory": 231424, "est. achieved occupancy %": 0}
    trace.operator("aten::mm", 10, 50, [[4096, 4096], [4096, 4096]], [BF16, BF16])
    trace.launch("cudaMemsetAsync", 15, 2, 1).memset(90, 2, 1, 4 * 2**20)
    trace.launch("cudaLaunchKernel", 20, 5, 2).kernel(
        GEMM, 100, 200, 2, grid=(132, 1, 1), block=(384, 1, 1), resources=gemm
    )
    trace.operator("aten::add", 70, 20, [[1024, 1024], [1024, 1024], []], [BF16, BF16, "Scalar"], ["", "", "1"])
    trace.launch("cudaLaunchKernel", 75, 5, 3).kernel(
        ADD, 310, 5, 3, grid=(1024, 1, 1), block=(128, 1, 1), resources={"registers per thread": 16, "shared memory": 0}
    )
    trace.operator("aten::linear", 1010, 60, [[2048, 4096], [4096, 4096], [4096]], [BF16, BF16, BF16])
    addmm = [[4096], [2048, 4096], [4096, 4096], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"], ["", "", "", "1", "1"]
    trace.operator("aten::addmm", 1020, 40, *addmm)
    trace.launch("cudaLaunchKernel", 1030, 5, 4).kernel(
        GEMM, 1100, 100, 4, grid=(132, 1, 1), block=(384, 1, 1), resources=gemm
    )
    trace.launch("cudaLaunchKernel", 1500, 5, 5).kernel(
        ADD, 1600, 10, 5, resources={"registers per thread": 16, "shared memory": 0}
    )
    return trace.write(path)


def rows(result, key: str = "Operator") -> dict[str, dict]:
    return {row[key]: row for row in result["efficiency"].to_dict("records")}


def test_a_bf16_gemm_and_an_add_against_the_h100s_roofline(tmp_path):
    """aten::mm of 4096^3 in BF16: 2 x 4096^3 = 137,438,953,472 FLOPs, 3 x 4096^2 x 2 = 100,663,296 bytes, plus
    cuBLAS's 4 MiB workspace memset (4,194,304 bytes written). Roofline: the GEMM needs 137.44e9 / 989.4e12 =
    138.911 us of compute (30.05 us of memory: compute-bound), the memset 4,194,304 / 3.35e12 = 1.252 us; over
    the op's 202 us: 69.388 %. aten::add of 2 x 1024^2 BF16: 1,048,576 FLOPs, 3 x 1024^2 x 2 = 6,291,456
    bytes, 1.878 us at 3.35 TB/s of its 5 us: 37.56 %, memory-bound."""
    result = efficiency_table(open_trace(h100_trace(tmp_path / "t.json")))
    mm, add = rows(result)["aten::mm"], rows(result)["aten::add"]
    assert (mm["Count"], mm["Kernels"], mm["GPU Time (ns)"]) == (1, 1, 202_000)
    assert mm["GFLOP"] == pytest.approx(137.438953472) and mm["GB"] == pytest.approx(0.1048576)
    roofline = (137_438_953_472 / PEAK + 100_663_296 / BANDWIDTH + 0) + 4_194_304 / BANDWIDTH
    compute_bound = max(137_438_953_472 / PEAK, 100_663_296 / BANDWIDTH) + 4_194_304 / BANDWIDTH
    assert roofline > compute_bound  # (the GEMM's roofline is the larger of the two, not their sum)
    assert mm["Roofline (%)"] == pytest.approx(100 * compute_bound / 202e-6)
    assert mm["TFLOP/s"] == pytest.approx(137_438_953_472 / 200e-6 / 1e12)  # over its kernel: a set computes nothing
    assert (mm["Precision"], mm["Unit"], mm["Bound"]) == ("BF16", "tensor cores", "compute")
    # 168 registers x 32 = 5,376 a warp: 3 warps a sub-partition, 12 an SM = one block of 12 warps: 12 / 64
    assert mm["Occupancy (%)"] == pytest.approx(18.75)
    assert add["GFLOP"] == pytest.approx(1_048_576 / 1e9) and add["GB"] == pytest.approx(6_291_456 / 1e9)
    assert add["Roofline (%)"] == pytest.approx(100 * 6_291_456 / BANDWIDTH / 5e-6)
    assert add["Bound"] == "memory" and add["Not Known"] is None
    peaks = result["peaks"].iloc[0]
    assert peaks["Taken For"] == "H100 SXM" and peaks["Memory (TB/s)"] == pytest.approx(3.35)


def test_a_nested_operator_counts_once_and_the_unknown_is_said(tmp_path):
    """aten::linear around aten::addmm: the kernel is addmm's, whose count is 2 x 2048 x 4096 x 4096 FLOPs and
    bias + two inputs + output in BF16 bytes; linear is no row of its own. The kernel no operator launched has
    no count, and says so."""
    table = rows(efficiency_table(open_trace(h100_trace(tmp_path / "t.json"))))
    assert "aten::linear" not in table
    addmm = table["aten::addmm"]
    assert addmm["GFLOP"] == pytest.approx(2 * 2048 * 4096 * 4096 / 1e9)
    assert addmm["GB"] == pytest.approx((4096 + 2 * 2048 * 4096 + 4096 * 4096) * 2 / 1e9)
    assert addmm["Roofline (%)"] == pytest.approx(100 * 2 * 2048 * 4096**2 / PEAK / 100e-6)
    orphan = table["(no operator)"]
    assert orphan["GFLOP"] != orphan["GFLOP"] and orphan["Not Known"] == "no CPU operator launched it (100% of time)"


def test_by_kernel_step_and_phase(tmp_path):
    """The same work grouped other ways: the two GEMM kernels together (FLOPs of both operators), per profiler
    step, and a phase named by its range."""
    trace = open_trace(h100_trace(tmp_path / "t.json"))
    kernels = rows(efficiency_table(trace, EfficiencyOptions(by="kernel")), "Kernel")
    gemm = kernels[next(name for name in kernels if name.startswith("sm90_xmma_gemm"))]
    assert (gemm["Count"], gemm["GPU Time (ns)"]) == (2, 300_000)
    assert gemm["GFLOP"] == pytest.approx((2 * 4096**3 + 2 * 2048 * 4096**2) / 1e9)
    steps = rows(efficiency_table(trace, EfficiencyOptions(by="step")), "Step")
    assert steps["ProfilerStep#1"]["GPU Time (ns)"] == 207_000 and steps["ProfilerStep#2"]["GPU Time (ns)"] == 110_000
    assert steps["ProfilerStep#1"]["GFLOP"] == pytest.approx((2 * 4096**3 + 1024**2) / 1e9)
    # MFU: the step's FLOPs over its wall time (1 ms) over the BF16 tensor cores' peak its GPU time ran in
    assert steps["ProfilerStep#1"]["Wall (ns)"] == 1_000_000
    assert steps["ProfilerStep#1"]["MFU (%)"] == pytest.approx(100 * (2 * 4096**3 + 1024**2) / 1e-3 / PEAK)
    phases = rows(efficiency_table(trace, EfficiencyOptions(by="phase", phases=("ProfilerStep#2",))), "Phase")
    assert list(phases) == ["ProfilerStep#2"] and phases["ProfilerStep#2"]["Kernels"] == 2
    with pytest.raises(tracekit.UsageError, match="none of forward, backward, optimizer found by name"):
        efficiency_table(trace, EfficiencyOptions(by="phase"))


def test_an_unknown_gpu_is_said_and_a_peaks_file_makes_it_known(tmp_path):
    """A GPU the table does not know gets no roofline, the reason on every row; a user's peaks file names it."""
    path = h100_trace(tmp_path / "t.json")
    text = path.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA Future GPU")
    path.write_text(text)
    unknown = efficiency_table(open_trace(path))
    mm = rows(unknown)["aten::mm"]
    assert mm["Roofline (%)"] != mm["Roofline (%)"] and "unknown GPU 'NVIDIA Future GPU'" in mm["Not Known"]
    assert mm["GFLOP"] == pytest.approx(137.438953472)  # what the trace says is still counted
    peaks = tmp_path / "peaks.json"
    future = {
        "key": "Future",
        "names": ["NVIDIA Future GPU"],
        "memory_bandwidth_gbs": 10_000,
        "tflops": {"BF16": {"tensor cores": 2000}, "FP32": {"CUDA cores": 100}},
        "source": "a test",
    }
    peaks.write_text(json.dumps({"gpus": [future]}))
    known = rows(efficiency_table(open_trace(path), EfficiencyOptions(peaks=str(peaks))))["aten::mm"]
    assert known["Roofline (%)"] == pytest.approx(100 * (137_438_953_472 / 2000e12 + 4_194_304 / 10e12) / 202e-6)


def _raw_gemm_rates(path: Path, operator: str) -> float:
    """Achieved TFLOP/s of every ``operator`` (aten::mm: [M, K] x [K, N]; aten::addmm: bias, [M, K], [K, N]),
    recomputed from the raw JSON without tracekit: 2 M K N per call over the GPU time of the kernels its
    launch calls (same thread, inside the operator) ran, matched by correlation id (cuBLAS's workspace memsets
    compute nothing)."""
    events = json.load(gzip.open(path, "rt"))["traceEvents"]
    operators = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == operator]
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    gpu_time = {}
    for e in events:
        if e.get("cat") == "kernel":
            key = e["args"]["correlation"]
            gpu_time[key] = gpu_time.get(key, 0.0) + float(e["dur"])
    flops = seconds = 0.0
    for op in operators:
        dims = op["args"]["Input Dims"]
        (m, k), (_, n) = (dims[0], dims[1]) if operator == "aten::mm" else (dims[1], dims[2])
        start, end = float(op["ts"]), float(op["ts"]) + float(op["dur"])
        mine = [
            call["args"]["correlation"]
            for call in launches
            if call["tid"] == op["tid"] and start <= float(call["ts"]) and float(call["ts"]) + float(call["dur"]) <= end
        ]
        time = sum(gpu_time.get(correlation, 0.0) for correlation in mine)
        if time:
            flops += 2 * m * k * n
            seconds += time * 1e-6
    return flops / seconds / 1e12


QWEN = SHARED_KINETO / "h100_qwen0.5b_inference.json.gz"


@pytest.mark.shared
@pytest.mark.parametrize("operator", ["aten::mm", "aten::addmm"])
def test_the_real_gemms_achieved_rate_equals_a_count_from_the_raw_json(operator):
    """Qwen on an H100 (BF16, record_shapes): the achieved TFLOP/s of its GEMM operators, recomputed by hand
    from the raw JSON, equals efficiency's within 0.5 % (the bar)."""
    if not QWEN.exists():
        pytest.skip(f"{QWEN} is absent (../shared not beside the project)")
    table = rows(efficiency_table(open_trace(QWEN)))
    mine = table[operator]["TFLOP/s"]
    assert mine == pytest.approx(_raw_gemm_rates(QWEN, operator), rel=0.005)
    assert table[operator]["Precision"] == "BF16" and table[operator]["Unit"] == "tensor cores"
    assert 40 < table[operator]["Roofline (%)"] < 80  # cuBLAS on an H100 at this size: well short of the peak


def test_an_nsys_export_with_emit_nvtx_shapes(tmp_path):
    """emit_nvtx(record_shapes=True) names operators with their input shapes and no dtypes: the FLOPs come
    from the shapes (2 x 4096^3), the bytes from the element size of the precision the GEMM kernel ran in
    (BF16 by its name: 3 x 4096^2 x 2 bytes). An A100 SXM4 80GB: BF16 tensor cores 312 TFLOP/s dense."""
    from helpers.nsys_builder import ExportBuilder

    from tracekit.analysis.hardware.gpu_peaks import match_gpu

    export = ExportBuilder("2026.2")
    export.gpu(0, "NVIDIA A100-SXM4-80GB", 108, 85_000_000_000, 8, 0)
    export.push_pop(1_000, 60_000, "aten::mm, seq = 1, op_id = 2, sizes = [[4096, 4096], [4096, 4096]]")
    gemm = "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn"
    export.kernel(
        100_000,
        600_000,
        gemm,
        launch_at=2_000,
        resources={"registersPerThread": 232, "staticSharedMemory": 0, "dynamicSharedMemory": 73728},
    )
    trace = open_trace(export.write(tmp_path / "e.sqlite"))
    mm = rows(efficiency_table(trace))["aten::mm"]
    assert mm["GFLOP"] == pytest.approx(2 * 4096**3 / 1e9) and mm["GB"] == pytest.approx(3 * 4096**2 * 2 / 1e9)
    a100 = match_gpu("NVIDIA A100-SXM4-80GB", 108, 85_000_000_000, "8.0")
    assert a100 is not None and a100.peak("BF16", "tensor cores") == pytest.approx(312e12)
    assert mm["Roofline (%)"] == pytest.approx(100 * 2 * 4096**3 / 312e12 / 500e-6)
    assert (mm["Precision"], mm["Unit"], mm["Bound"]) == ("BF16", "tensor cores", "compute")
    assert mm["Not Known"] == "dtype not recorded: bytes at the element size of the kernel's precision (100% of time)"


A100_LM = SHARED_KINETO.parent / "traces" / "a100_small_lm_trainstep_nsys2026.3.sqlite"


@pytest.mark.shared
def test_an_fp32_training_steps_gemms_from_emit_nvtx_names_counted_by_hand():
    """The small LM's train step on an A100 (nsys, emit_nvtx with shapes, FP32): its aten::bmm GEMMs' FLOPs
    are 2 B M K N summed over their range names, parsed here with the standard library; they ran on the
    CUDA cores at over 80 % of the FP32 peak (19.5 TFLOP/s) - the case where "half their time" was a guess."""
    import re
    import sqlite3

    if not A100_LM.exists():
        pytest.skip(f"{A100_LM} is absent (../shared not beside the project)")
    with sqlite3.connect(A100_LM) as connection:
        texts = [row[0] for row in connection.execute("SELECT text FROM NVTX_EVENTS WHERE text LIKE 'aten::bmm,%'")]
        texts += [
            row[0]
            for row in connection.execute(
                "SELECT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId WHERE s.value LIKE 'aten::bmm,%'"
            )
        ]
    flops = 0
    for text in texts:
        (b, m, k), (_, _, n) = (
            tuple(int(x) for x in dims.split(", ")) for dims in re.findall(r"\[(\d+, \d+, \d+)\]", text)[:2]
        )
        flops += 2 * b * m * k * n
    bmm = rows(efficiency_table(open_trace(A100_LM)))["aten::bmm"]
    assert bmm["Count"] == len(texts) == 327
    assert bmm["GFLOP"] == pytest.approx(flops / 1e9)
    assert (bmm["Precision"], bmm["Unit"], bmm["Bound"]) == ("FP32", "CUDA cores", "compute")
    achieved = bmm["TFLOP/s"] * 1e12  # over its kernels' time (GPU Time also holds the sets cuBLAS issues)
    assert flops / (bmm["GPU Time (ns)"] * 1e-9) <= achieved < 1.01 * flops / (bmm["GPU Time (ns)"] * 1e-9)
    # (the roofline share also holds the sets' few microseconds: within 0.2 %)
    assert bmm["Roofline (%)"] == pytest.approx(100 * achieved / 19.5e12, rel=2e-3) and bmm["Roofline (%)"] > 80


def test_the_roofline_picture_and_the_reports_section(cli, tmp_path):
    """The chart holds each group with FLOPs and bytes as a point (intensity, achieved TFLOP/s, ms) under the
    H100's FP32 CUDA-core and BF16 tensor-core roofs; --picture draws it; report gives it a section."""
    path = h100_trace(tmp_path / "t.json")
    chart = efficiency_table(open_trace(path)).charts["roofline"]
    points = {point[0]: point for point in chart.data["points"]}
    assert points["aten::mm"][1] == pytest.approx(2 * 4096**3 / (3 * 4096**2 * 2)) and points["aten::mm"][
        3
    ] == pytest.approx(0.202)
    assert [roof[:2] for roof in chart.data["roofs"]] == [
        ["H100 SXM FP32 CUDA cores", pytest.approx(66.9)],
        ["H100 SXM BF16 tensor cores", pytest.approx(989.4)],
    ]
    picture = tmp_path / "roofline.png"
    assert cli("efficiency", path, "--picture", picture).exit_code == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli("report", path, "-o", tmp_path / "report").exit_code == 0
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "### How close to the hardware" in markdown and "efficiency_roofline.png" in markdown


def test_many_inputs_add_up_exactly(tmp_path):
    """The same trace twice: every sum doubles, every rate and share stays; each input's rows follow."""
    first = h100_trace(tmp_path / "a.json")
    second = tmp_path / "b.json"
    second.write_bytes(first.read_bytes())
    alone = rows(tracekit.efficiency(first))["aten::mm"]
    result = tracekit.efficiency([first, second], workers=1)
    both = rows(result)["aten::mm"]
    assert (both["Count"], both["GPU Time (ns)"]) == (2 * alone["Count"], 2 * alone["GPU Time (ns)"])
    assert both["GFLOP"] == pytest.approx(2 * alone["GFLOP"]) and both["GB"] == pytest.approx(2 * alone["GB"])
    for column in ("TFLOP/s", "Roofline (%)", "Occupancy (%)", "Precision", "Bound"):
        assert both[column] == pytest.approx(alone[column]) if isinstance(alone[column], float) else alone[column]
    assert len(result["efficiency_by_run"]) == 2 * len(result["efficiency"]) and len(result["peaks"]) == 1
    steps = rows(tracekit.efficiency([first, second], by="step", workers=1), "Step")["ProfilerStep#1"]
    assert steps["Wall (ns)"] == 2_000_000 and steps["MFU (%)"] == pytest.approx(
        100 * (2 * 4096**3 + 1024**2) / 1e-3 / PEAK
    )


def test_the_kernel_summary_says_what_each_kernel_ran_on(cli, tmp_path):
    """kernels --hardware: the GEMM in BF16 on the tensor cores at 18.75 % occupancy (12 warps of 64); the add,
    with no matrix precision, at 100 % (16 blocks of 4 warps fill the SM's 64 warp slots)."""
    path = h100_trace(tmp_path / "t.json")
    table = tracekit.kernels(path, name="short", hardware=True)["kernels"].set_index("Name")
    gemm = table.loc[[name for name in table.index if name.startswith("sm90_xmma")][0]]
    assert (gemm["Precision"], gemm["Unit"], gemm["Occupancy (%)"]) == ("BF16", "tensor cores", pytest.approx(18.75))
    add = table.loc["vectorized_elementwise_kernel<CUDAFunctor_add>"]
    assert add["Precision"] is None and add["Occupancy (%)"] == pytest.approx(100.0)
    refused = cli("kernels", path, "--hardware", "--by", "category")
    assert refused.exit_code == 2 and "--by kernel" in refused.stderr


def test_ops_gives_the_operators_flops_where_shapes_are_recorded(tmp_path):
    """ops: aten::mm's 2 x 4096^3 FLOPs over its kernel's 200 us (the memset is a set, not a kernel); a trace
    without shapes keeps HolisticTraceAnalysis's columns alone."""
    table = tracekit.ops(h100_trace(tmp_path / "t.json"))["ops"].set_index("Operator")
    assert table.loc["aten::mm", "GFLOP"] == pytest.approx(2 * 4096**3 / 1e9)
    assert table.loc["aten::mm", "TFLOP/s"] == pytest.approx(2 * 4096**3 / 200e-6 / 1e12)
    assert table.loc["aten::addmm", "GFLOP"] == pytest.approx(2 * 2048 * 4096**2 / 1e9)
    plain = KinetoBuilder()
    plain.event("X", "cpu_op", "aten::mm", 100, 100, 10, 50)
    plain.launch("cudaLaunchKernel", 20, 5, 1).kernel(GEMM, 100, 200, 1)
    assert "GFLOP" not in tracekit.ops(plain.write(tmp_path / "plain.json"))["ops"]


def test_a_step_whose_gpu_work_outlasts_its_cpu_range_and_a_precision_without_a_peak(tmp_path):
    """The CPU leaves the step after 30 us, its GEMM runs from 100 to 300 us: the step's wall time is 300 us
    (its range's start to its last kernel's end), so MFU is 2 x 4096^3 / 300 us over the BF16 peak, never
    above the GEMM's own share. On an RTX 3080, whose BF16 tensor-core peak tracekit does not know, the GEMM
    gets no roofline (not the FP32 CUDA cores' far lower one), and says why."""
    trace = KinetoBuilder().device_limits(**H100_LIMITS)
    trace.annotation("ProfilerStep#1", 0, 30)
    trace.operator("aten::mm", 1, 20, [[4096, 4096], [4096, 4096]], [BF16, BF16])
    trace.launch("cudaLaunchKernel", 2, 5, 1).kernel(GEMM, 100, 200, 1, grid=(132, 1, 1), block=(384, 1, 1))
    path = trace.write(tmp_path / "async.json")
    step = rows(efficiency_table(open_trace(path), EfficiencyOptions(by="step")), "Step")["ProfilerStep#1"]
    assert step["Wall (ns)"] == 300_000
    assert step["MFU (%)"] == pytest.approx(100 * 2 * 4096**3 / 300e-6 / PEAK) and step["MFU (%)"] < 100
    rtx = path.read_text().replace('"NVIDIA H100 80GB HBM3"', '"NVIDIA GeForce RTX 3080"')
    rtx = rtx.replace('"numSms": 132', '"numSms": 68').replace(
        '"totalGlobalMem": 85000000000', '"totalGlobalMem": 10736893952'
    )
    rtx = rtx.replace('"computeMajor": 9', '"computeMajor": 8').replace('"computeMinor": 0', '"computeMinor": 6')
    (tmp_path / "rtx.json").write_text(rtx)
    mm = rows(efficiency_table(open_trace(tmp_path / "rtx.json")))["aten::mm"]
    assert mm["Roofline (%)"] != mm["Roofline (%)"] and mm["GFLOP"] == pytest.approx(2 * 4096**3 / 1e9)
    assert mm["Not Known"].startswith("no BF16 tensor cores peak known for the RTX 3080")


def test_an_operator_with_kernels_of_its_own_around_another_keeps_its_flops_less_theirs(tmp_path):
    """aten::mse_loss launches its subtract-and-square kernel and calls aten::mean, which launches its own: the
    mean's FLOPs are the mean's, the loss keeps its count less them (FLOPs add up), its bytes unknown."""
    from tracekit.analysis.hardware.op_counts import count_op

    trace = KinetoBuilder().device_limits(**H100_LIMITS)
    loss = [[1024, 1024], [1024, 1024], []], ["float", "float", "int"], ["", "", "1"]
    mean = [[1024, 1024], [], [], []], ["float", "", "", ""], ["", "", "", ""]
    trace.operator("aten::mse_loss", 10, 100, *loss)
    trace.launch("cudaLaunchKernel", 12, 5, 1).kernel("mse_kernel_cuda", 200, 20, 1)
    trace.operator("aten::mean", 40, 30, *mean)
    trace.launch("cudaLaunchKernel", 45, 5, 2).kernel("reduce_kernel", 230, 10, 2)
    table = rows(efficiency_table(open_trace(trace.write(tmp_path / "t.json"))))
    whole, inner = count_op("aten::mse_loss", *loss).flops, count_op("aten::mean", *mean).flops
    assert whole and inner and whole > inner
    assert table["aten::mean"]["GFLOP"] == pytest.approx(inner / 1e9)
    assert table["aten::mse_loss"]["GFLOP"] == pytest.approx((whole - inner) / 1e9)
    assert table["aten::mse_loss"]["Not Known"].startswith("bytes counted in the operators it calls")
