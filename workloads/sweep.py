"""Sweeps: the product of option lists, one configuration after another, one row each; and the results
database that sweeps append to, so that runs on different days and machines accumulate.
"""

from __future__ import annotations

import itertools
import json
import platform
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Sequence

import pandas as pd
import torch

from workloads.bench import RunResult, result_record, run, summarize
from workloads.config import RunConfig

RESULTS_TABLE = "runs"


def configurations(
    models: Sequence[str],
    contexts: Sequence[int],
    batches: Sequence[int] = (4,),
    modes: Sequence[str] = ("train",),
    dtypes: Sequence[str] = ("fp32",),
    compiles: Sequence[bool] = (False,),
    attentions: Sequence[str] = ("naive",),
    warmup: int = 5,
    steps: int = 10,
    device: str = "auto",
) -> list[RunConfig]:
    """Every combination of the lists, in a stable order (model outermost, attention innermost)."""
    return [
        RunConfig(model, context, batch, mode, dtype, compiled, attention, warmup, steps, device)
        for model, context, batch, mode, dtype, compiled, attention in itertools.product(
            models, contexts, batches, modes, dtypes, compiles, attentions
        )
    ]


def run_sweep(configs: Iterable[RunConfig], on_result: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    """Run each configuration in turn; an out-of-memory one is a row with status oom and the sweep goes on."""
    results = []
    for config in configs:
        result = run(config)
        results.append(result)
        if on_result:
            on_result(result)
    return results


def benchmark(
    configs: Sequence[RunConfig], db: str | Path | None = None, on_result: Callable[[RunResult], None] | None = None
) -> tuple[pd.DataFrame, int | None]:
    """Run a sweep; its table, and (with ``db``) the number of rows the results database now holds."""
    results = run_sweep(configs, on_result)
    return results_table(results), (record(db, results) if db else None)


def results_table(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per configuration (see ``bench.summarize`` for the columns)."""
    return pd.DataFrame([summarize(result) for result in results])


COMPACT_KEYS = ["Model", "Ctx", "Batch", "Mode", "Dtype", "Compile", "Attention", "Status", "Params (M)"]


def compact_table(table: pd.DataFrame) -> pd.DataFrame:
    """The sweep for reading: per phase "mean ± std" (ms), the step's median/min/max, throughput.
    Every statistic stays in the full table (CSV, JSON, the results database)."""
    compact = table[[key for key in COMPACT_KEYS if key in table.columns]].copy()
    for phase in ("Forward", "Backward", "Optimizer", "Step"):
        mean, std = table[f"{phase} Mean (ms)"], table[f"{phase} Std (ms)"]
        compact[f"{phase} (ms)"] = [f"{m:,.2f} ± {s:,.2f}" if pd.notna(m) else "" for m, s in zip(mean, std)]
    for column in (
        "Step Median (ms)",
        "Step Min (ms)",
        "Step Max (ms)",
        "Tokens/s",
        "TFLOP/s",
        "MFU (%)",
        "Peak Memory (MiB)",
        "Error",
    ):
        if column in table.columns and table[column].notna().any():
            compact[column] = table[column]
    return compact


def record(db_path: str | Path, results: Sequence[RunResult]) -> int:
    """Append the runs to the SQLite database ``db_path`` (table ``runs``) with where and when they ran.

    Columns are the summary's in snake_case, plus time_utc, host, torch_version, tracekit_version,
    git_revision and the raw samples as JSON. Returns the number of rows the table now holds.
    """
    import sqlite_utils

    from tracekit import __version__

    context = {
        "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "torch_version": str(torch.__version__),
        "tracekit_version": __version__,
        "git_revision": git_revision(),
    }
    rows = []
    for result in results:
        row = {column_name(key): value for key, value in summarize(result).items()}
        row.update(context)
        row["samples_ms"] = json.dumps(result_record(result)["samples_ms"])
        rows.append(row)
    database = sqlite_utils.Database(db_path)
    database[RESULTS_TABLE].insert_all(rows, alter=True)
    return database[RESULTS_TABLE].count


def column_name(label: str) -> str:
    """ "Step Mean (ms)" -> "step_mean_ms", "MFU (%)" -> "mfu_pct"."""
    label = label.replace("%", "pct").replace("/", "_per_")
    return re.sub(r"[^0-9a-z]+", "_", label.lower()).strip("_")


def git_revision() -> str | None:
    """Short commit of the tracekit checkout these workloads run from (None outside git)."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None
