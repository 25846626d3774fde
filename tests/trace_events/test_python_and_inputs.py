"""The timeline holds what torch.profiler recorded beyond ranges: with_stack's Python calls on their thread's
track (category python_function, their ids as args), and each CPU operator's recorded inputs on its slice
("Input Dims", "Input type", "Concrete Inputs" as JSON arrays, "flops"), in the JSON and the .pftrace alike;
tracekit reads its own JSON back into the same python_calls and op_shapes."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
from helpers.paths import SHARED_KINETO
from helpers.perfetto_decode import from_json, from_protobuf

import tracekit
from tracekit.model.trace import Trace

from ..sources.test_kineto_python_calls import WITH_STACK, with_stack

PRETTY_DIMS = [[8, 1024], [], []]  # an operator written as a pretty-printed trace writes it (line breaks)


def built(tmp_path):
    b = with_stack()
    pretty = {"Input Dims": PRETTY_DIMS, "Input type": ["float", "Scalar", ""], "Concrete Inputs": ["", "1", ""]}
    b.raw(
        '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 100, "tid": 100, "ts": 1033.000, "dur": 2.000,'
        f' "args": {json.dumps(pretty, indent=8)}}}'
    )
    return b.write(tmp_path / "source.json")


def events(path, category: str) -> list[dict]:
    with open(path) as handle:
        found = [event for event in json.load(handle)["traceEvents"] if event.get("cat") == category]
    return sorted(found, key=lambda event: event["ts"])


def test_python_calls_are_slices_on_their_thread_s_track(tmp_path):
    path = tracekit.timeline(built(tmp_path), tmp_path / "t.json")
    calls = [
        {key: event[key] for key in ("name", "pid", "tid", "ts", "dur", "args")}
        for event in events(path, "python_function")
    ]
    assert calls == [
        {"name": "train.py(10): <module>", "pid": 100, "tid": 100, "ts": 1000, "dur": 100, "args": {"Python id": 1}},
        {
            "name": "threading.py(1032): _bootstrap",
            "pid": 100,
            "tid": 200,
            "ts": 1005,
            "dur": 3,
            "args": {"Python id": 9},
        },
        {
            "name": "model.py(42): forward",
            "pid": 100,
            "tid": 100,
            "ts": 1010.5,
            "dur": 50.25,
            "args": {"Python id": 2, "Python parent id": 1},
        },
        {
            "name": "nn.Module: Linear_0",
            "pid": 100,
            "tid": 100,
            "ts": 1020,
            "dur": 20,
            "args": {"Python id": 3, "Python parent id": 2, "Python module id": 77},
        },
    ]
    assert from_json(path)["names"][(100, 200)] == "thread 200"  # a thread with Python calls alone has its track


def test_operators_carry_their_recorded_inputs_as_json_arrays(tmp_path):
    path = tracekit.timeline(built(tmp_path), tmp_path / "t.json")
    assert [event["args"] for event in events(path, "cpu_op")] == [
        {
            "Input Dims": [[2, 3], [3, 4]],
            "Input type": ["float", "float"],
            "Concrete Inputs": ["", ""],
            "flops": 48,
        },
        {"Input Dims": PRETTY_DIMS, "Input type": ["float", "Scalar", ""], "Concrete Inputs": ["", "1", ""]},
    ]
    assert "forward" in {event["name"] for event in events(path, "user_annotation")}  # an annotation has none
    assert not events(path, "user_annotation")[0].get("args")


def test_the_pftrace_holds_the_same_calls_and_inputs(tmp_path):
    source = built(tmp_path)
    protobuf = from_protobuf(tracekit.timeline(source, tmp_path / "t.pftrace"))
    assert protobuf == from_json(tracekit.timeline(source, tmp_path / "t.json"))
    mm = next(row for row in protobuf["slices"] if row[5] == "aten::mm")
    assert dict(mm[6]) == {  # the .pftrace holds the arrays as their text
        "Input Dims": "[[2, 3], [3, 4]]",
        "Input type": '["float", "float"]',
        "Concrete Inputs": '["", ""]',
        "flops": 48,
    }
    module = next(row for row in protobuf["slices"] if row[5] == "nn.Module: Linear_0")
    assert module[:5] == (100, 100, 1_020_000, 20_000, "python_function")
    assert dict(module[6]) == {"Python id": 3, "Python parent id": 2, "Python module id": 77}
    assert protobuf["names"][(100, 200)] == "thread 200"


def table(trace: Trace, name: str) -> pd.DataFrame:
    frame = trace.optional(name)
    assert frame is not None, f"no {name} table"
    return frame


def _inputs(trace) -> pd.DataFrame:
    """op_shapes by each operator's start and name (range ids are the file's order), the texts as values."""
    shapes = table(trace, "op_shapes").merge(trace.ranges[["range_id", "start", "name"]], on="range_id")
    texts = {
        column: shapes[column].astype(str).map(lambda text: json.loads(text) if text else None)
        for column in ("dims", "types", "concrete")
    }
    frame = pd.DataFrame(
        {"start": shapes["start"], "name": shapes["name"].astype(str), **texts, "flops": shapes["flops"]}
    )
    return frame.sort_values(["start", "name"]).reset_index(drop=True)


def _calls(trace) -> pd.DataFrame:
    calls = table(trace, "python_calls")
    return calls.assign(name=calls["name"].astype(str)).sort_values(["start", "tid"]).reset_index(drop=True)


def assert_read_back(source, back) -> None:
    pd.testing.assert_frame_equal(_calls(back), _calls(source))
    pd.testing.assert_frame_equal(_inputs(back), _inputs(source))


def test_tracekit_reads_its_own_timeline_back(tmp_path):
    source = tracekit.open_trace(built(tmp_path))
    back = tracekit.open_trace(tracekit.timeline(source, tmp_path / "back.json"))
    assert_read_back(source, back)
    inputs = _inputs(back)
    assert inputs["dims"].tolist() == [[[2, 3], [3, 4]], PRETTY_DIMS] and inputs["flops"].tolist()[0] == 48
    # the pretty-printed operator's text is one line now
    assert sorted(table(back, "op_shapes")["dims"].astype(str)) == ["[[2, 3], [3, 4]]", "[[8, 1024], [], []]"]


@pytest.mark.shared
def test_a_real_trace_s_calls_and_inputs_are_all_there(tmp_path):
    if not WITH_STACK.exists():
        pytest.skip(f"{WITH_STACK} is absent")
    with gzip.open(WITH_STACK, "rt") as handle:
        recorded = json.load(handle)["traceEvents"]
    source = tracekit.open_trace(WITH_STACK)
    path = tracekit.timeline(source, tmp_path / "t.json")
    written = {category: events(path, category) for category in ("python_function", "cpu_op")}
    assert len(written["python_function"]) == sum(event.get("cat") == "python_function" for event in recorded)
    with_inputs = [event for event in recorded if event.get("cat") == "cpu_op" and "Input Dims" in event["args"]]
    assert sum("Input Dims" in event["args"] for event in written["cpu_op"]) == len(with_inputs) == 4_186
    assert sorted(json.dumps(event["args"]["Input Dims"]) for event in written["cpu_op"]) == sorted(
        json.dumps(event["args"]["Input Dims"]) for event in with_inputs
    )
    assert_read_back(source, tracekit.open_trace(path))


def test_dlrm_s_inputs_in_both_formats(tmp_path):
    """A trace recorded with record_shapes and no stacks (one DLRM rank): every operator's inputs (the NCCL
    annotations' too), no Python."""
    path = SHARED_KINETO / "v100_dlrm_8ranks" / "rank0.pt.trace.json"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    source = tracekit.open_trace(path)
    timeline = tracekit.timeline(source, tmp_path / "t.json")
    assert sum(
        "Input Dims" in event.get("args", {})
        for event in [*events(timeline, "cpu_op"), *events(timeline, "user_annotation")]
    ) == len(table(source, "op_shapes"))
    assert not events(timeline, "python_function")
