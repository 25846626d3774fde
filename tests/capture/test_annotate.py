"""tracekit.annotate: ranges and steps that torch.profiler (and nsys) record, free without a profiler."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from tracekit.sources import open_trace

torch = pytest.importorskip("torch", reason="the annotation tests run torch programs (pip install torch)")

PROGRAM = textwrap.dedent(
    """
    import torch
    from tracekit import annotate

    weights = torch.ones(64, 64)

    @annotate.range("optimizer")
    def update():
        weights.mul_(0.999)

    for step in annotate.steps(range(7), warmup=3):
        with annotate.range("forward"):
            with annotate.range("matmul"):
                loss = (weights @ weights).sum()
        update()
    """
)


def run_program(tmp_path, source: str, **environment: str) -> subprocess.CompletedProcess:
    program = tmp_path / "program.py"
    program.write_text(source)
    env = {key: value for key, value in os.environ.items() if not key.startswith("TRACEKIT_")}
    return subprocess.run(
        [sys.executable, str(program)],
        env={**env, **environment},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_without_a_profiler_nothing_is_imported_or_recorded(tmp_path):
    result = run_program(
        tmp_path,
        textwrap.dedent(
            """
        import sys
        from tracekit import annotate
        with annotate.range("forward"):
            pass
        for _ in annotate.steps(range(3), warmup=1):
            pass
        assert not {"torch", "pandas", "numpy", "nvtx"} & set(sys.modules), sorted(sys.modules)
        """
        ),
    )
    assert result.returncode == 0, result.stderr


def test_steps_under_torch_profiler_record_only_measured_steps(tmp_path):
    trace_path = tmp_path / "trace.pt.trace.json.gz"
    result = run_program(tmp_path, PROGRAM, TRACEKIT_PROFILER="torch", TRACEKIT_TORCH_TRACE=str(trace_path))
    assert result.returncode == 0, result.stderr
    ranges = open_trace(trace_path).ranges
    user = ranges.loc[ranges["domain"] == ""]
    counts = Counter(user["name"].astype(str))
    # 7 items, 3 of them warm-up; the measured steps inside one capture window
    assert counts == {"tracekit-capture": 1, "step": 4, "forward": 4, "matmul": 4, "optimizer": 4}
    depth = user.groupby(user["name"].astype(str))["depth"].max().to_dict()
    assert depth == {"tracekit-capture": 0, "step": 1, "forward": 2, "matmul": 3, "optimizer": 2}
    assert not list(tmp_path.glob("*.partial*"))  # the trace was written whole


def test_ranges_inside_a_running_torch_profiler(tmp_path):
    from tracekit import annotate

    @annotate.range("recurse")
    def recurse(depth: int) -> int:
        return 0 if depth == 0 else 1 + recurse(depth - 1)

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        with annotate.range("outer"):
            assert recurse(3) == 3
    path = tmp_path / "t.json"
    profiler.export_chrome_trace(str(path))
    ranges = open_trace(path).ranges
    names = ranges.loc[ranges["domain"] == ""]
    assert Counter(names["name"].astype(str)) == {"recurse": 4, "outer": 1}
    assert sorted(names["depth"].tolist()) == [0, 1, 2, 3, 4]


def test_ranges_do_not_break_a_compiled_graph():
    from tracekit import annotate

    def step(x):
        with annotate.range("inside"):
            return torch.relu(x) * 2

    explained = torch._dynamo.explain(step)(torch.ones(4))
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_only_the_first_steps_loop_is_captured(tmp_path):
    """A training loop then an evaluation loop: the first is the capture (as nsys's capture range
    ends it), the second neither overwrites the trace nor fails; a nested loop is inside the first."""
    trace_path = tmp_path / "trace.json"
    result = run_program(
        tmp_path,
        textwrap.dedent(
            """
        import torch
        from tracekit import annotate
        for _ in annotate.steps(range(4), warmup=1, name="train"):
            for _ in annotate.steps(range(2), name="inner"):
                torch.ones(4) + 1
        for _ in annotate.steps(range(3), name="eval"):
            torch.ones(4) * 2
        """
        ),
        TRACEKIT_PROFILER="torch",
        TRACEKIT_TORCH_TRACE=str(trace_path),
    )
    assert result.returncode == 0, result.stderr
    ranges = open_trace(trace_path).ranges
    names = Counter(ranges.loc[ranges["domain"] == "", "name"].astype(str))
    assert names == {"tracekit-capture": 1, "train": 3, "inner": 6}
