"""`tracekit report --bench DB` on a results database edited by hand or by another program: every row whose
values are not what `tracekit bench` writes is left out and counted, a database lacking a column the report
reads is one error line, and a database with no run that went well is a report saying so. Each of these raised
a traceback (TypeError, ValueError, KeyError) from pandas, matplotlib or a format string."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

COLUMNS = [
    "model",
    "ctx",
    "batch",
    "mode",
    "dtype",
    "compile",
    "attention",
    "device",
    "warmup",
    "tf32",
    "status",
    "step_mean_ms",
    "step_std_ms",
    "error",
    "time_utc",
]
GOOD = ["tiny", 128, 4, "train", "bf16", 0, "sdpa", "cuda", 2, 1, "ok", 10.5, 0.5, None, "2026-01-01T00:00:00"]


def database(path: Path, rows: list[list], columns: list[str] = COLUMNS) -> Path:
    with sqlite3.connect(path) as connection:
        connection.execute(f"CREATE TABLE runs ({', '.join(columns)})")
        connection.executemany(f"INSERT INTO runs VALUES ({', '.join('?' * len(columns))})", rows)
    return path


def edited(**values) -> list:
    return [values.get(column, value) for column, value in zip(COLUMNS, GOOD)]


BAD_ROWS = {
    "dtype NULL": edited(dtype=None),
    "step mean text": edited(step_mean_ms="abc", step_std_ms="x"),
    "step std NaN": edited(step_mean_ms=math.inf, step_std_ms=math.nan),
    "ctx text": edited(ctx="big"),
    "compile text": edited(compile="yes"),
    "compile 2": edited(compile=2),
    "ctx 1.5": edited(ctx=1.5),
    "ctx bytes": edited(ctx=b"\x00\xff"),
    "every value NULL": [None] * len(COLUMNS),
}


@pytest.mark.parametrize("case", BAD_ROWS, ids=str)
def test_a_row_of_unusable_values_is_left_out_and_counted(cli, tmp_path, case):
    db = database(tmp_path / "results.db", [BAD_ROWS[case], edited(ctx=256, step_mean_ms=20.0)])
    result = cli("report", "--bench", db, "-o", tmp_path / "report")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| tiny | 256 | 4 | train | 20.00 ± 0.50 |" in text
    assert "> note: 1 row of results.db left out: values that are not what `tracekit bench` writes" in text
    assert "nan" not in text.lower()


def test_a_database_without_the_time_of_its_runs_is_one_error_line(cli, tmp_path):
    db = database(tmp_path / "results.db", [GOOD[:-1]], COLUMNS[:-1])
    result = cli("report", "--bench", db, "-o", tmp_path / "report")
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: {db}: the runs table lacks time_utc: not a `tracekit bench --db` database"


@pytest.mark.parametrize(
    "rows", [[], [edited(status="oom", step_mean_ms=None, step_std_ms=None)]], ids=["empty", "oom"]
)
def test_a_database_with_no_run_that_went_well_says_so(cli, tmp_path, rows):
    db = database(tmp_path / "results.db", rows)
    result = cli("report", "--bench", db, "-o", tmp_path / "report")
    assert result.exit_code == 0 and "Warning" not in result.output, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "No configuration ran to the end (status ok): nothing to compare." in text
    assert sorted(path.name for path in (tmp_path / "report").iterdir()) == ["report.md"]  # no empty picture
