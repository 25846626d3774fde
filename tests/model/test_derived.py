"""Per-trace derived tables: one typed accessor each, keyed by its inputs, and nothing a caller does to a
returned frame or array reaches the next caller's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.analysis.kernels.summary import kernel_table
from tracekit.analysis.primitives.categories import op_categories
from tracekit.analysis.primitives.copies import copy_details
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.phases import choose_phases
from tracekit.analysis.ranges.breakdown import phase_intervals
from tracekit.analysis.waits.idle import idle_gaps
from tracekit.model.derived import per_trace
from tracekit.model.trace import Trace


@pytest.fixture
def trace(tmp_path) -> Trace:
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "forward")
    b.kernel(100, 200, "gemm_kernel", launch_at=50)
    b.kernel(300, 450, "elementwise_kernel", launch_at=250)
    b.kernel(600, 700, "gemm_kernel", launch_at=550)
    b.memcpy(800, 900, launch_at=750)
    return tracekit.open_trace(b.write(tmp_path / "t.sqlite"))


def test_a_returned_frame_changed_leaves_the_derived_table_as_it_was(trace):
    before = kernel_table(trace)
    expected = before.copy(deep=True)
    before.loc[0, "Instances"] = 999
    before["Name"] = "changed"
    before.iloc[1, 1] = -1
    assert kernel_table(trace).equals(expected)


@pytest.mark.parametrize("accessor", [copy_details, lambda trace: trace.optional("copies")], ids=["copies", "optional"])
def test_a_derived_frame_cannot_be_changed_through_its_arrays(trace, accessor):
    frame = accessor(trace)
    assert len(frame) == 1
    expected = frame.copy(deep=True)
    with pytest.raises(ValueError, match="read-only"):
        frame["bytes"].to_numpy()[0] = 0
    frame.loc[0, "bytes"] = 0
    frame["duration"] = 0
    assert accessor(trace).equals(expected)


def test_a_copy_of_gaps_is_changed_alone(trace):
    gaps = idle_gaps(trace)
    expected = gaps.copy(deep=True)
    gaps.loc[:, "Idle (ns)"] = 0
    assert idle_gaps(trace).equals(expected)


def test_derived_arrays_are_read_only(trace):
    categories = op_categories(trace)
    with pytest.raises(ValueError, match="read-only"):
        categories[0] = 3
    launches = op_launches(trace)
    assert launches.found.all()
    with pytest.raises(ValueError, match="read-only"):
        launches.start[0] = 0
    intervals = phase_intervals(trace, ["forward"])
    with pytest.raises(TypeError):
        intervals["forward"] = (np.zeros(0), np.zeros(0))  # type: ignore[index]
    starts, inside = intervals["forward"]
    with pytest.raises(ValueError, match="read-only"):
        inside[0] = -1
    assert starts.tolist() == [0] and inside.tolist() == [0, 0, 0, 0]


def test_an_accessor_is_keyed_by_its_inputs_as_bound(trace):
    calls = []

    @per_trace
    def lengths(trace: Trace, per_stream: bool, limit: int = 10) -> pd.DataFrame:
        calls.append((per_stream, limit))
        return pd.DataFrame({"n": [len(trace.gpu_ops)]})

    assert lengths(trace, True)["n"].tolist() == [4]
    lengths(trace, per_stream=True)
    lengths(trace, True, 10)
    lengths(trace, False)
    assert calls == [(True, 10), (False, 10)]


def test_how_phases_are_named_is_not_part_of_what_is_found(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "## forward ##")
    b.kernel(100, 200, "gemm_kernel", launch_at=50)
    trace = tracekit.open_trace(b.write(tmp_path / "t.sqlite"))
    first, second = choose_phases(trace, None, how="--phases"), choose_phases(trace, None, how="phases=")
    assert first.chosen == second.chosen == (("forward", "=## forward ##"),)
    assert first.note is not None and first.note.endswith("(name others with --phases)")
    assert second.note is not None and second.note.endswith("(name others with phases=)")
