"""``tracekit report --bench results.db``: a ``tracekit bench --db`` results database as a report: mean ±
std step time per model and context for each dtype and compile variant, and step time against context
length. Columns are read by their keys (``tracekit.run_config``)."""

from __future__ import annotations

import math
import numbers
import sqlite3
from pathlib import Path

import pandas as pd

from tracekit.errors import UsageError
from tracekit.files import protect
from tracekit.model.result import Chart
from tracekit.render.markup import md_text
from tracekit.report.document import BENCH_HEADING, Document, write_report_folder
from tracekit.run_config import (
    ATTENTION,
    BATCH,
    COMPILE,
    CTX,
    DEVICE,
    DTYPE,
    ERROR,
    MODE,
    MODEL,
    RESULTS_TABLE,
    STATUS,
    TF32,
    WARMUP,
    Field,
    mean_std,
    phase_field,
)

STEP_MEAN, STEP_STD = phase_field("step", "mean"), phase_field("step", "std")
TIME = Field("time_utc", "Time (UTC)")  # when the run was recorded (workloads.results_db)
CONFIGURATION = [MODEL, CTX, BATCH, MODE, DTYPE, COMPILE, ATTENTION, DEVICE]
SETTINGS = [WARMUP, TF32]  # recorded since the benchmarks-you-can-trust issue


def _variants(latest: pd.DataFrame) -> pd.Series:
    """The column each row's cell goes in: its dtype and compile, plus every other setting that varies
    in the database (attention, warm-up, TF32), so that no two configurations share a cell."""
    compiled = latest[COMPILE.key].map({1: " compiled", 0: ""})  # True == 1 and False == 0 as keys too
    variant = latest[DTYPE.key] + compiled
    for field, word in ((ATTENTION, ""), (WARMUP, "warm-up "), (TF32, "tf32 ")):
        if field.key in latest.columns and latest[field.key].nunique(dropna=False) > 1:
            variant = variant + ", " + word + latest[field.key].astype(str)
    return variant


def read_results(path: Path) -> pd.DataFrame:
    """Every row of the results database; UsageError when it is missing or not one."""
    if not path.is_file():
        raise UsageError(f"{path}: no such results database (write one with `tracekit bench ... --db {path}`)")
    protect(path)
    try:
        with sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True) as connection:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if RESULTS_TABLE not in tables:
                raise UsageError(f"{path} has no {RESULTS_TABLE} table: not a `tracekit bench --db` database")
            return pd.read_sql_query(f"SELECT * FROM {RESULTS_TABLE}", connection)
    except sqlite3.DatabaseError as error:
        raise UsageError(f"{path} is not an SQLite database ({error}): not a `tracekit bench --db` database") from None


NUMBERS = [CTX, BATCH, COMPILE, WARMUP]  # whole numbers as `tracekit bench` writes them (compile: 0 or 1)
TEXTS = [MODEL, MODE, DTYPE, ATTENTION, DEVICE, STATUS]


def usable_rows(rows: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The rows whose values are what `tracekit bench` writes, numbers as numbers, and how many others there
    were (a database edited by hand or by another program: a NULL dtype, a context "big", a step time
    "abc" or NaN in a run that went well); their values would reach string joins, sorting, number formats
    and the chart's error bars."""
    keep = pd.Series(True, index=rows.index)
    rows = rows.copy()
    for field in NUMBERS + [STEP_MEAN, STEP_STD]:
        if field.key in rows.columns:
            numbers = rows[field.key].map(_number)
            rows[field.key] = numbers.where(numbers.abs() < math.inf)  # inf as NaN: no time
            if field not in (STEP_MEAN, STEP_STD):
                keep &= rows[field.key].notna() & (rows[field.key] == rows[field.key].round())
    keep &= rows[COMPILE.key].isin([0, 1])
    for field in TEXTS:
        keep &= rows[field.key].map(lambda value: isinstance(value, str))
    ok = rows[STATUS.key] == "ok"
    keep &= ~ok | (rows[STEP_MEAN.key].notna() & rows[STEP_STD.key].notna())  # a run that went well has its times
    kept = rows.loc[keep]
    whole = {field.key: "int64" for field in NUMBERS if field.key in kept.columns}
    return kept.astype(whole), int((~keep).sum())


def _number(value: object) -> float:
    """A value of a number column as a float; NaN for what is not a number (text, bytes, NULL, a bool)."""
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan


def write_bench_report(db: str | Path, out: str | Path | None = None, reports: str | Path = "reports") -> Path:
    """The report of a results database; returns the path of report.md."""
    path = Path(db)
    rows = read_results(path)
    needed = [*CONFIGURATION, STATUS, STEP_MEAN, STEP_STD, TIME]
    missing = [field.key for field in needed if field.key not in rows.columns]
    if missing:
        raise UsageError(f"{path}: the runs table lacks {', '.join(missing)}: not a `tracekit bench --db` database")
    rows, left_out = usable_rows(rows)
    folder = Path(out) if out else Path(reports) / "bench"
    ok = rows[rows[STATUS.key] == "ok"].copy()
    # Older databases lack the newer settings: a missing column is one value for every row.
    configuration = [field.key for field in [*CONFIGURATION, *SETTINGS] if field.key in ok.columns]
    # The latest run of each configuration stands for it (insertion order breaks ties of time_utc, which
    # one sweep shares); earlier ones remain in the database.
    latest = ok.sort_values(TIME.key, kind="stable").groupby(configuration, as_index=False, dropna=False).tail(1)
    latest["Variant"] = _variants(latest)
    latest["cell"] = [mean_std(m, s) for m, s in zip(latest[STEP_MEAN.key], latest[STEP_STD.key])]
    index = [MODEL, CTX, BATCH, MODE]
    pivot = latest.pivot_table(
        index=[field.key for field in index], columns="Variant", values="cell", aggfunc="first"
    ).reset_index()
    pivot = pivot.rename(columns={field.key: field.label for field in index})
    pivot.columns = [str(column) for column in pivot.columns]

    def write_into(staging: Path) -> None:
        document = Document(staging)
        document.text(
            f"{BENCH_HEADING} {md_text(path.name)}",
            f"{len(rows)} rows ({len(rows) - len(ok)} not ok: out of memory or error), latest run per configuration. "
            "Step time in ms, mean ± std over the measured steps.",
        )
        if left_out:
            document.note(
                f"{left_out:,} {'row' if left_out == 1 else 'rows'} of {path.name} left out: values that are "
                "not what `tracekit bench` writes (NULL, text where a number belongs, a step time that is not one)"
            )
        if latest.empty:
            document.text("No configuration ran to the end (status ok): nothing to compare.")
        else:
            document.table(pivot)
            scaling = latest.rename(columns={field.key: field.label for field in (MODEL, CTX, STEP_MEAN, STEP_STD)})
            document.picture(
                Chart("bench_scaling", "Step time against context length", {"table": scaling}),
                "step_vs_context",
                "step time against context length",
            )
        failed = rows.loc[rows[STATUS.key] != "ok"]
        if not failed.empty:
            columns = [field.key for field in (MODEL, CTX, BATCH, MODE, DTYPE, STATUS, ERROR) if field.key in rows]
            document.text("Configurations that did not run:")
            document.table(failed.loc[:, columns])
        document.write(staging / "report.md")

    # refused before the picture is drawn when the folder holds anything but a previous report (or an input)
    write_report_folder(folder, write_into)
    return folder / "report.md"
