"""`tracekit ops`: per CPU operator its kernels and the delays to the first, on built traces with exact
numbers and against HolisticTraceAnalysis 0.5's get_aten_op_kernels_and_delay on the torch.profiler traces
in ../shared (with --name demangled --drop-last-step: HTA's kernel names and step window)."""

from __future__ import annotations

import logging

import pytest
from helpers.hta_loaded import hta_analysis
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.waits.ops import kernels_per_operator
from tracekit.analysis.waits.ops_command import OpsOptions
from tracekit.sources import open_trace

US = 1000
KINETO = SHARED / "kineto"
# mi250: HTA's launch pattern misses hipLaunchKernel (it stops with a KeyError); tracekit reads it
TRACES = (
    (
        [path for path in sorted(KINETO.glob("*.json.gz")) if not path.name.startswith("mi250")]
        + sorted((KINETO / "v100_dlrm_8ranks").glob("rank[05].pt.trace.json"))
    )
    if KINETO.is_dir()
    else []
)


def built(path):
    """aten::linear (0-100 µs) holds aten::mm (10-60), which launches gemm at 20 (runs 200-300) and
    bias_add at 40 (runs 300-310); aten::relu (100-130) launches relu at 110 (runs 320-330); a call under
    no operator (150) is not counted."""
    b = KinetoBuilder()
    b.annotation("aten::linear", 0, 100, cat="cpu_op").annotation("aten::mm", 10, 50, cat="cpu_op")
    b.launch("cudaLaunchKernel", 20, 5, correlation=1).kernel("gemm", 200, 100, correlation=1)
    b.launch("cudaLaunchKernel", 40, 5, correlation=2).kernel("bias_add", 300, 10, correlation=2)
    b.annotation("aten::relu", 100, 30, cat="cpu_op")
    b.launch("cudaLaunchKernel", 110, 5, correlation=3).kernel("relu", 320, 10, correlation=3)
    b.launch("cudaLaunchKernel", 150, 5, correlation=4).kernel("lonely", 340, 10, correlation=4)
    return b.write(path / "ops.json")


def test_each_operators_kernels_and_first_delays(tmp_path):
    result = tracekit.ops(built(tmp_path))
    rows = {row["Operator"]: row for row in result["ops"].to_dict("records")}
    assert set(rows) == {"aten::mm", "aten::relu"}  # aten::linear launched nothing itself
    mm = rows["aten::mm"]
    assert (mm["Instances"], mm["Kernels"], mm["Kernel Time (ns)"]) == (1, 2, 110 * US)
    assert (mm["Launch Delay (ns)"], mm["Runtime Delay (ns)"], mm["Op To Kernel (ns)"]) == (10 * US, 180 * US, 190 * US)
    relu = rows["aten::relu"]
    assert (relu["Launch Delay (ns)"], relu["Runtime Delay (ns)"]) == (10 * US, 210 * US)
    sequences = result["sequences"].set_index("Operator")
    assert sequences.loc["aten::mm", "Kernels"] == "gemm -> bias_add" and sequences.loc["aten::mm", "Count"] == 1


def test_emit_nvtx_ranges_are_the_operators_of_an_nsys_export(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 50 * US, "aten::mm, seq = 1, op_id = 1")
    b.kernel(200 * US, 300 * US, "gemm", launch_at=20 * US)
    row = tracekit.ops(b.write(tmp_path / "ops.sqlite"))["ops"].iloc[0]
    assert (row["Operator"], row["Kernels"], row["Launch Delay (ns)"], row["Runtime Delay (ns)"]) == (
        "aten::mm",
        1,
        20 * US,
        180 * US,
    )


@pytest.mark.skipif(not TRACES, reason=f"real traces not available: {KINETO}")
@pytest.mark.parametrize("path", TRACES, ids=lambda path: path.name)
def test_the_kernel_sequences_equal_htas(path, tmp_path, monkeypatch):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")
    import hta.analyzers.cuda_kernel_analysis as analysis  # pyright: ignore[reportMissingImports]  (parity extra)

    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")  # HTA's times as float µs, as its users read them
    monkeypatch.setattr(
        analysis.CudaKernelAnalysis, "visualize_aten_op_kernels_and_overhead", classmethod(lambda cls, *args: None)
    )  # plotly's figure.show() opens a browser
    logging.getLogger("hta").setLevel(logging.ERROR)
    (tmp_path / path.name).symlink_to(path)
    trace_analysis = hta_analysis(tmp_path)
    rank = trace_analysis.t.get_ranks()[0]
    theirs = trace_analysis.get_aten_op_kernels_and_delay(ranks=[rank])[rank]
    ours = kernels_per_operator(open_trace(path), OpsOptions(top=10**6, name="demangled", drop_last_step=True))[
        "sequences"
    ]
    ours = ours.set_index(["Operator", "Kernels"])
    assert len(ours) == len(theirs)
    for row in theirs.to_dict("records"):
        mine = ours.loc[(row["aten_op_name"], row["kernel_sequence"])]
        assert mine["Count"] == row["occurrence_count"]
        # HTA reads times as float64 µs (0.25 µs apart at epoch values) and rounds means to 0.001 µs
        assert mine["Launch Delay (ns)"] / US == pytest.approx(row["avg_aten_op_launch_delay"], abs=0.25)
        assert mine["Runtime Delay (ns)"] / US == pytest.approx(row["avg_runtime_delay"], abs=0.25)
