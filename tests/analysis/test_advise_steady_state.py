"""advise judges the steady state: one-time costs (setup ranges, context creation, module loading on first
launches) are apart, warm-up steps are left out, a cold first pass is said first; the window can be given or
the whole trace asked for. Built traces where the old ranking put a one-time cost first."""

from __future__ import annotations

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.analysis.primitives.one_time_names import is_setup_name
from tracekit.model.options import OptionError

MS, US = 1_000_000, 1_000
SGEMM = "ampere_sgemm_128x64_nn"


def gpu(builder: ExportBuilder) -> None:
    builder.gpu(0, "NVIDIA A100-SXM4-80GB", 108, 85_000_000_000, 8, 0)


def setup_then_loop(tmp_path, steps: int = 5):
    """init_model: 300 ms of pageable uploads (3 x 100 ms) between 0 and 400 ms; then ``steps`` "step" ranges of
    100 ms, each an FP32 sgemm of 90 ms launched at the step's start."""
    b = ExportBuilder("2026.2")
    gpu(b)
    b.push_pop(0, 400 * MS, "init_model")
    for index in range(3):
        start = (10 + index * 120) * MS
        b.memcpy(start, start + 100 * MS, copy_kind=1, size=1 << 30, src_kind=0, dst_kind=2, launch_at=start - US)
    for step in range(steps):
        begin = (500 + step * 100) * MS
        b.push_pop(begin, begin + 100 * MS, "step")
        b.kernel(begin + 5 * MS, begin + 95 * MS, SGEMM, launch_at=begin + US)
    return b.write(tmp_path / "setup.sqlite")


def findings(path, **options):
    result = tracekit.advise(path, **options)
    return result, result.table("findings")["Finding"].tolist()


def test_setup_copies_before_the_loop_are_one_time_and_fp32_is_first(tmp_path):
    """The old ranking: pageable copies (300 ms, all in init_model) first. Judged on the steps, FP32 matmul is
    first, the copies are gone from the findings, and the one-time table names init_model."""
    path = setup_then_loop(tmp_path)
    result, kinds = findings(path)
    assert kinds[0] == "fp32 matmul" and "pageable copies" not in kinds
    one_time = result.table("one-time").set_index("Kind")
    assert one_time.loc["setup range", "Time (ns)"] == 400 * MS
    assert one_time.loc["setup range", "Longest"] == "init_model (400.000 ms)"
    assert any(note.startswith("judged: the steady state, steps step #1 to step #5 (5 of 5)") for note in result.notes)
    _, whole = findings(path, whole_trace=True)
    assert whole[0] == "pageable copies"  # what it said before: one-time costs ranked with the rest


def test_a_long_first_step_is_warm_up(tmp_path):
    """Five steps; the first lasts 400 ms (autotuning, say), the others 100: it is warm-up, said, and left out."""
    b = ExportBuilder("2026.2")
    gpu(b)
    begin = 0
    for step in range(5):
        length = 400 * MS if step == 0 else 100 * MS
        b.push_pop(begin, begin + length, "step")
        b.kernel(begin + 5 * MS, begin + length - 5 * MS, SGEMM, launch_at=begin + US)
        begin += length
    result, _ = findings(b.write(tmp_path / "warm.sqlite"))
    judged = next(note for note in result.notes if note.startswith("judged:"))
    assert "steps step #2 to step #5 (4 of 5); step #1 was warm-up" in judged


def test_a_cold_first_pass_is_said_first(tmp_path):
    """One pass, no steps: the process's first call (cudaMalloc) takes 800 ms creating the context and the first
    launch of each of two kernels 200 ms (module loading): 1.2 s of the 1.5 s from its first call to its last
    GPU op, a cold start, said first."""
    trace = KinetoBuilder()
    trace.launch("cudaMalloc", 0, 800_000, 90)
    trace.launch("cudaLaunchKernel", 800_000, 200_000, 1).kernel("conv_kernel", 1_000_010, 100, 1)
    trace.launch("cudaLaunchKernel", 1_000_200, 200_000, 2).kernel("relu_kernel", 1_200_210, 100, 2)
    trace.launch("cudaLaunchKernel", 1_200_400, 10, 3).kernel("conv_kernel", 1_200_420, 100, 3)
    trace.launch("cudaLaunchKernel", 1_200_600, 10, 4).kernel("relu_kernel", 1_500_000, 100, 4)
    result, kinds = findings(trace.write(tmp_path / "cold.json"))
    assert kinds[0] == "cold start"
    cold = result.table("findings").iloc[0]
    assert "2 module loading" in cold["What"]
    one_time = result.table("one-time").set_index("Kind")
    assert one_time.loc["module loading", "Count"] == 2 and one_time.loc["module loading", "Time (ns)"] == 400 * MS


def test_a_first_call_whose_kernels_never_repeat_is_a_cold_start(tmp_path):
    """A benchmark's first call (nvFuser's, say): six kernels, each run once, the first launch of the first one
    20 ms (module loading), then 600 ms of host time between launches (compilation no range names): the
    one-time costs are 20 of 620 ms, but nothing repeats, so there is no steady state to judge: a cold start,
    said first (it read "host stall" first)."""
    trace = KinetoBuilder()
    trace.launch("cudaLaunchKernel", 0, 20_000, 1).kernel("k0", 20_010, 50, 1)
    for index in range(1, 6):
        at = 20_000 + index * 120_000
        trace.launch("cudaLaunchKernel", at, 10, index + 1).kernel(f"k{index}", at + 20, 50, index + 1)
    result, kinds = findings(trace.write(tmp_path / "first_call.json"))
    assert kinds[0] == "cold start" and "host stall" in kinds
    assert "its kernels do not repeat: 100 % of them ran once" in result.table("findings").iloc[0]["What"]
    judged = next(note for note in result.notes if note.startswith("judged:"))
    assert "a cold first pass (its kernels do not repeat" in judged


def test_a_host_stall_during_a_recompilation_is_a_one_time_cost(tmp_path):
    """Six "step" ranges of 100 ms, each a 10 ms bf16 GEMM launched at its start; the host launches the next
    step's after 90 ms idle (a host stall of 5 x 90 ms), except that step 4's GEMM waits a further 300 ms
    inside a "compile_graph" range (a recompilation): 300 ms of that gap are the compilation's, in the
    one-time table as recurring in the window; the host stall is the 450 ms of the others (it was 750)."""
    b = ExportBuilder("2026.2")
    gpu(b)
    gemm = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
    at = 0
    for step in range(6):
        if step == 4:
            b.push_pop(at, at + 300 * MS, "compile_graph")
            at += 300 * MS
        b.push_pop(at, at + 100 * MS, "step")
        b.kernel(at + 10 * US, at + 10 * MS + 10 * US, gemm, launch_at=at)
        at += 100 * MS
    result, kinds = findings(b.write(tmp_path / "recompile.sqlite"))
    stall = result.table("findings").set_index("Finding").loc["host stall"]
    assert stall["Recoverable (ns)"] == 450 * MS
    one_time = result.table("one-time").set_index("Kind")
    assert one_time.loc["setup range", "Repeats"] == "yes: once in the judged window"


def test_a_repeated_user_range_marks_the_iterations(tmp_path):
    """No ProfilerStep: "Optimizer.step#SGD.step" marks three iterations; setup before them is left out."""
    trace = KinetoBuilder()
    trace.annotation("model_init", 0, 50_000)
    for index in range(3):
        at = 100_000 + index * 10_000
        trace.launch("cudaLaunchKernel", at, 10, index + 1).kernel("gemm_kernel", at + 100, 5_000, index + 1)
        trace.annotation("Optimizer.step#SGD.step", at + 8_000, 500)
    result, _ = findings(trace.write(tmp_path / "marks.json"))
    judged = next(note for note in result.notes if note.startswith("judged:"))
    assert "the repeated range 'Optimizer.step#SGD.step'" in judged


def test_a_window_given_in_ms(tmp_path):
    """--window 500: judges the loop alone (ms from the first GPU op, which is the first copy at 10 ms)."""
    path = setup_then_loop(tmp_path)
    result, kinds = findings(path, window="480:")
    assert kinds[0] == "fp32 matmul" and "pageable copies" not in kinds
    assert any(note.startswith("judged: the window 480: ms") for note in result.notes)
    with pytest.raises(OptionError, match="START:END"):
        tracekit.advise(path, window="late")
    with pytest.raises(OptionError, match="end must come after"):
        tracekit.advise(path, window="9:3")


@pytest.mark.parametrize(
    ("name", "setup"),
    [
        ("init_model", True),
        ("Warm-up", True),
        ("warmup_iters", True),
        ("loadWeights", True),
        ("load_weights", True),
        ("model.compile", True),
        ("dataloader", False),
        ("initial_loss", False),
        ("__init__", False),
        ("{'traceMarker': ['a.py:153'], 'op': '__init__'}", False),
        ("step", False),
    ],
)
def test_setup_names(name, setup):
    assert is_setup_name(name) is setup


def test_a_critical_path_stops_at_its_steps_end_and_says_what_ran_past_it(tmp_path):
    """Three 10 ms steps; the median one's kernel runs from 11 to 35 ms, past its step's end: HTA's path (24.5 ms)
    is longer than the step (10 ms); advise's (tracekit's definition) counts the launch delay and the kernel up
    to the step's end (9.5 ms), and its note says what ran past the end."""
    b = ExportBuilder("2026.2")
    for index in range(3):
        t = index * 10 * MS
        b.push_pop(t, t + 10 * MS, "step")
        b.kernel(t + MS, t + (25 if index == 1 else 8) * MS, "gemm_kernel", launch_at=t + MS // 2)
    path = b.write(tmp_path / "long_path.sqlite")
    result = tracekit.advise(path, whole_trace=True)
    row = result["critical-path"].iloc[0]
    assert (row["Step"], row["Wall (ns)"], row["Path (ns)"]) == ("step #2", 10 * MS, 9_500_000)
    assert (row["GPU Compute (ns)"], row["Launch Overhead (ns)"], row["Bound By"]) == (9 * MS, MS // 2, "GPU Compute")
    said = next(note for note in result.notes if note.startswith("the critical path of step #2"))
    assert "is 95 % GPU Compute" in said
    assert "the GPU work step #2 launched ran on 15.000 ms past its end; that time is left out" in said
    hta = tracekit.critical_path(path, step="2", definition="hta")["steps"].iloc[0]
    assert hta["Path (ns)"] == 24_500_000
