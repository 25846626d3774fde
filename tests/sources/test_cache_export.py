"""The table cache beside large exports, and `tracekit export --parquet`."""

import json
import os
import shutil
import time

import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.steps import build_step

from tracekit.analysis.kernels.summary import kernel_table
from tracekit.model.range_specs import spec_patterns
from tracekit.session import Session
from tracekit.sources import cache as cache_module
from tracekit.sources import open_trace


@pytest.fixture
def export(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")  # cache even tiny exports
    b = ExportBuilder("2026.2")
    build_step(b, 0)
    build_step(b, 2000)
    b.domain(1, "NCCL", tid=100)
    b.push_pop(50, 60, "allreduce", tid=100, domain_id=1)
    return b.write(tmp_path / "steps.sqlite")


def test_second_read_comes_from_the_cache_and_equals_the_first(export):
    first = open_trace(export)
    tables = {name: getattr(first, name) for name in ("gpu_ops", "launches", "ranges")}
    folder = export.with_name(export.name + cache_module.SUFFIX)
    assert {path.name for path in folder.iterdir()} == {"key.json", "gpu_ops", "launches", "ranges"}
    second = open_trace(export)
    for name, frame in tables.items():
        pd.testing.assert_frame_equal(getattr(second, name), frame, check_categorical=False)
        assert list(getattr(second, name).dtypes.astype(str)) == list(frame.dtypes.astype(str))
    assert kernel_table(second).equals(kernel_table(first))
    selected = second.ranges_named(spec_patterns(["forward", "NCCL:*"]))  # served from the cached range table
    assert sorted(selected["name"].astype(str)) == ["NCCL:allreduce", "forward", "forward"]


def test_named_selections_are_cached_too(export):
    first = open_trace(export).ranges_named(spec_patterns(["step", "*ward"]))
    folder = export.with_name(export.name + cache_module.SUFFIX)
    assert any(path.name.startswith("ranges_named-") for path in folder.iterdir())
    second = open_trace(export).ranges_named(spec_patterns(["*ward", "step"]))  # same patterns, any order
    pd.testing.assert_frame_equal(second, first, check_categorical=False)
    assert sorted(second["name"].astype(str)) == ["backward", "backward", "forward", "forward", "step", "step"]


def test_cache_is_thrown_away_when_the_export_changes(export):
    assert len(open_trace(export).gpu_ops) == 14
    b = ExportBuilder("2026.2")
    b.kernel(0, 999, "only_kernel")
    time.sleep(0.01)
    b.write(export)  # same path, new contents
    assert open_trace(export).gpu_ops["name"].tolist() == ["only_kernel"]


def test_read_only_folder_uses_the_user_cache(export, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert len(open_trace(export).gpu_ops) == 14
    assert not export.with_name(export.name + cache_module.SUFFIX).exists()
    assert any((tmp_path / "xdg" / "tracekit").iterdir())


def test_small_exports_and_switch(export, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE", "0")
    assert len(open_trace(export).gpu_ops) == 14
    assert not export.with_name(export.name + cache_module.SUFFIX).exists()


def test_export_parquet(cli, export, tmp_path):
    out = tmp_path / "tables"
    result = cli("export", export, "--parquet", out)
    assert result.exit_code == 0, result.output
    kernels = pd.read_parquet(out / "gpu_ops.parquet")
    assert len(kernels) == 14 and kernels["duration"].sum() == 2 * 450
    ranges = pd.read_parquet(out / "ranges.parquet")
    assert set(ranges["name"].astype(str)) >= {"step", "forward", "NCCL:allreduce"}
    assert (out / "meta.json").exists() and len(pd.read_parquet(out / "launches.parquet")) == 14


def test_same_size_and_mtime_but_new_contents_is_a_new_export(export):
    """A rewrite that keeps size and mtime (touch -r) still changes the key: the checksum of the pages
    where SQLite keeps its header and change counter."""
    first = open_trace(export).gpu_ops
    assert first["duration"].iloc[0] != 77
    stat = export.stat()
    import sqlite3

    with sqlite3.connect(export) as connection:  # same row count and widths: the file keeps its size
        connection.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + 77")
    os.utime(export, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert export.stat().st_size == stat.st_size and export.stat().st_mtime_ns == stat.st_mtime_ns
    assert (open_trace(export).gpu_ops.loc[lambda ops: ops["kind"] == "kernel", "duration"] == 77).all()


def test_a_damaged_cache_is_rebuilt_and_said_so(export):
    expected = open_trace(export).gpu_ops
    folder = export.with_name(export.name + cache_module.SUFFIX)
    (folder / "gpu_ops" / "start.npy").write_bytes(b"\x93NUMPY garbage")
    trace = open_trace(export)
    pd.testing.assert_frame_equal(trace.gpu_ops, expected, check_categorical=False)
    assert any("was damaged (gpu_ops); rebuilt from the export" in warning for warning in trace.warnings)
    again = open_trace(export)  # rebuilt: read from the cache again, nothing to say
    pd.testing.assert_frame_equal(again.gpu_ops, expected, check_categorical=False)
    assert again.warnings == []
    layout = json.loads((folder / "gpu_ops" / "columns.json").read_text())
    (folder / "gpu_ops" / "columns.json").write_text(json.dumps({**layout, "rows": 3}))  # wrong shape
    wrong = open_trace(export)
    assert len(wrong.gpu_ops) == len(expected) and "was damaged" in wrong.warnings[0]


def test_a_flipped_byte_or_a_garbage_header_is_caught(export):
    """One flipped byte in a cached column silently changed idle's output (0.646345 where 0.646432); a
    .npy header of garbage ended in tokenize.TokenError. Each column has a checksum, checked on read."""
    expected = open_trace(export).gpu_ops
    column = export.with_name(export.name + cache_module.SUFFIX) / "gpu_ops" / "end.npy"
    data = bytearray(column.read_bytes())
    data[-3] ^= 0x10  # a value's byte, past the header
    column.write_bytes(bytes(data))
    trace = open_trace(export)
    pd.testing.assert_frame_equal(trace.gpu_ops, expected, check_categorical=False)
    assert any("was damaged (gpu_ops)" in warning for warning in trace.warnings)
    header = bytearray(column.read_bytes())
    header[10:40] = b"{'descr': (((((((((((((((((((("
    column.write_bytes(bytes(header))
    again = open_trace(export)
    pd.testing.assert_frame_equal(again.gpu_ops, expected, check_categorical=False)
    assert any("was damaged" in warning for warning in again.warnings)


def test_checksums_see_every_changed_byte():
    import numpy as np

    values = np.arange(1_001, dtype=np.int32)  # 4,004 bytes: a tail past the last 8-byte word
    original = cache_module.checksum(values)
    for position in range(values.nbytes):
        for bit in (0x01, 0x80):
            changed = values.copy().view(np.uint8)
            changed[position] ^= bit
            assert cache_module.checksum(changed.view(np.int32)) != original, (position, bit)
    assert cache_module.checksum(values[:-1]) != original and cache_module.checksum(values.copy()) == original


def test_a_cache_folder_that_is_a_link_or_not_ours_is_left_alone(export, tmp_path):
    folder = export.with_name(export.name + cache_module.SUFFIX)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.symlink_to(elsewhere)
    assert len(open_trace(export).gpu_ops) == 14
    assert list(elsewhere.iterdir()) == [] and folder.is_symlink()  # nothing written through the link
    folder.unlink()
    folder.mkdir()
    (folder / "thesis.tex").write_text("mine")
    assert len(open_trace(export).gpu_ops) == 14
    assert [path.name for path in folder.iterdir()] == ["thesis.tex"]


def test_the_cache_of_a_private_export_is_private(export):
    export.chmod(0o600)
    old = os.umask(0o022)
    try:
        assert len(open_trace(export).gpu_ops) == 14  # loads and caches the table
    finally:
        os.umask(old)
    folder = export.with_name(export.name + cache_module.SUFFIX)
    assert folder.stat().st_mode & 0o077 == 0


def test_a_command_writes_its_cache_behind_and_finishes_before_it_returns(export, cli):
    folder = export.with_name(export.name + cache_module.SUFFIX)
    with Session(write_behind=True) as session:
        trace = open_trace(export)
        ops = trace.gpu_ops
        assert len(session.pending_writes) >= 1  # handed to a background write
    assert not session.pending_writes  # every write joined when the session ends
    assert (folder / "gpu_ops" / "columns.json").is_file() and not list(folder.glob(".*.partial"))
    pd.testing.assert_frame_equal(open_trace(export).gpu_ops, ops, check_categorical=False)

    shutil.rmtree(folder)
    assert cli("kernels", export).exit_code == 0  # the command line writes behind, and waits before it returns
    assert {path.name for path in folder.iterdir()} == {"key.json", "gpu_ops"}
    assert not list(folder.glob(".*.partial"))


def test_a_table_being_written_is_served_from_memory(export):
    cache = cache_module.TableCache.for_export(export)
    assert cache is not None
    frame = open_trace(export).gpu_ops
    with Session(write_behind=True):
        with cache_module._STORING:  # hold the writer back: the table is pending, not yet on disk
            cache.store("gpu_ops", frame)
            assert cache.cached_columns("gpu_ops") == list(frame.columns)
            served = cache.load("gpu_ops", ["start", "end"])
            assert served is not None and served.equals(frame.loc[:, ["start", "end"]])
            assert cache.load("gpu_ops", ["no_such_column"]) is None
    assert cache.load("gpu_ops") is not None and not cache._pending


def test_two_commands_writing_one_table_at_once_leave_it_whole(export, monkeypatch):
    """Two processes caching the same table (`tracekit idle big.sqlite & tracekit launches big.sqlite`) wrote
    into one shared `.launches.partial` folder: one's columns.json renamed into place with the other's few
    columns beside it, and every later command found the cache damaged. Writers interleave here as two
    processes can (the in-process lock bypassed): A pauses before its columns.json, B writes a column, A ends."""
    import threading
    from pathlib import Path

    import numpy as np

    frame = open_trace(export).launches
    folder = export.with_name(export.name + cache_module.SUFFIX)
    shutil.rmtree(folder)
    first, second = cache_module.TableCache(export, folder), cache_module.TableCache(export, folder)
    columns = [
        (column, [str(c) for c in frame[column].cat.categories] if frame[column].dtype == "category" else None)
        for column in frame.columns
    ]
    a_paused, b_wrote, a_done = threading.Event(), threading.Event(), threading.Event()
    save, write_text = np.save, Path.write_text

    def saving(path, values, **kwargs):
        save(path, values, **kwargs)
        if threading.current_thread().name == "B" and not b_wrote.is_set():
            b_wrote.set()
            a_done.wait(10)

    def writing(path, text, *args, **kwargs):
        if threading.current_thread().name == "A" and path.name == "columns.json":
            a_paused.set()
            b_wrote.wait(10)
        return write_text(path, text, *args, **kwargs)

    monkeypatch.setattr(np, "save", saving)
    monkeypatch.setattr(Path, "write_text", writing)

    def run_a() -> None:
        first._store("launches", frame, columns)
        a_done.set()

    a = threading.Thread(target=run_a, name="A")
    b = threading.Thread(target=lambda: (a_paused.wait(10), second._store("launches", frame, columns)), name="B")
    a.start()
    b.start()
    a.join(30)
    b.join(30)
    monkeypatch.undo()
    reader = cache_module.TableCache(export, folder)
    loaded = reader.load("launches")
    assert reader.damaged == [] and loaded is not None
    pd.testing.assert_frame_equal(loaded, frame, check_categorical=False)
    assert sorted(path.name for path in folder.iterdir()) == ["key.json", "launches"]  # no partial folder left
