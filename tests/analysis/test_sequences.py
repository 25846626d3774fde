"""`tracekit sequences`: the kernel sequences a trace repeats, on built traces with exact numbers (torch.profiler
and nsys exports), and HolisticTraceAnalysis's per-operator sequences (--operator) on built traces; the parity
with HTA 0.5's get_frequent_cuda_kernel_sequences is in test_sequences_parity.py."""

from __future__ import annotations

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED
from helpers.sequence_trace import windows_trace

import tracekit

US = 1000


def test_windows_of_consecutive_kernels_on_a_stream(tmp_path):
    table = tracekit.sequences(windows_trace(tmp_path))["sequences"]
    assert table["Sequence"].tolist() == ["A -> B -> C"]  # B C A and C A B are seen once; the copy breaks 3 windows
    row = table.iloc[0]
    assert (row["Count"], row["Streams"], row["Kernel Time (ns)"], row["Mean Time (ns)"]) == (4, 2, 120 * US, 30 * US)
    assert row["Gaps (ns)"] == (40 + 40 + 40 + 50 - 120) * US  # first start to last end, less the kernels
    assert row["Kernel Share (%)"] == pytest.approx(100.0)  # every kernel is in one of its windows
    assert (row["From"], row["From Share (%)"]) == ("layer", 75.0)


def test_min_count_length_and_top(tmp_path):
    path = windows_trace(tmp_path)
    every = tracekit.sequences(path, min_count=1)["sequences"].set_index("Sequence")["Count"].to_dict()
    assert every == {"A -> B -> C": 4, "B -> C -> A": 1, "C -> A -> B": 1}
    pairs = tracekit.sequences(path, length=2, min_count=1)["sequences"].set_index("Sequence")["Count"].to_dict()
    assert pairs == {"A -> B": 4, "B -> C": 4, "C -> A": 1}  # C then the copy, the copy then A: no pair
    assert len(tracekit.sequences(path, length=2, min_count=1, top=2)["sequences"]) == 2
    assert tracekit.sequences(path, length=4)["sequences"].empty  # A B C A once only


def test_an_nsys_export_with_nvtx_ranges(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 100 * US, "attention")
    for repeat in range(3):  # softmax then dropout, three times, launched inside "attention"
        base = 1000 * US + repeat * 100 * US
        b.kernel(base, base + 20 * US, "softmax_kernel<float>", launch_at=(10 + 20 * repeat) * US)
        b.kernel(base + 30 * US, base + 40 * US, "dropout_kernel", launch_at=(15 + 20 * repeat) * US)
    table = tracekit.sequences(b.write(tmp_path / "attention.sqlite"), length=2)["sequences"].set_index("Sequence")
    assert table["Count"].to_dict() == {"softmax_kernel -> dropout_kernel": 3, "dropout_kernel -> softmax_kernel": 2}
    row = table.loc["softmax_kernel -> dropout_kernel"]
    assert (row["Kernel Time (ns)"], row["Gaps (ns)"], row["From"]) == (90 * US, 30 * US, "attention")


def operators_trace(path):
    """Main thread 100: ProfilerStep#1 (0-1000 µs) holds three aten::linear (gemm 50 µs, bias 10, act 10; the
    third runs act on stream 8 before bias, behind a Stream Wait Event), the first two around an aten::addmm,
    an aten::mm (mm_k x3, 20 µs each) and "## backward ##" (500-900). Backward thread 200: evaluate_function
    (600-700) holds another aten::mm (mm_k x3)."""
    b = KinetoBuilder()
    b.annotation("ProfilerStep#1", 0, 1000).annotation("## backward ##", 500, 400)
    correlation = 0

    def launch(at, name, start, duration, stream=7, tid=100):
        nonlocal correlation
        correlation += 1
        b.launch("cudaLaunchKernel", at, 2, correlation=correlation, tid=tid)
        b.kernel(name, start, duration, correlation=correlation, stream=stream)

    for begin, gpu in ((10, 1000), (100, 1100)):
        b.annotation("aten::linear", begin, 40, cat="cpu_op").annotation("aten::addmm", begin + 5, 30, cat="cpu_op")
        for at, name, start, duration in ((10, "gemm", 0, 50), (20, "bias", 60, 10), (30, "act", 80, 10)):
            launch(begin + at, name, gpu + start, duration)
    b.annotation("aten::linear", 200, 40, cat="cpu_op")
    for at, name, start, duration, stream in (
        (210, "gemm", 1200, 50, 7),
        (220, "bias", 1260, 10, 7),
        (230, "act", 1205, 10, 8),
    ):
        launch(at, name, start, duration, stream)
    correlation += 1
    b.launch("cudaStreamWaitEvent", 235, 2, correlation=correlation).sync("Stream Wait Event", 1250, 1, correlation)
    b.annotation("aten::mm", 300, 40, cat="cpu_op")
    for at, start in ((310, 1300), (320, 1330), (330, 1360)):
        launch(at, "mm_k", start, 20)
    b.annotation("autograd::engine::evaluate_function: MmBackward0", 600, 100, tid=200, cat="cpu_op")
    b.annotation("aten::mm", 610, 80, tid=200, cat="cpu_op")
    for at, start in ((620, 1600), (630, 1630), (640, 1660)):
        launch(at, "mm_k", start, 20, tid=200)
    return b.write(path / "operators.json")


def patterns(path, **options):
    table = tracekit.sequences(path, min_count=1, **options)["sequences"]
    return {
        (row["Operator"], row["Sequence"]): (
            row["Count"],
            row["Kernel Time (ns)"] // US,
            row["Operator Time (ns)"] // US,
        )
        for row in table.to_dict("records")
    }


def test_operator_sequences_of_the_outermost_instances(tmp_path):
    path = operators_trace(tmp_path)
    # aten::addmm sits inside aten::linear: counted as part of it; each thread's aten::mm counts
    assert patterns(path, operator="aten::") == {
        ("aten::linear", "gemm -> bias -> act"): (2, 140, 80),
        ("aten::linear", "gemm -> act -> bias"): (1, 70, 40),
        ("aten::mm", "mm_k -> mm_k -> mm_k"): (2, 120, 120),
    }
    assert patterns(path, operator="aten::addmm") == {("aten::addmm", "gemm -> bias -> act"): (2, 140, 60)}
    assert patterns(path, operator="aten::linear", length=4) == {}  # none launched 4 GPU ops


def test_operator_sequences_as_hta(tmp_path):
    path = operators_trace(tmp_path)
    # HTA: the smallest depth only (the backward aten::mm hangs under "## backward ##": depth 3, not 1), and
    # the Stream Wait Event the third linear's call made is one of its GPU rows
    assert patterns(path, operator="aten::", as_hta=True) == {
        ("aten::linear", "gemm -> bias -> act"): (2, 140, 80),
        ("aten::linear", "gemm -> act -> Stream Wait Event -> bias"): (1, 71, 40),
        ("aten::mm", "mm_k -> mm_k -> mm_k"): (1, 60, 40),
    }
    # the step holds the backward thread's kernels too, as HTA's call graph links them
    step = "gemm -> bias -> act -> gemm -> bias -> act -> gemm -> act -> bias -> mm_k -> mm_k -> mm_k"
    assert patterns(path, operator="ProfilerStep") == {("ProfilerStep#1", step): (1, 270, 1000)}
    linked = step.replace("gemm -> act -> bias", "gemm -> act -> Stream Wait Event -> bias") + " -> mm_k" * 3
    assert patterns(path, operator="ProfilerStep", as_hta=True) == {("ProfilerStep#1", linked): (1, 331, 1000)}


def test_errors_are_one_line(tmp_path, cli):
    path = operators_trace(tmp_path)
    for arguments, expected in (
        (["--operator", "aten::nothing"], "no operator or range's name contains 'aten::nothing'"),
        (["--as-hta"], "--as-hta applies to --operator"),
        (["--length", "65"], "--length is at most 64 kernels"),
        (["--length", "0"], "--length"),
    ):
        result = cli("sequences", path, *arguments)
        assert result.exit_code != 0 and expected in result.output.strip().splitlines()[-1], (arguments, result.output)
        assert "Traceback" not in result.output


NSYS_EXPORTS = sorted((SHARED / "traces").glob("*.sqlite")) if (SHARED / "traces").is_dir() else []


@pytest.mark.skipif(not NSYS_EXPORTS, reason="real nsys exports not available")
@pytest.mark.parametrize("path", NSYS_EXPORTS, ids=lambda path: path.name)
def test_every_real_nsys_export(path):
    trace = tracekit.open_trace(path)
    kernels = trace.gpu_ops.loc[(trace.gpu_ops["kind"] == "kernel").to_numpy()]
    if kernels.empty:
        with pytest.raises(tracekit.TracekitError, match="no kernels"):
            tracekit.sequences(trace)
        return
    table = tracekit.sequences(trace, length=2, min_count=1, top=10**6)["sequences"]
    # counted independently: every two consecutive ops of a stream that are both kernels form one window
    ops = trace.gpu_ops.sort_values(["device", "stream", "start"], kind="stable")
    kernel = (ops["kind"] == "kernel").to_numpy()
    same = (ops["device"].to_numpy()[1:] == ops["device"].to_numpy()[:-1]) & (
        ops["stream"].to_numpy()[1:] == ops["stream"].to_numpy()[:-1]
    )
    pairs = same & kernel[1:] & kernel[:-1]
    duration = ops["duration"].to_numpy()
    assert table["Count"].sum() == pairs.sum()
    assert table["Kernel Time (ns)"].sum() == (duration[1:][pairs] + duration[:-1][pairs]).sum()
    assert ((table["From Share (%)"] > 0) & (table["From Share (%)"] <= 100)).all()


def test_a_window_no_one_range_launched_names_the_first_kernels(tmp_path):
    b = KinetoBuilder()
    b.annotation("norm", 0, 10).annotation("act", 10, 10)
    for correlation, (at, name, start) in enumerate(((2, "A", 100), (5, "B", 120), (12, "C", 140)), start=1):
        b.launch("cudaLaunchKernel", at, 1, correlation=correlation).kernel(name, start, 10, correlation=correlation)
    row = tracekit.sequences(b.write(tmp_path / "two.json"), min_count=1)["sequences"].iloc[0]
    assert (row["Sequence"], row["From"], row["From Share (%)"]) == ("A -> B -> C", "norm (first kernel's)", 100.0)


def test_the_report_lists_the_sequences(tmp_path, cli):
    result = cli("report", windows_trace(tmp_path), "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "Kernel sequences seen most often" in text and "tracekit sequences" in text
    assert "| A -&gt; B -&gt; C |" in text  # (">" escaped: a name is never markup)


def test_launches_on_a_thread_without_ranges_and_ranges_that_start_together(tmp_path):
    # the launches' thread (200) has no range: no range launched them, and syncs and ops say so too
    b = KinetoBuilder()
    b.annotation("elsewhere", 0, 100, tid=100)
    for correlation, (name, start) in enumerate(
        (("A", 100), ("B", 120), ("C", 140), ("A", 160), ("B", 180), ("C", 200)), start=1
    ):
        b.launch("cudaLaunchKernel", correlation * 2, 1, correlation=correlation, tid=200)
        b.kernel(name, start, 10, correlation=correlation)
    b.launch("cudaDeviceSynchronize", 20, 5, correlation=99, tid=200)
    path = b.write(tmp_path / "thread.json")
    assert tracekit.sequences(path)["sequences"].iloc[0]["From"] == "(no range)"
    assert tracekit.syncs(path)["syncs"]["Range"].tolist() == ["(no range)"]
    # "inner" written before "outer", both starting at 0: the innermost covering range is still "inner"
    b = KinetoBuilder()
    b.annotation("inner", 0, 50).annotation("outer", 0, 100)
    for correlation, (name, start) in enumerate((("A", 100), ("B", 120), ("C", 140)), start=1):
        b.launch("cudaLaunchKernel", 4 + correlation, 1, correlation=correlation).kernel(
            name, start, 10, correlation=correlation
        )
    assert tracekit.sequences(b.write(tmp_path / "ties.json"), min_count=1)["sequences"]["From"].tolist() == ["inner"]


def test_every_instance_in_the_last_step_and_no_launch_calls(tmp_path):
    b = KinetoBuilder()
    b.annotation("ProfilerStep#1", 0, 100).annotation("ProfilerStep#2", 100, 100)
    b.annotation("aten::only_last", 110, 50, cat="cpu_op")
    for correlation, (at, start) in enumerate(((120, 1000), (130, 1020), (140, 1040)), start=1):
        b.launch("cudaLaunchKernel", at, 2, correlation=correlation).kernel("k", start, 10, correlation=correlation)
    path = b.write(tmp_path / "last.json")
    result = tracekit.sequences(path, operator="only_last", as_hta=True, drop_last_step=True, min_count=1)
    assert result["sequences"].empty and any("no instance launched 3 GPU ops" in note for note in result.notes)
    assert len(tracekit.sequences(path, operator="only_last", min_count=1)["sequences"]) == 1
    # kernels without any launch call, and two steps
    b = KinetoBuilder()
    b.annotation("ProfilerStep#1", 0, 100).annotation("ProfilerStep#2", 100, 100)
    for correlation, start in enumerate((1000, 1020, 1040, 1060), start=1):
        b.kernel("k", start, 10, correlation=correlation)
    path = b.write(tmp_path / "nocall.json")
    assert tracekit.sequences(path)["sequences"].iloc[0]["From"] == "(launching call not in trace)"
    result = tracekit.sequences(path, operator="Step", as_hta=True, drop_last_step=True, min_count=1)
    assert result["sequences"].empty
