"""The .pftrace encoder's shortcuts write exactly the bytes of its general layout: a track whose slices follow
one another is laid out without sorting its begins and ends, and what many slices share (name, category,
grid, block, ...) is encoded once per combination; where they do not hold (ranges that nest on a thread,
argument sets nearly all distinct, two combinations the hash cannot tell apart) the general layout is used,
and the file still decodes to the JSON timeline's events."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.perfetto_decode import from_json, from_protobuf

from tracekit.trace_events import perfetto, track_event_fields
from tracekit.trace_events.writer import timeline as write_timeline

pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2", reason="pip install -e '.[test]'")

GEMM = "ampere_sgemm_128x64_nn"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>()"


def _export(path, *, nested: bool = False, distinct_grids: bool = False):
    b = ExportBuilder("2026.2")
    for index in range(60):
        at = 10_000 + index * 2_000
        name, stream = (GEMM, 7) if index % 3 else (ADD, 13)
        grid = (index + 1, 1, 1) if distinct_grids else (4 + index % 2, 1, 1)
        b.kernel(at, at + 800, name, grid=grid, stream=stream, launch_at=at - 500)
        if index % 10 == 0:
            b.memcpy(at + 900, at + 950 + index, size=4096 * (index + 1), launch_at=at)
    b.kernel(200_000, 200_000, ADD, launch_at=199_000)  # lasts 0 ns: an instant
    if nested:  # ranges within ranges on a thread: their slices nest, begins and ends sorted
        b.push_pop(5_000, 150_000, "step")
        b.push_pop(6_000, 60_000, "forward")
        b.push_pop(60_000, 140_000, "backward")
    return b.write(path)


def _spy(monkeypatch, name: str) -> list:
    """What each call of the encoder's function ``name`` returned, from now on."""
    module = perfetto if hasattr(perfetto, name) else track_event_fields
    results: list = []
    original = getattr(module, name)

    def spying(*args, **kwargs):
        results.append(original(*args, **kwargs))
        return results[-1]

    monkeypatch.setattr(module, name, spying)
    return results


def test_the_shortcuts_write_the_bytes_of_the_general_layout(tmp_path, monkeypatch):
    export = _export(tmp_path / "t.sqlite")
    flat, distinct = _spy(monkeypatch, "_flat_order"), _spy(monkeypatch, "_distinct")
    fast = write_timeline([export], tmp_path / "fast.pftrace").path.read_bytes()
    assert any(order is not None for order in flat) and any(codes is not None for codes in distinct)
    monkeypatch.setattr(perfetto, "_flat_order", lambda chunk, track: None)
    sorted_events = write_timeline([export], tmp_path / "sorted.pftrace").path.read_bytes()
    monkeypatch.setattr(track_event_fields, "_distinct", lambda columns: None)
    row_by_row = write_timeline([export], tmp_path / "rows.pftrace").path.read_bytes()
    assert fast == sorted_events == row_by_row
    assert from_protobuf(tmp_path / "fast.pftrace") == from_json(write_timeline([export], tmp_path / "t.json").path)


def test_combinations_a_hash_confuses_are_written_row_by_row(tmp_path, monkeypatch):
    export = _export(tmp_path / "t.sqlite")
    fast = write_timeline([export], tmp_path / "fast.pftrace").path.read_bytes()
    monkeypatch.setattr(track_event_fields, "_MIX", np.uint64(0))  # every key is its last column alone: collisions
    distinct = _spy(monkeypatch, "_distinct")
    confused = write_timeline([export], tmp_path / "confused.pftrace").path.read_bytes()
    assert any(codes is None for codes in distinct) and confused == fast


@pytest.mark.parametrize("shape", ["nested", "distinct_grids"])
def test_where_a_shortcut_does_not_hold_the_file_still_holds_every_event(tmp_path, monkeypatch, shape):
    export = _export(tmp_path / "t.sqlite", **{shape: True})
    flat, distinct = _spy(monkeypatch, "_flat_order"), _spy(monkeypatch, "_distinct")
    protobuf = from_protobuf(write_timeline([export], tmp_path / "t.pftrace").path)
    if shape == "nested":
        assert any(order is None for order in flat)  # the ranges nest: events sorted
    else:
        assert any(codes is None for codes in distinct)  # a grid per kernel: written row by row
    assert protobuf == from_json(write_timeline([export], tmp_path / "t.json").path)
    assert len(protobuf["slices"]) >= 61
