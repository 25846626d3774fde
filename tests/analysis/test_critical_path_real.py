"""The critical path on every real trace in ../shared, checked where HolisticTraceAnalysis cannot be.

HTA 0.5 stops on v100_resnet50_torch1.8 (its operators' category is not a node in HTA's graph), and it has
no nsys reader. There, and on every trace, the path is checked against what it must be:
- its time by bound adds up to its length, and its GPU time is at most the GPU time launched in the step;
- with no GPU-side synchronization in the trace (all but alexnet), a path that never reaches the GPU is
  the longest CPU chain of one thread, computed independently here: the union of the thread's operator
  and call intervals in the window (nested calls lie inside their operator), less the blocking calls'
  own time (their wait is the GPU's).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.paths import SHARED

from tracekit.analysis.critical_path.analysis import BOUNDS, CPU, step_paths
from tracekit.analysis.critical_path.critical_path_command import CriticalPathOptions
from tracekit.analysis.critical_path.events import BLOCKING_CALLS
from tracekit.analysis.primitives.hta import API_VERSION
from tracekit.analysis.primitives.intervals import merge_intervals
from tracekit.sources import open_trace

KINETO = SHARED / "kineto"
TRACES = sorted(KINETO.glob("*.json.gz")) + sorted((KINETO / "v100_dlrm_8ranks").glob("rank[03].pt.trace.json"))
TRACES += sorted((SHARED / "traces").glob("*.sqlite"))
# ddp: its three steps are bound by the CPU (HTA agrees on the two its step filter keeps)
CPU_BOUND = {"a100_ddp_rank0of2_nccl.json.gz": 3}
STEPS = {"v100_resnet50_torch1.8.pt.trace.json.gz": 6, "a100_ddp_rank0of2_nccl.json.gz": 3}


def cpu_chain(trace, start: int, end: int, pid: int) -> int:
    """The longest chain of CPU time on one thread of ``pid`` in [start, end] (see the module docstring)."""
    ranges, calls = trace.ranges, trace.launches
    names = ranges["name"].astype(str)
    operators = ranges.loc[((ranges["domain"].astype(str) == "cpu_op") & ~names.str.contains("#")).to_numpy()]
    best = 0
    for frame_pid, tid in set(zip(calls["pid"], calls["tid"], strict=True)) | set(
        zip(operators["pid"], operators["tid"], strict=True)
    ):
        if frame_pid != pid:
            continue
        parts = [
            frame.loc[
                (
                    (frame["pid"] == pid)
                    & (frame["tid"] == tid)
                    & (frame["start"] >= start)
                    & (frame["start"] <= end)
                    & (frame["duration"] > 0)
                ).to_numpy()
            ]
            for frame in (operators, calls)
        ]
        low, high = merge_intervals(
            np.concatenate([part["start"].to_numpy() for part in parts]),
            np.concatenate([part["end"].to_numpy() for part in parts]),
        )
        api = np.asarray([API_VERSION.sub("", str(name)) for name in parts[1]["name"]], dtype=object)
        blocked = parts[1]["duration"].to_numpy()[np.isin(api, list(BLOCKING_CALLS))].sum()
        best = max(best, int((high - low).sum() - blocked))
    return best


@pytest.mark.skipif(not TRACES, reason=f"real traces not available: {SHARED}")
@pytest.mark.parametrize("path", TRACES, ids=lambda path: path.name)
def test_the_path_adds_up_and_a_cpu_only_path_is_the_longest_cpu_chain(path):
    trace = open_trace(path)
    paths, events = step_paths(trace, CriticalPathOptions())
    assert paths
    for step in paths:
        by_bound = step.time_by_bound()
        assert by_bound.sum() == step.length
        launched_gpu = events.end - events.start
        assert by_bound[1] + by_bound[2] <= launched_gpu[events.role >= 3].sum()
        if trace.optional("gpu_syncs") is not None and len(trace.optional("gpu_syncs")):  # type: ignore[arg-type]
            continue
        if step.length and by_bound[BOUNDS.index(CPU)] == step.length and step.pid is not None:
            assert step.length == cpu_chain(trace, step.start, step.end, step.pid), step.label
    if path.name in STEPS:
        assert len(paths) == STEPS[path.name] and all(step.length > 0 for step in paths)
    if path.name in CPU_BOUND:
        assert all(step.time_by_bound()[BOUNDS.index(CPU)] == step.length > 0 for step in paths)
