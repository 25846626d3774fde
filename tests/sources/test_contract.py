"""The column contract (tracekit.model.schema): every reader fills it on every real and built input,
and a table that breaks it is refused with a line saying what is wrong. The registry picks readers by
content."""

from __future__ import annotations

import pickle
import shutil

import numpy as np
import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED_MEMORY, shared_export_paths
from helpers.small_export import build_small
from helpers.snapshot_builder import SnapshotBuilder, stack

from tracekit.errors import InvalidTraceError, NotAnExportError, SnapshotError
from tracekit.model import memory_schema, schema
from tracekit.model.memory import MemoryTrace
from tracekit.model.trace import Trace, TraceMeta
from tracekit.sources import open_snapshot, open_trace


def assert_fills(table: pd.DataFrame, declared: schema.Schema) -> None:
    """Independent of Schema.check: names, order, dtype of every column."""
    assert list(table.columns) == declared.names
    for column in declared.columns:
        dtype = table[column.name].dtype
        if column.dtype == "text":
            assert dtype == np.dtype(object) or isinstance(dtype, pd.StringDtype), column.name
        else:
            assert str(dtype) == column.dtype, column.name
        if column.categories is not None:
            assert tuple(table[column.name].cat.categories) == column.categories


def assert_trace_fills_contract(trace: Trace) -> None:
    for declared in schema.TRACE_TABLES:
        table = getattr(trace, declared.table)
        assert_fills(table, declared)
        if declared.interval:
            assert (table["end"] >= table["start"]).all()
            assert (table["duration"] == table["end"] - table["start"]).all()
    assert_fills(trace.meta.gpus, schema.GPUS)


@pytest.mark.parametrize("export", shared_export_paths(), ids=lambda path: path.name)
def test_nsys_reader_fills_the_contract_on_real_exports(shared_traces, export, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE", "0")
    trace = open_trace(export)
    assert_trace_fills_contract(trace)
    assert len(trace.gpu_ops) > 0


@pytest.mark.parametrize("generation", ["2022.4", "2026.2"])
def test_nsys_reader_fills_the_contract_on_built_exports(tmp_path, generation, monkeypatch):
    trace = open_trace(build_small(generation, tmp_path / "t.sqlite"))
    assert_trace_fills_contract(trace)
    # a CPU-only export: empty GPU tables, still of the declared shape
    b = ExportBuilder(generation)
    b.push_pop(0, 10, "step")
    cpu = open_trace(b.write(tmp_path / "cpu.sqlite"))
    assert_trace_fills_contract(cpu)
    assert cpu.gpu_ops.empty and len(cpu.ranges) == 1


def test_cached_tables_fill_the_contract(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")
    export = build_small("2026.2", tmp_path / "t.sqlite")
    first, second = open_trace(export), open_trace(export)  # the second reads the cache the first wrote
    assert_trace_fills_contract(first)
    assert_trace_fills_contract(second)
    assert (export.parent / (export.name + ".tracekit-cache") / "gpu_ops").is_dir()


def snapshots() -> list:
    return sorted(SHARED_MEMORY.glob("*.pickle")) if SHARED_MEMORY.is_dir() else []


def assert_memory_fills_contract(memory: MemoryTrace) -> None:
    assert_fills(memory.events, memory_schema.MEMORY_EVENTS)
    assert_fills(memory.blocks, memory_schema.MEMORY_BLOCKS)
    assert_fills(memory.segments, memory_schema.MEMORY_SEGMENTS)
    assert_fills(memory.annotations, memory_schema.MEMORY_ANNOTATIONS)


@pytest.mark.parametrize("path", snapshots(), ids=lambda path: path.name)
def test_snapshot_reader_fills_the_contract_on_real_snapshots(shared_memory, path):
    assert_memory_fills_contract(open_snapshot(path))


def test_snapshot_reader_fills_the_contract_on_built_snapshots(tmp_path):
    b = SnapshotBuilder(with_time=False, devices=2)
    b.alloc(0x10, 2048, 0, stack("model.py:1 f"), device=1)
    b.segment(0x0, 4096, [(0x10, 2048, "active_allocated")], device=1)
    b.annotate("Optimizer.step#AdamW.step", 0, 1)
    assert_memory_fills_contract(open_snapshot(b.dump(tmp_path / "s.pickle")))
    empty = SnapshotBuilder()
    empty.traces = [[]]
    assert_memory_fills_contract(open_snapshot(empty.dump(tmp_path / "empty.pickle")))


def good_tables() -> dict[str, pd.DataFrame]:
    ops = schema.GPU_OPS.empty()
    return {"gpu_ops": ops, "launches": schema.LAUNCHES.empty(), "ranges": schema.RANGES.empty()}


@pytest.mark.parametrize(
    "table,breakage,message",
    [
        ("gpu_ops", lambda t: t.drop(columns=["stream"]), "missing stream"),
        ("gpu_ops", lambda t: t.assign(extra=np.zeros(len(t))), "unexpected extra"),
        (
            "gpu_ops",
            lambda t: t.astype({"start": "float64"}),
            "gpu_ops.start is float64, the column contract says int64",
        ),
        ("launches", lambda t: t.astype({"name": object}), "launches.name is object"),
        ("ranges", lambda t: t[list(reversed(t.columns))], "columns out of order"),
        ("ranges", lambda t: t.assign(style=pd.Categorical([], categories=["a", "b"])), "style has categories"),
    ],
)
def test_a_table_breaking_the_contract_is_refused(table, breakage, message):
    tables = good_tables()
    tables[table] = breakage(tables[table])
    trace = Trace.from_frames(TraceMeta("built"), **tables)
    with pytest.raises(InvalidTraceError, match=message):
        getattr(trace, table)


def test_intervals_are_checked(tmp_path):
    bad = open_trace(build_small("2026.2", tmp_path / "t.sqlite")).gpu_ops.copy()
    bad.loc[1, "end"] = bad.loc[1, "start"] - 5
    with pytest.raises(InvalidTraceError, match="1 rows of gpu_ops end before they start"):
        _ = Trace.from_frames(TraceMeta("built"), gpu_ops=bad).gpu_ops
    with pytest.raises(InvalidTraceError, match="gpus.sm_count is int64"):
        TraceMeta("built", gpus=schema.GPUS.empty().astype({"sm_count": "int64"}))


def test_registry_chooses_by_content(tmp_path, shared_traces):
    """An export under another name is still an export; other files get what they seem to be."""
    renamed = tmp_path / "profile.db"
    shutil.copy(shared_traces / "tiny_cuda_nsys2026.1.sqlite", renamed)
    assert (open_trace(renamed).gpu_ops["kind"] == "kernel").sum() == 2
    snapshot = tmp_path / "snapshot.sqlite"
    snapshot.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]]}))
    with pytest.raises(NotAnExportError, match="is a pickle .*tracekit memory"):
        open_trace(snapshot)
    chrome = tmp_path / "trace.json"
    chrome.write_text('{"traceEvents": []}')
    assert open_trace(chrome).gpu_ops.empty  # a torch.profiler trace of nothing: empty tables, as nsys's
    with pytest.raises(SnapshotError, match="looks like a torch.profiler trace .*, not a memory snapshot"):
        open_snapshot(chrome)
    with pytest.raises(SnapshotError, match="looks like an nsys SQLite export .*, not a memory snapshot"):
        open_snapshot(renamed)
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    with pytest.raises(NotAnExportError, match="is an empty file"):
        open_trace(empty)
