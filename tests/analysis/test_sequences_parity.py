"""`tracekit sequences --operator NAME --as-hta --drop-last-step --name demangled` against HolisticTraceAnalysis
0.5's get_frequent_cuda_kernel_sequences (min_pattern_len 3) on every torch.profiler trace in ../shared where
HTA runs: the same patterns, counts, GPU time and operator time (within 1 µs).

The operator names asked: "ProfilerStep#" (a step's whole sequence, the backward thread's kernels included
as HTA's call graph hangs them under the step), "autograd::engine" and the three operators with most
instances (tracekit's `ops`). HTA needs a fix to build its call graph under pandas 3
(helpers/hta_patches.py). Definitional differences, written in docs/guide/waits.md too: HTA leaves out the
last profiler step (--drop-last-step); it keeps only the instances at the smallest call depth, counting
python_function events (which tracekit does not read; on the Qwen trace, recorded with Python stacks, the
names asked pick the same instances) and giving GPU-side annotations depth -1 (so a name a GPU-side
annotation holds, ProfilerStep# on the Qwen trace, gives nothing: tracekit --as-hta too). It does not
run on v100_resnet50_torch1.8 (string thread ids): there, and everywhere, tracekit's default sequences are
also checked against a plain loop over the instances (``naive``).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from helpers.hta_loaded import hta_analysis
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.waits.ops import kernels_per_operator
from tracekit.analysis.waits.ops_command import OpsOptions
from tracekit.sources import open_trace

pytestmark = pytest.mark.filterwarnings("ignore")
KINETO = SHARED / "kineto"
TRACES = (
    (
        [path for path in sorted(KINETO.glob("*.json.gz"))]
        + sorted((KINETO / "v100_dlrm_8ranks").glob("rank[05].pt.trace.json"))
    )
    if KINETO.is_dir()
    else []
)
HTA_FAILS = {"v100_resnet50_torch1.8.pt.trace.json.gz": "HTA's call graph takes string thread ids for numbers"}
US = 1000


def operator_names(trace) -> list[str]:
    ops = kernels_per_operator(trace, OpsOptions(top=10**6))["ops"]
    busiest = ops.sort_values(["Instances", "Operator"], ascending=[False, True]).head(3)["Operator"].tolist()
    present = trace.ranges["name"].astype(str).unique()
    return [name for name in ("ProfilerStep#", "autograd::engine") if any(name in text for text in present)] + busiest


def ours(trace, operator: str, **options) -> dict[tuple[str, str], tuple[int, float, float]]:
    table = tracekit.sequences(trace, operator=operator, min_count=1, top=10**6, **options)["sequences"]
    return {
        (row["Operator"], row["Sequence"]): (row["Count"], row["Kernel Time (ns)"] / US, row["Operator Time (ns)"] / US)
        for row in table.to_dict("records")
    }


@pytest.mark.skipif(not TRACES, reason=f"real traces not available: {KINETO}")
@pytest.mark.parametrize("path", [path for path in TRACES if path.name not in HTA_FAILS], ids=lambda path: path.name)
def test_frequent_sequences_equal_htas(path, tmp_path, monkeypatch):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")
    import hta.analyzers.cuda_kernel_analysis as analysis  # pyright: ignore[reportMissingImports]  (parity extra)
    from helpers.hta_patches import hta_under_pandas_3

    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")  # HTA's times as float µs, as its users read them
    logging.getLogger("hta").setLevel(logging.CRITICAL)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / path.name).symlink_to(path)
    trace_analysis = hta_analysis(tmp_path / "in")
    rank = trace_analysis.t.get_ranks()[0]
    # the table only: HTA also writes the whole trace again with the patterns overlaid (seconds per name)
    monkeypatch.setattr(
        analysis.CudaKernelAnalysis,
        "_overlay_frequent_patterns_with_trace",
        classmethod(lambda cls, *args, **keywords: None),
    )
    monkeypatch.setattr(trace_analysis.t, "write_raw_trace", lambda *args, **keywords: None)
    graphs: dict = {}  # one call graph per trace: HTA builds it anew for every operator name
    real_graph = analysis.CallGraph
    monkeypatch.setattr(analysis, "CallGraph", lambda t, ranks: graphs.setdefault("graph", real_graph(t, ranks)))
    trace = open_trace(path)
    compared = 0
    for name in operator_names(trace):
        with hta_under_pandas_3():
            frame = trace_analysis.get_frequent_cuda_kernel_sequences(
                name, str(tmp_path), min_pattern_len=3, rank=rank, top_k=1, visualize=False
            )
        theirs = {}
        for row in frame.to_dict("records") if frame is not None else []:
            parts = row["pattern"].split("|")  # the operator, then its GPU ops
            theirs[(parts[0], " -> ".join(parts[1:]))] = (
                row["count"],
                row["GPU kernel duration (us)"],
                row["CPU op duration (us)"],
            )
        mine = ours(trace, name, as_hta=True, drop_last_step=True, name="demangled")
        assert set(mine) == set(theirs), name
        for key, (count, gpu, cpu) in theirs.items():
            assert mine[key][0] == count, (name, key[0])
            assert mine[key][1] == pytest.approx(gpu, abs=1.0) and mine[key][2] == pytest.approx(cpu, abs=1.0)
        compared += len(theirs)
    if path.name.startswith(("a100_ddp", "v100_resnet_torch2.3", "v100_dlrm", "a100_alexnet")):
        assert compared > 0  # traces where HTA finds sequences for these names: the comparison is not empty


def naive(trace, name: str) -> dict[tuple[str, str], int]:
    """The patterns of the outermost ranges containing ``name`` (kernels, copies and sets their thread
    launched inside them, in GPU order, three or more), a loop per instance: the independent check.
    The loop runs per thread on its instances' and calls' arrays, and an instance looks only at the calls
    starting within it (found by bisection): the rows, in the order, that masks over the whole trace give."""
    ranges = trace.ranges.loc[(trace.ranges["domain"].astype(str) != "gpu").to_numpy()]
    shown = ranges["name"].astype(str).str.removeprefix("cpu_op:")
    matching = ranges.loc[shown.str.contains(name, regex=False).to_numpy()]
    calls, ops = trace.launches, trace.gpu_ops
    joined = ops.merge(
        calls[["pid", "tid", "correlation_id", "start", "end"]], on=["pid", "correlation_id"], suffixes=("", "_call")
    )
    assert (joined["end_call"] >= joined["start_call"]).all()  # so a call ending in a range starts in it
    found: dict[tuple[str, str], int] = {}
    for (pid, tid), instances in matching.groupby(["pid", "tid"], sort=False):
        starts, ends = instances["start"].to_numpy(), instances["end"].to_numpy()
        launched = joined.loc[((joined["pid"] == pid) & (joined["tid"] == tid)).to_numpy()]
        call_starts, call_ends = launched["start_call"].to_numpy(), launched["end_call"].to_numpy()
        op_starts, op_names = launched["start"].to_numpy(), launched["short_name"].astype(str).to_numpy()
        by_call_start = np.argsort(call_starts, kind="stable")
        sorted_call_starts = call_starts[by_call_start]
        for row in instances.itertuples():
            enclosing = np.flatnonzero((starts <= row.start) & (ends >= row.end))
            if len(enclosing) > 1:  # inside another instance (the same bounds count once: the first kept)
                first = instances.iloc[enclosing].sort_values(["start", "depth"]).iloc[0]
                if first.name != row.Index:
                    continue
            first_call = np.searchsorted(sorted_call_starts, row.start, side="left")
            past_last = np.searchsorted(sorted_call_starts, row.end, side="right")
            calls = np.sort(by_call_start[first_call:past_last])  # the calls starting in [start, end]
            calls = calls[call_ends[calls] <= row.end]
            if len(calls) >= 3:
                in_gpu_order = calls[np.argsort(op_starts[calls], kind="stable")]
                key = (str(row.name).removeprefix("cpu_op:"), " -> ".join(op_names[in_gpu_order]))
                found[key] = found.get(key, 0) + 1
    return found


@pytest.mark.skipif(not TRACES, reason=f"real traces not available: {KINETO}")
@pytest.mark.parametrize("path", TRACES, ids=lambda path: path.name)
def test_operator_sequences_equal_a_plain_loop(path):
    trace = open_trace(path)
    for name in operator_names(trace)[-3:]:  # operators: their instances are few enough for a loop
        mine = {key: value[0] for key, value in ours(trace, name).items()}
        assert mine == naive(trace, name), name
