"""torch.profiler's python_function events (with_stack=True) read into the optional table python_calls, apart
from the ranges (no analysis counts them); kept by a window of the trace and by the table cache."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.paths import SHARED_KINETO

from tracekit.analysis.primitives.trace_window import trace_window
from tracekit.sources import cache as cache_module
from tracekit.sources import open_trace

WITH_STACK = SHARED_KINETO / "h100_qwen0.5b_inference.json.gz"


def with_stack() -> KinetoBuilder:
    """A forward annotation and an operator on thread 100, under three Python calls (a root, its child, an
    nn.Module's call); thread 200 has a Python call only."""
    b = KinetoBuilder()
    b.python_call("train.py(10): <module>", "1000.000", "100.000", python_id=1, parent=None)
    b.python_call("model.py(42): forward", "1010.500", "50.250", python_id=2, parent=1)
    b.python_call("nn.Module: Linear_0", "1020.000", "20.000", python_id=3, parent=2, module=77)
    b.annotation("forward", "1011.000", "40.000")
    b.operator("aten::mm", "1021.000", "10.000", [[2, 3], [3, 4]], ["float", "float"], flops=48)
    b.python_call("threading.py(1032): _bootstrap", "1005.000", "3.000", python_id=9, parent=None, tid=200)
    return b


def test_python_function_events_are_python_calls_not_ranges(tmp_path):
    trace = open_trace(with_stack().write(tmp_path / "t.json"))
    calls = trace.optional("python_calls")
    assert calls is not None
    assert calls.to_dict("list") == {
        "start": [1_000_000, 1_010_500, 1_020_000, 1_005_000],
        "end": [1_100_000, 1_060_750, 1_040_000, 1_008_000],
        "duration": [100_000, 50_250, 20_000, 3_000],
        "name": [
            "train.py(10): <module>",
            "model.py(42): forward",
            "nn.Module: Linear_0",
            "threading.py(1032): _bootstrap",
        ],
        "pid": [100, 100, 100, 100],
        "tid": [100, 100, 100, 200],
        "python_id": [1, 2, 3, 9],
        "parent_id": [-1, 1, 2, -1],  # null: a root
        "module_id": [-1, -1, 77, -1],
    }
    assert sorted(trace.ranges["name"].astype(str)) == ["cpu_op:aten::mm", "forward"]  # analyses see no change


def test_a_trace_without_stacks_has_an_empty_table(tmp_path):
    b = KinetoBuilder()
    b.annotation("forward", "1011.000", "40.000")
    calls = open_trace(b.write(tmp_path / "t.json")).optional("python_calls")
    assert calls is not None and calls.empty and list(calls.columns)[-3:] == ["python_id", "parent_id", "module_id"]


def test_a_window_keeps_the_calls_that_overlap_it(tmp_path):
    """As ranges: the calls around the window (the root, forward) and in it (the module's), not the one before."""
    window = trace_window(open_trace(with_stack().write(tmp_path / "t.json")), 1_015_000, 1_030_000)
    calls = window.optional("python_calls")
    assert calls is not None and calls["python_id"].tolist() == [1, 2, 3]


def test_the_table_cache_keeps_them(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")  # cache even a tiny trace
    path = with_stack().write(tmp_path / "t.json")
    first = open_trace(path).optional("python_calls")
    assert first is not None
    assert (path.with_name(path.name + cache_module.SUFFIX) / "python_calls").is_dir()
    second = open_trace(path).optional("python_calls")
    assert second is not None
    pd.testing.assert_frame_equal(second, first, check_categorical=False)


@pytest.mark.shared
def test_a_real_trace_s_python_calls_are_its_python_function_events():
    if not WITH_STACK.exists():
        pytest.skip(f"{WITH_STACK} is absent")
    with gzip.open(WITH_STACK, "rt") as handle:
        events = [event for event in json.load(handle)["traceEvents"] if event.get("cat") == "python_function"]
    calls = open_trace(WITH_STACK).optional("python_calls")
    assert calls is not None and len(calls) == len(events) == 4_262
    assert calls["python_id"].tolist() == [event["args"]["Python id"] for event in events]
    parents = [event["args"]["Python parent id"] for event in events]
    assert calls["parent_id"].tolist() == [-1 if parent is None else parent for parent in parents]
    assert int((calls["module_id"] >= 0).sum()) == sum("Python module id" in event["args"] for event in events)
