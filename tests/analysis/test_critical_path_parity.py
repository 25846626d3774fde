"""`tracekit critical-path --definition hta --as-hta` against HolisticTraceAnalysis 0.5's critical_path_analysis on every
torch.profiler trace in ../shared where HTA runs: the same path (as many edges), the same length, and the
same time per bound, exactly (µs).

HTA needs two fixes to run under pandas 3 (helpers/hta_patches.py; without the second it silently loses
every stream-wait and event-sync edge). It does not run on v100_resnet50_torch1.8 (its operators'
category, "Operator", is not a node in HTA's graph, and HTA stops with an AssertionError at the first
launch edge): tracekit's path there is checked in test_critical_path_real.py instead. Definitional
differences, none of which changes these traces' figures: HTA keys streams by number alone (tracekit by
device and stream) and counts a path edge of -1 µs (an op HTA's rounding left ending before it starts)
as -1 in its breakdown and as 0 in the path's length; tracekit counts it as 0 in both (the breakdown here
clips HTA's to 0 to compare).
"""

from __future__ import annotations

import logging

import pytest
from helpers.hta_loaded import hta_analysis
from helpers.paths import SHARED

from tracekit.analysis.critical_path.analysis import BOUNDS, step_paths
from tracekit.analysis.critical_path.critical_path_command import CriticalPathOptions
from tracekit.sources import open_trace

pytestmark = pytest.mark.filterwarnings("ignore")
KINETO = SHARED / "kineto"
BOUND_BY = {
    "cpu_bound": "CPU",
    "gpu_compute_bound": "GPU Compute",
    "gpu_communication_bound": "Communication",
    "gpu_kernel_kernel_overhead": "Kernel-Kernel Overhead",
    "gpu_kernel_launch_overhead": "Launch Overhead",
}
# (file, HTA's annotation and instance, tracekit's step and step range for the same window)
RUNS = [
    ("a100_alexnet_cuda_sync.json.gz", "", 0, None, None),
    (
        "a100_alexnet_cuda_sync.json.gz",
        "measure|forward",
        0,
        "1",
        "[param|pytorch.model.alex_net|0|0|0|measure|forward]",
    ),
    ("a100_ddp_rank0of2_nccl.json.gz", "ProfilerStep", 0, "4", None),
    ("a100_ddp_rank0of2_nccl.json.gz", "ProfilerStep", 1, "5", None),
    ("gp100_steps_gpu_user_annotation.json.gz", "", 0, None, None),
    ("h100_qwen0.5b_inference.json.gz", "ProfilerStep", 0, "6", None),
    ("mi250_rocm6.2_toy.json.gz", "ProfilerStep", 0, "1", None),
    ("v100_resnet_torch2.3_ns_precision.pt.trace.json.gz", "ProfilerStep", 0, "101", None),
    ("v100_resnet_torch2.3_ns_precision.pt.trace.json.gz", "ProfilerStep", 1, "102", None),
    *[(f"v100_dlrm_8ranks/rank{rank}.pt.trace.json", "ProfilerStep", 0, "10", None) for rank in range(8)],
]
_loaded: dict[str, object] = {}


def hta_path(name: str, annotation: str, instance: int, tmp_path_factory) -> tuple[int, int, dict[str, int]]:
    """(edges on HTA's path, its length, µs per bound) for one window."""
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")
    from helpers.hta_patches import hta_under_pandas_3

    logging.getLogger("hta").setLevel(logging.ERROR)
    if name not in _loaded:
        folder = tmp_path_factory.mktemp("hta")
        (folder / (KINETO / name).name).symlink_to(KINETO / name)
        with pytest.MonkeyPatch.context() as patch:  # HTA's default reading, whatever a test before set
            patch.delenv("HTA_DISABLE_NS_ROUNDING", raising=False)
            _loaded[name] = hta_analysis(folder)
    analysis = _loaded[name]
    rank = next(iter(analysis.t.traces))  # pyright: ignore[reportAttributeAccessIssue]
    with hta_under_pandas_3():
        graph, success = analysis.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)  # pyright: ignore[reportAttributeAccessIssue]
        breakdown = graph.get_critical_path_breakdown()
    assert success
    nodes = graph.critical_path_nodes
    length = sum(graph.edges[u, v]["weight"] for u, v in zip(nodes[:-1], nodes[1:], strict=False))
    clipped = breakdown["duration"].clip(lower=0)
    by_bound = clipped.groupby(breakdown["bound_by"]).sum()
    return (
        len(nodes) - 1,
        int(length),
        {BOUND_BY[key]: int(value) for key, value in by_bound.items() if key in BOUND_BY},
    )


@pytest.mark.parametrize("run", RUNS, ids=lambda run: f"{run[0].split('/')[-1]}:{run[1] or 'whole'}:{run[2]}")
def test_the_critical_path_equals_htas(run, tmp_path_factory):
    name, annotation, instance, step, step_range = run
    if not (KINETO / name).exists():
        pytest.skip(f"{KINETO / name} is not here")
    edges, length, by_bound = hta_path(name, annotation, instance, tmp_path_factory)
    options = CriticalPathOptions(step=step, step_range=step_range, as_hta=True, definition="hta")
    (path,), _ = step_paths(open_trace(KINETO / name), options)
    assert len(path.weight) == edges
    assert path.length == length * 1000
    ours = dict(zip(BOUNDS, (int(value) // 1000 for value in path.time_by_bound()), strict=True))
    assert ours == {bound: by_bound.get(bound, 0) for bound in BOUNDS}
