"""The one-time costs a steady state never pays again, beyond setup ranges, context creation and module loading:
library setup named in its own NVTX domain, cuDNN's and torch.compile's autotuning, torch.compile's compilation,
a communicator's first collective; and the one-time table says whether a kind recurs in the judged window.
Built traces with exact times: each kind was missed, or called something else, before."""

from __future__ import annotations

from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.analysis.primitives.one_time import one_time_costs

MS, US = 1_000_000, 1_000
SGEMM = "ampere_sgemm_128x64_nn"


def costs(path) -> list[tuple]:
    """(kind, what, start, end) of each one-time cost of the trace at ``path``, by start."""
    found = one_time_costs(tracekit.open_trace(path))
    return list(zip(found["kind"], found["what"], found["start"].tolist(), found["end"].tolist()))


def test_library_ranges_in_their_own_domain_are_library_setup(tmp_path):
    """NCCL and cuDNN name their ranges in their NVTX domains ("NCCL:ncclCommInitRank"): communicator setup was
    taken for a setup range by its words (comm init), cuDNN's algorithm search was not found at all."""
    b = ExportBuilder("2026.2")
    b.domain(1, "NCCL")
    b.domain(2, "cuDNN")
    b.push_pop(0, 100 * MS, "ncclCommInitRank", domain_id=1)
    b.push_pop(120 * MS, 150 * MS, "cudnnFindConvolutionForwardAlgorithmEx", domain_id=2)
    b.push_pop(150 * MS, 151 * MS, "cudnnGetConvolutionBackwardDataAlgorithm_v7", domain_id=2)
    b.kernel(200 * MS, 300 * MS, SGEMM, launch_at=200 * MS - US)
    assert costs(b.write(tmp_path / "libraries.sqlite")) == [
        ("library setup", "NCCL:ncclCommInitRank", 0, 100 * MS),
        ("autotuning", "cuDNN:cudnnFindConvolutionForwardAlgorithmEx", 120 * MS, 150 * MS),
        ("autotuning", "cuDNN:cudnnGetConvolutionBackwardDataAlgorithm_v7", 150 * MS, 151 * MS),
    ]


def convolution_steps(tmp_path, waits: int = 4):
    """Four 10 ms ProfilerSteps, each with one aten::cudnn_convolution. In the first (1 to 6 ms) cuDNN's benchmark
    mode runs ``waits`` candidate algorithms, a kernel each, and waits for each (cudaEventSynchronize); later
    convolutions (1 to 1.2 ms into their step) run the algorithm it chose, and never wait."""
    trace = KinetoBuilder()
    correlation = 0
    for step in range(4):
        at = step * 10_000
        trace.annotation(f"ProfilerStep#{step}", at, 10_000)
        trials = waits if step == 0 else 1
        trace.event("X", "cpu_op", "aten::cudnn_convolution", 100, 100, at + 1_000, 5_000 if step == 0 else 200)
        for trial in range(trials):
            correlation += 1
            launch = at + 1_000 + trial * 1_000
            algorithm = trial if step == 0 else 2
            trace.launch("cudaLaunchKernel", launch, 10, correlation)
            trace.kernel(f"cudnn_conv_algo_{algorithm}", launch + 20, 400, correlation)
            if step == 0:
                trace.launch("cudaEventSynchronize", launch + 500, 300, 10_000 + correlation)
    return trace.write(tmp_path / "conv.json")


def test_cudnn_benchmark_trials_are_autotuning(tmp_path):
    """The first convolution waited 4 times: its 5 ms are autotuning; ProfilerStep#0, half of it autotuning, is
    warm-up. Three waits or fewer inside a convolution are not the benchmark's."""
    path = convolution_steps(tmp_path)
    ((kind, what, start, end),) = costs(path)
    assert kind == "autotuning" and end - start == 5 * MS
    assert what == "aten::cudnn_convolution: waited for the GPU 4 times inside (cuDNN benchmark mode timing algorithms)"
    judged = next(note for note in tracekit.advise(path).notes if note.startswith("judged:"))
    assert "ProfilerStep#1 to ProfilerStep#3 (3 of 4); ProfilerStep#0 was warm-up" in judged
    assert costs(convolution_steps(tmp_path, waits=2)) == []


def test_torch_compile_compilation_and_autotuning(tmp_path):
    """torch 2.x names its compile-time ranges "KEY (dynamo_timed)": _compile.compile_inner (0 to 300 ms, holding
    GraphLowering.run) is one compilation; Triton's autotuning at the first call (310 to 340 ms) is autotuning;
    the ranges that run compiled code on every call (Torch-Compiled Region, CompiledFunction) are not one-time;
    a range named compile_fx is compilation, no longer a setup range."""
    trace = KinetoBuilder()
    trace.annotation("_compile.compile_inner (dynamo_timed)", 0, 300_000)
    trace.annotation("GraphLowering.run (dynamo_timed)", 50_000, 50_000)
    trace.annotation("compile_fx", 100_000, 100_000, tid=101)
    for call in range(3):
        at = 305_000 + call * 40_000
        trace.annotation("Torch-Compiled Region: 0/0", at, 38_000)
        trace.annotation("CompiledFunction", at + 1_000, 36_000)
        if call == 0:
            trace.annotation("CachingAutotuner.benchmark_all_configs (dynamo_timed)", at + 5_000, 30_000)
        trace.launch("cudaLaunchKernel", at + 2_000, 10, call + 1).kernel(
            "triton_poi_fused_add_0", at + 2_100, 100, call + 1
        )
    assert costs(trace.write(tmp_path / "compiled.json")) == [
        ("compilation", "_compile.compile_inner (dynamo_timed)", 0, 300 * MS),
        ("compilation", "compile_fx", 100 * MS, 200 * MS),
        ("autotuning", "CachingAutotuner.benchmark_all_configs (dynamo_timed)", 310 * MS, 340 * MS),
    ]


def test_a_communicators_first_collective(tmp_path):
    """ProcessGroupNCCL makes the communicator inside the first all_reduce: 300 ms, where the next three take
    100 us. A broadcast called once is not judged (no later call to compare); nor is a first call only 5 times
    as long as the later ones."""
    trace = KinetoBuilder()
    trace.annotation("nccl:all_reduce", 0, 300_000)
    for call in range(3):
        trace.annotation("nccl:all_reduce", 310_000 + call * 1_000, 100)
        trace.annotation("nccl:reduce_scatter", 320_000 + call * 1_000, 500 if call == 0 else 100)
    trace.annotation("nccl:broadcast", 330_000, 50_000)
    trace.launch("cudaLaunchKernel", 400_000, 10, 1).kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 400_020, 50, 1)
    assert costs(trace.write(tmp_path / "nccl.json")) == [
        (
            "first collective",
            "first nccl:all_reduce of the process (its communicator set up or connected in it)",
            0,
            300 * MS,
        )
    ]


def test_nccls_own_first_collective_range(tmp_path):
    b = ExportBuilder("2026.2")
    b.domain(1, "NCCL")
    for call, length in enumerate((250 * MS, US, US)):
        b.push_pop(call * 300 * MS, call * 300 * MS + length, "ncclAllReduce", domain_id=1)
    b.kernel(700 * MS, 701 * MS, SGEMM, launch_at=700 * MS - US)
    assert [cost[:2] for cost in costs(b.write(tmp_path / "nccl.sqlite"))] == [
        ("first collective", "first NCCL:ncclAllReduce of the process (its communicator set up or connected in it)")
    ]


def compiled_steps(tmp_path):
    """Six 100 ms "step" ranges from 0, a 90 ms sgemm each; torch.compile compiles in the first (0 to 50 ms) and
    recompiles in the fifth (400 to 420 ms)."""
    b = ExportBuilder("2026.2")
    for step in range(6):
        begin = step * 100 * MS
        b.push_pop(begin, begin + 100 * MS, "step")
        b.kernel(begin + 5 * MS, begin + 95 * MS, SGEMM, launch_at=begin + US)
    b.push_pop(0, 50 * MS, "_compile.compile_inner (dynamo_timed)")
    b.push_pop(400 * MS, 420 * MS, "_compile.compile_inner (dynamo_timed)")
    return b.write(tmp_path / "recompiles.sqlite")


def test_the_one_time_table_says_what_recurs_in_the_judged_window(tmp_path):
    """Step #1 compiles: warm-up. The recompilation in step #5 is inside the steady state: the table says the kind
    recurs there, and a note calls it a steady-state cost."""
    result = tracekit.advise(compiled_steps(tmp_path))
    table = result.table("one-time").set_index("Kind")
    assert table.loc["compilation", ["Count", "Time (ns)", "In Window", "Repeats"]].tolist() == [
        2,
        70 * MS,
        1,
        "yes: once in the judged window",
    ]
    assert (
        "one-time costs recur inside the judged window: compilation once (20.000 ms); the steady state pays them "
        "again, a steady-state cost" in "\n".join(result.notes)
    )
    whole = tracekit.advise(compiled_steps(tmp_path), whole_trace=True).table("one-time").set_index("Kind")
    assert whole.loc["compilation", ["In Window", "Repeats"]].tolist() == [2, "n/a: the whole trace is judged"]


def test_setup_before_the_loop_does_not_recur(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 400 * MS, "init_model")
    for step in range(3):
        begin = (500 + step * 100) * MS
        b.push_pop(begin, begin + 100 * MS, "step")
        b.kernel(begin + 5 * MS, begin + 95 * MS, SGEMM, launch_at=begin + US)
    result = tracekit.advise(b.write(tmp_path / "setup.sqlite"))
    assert result.table("one-time").set_index("Kind").loc["setup range", ["In Window", "Repeats"]].tolist() == [0, "no"]
    assert not any(note.startswith("one-time costs recur") for note in result.notes)
