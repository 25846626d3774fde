"""Sweeps: the product of option lists, one configuration after another, one row each; and the results
database that sweeps append to, so that runs on different days and machines accumulate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

import pandas as pd

from tracekit.model.result import Result, Table
from tracekit.run_config import (
    ATTENTION,
    BATCH,
    COMPILE,
    COMPILE_MS,
    CTX,
    DTYPE,
    ERROR,
    FIELDS,
    GRAPH_BREAKS,
    LABELS,
    MFU,
    MODE,
    MODEL,
    NOISY,
    PARAMS,
    PEAK_MEMORY,
    PHASES,
    RECOMPILES,
    STATUS,
    STEP_CV,
    TFLOPS,
    TFLOPS_CAUSAL,
    TOKENS,
    WARMUP,
    RunConfig,
    mean_std,
    phase_field,
)
from workloads.bench import RunResult, result_record, run, summarize
from workloads.hardware import environment, peak_flops
from workloads.results_db import ResultsDB


def configurations(
    models: Sequence[str],
    contexts: Sequence[int],
    batches: Sequence[int] = (4,),
    modes: Sequence[str] = ("train",),
    dtypes: Sequence[str] = ("fp32",),
    compiles: Sequence[bool] = (False,),
    attentions: Sequence[str] = ("naive",),
    warmup: int | Sequence[int] = 5,
    steps: int = 10,
    device: str = "auto",
    tf32: bool = False,
) -> list[RunConfig]:
    """Every combination of the lists, in a stable order (model outermost, warm-up count innermost)."""
    warmups = [warmup] if isinstance(warmup, int) else list(warmup)
    return [
        RunConfig(model, context, batch, mode, dtype, compiled, attention, count, steps, device, tf32=tf32)
        for model, context, batch, mode, dtype, compiled, attention, count in itertools.product(
            models, contexts, batches, modes, dtypes, compiles, attentions, warmups
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
    configs: Sequence[RunConfig],
    db: ResultsDB | None = None,
    on_result: Callable[[RunResult], None] | None = None,
    compact: bool = False,
) -> Result:
    """Run a sweep: its table (``compact``: one "mean ± std" column per phase), and with ``db`` each
    finished configuration appended to that results database at once (a note says how many rows it
    now holds)."""

    def finished(result: RunResult) -> None:
        if db is not None:
            record = result_record(result)
            db.add(summarize(result), record["samples_ms"], environment(result.device_type))
        if on_result:
            on_result(result)

    results = run_sweep(configs, finished)
    table = results_table(results)
    notes = [f"{db.path}: {db.rows} rows"] if db is not None else []
    unknown = sorted(
        {r.device for r in results if r.device_type == "cuda" and not peak_flops(r.device, r.config.dtype)}
    )
    if unknown:
        notes.append(f"MFU left empty for {', '.join(unknown)}: no data-sheet peak for it in workloads/hardware.py")
    tables = [Table("benchmark", compact_table(table) if compact else table, TITLE)]
    if len({config.warmup for config in configs}) > 1:
        tables.append(Table("warmup", warmup_table(table), "Step time (ms, mean ± std) by warm-up steps"))
    return Result(tables, notes)


def warmup_table(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration, a "mean ± std" step-time column per warm-up count (``table`` is
    ``results_table``'s): the effect of warm-up in one table."""
    keys = [field.label for field in (MODEL, CTX, BATCH, MODE, DTYPE, COMPILE, ATTENTION)]
    cells = table.assign(
        cell=[
            mean_std(m, s)
            for m, s in zip(table[phase_field("step", "mean").label], table[phase_field("step", "std").label])
        ]
    )
    wide = cells.pivot_table(index=keys, columns=WARMUP.label, values="cell", aggfunc="first", sort=False)
    wide.columns = [f"Warm-up {count}" for count in wide.columns]
    return wide.reset_index()


TITLE = (
    "Benchmark (ms per step phase; oom = out of memory, the sweep went on; eager-fallback = compiled, but dynamo "
    "ran it eager; TFLOP/s and MFU count attention over the full context square, TFLOP/s (causal) its causal half)"
)


def results_table(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per configuration, every statistic, columns labelled for people (``config.FIELDS``)."""
    return pd.DataFrame([summarize(result) for result in results], columns=[f.key for f in FIELDS]).rename(
        columns=LABELS
    )


COMPACT_KEYS = (MODEL, CTX, BATCH, MODE, DTYPE, COMPILE, ATTENTION, WARMUP, STATUS, PARAMS)
COMPACT_EXTRA = (
    phase_field("step", "ci95"),
    STEP_CV,
    NOISY,
    phase_field("step", "median"),
    phase_field("step", "min"),
    phase_field("step", "max"),
    TOKENS,
    TFLOPS,
    TFLOPS_CAUSAL,
    MFU,
    PEAK_MEMORY,
    COMPILE_MS,
    RECOMPILES,
    GRAPH_BREAKS,
    ERROR,
)


def compact_table(table: pd.DataFrame) -> pd.DataFrame:
    """The sweep for reading (``table`` is ``results_table``'s): per phase "mean ± std" (ms), the step's
    median/min/max, throughput. Every statistic stays in the full table (CSV, JSON, the database)."""
    compact = table[[field.label for field in COMPACT_KEYS]].copy()
    for phase in PHASES:
        mean, std = table[phase_field(phase, "mean").label], table[phase_field(phase, "std").label]
        compact[f"{phase.capitalize()} (ms)"] = [mean_std(m, s) for m, s in zip(mean, std)]
    for field in COMPACT_EXTRA:
        if table[field.label].notna().any():
            compact[field.label] = table[field.label]
    return compact
