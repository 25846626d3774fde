"""Every table command x every format x --output: the files written, read back, equal the library's Result.

For the commands on traces and snapshots the Result is computed again through the library and must
be equal; for the benchmarks (timings differ run to run) the Result the command handed to the
renderer is caught on its way and the files are compared with it. csv and parquet of several tables
write one file per table (``out.<table>.csv``); json of several tables is one object keyed by table
name; table and md are the renderer's text.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.snapshot_builder import two_snapshots
from helpers.steps import build_step

import tracekit
from tracekit.model.result import Result
from tracekit.render import FORMATS
from tracekit.render import tables as renderer
from tracekit.sources import open_snapshot, open_trace

MIB = 2**20
PHASES = ["forward", "backward", "optimizer"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Two built exports (one and two training steps) and two built snapshots."""
    folder = tmp_path_factory.mktemp("inputs")
    one, two = ExportBuilder("2026.2"), ExportBuilder("2022.4")
    build_step(one, 0)
    build_step(two, 0)
    build_step(two, 2000)
    small, large = two_snapshots(folder)
    return {
        "a": one.write(folder / "a.sqlite"),
        "b": two.write(folder / "b.sqlite"),
        "m1": small,
        "m2": large,
    }


def library(name: str, paths: dict) -> Result | None:
    """The Result each command's arguments (below) ask the library for; None for the benchmarks."""
    a, b = (lambda: open_trace(paths["a"])), (lambda: open_trace(paths["b"]))
    return {
        "kernels": lambda: tracekit.kernels(b(), name="short"),
        "kernels-category": lambda: tracekit.kernels(b(), by="category"),
        "ranges": lambda: tracekit.ranges(b()),
        "breakdown": lambda: tracekit.breakdown(b(), phases=PHASES),
        "diff": lambda: tracekit.diff(a(), b(), phases=PHASES),
        "memory": lambda: tracekit.memory(open_snapshot(paths["m1"]), top=20, by="allocation"),
        "memory-compare": lambda: tracekit.memory([open_snapshot(paths["m1"]), open_snapshot(paths["m2"])]),
    }.get(name, lambda: None)()


COMMANDS = {
    "kernels": lambda p: ["kernels", p["b"], "--name", "short"],
    "kernels-category": lambda p: ["kernels", p["b"], "--by", "category"],
    "ranges": lambda p: ["ranges", p["b"]],
    "breakdown": lambda p: ["breakdown", p["b"]],
    "diff": lambda p: ["diff", p["a"], p["b"]],
    "memory": lambda p: ["memory", p["m1"]],
    "memory-compare": lambda p: ["memory", p["m1"], p["m2"], "--compare"],
    "bench-models": lambda p: ["bench", "tiny", "--ctx", "8", "--batch", "1", "--warmup", "0", "--steps", "1",
                               "--device", "cpu"],
    "bench-attention": lambda p: ["bench", "attention", "--head-dim", "8", "--seq", "16", "--passes", "1", "--warmup",
                                  "0", "--impl", "naive", "--device", "cpu"],
    "bench-optimizer": lambda p: ["bench", "optimizer", "--params", "1", "--size", "16", "--impl", "single-tensor",
                                  "--steps", "1", "--warmup", "0", "--device", "cpu"],
    "bench-dtypes": lambda p: ["bench", "dtypes", "tiny", "--ctx", "8", "--batch", "1", "--device", "cpu"],
}  # fmt: skip
SUFFIX = {"table": ".txt", "md": ".md", "csv": ".csv", "json": ".json", "parquet": ".parquet"}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_every_format_to_a_file(cli, inputs, tmp_path, monkeypatch, command, fmt):
    if command.startswith("bench"):
        pytest.importorskip("torch")
    handed: list[tuple] = []
    write = renderer.write
    monkeypatch.setattr(renderer, "write", lambda *args: handed.append(args) or write(*args))
    output = tmp_path / f"out{SUFFIX[fmt]}"
    run = cli(*COMMANDS[command](inputs), "--format", fmt, "-o", output)
    assert run.exit_code == 0, run.output
    ((result, _, _, unit),) = handed
    expected = library(command, inputs)
    if expected is not None:  # the command computed what the library computes
        assert result.names == expected.names
        for mine, theirs in zip(result.tables, expected.tables):
            pd.testing.assert_frame_equal(mine.frame, theirs.frame)
    check_files(result, fmt, output, unit)


def check_files(result: Result, fmt: str, output, unit: str) -> None:
    several = len(result.tables) > 1
    if fmt in ("table", "md"):
        text = output.read_text()
        assert text == renderer.render_text(result, fmt, unit) + "\n"
        for table in result.tables:
            assert table.title in text
        return
    if fmt == "json":
        data = json.loads(output.read_text())
        if several:
            assert list(data) == result.names
        for table in result.tables:
            records = data[table.name] if several else data
            assert_records_equal(records, renderer.in_unit(table.frame, unit))
        return
    for table in result.tables:
        path = output.with_name(f"{output.stem}.{table.name}{output.suffix}") if several else output
        assert path.exists(), f"{path} missing"
        if fmt == "csv":
            read = pd.read_csv(path, keep_default_na=False, dtype=str)
        else:
            read = pd.read_parquet(path)
            assert list(read.columns) == list(renderer.in_unit(table.frame, unit).columns)  # the schema
        assert_frame_values_equal(read, renderer.in_unit(table.frame, unit))
    if several:
        assert not output.exists()  # one file per table, none under the plain name


def same(value, expected) -> bool:
    """A value read back (text from CSV, JSON scalars, parquet values) against the table's value."""
    if expected is None or (isinstance(expected, float) and math.isnan(expected)) or expected is pd.NA:
        return value in (None, "") or (isinstance(value, float) and math.isnan(value))
    if isinstance(expected, (bool, np.bool_)):
        return str(value) == str(bool(expected))
    if isinstance(expected, (int, float, np.integer, np.floating)):
        return math.isclose(float(value), float(expected), rel_tol=1e-12, abs_tol=1e-12)
    return str(value) == str(expected)


def assert_frame_values_equal(read: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert list(read.columns) == [str(column) for column in expected.columns]
    assert len(read) == len(expected) > 0
    for column in expected.columns:
        for got, want in zip(read[str(column)].tolist(), expected[column].tolist()):
            assert same(got, want), (column, got, want)


def assert_records_equal(records: list[dict], expected: pd.DataFrame) -> None:
    assert len(records) == len(expected) > 0
    for record, (_, row) in zip(records, expected.iterrows()):
        assert list(record) == [str(column) for column in expected.columns]
        for column in expected.columns:
            assert same(record[str(column)], row[column]), (column, record[str(column)], row[column])


def test_several_tables_on_standard_output(cli, inputs):
    """Without --output: csv prints each table after a "# name" line, json one object by table name."""
    result = tracekit.memory(open_snapshot(inputs["m1"]), top=20, by="allocation")
    as_json = json.loads(cli("memory", inputs["m1"], "--format", "json").stdout)
    assert list(as_json) == ["summary", "allocations"]
    assert_records_equal(as_json["allocations"], result.table("allocations"))
    as_csv = cli("memory", inputs["m1"], "--format", "csv").stdout
    assert as_csv.startswith("# summary\nQuantity,Value\n") and "\n\n# allocations\nSize (MiB)," in as_csv
    parquet = cli("memory", inputs["m1"], "--format", "parquet")
    assert parquet.exit_code == 1 and "--output" in parquet.output


def test_units_are_converted_in_every_format(cli, inputs, tmp_path):
    trace = open_trace(inputs["b"])
    expected = tracekit.kernels(trace, name="short").frame
    out = tmp_path / "k.parquet"
    assert (
        cli("kernels", inputs["b"], "--name", "short", "--unit", "us", "--format", "parquet", "-o", out).exit_code == 0
    )
    read = pd.read_parquet(out)
    assert "Total Time (us)" in read and "Total Time (ns)" not in read
    assert read["Total Time (us)"].tolist() == (expected["Total Time (ns)"] / 1e3).tolist()


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet", ".md", ".txt"])
def test_the_output_s_suffix_picks_the_format(cli, tmp_path, suffix):
    """-o k.csv / .json / .parquet / .md without --format writes that format; CSV, JSON and Parquet carry
    the unrounded average (301/3 ns), the table and md the one decimal nsys prints."""
    b = ExportBuilder("2026.2")
    for start, duration in ((0, 100), (1000, 100), (2000, 101)):
        b.kernel(start, start + duration, "gemm", launch_at=start)
    out = tmp_path / f"k{suffix}"
    run = cli("kernels", b.write(tmp_path / "k.sqlite"), "-o", out)
    assert run.exit_code == 0, run.output
    average = 301 / 3
    if suffix == ".csv":
        read = pd.read_csv(out)
        assert read["Avg (ns)"].tolist() == [average] and repr(average) in out.read_text()
    elif suffix == ".json":
        assert json.loads(out.read_text())[0]["Avg (ns)"] == average
    elif suffix == ".parquet":
        assert pd.read_parquet(out)["Avg (ns)"].tolist() == [average]
    else:
        text = out.read_text()
        assert ("| 100.3 |" in text) == (suffix == ".md") and "100.33" not in text and " 100.3 " in text


def test_a_suffix_that_contradicts_the_format_is_a_usage_error(cli, inputs, tmp_path):
    run = cli("kernels", inputs["b"], "--format", "json", "-o", tmp_path / "k.csv")
    assert run.exit_code == 2 and "k.csv" in run.output and "json" in run.output
    assert not (tmp_path / "k.csv").exists()
