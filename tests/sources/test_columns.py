"""Column-selective reads (issue #17): a command reads only the GPU-op columns it uses, from the export
or its cache, started ahead of its imports; the numbers are those of a whole-table read."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder

import tracekit.analysis.stats as stats
from tracekit.model.schema import GPU_OPS
from tracekit.session import current
from tracekit.sources import open_trace
from tracekit.sources.cache import TableCache
from tracekit.sources.nsys import export as nsys
from tracekit.sources.nsys import sqlite_columns
from tracekit.sources.nsys.read_ahead import read_gpu_ops_ahead

GEMM = "ampere_sgemm_128x64_tn"
ADD = "vectorized_elementwise_kernel<add>"


@pytest.fixture
def export(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 10_000, "step")
    b.kernel(100, 200, GEMM, grid=(4, 2, 1), launch_at=50)
    b.kernel(300, 330, ADD, launch_at=60)
    b.kernel(400, 460, GEMM, grid=(8, 1, 1), device=40_000, launch_at=70)  # a device no int16 holds
    b.memcpy(500, 550, size=4096, launch_at=80)
    return b.write(tmp_path / "cols.sqlite")


@pytest.fixture
def reads(monkeypatch):
    """The integer expressions of every SQL read of GPU ops, by table."""
    seen: list[tuple[str, list[str]]] = []
    original = nsys.read_columns

    def recording(path, **arguments):
        seen.append((arguments["table"], sorted(arguments["ints"])))
        return original(path, **arguments)

    monkeypatch.setattr(nsys, "read_columns", recording)
    return seen


def test_a_kernel_summary_reads_durations_and_names_only(export, reads):
    trace = open_trace(export)
    trace.need("gpu_ops", ["kind", "duration", "name"])
    ops = trace.columns("gpu_ops", ["kind", "duration", "name"])
    assert list(ops.columns) == ["duration", "kind", "name"]  # contract order
    assert reads == [
        ("CUPTI_ACTIVITY_KIND_KERNEL", ["duration", "name_id"]),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", ["copy_kind", "duration"]),
    ]
    assert ops["duration"].tolist() == [100, 30, 60, 50]  # the kernel on device 40,000: its times are usable
    assert ops["name"].astype(str).tolist() == [GEMM, ADD, GEMM, "[CUDA memcpy HtoD]"]
    assert trace.dropped("gpu_ops") == 0


def test_more_columns_are_read_together_and_the_rows_stay(export, reads):
    trace = open_trace(export)
    first = trace.columns("gpu_ops", ["duration", "name"])
    assert len(first) == 4
    marker = trace.derived("per-row", lambda: np.arange(len(first)))
    wider = trace.columns("gpu_ops", ["device", "grid_x"])  # reads device: the 40,000 one reads as unknown
    assert len(reads) == 4 and sorted(reads[2][1]) == ["block", "device_stream", "duration", "grid", "name_id"]
    assert wider["grid_x"].tolist() == [4, 1, 8, 0] and wider["device"].tolist() == [0, 0, -1, 0]
    assert trace.columns("gpu_ops", ["duration"])["duration"].tolist() == [100, 30, 60, 50]
    assert trace.dropped("gpu_ops") == 0 and trace.warnings[0].startswith("1 gpu_ops value of")
    assert trace.derived("per-row", lambda: np.arange(0)) is marker  # per-row results still line up


@pytest.mark.parametrize("names", [["end", "duration"], ["start", "duration"], ["duration"], ["start", "end"]])
def test_durations_are_right_with_any_time_column(export, names):
    ops = open_trace(export).columns("gpu_ops", names)
    assert list(ops.columns) == names
    if "duration" in names:
        assert ops["duration"].tolist() == [100, 30, 60, 50]
    if "start" in names:
        assert ops["start"].tolist() == [100, 300, 400, 500]


def test_masks_taken_before_a_wider_read_still_line_up(cli, tmp_path):
    """A command that selects rows on a narrow read, then reads more columns (a diff by kernel reads the
    kind first, then the short names) must not misalign its selection, whatever the values it meets."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 10_000, "step")
    b.kernel(100, 200, GEMM, launch_at=50)
    b.kernel(300, 330, ADD, launch_at=60)
    b.rows["CUPTI_ACTIVITY_KIND_KERNEL"][-1]["demangledName"] = 2**40  # no such string id, nor int32
    b.kernel(400, 460, GEMM, launch_at=70)
    path = b.write(tmp_path / "bad-name.sqlite")
    result = cli("diff", path, path, "--by", "kernel", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = {line.split(",")[0]: line.split(",") for line in result.stdout.splitlines()[1:]}
    assert set(rows) == {GEMM, "[unreadable kernel name]"}
    from tracekit.analysis.kernels.summary import kernel_table

    trace = open_trace(path)
    trace.columns("gpu_ops", ["kind"])  # a narrow read first, as kernel_mask does
    table = kernel_table(trace, ranges=["step"])
    assert table["Instances"].tolist() == [2, 1] and table["Total Time (ns)"].tolist() == [160, 30]


def test_answers_do_not_depend_on_earlier_commands(cli, export, monkeypatch):
    """The cache keeps the union of the columns read; a narrow command served from a wider cache gives the
    rows it gives alone."""
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")
    alone = cli("kernels", export, "--format", "csv").stdout
    # a range filter reads the whole table, the device of the 40,000 one too (it once left that row out)
    assert cli("kernels", export, "--range", "step", "--format", "csv").exit_code == 0
    assert cli("kernels", export, "--format", "csv").stdout == alone
    assert alone.splitlines()[1].split(",")[1:3] == ["160", "2"]  # GEMM: 100 + 60 ns, the 40,000 one too


def test_the_whole_table_equals_a_reader_of_every_column(export):
    partial = open_trace(export)
    partial.columns("gpu_ops", ["name"])
    whole = partial.gpu_ops  # the rest read at once, with the names again
    assert list(whole.columns) == GPU_OPS.names
    fresh = nsys.read_gpu_ops(export, nsys.check_export(export))
    pd.testing.assert_frame_equal(whole, fresh, check_categorical=False)


def test_the_cache_keeps_the_columns_read_and_widens(export, reads, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_MIN_BYTES", "0")
    columns = ["kind", "duration", "name"]
    expected = open_trace(export).columns("gpu_ops", columns)
    cache = TableCache.for_export(export)
    assert cache is not None and cache.cached_columns("gpu_ops") == ["duration", "kind", "name"]
    reads.clear()
    again = open_trace(export).columns("gpu_ops", columns)
    assert reads == []  # from the cache alone
    pd.testing.assert_frame_equal(again, expected, check_categorical=False)
    wider = open_trace(export).columns("gpu_ops", ["short_name"])  # the cached columns come along
    assert sorted(reads[0][1]) == ["duration", "name_id"]  # the short names are the names' shortened
    assert wider["short_name"].astype(str).tolist()[:2] == [GEMM, ADD]  # a generic base keeps its work argument
    assert cache.cached_columns("gpu_ops") == ["duration", "kind", "name", "short_name"]


def test_reads_started_ahead_are_taken_not_repeated(export, monkeypatch):
    calls = []
    original = sqlite_columns._read_columns
    monkeypatch.setattr(sqlite_columns, "_read_columns", lambda *a, **k: calls.append(k["table"]) or original(*a, **k))
    read_gpu_ops_ahead(export, ["kind", "duration", "name"])
    trace = open_trace(export)
    trace.need("gpu_ops", ["kind", "duration", "name"])
    ops = trace.columns("gpu_ops", ["duration"])
    assert sorted(calls) == ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"]  # once each
    assert ops["duration"].tolist() == [100, 30, 60, 50] and not current().reads_ahead


def test_read_ahead_leaves_what_is_not_an_export_to_the_command(tmp_path):
    for content in (b"", b"not sqlite at all", b"SQLite format 3\x00" + b"\x00" * 100):
        path = tmp_path / "bad.sqlite"
        path.write_bytes(content)
        read_gpu_ops_ahead(path, ["duration"])  # nothing raised, nothing started
    read_gpu_ops_ahead(tmp_path / "missing.sqlite", ["duration"])
    assert not current().reads_ahead


@pytest.mark.parametrize("seed", range(4))
def test_grouped_stats_by_selection_equal_the_full_sort(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 30_000))
    codes = rng.integers(-1, int(rng.integers(1, 12)), rows).astype(np.int32)
    values = rng.integers(0, int(rng.choice([3, 1000, 2**40])), rows).astype(np.int64)  # ties too
    monkeypatch.setattr(stats, "ROWS_PER_GROUP", 1)
    fast = stats.grouped_stats(codes, values)
    wide = codes.astype(np.int64)
    wide[wide < 0] = -(2**32) + 1  # left out as -1 is: narrowed to int32 unclamped, it would read as group 1
    pd.testing.assert_frame_equal(stats.grouped_stats(wide, values), fast)
    monkeypatch.setattr(stats, "FEW_GROUPS", -1)
    pd.testing.assert_frame_equal(fast, stats.grouped_stats(codes, values))
    group = codes == codes.max()
    row = fast.loc[int(codes.max())]
    assert row[stats.MED] == np.median(values[group]) and row[stats.MIN] == values[group].min()


def test_the_program_exits_at_once_with_its_output_whole(export, tmp_path):
    """The console script's fast exit (``cli.run``) flushes everything first and keeps the status."""
    command = [sys.executable, "-m", "tracekit.cli", "kernels", str(export), "--format", "csv"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.splitlines()[1].split(",")[1:3] == ["160", "2"]
    missing = subprocess.run([*command[:4], str(tmp_path / "none.sqlite")], capture_output=True, text=True)
    assert missing.returncode == 1 and missing.stderr.strip().count("\n") == 0 and "no such file" in missing.stderr


@pytest.mark.parametrize("command", ["report", "diff", "breakdown"])
def test_each_command_reads_the_gpu_ops_once(cli, export, reads, tmp_path, command):
    """A command that needs many GPU-op columns says so before its first read: one read per kind table
    (a breakdown alone reads its nine columns; a report or a diff, the whole table)."""
    args = {
        "report": ["report", export, "-o", tmp_path / "report"],
        "diff": ["diff", export, export],
        "breakdown": ["breakdown", export, "--phases", "step"],
    }[command]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    kernel_reads = [columns for table, columns in reads if table == "CUPTI_ACTIVITY_KIND_KERNEL"]
    assert len(kernel_reads) == (2 if command == "diff" else 1)  # a diff opens its two inputs
    breakdown = ["correlation_id", "device_stream", "end", "name_id", "pid", "start"]  # not streams'/grids' own
    # the short names are the names' (no shortName read)
    whole = sorted([*breakdown, "block", "grid", "registers_per_thread", "shared_memory"])
    assert all(columns == (breakdown if command == "breakdown" else whole) for columns in kernel_reads), kernel_reads
