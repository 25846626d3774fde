"""Kernel summary: nsys's ``gpukernsum`` / ``cuda_gpu_kern_sum``, and category shares.

Definitions (see ``stats``): per kernel name, Total / Instances / Avg / Med / Min / Max / StdDev of
the kernel durations, Time (%) of the summed total, largest total first. nsys 2022.4 also splits a
name by grid and block dimensions (``by_launch_config``); 2023.1+ group by name only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.kernels.columns import CATEGORY_COLUMNS, command_columns, summary_columns
from tracekit.analysis.kernels.kernels_command import KernelsOptions
from tracekit.analysis.primitives.attribution import ops_in_ranges
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.analysis.primitives.kernel_hardware import kernel_hardware
from tracekit.analysis.primitives.kernel_types import type_table
from tracekit.analysis.primitives.op_selection import NAME_COLUMNS, kernel_mask
from tracekit.analysis.primitives.selection import select_ranges
from tracekit.analysis.primitives.step_window import last_step_start, launched_before_last_step
from tracekit.analysis.stats import SHOWN_SHARE
from tracekit.errors import NoGpuDataError
from tracekit.model.derived import per_trace
from tracekit.model.options import OptionError, named
from tracekit.model.result import Result
from tracekit.model.schema import GPU_OPS
from tracekit.model.trace import Trace

NAME = "Name"
GRID = "GridXYZ"
BLOCK = "BlockXYZ"
CATEGORY = "Category"
KERNEL_COUNT = "Kernels"


def kernel_groups(
    ops: pd.DataFrame, name: str = "demangled", by_launch_config: bool = False, rows: np.ndarray | None = None
) -> tuple[np.ndarray, Callable[[np.ndarray], dict[str, np.ndarray | list[str]]]]:
    """Per GPU op: its group code (kernel name, and launch configuration with ``by_launch_config``; -1
    outside ``rows``), and a function giving the key columns (Name[, GridXYZ, BlockXYZ]) of codes."""
    if name not in NAME_COLUMNS:
        raise OptionError(f"{named('name')} {name!r} is not one of demangled, short")
    names = ops[NAME_COLUMNS[name]]
    parts = [names.cat.codes.to_numpy()]
    uniques = [np.asarray(names.cat.categories, dtype=object)]
    if by_launch_config:
        for axis in ("grid", "block"):
            codes, packed = pd.factorize(_pack_dims(ops, axis))
            parts.append(codes.astype(np.int32))  # few configurations: half the memory of int64 codes
            uniques.append(np.asarray(packed))
    combined, radices = stats.combine_codes(parts)
    del parts
    if rows is not None:
        combined[~rows] = -1

    def keys_of(codes: np.ndarray) -> dict[str, np.ndarray | list[str]]:
        key_codes = stats.split_codes(codes, radices)
        keys: dict[str, np.ndarray | list[str]] = {NAME: uniques[0][key_codes[0]]}
        if by_launch_config:
            keys[GRID] = _format_dims(uniques[1][key_codes[1]])
            keys[BLOCK] = _format_dims(uniques[2][key_codes[2]])
        return keys

    return combined, keys_of


def summarize_kernels(
    ops: pd.DataFrame, name: str = "demangled", by_launch_config: bool = False, rows: np.ndarray | None = None
) -> pd.DataFrame:
    """Per kernel (and launch configuration): the gpukernsum statistics of the ``rows`` of ``ops``.

    Columns: Time (%), Total Time (ns), Instances, Avg (ns), Med (ns), Min (ns), Max (ns),
    StdDev (ns), [GridXYZ, BlockXYZ,] Name. Launch configurations print as nsys does ("%4d %4d %4d").
    Rows are selected by a mask rather than copied: a 10M-row table is never duplicated.
    """
    combined, keys_of = kernel_groups(ops, name, by_launch_config, rows)
    table = stats.grouped_stats(combined, ops["duration"].to_numpy())
    del combined
    summary = stats.finish(table, keys_of(table.index.to_numpy()))
    return summary.loc[:, stats.STAT_COLUMNS + ([GRID, BLOCK] if by_launch_config else []) + [NAME]]


def kernel_table(
    trace: Trace,
    top: int | None = None,
    name: str = "demangled",
    by_launch_config: bool = False,
    which_ops: str = "kernels",
    ranges: list[str] | None = None,
    per_instance: bool = False,
    same_thread: bool = False,
    domain: str | None = None,
    window: np.ndarray | None = None,
) -> pd.DataFrame:
    """``tracekit kernels``: the kernel summary of a trace, or of the GPU ops launched inside ``ranges``
    (range specs; see ``model.range_specs``). ``per_instance`` divides Total Time and Instances by the
    number of matching range instances (nested matches count once): the per-step figure.
    Time (%) is of all listed rows, before ``top`` cuts them.
    """
    # Said before the first read (the kind, for the mask), so that one read fetches them all.
    columns = summary_columns(name, by_launch_config)
    trace.need("gpu_ops", columns if not ranges and window is None else GPU_OPS.names)
    rows, instances = selected_rows(trace, which_ops, ranges, same_thread, domain, window)
    if ranges or window is not None:
        summary = summarize_kernels(trace.columns("gpu_ops", columns), name, by_launch_config, rows)
    else:
        summary = whole_trace_summary(trace, name, by_launch_config, which_ops)
    if per_instance:
        summary = _per_instance(summary, instances, [stats.TOTAL, stats.INSTANCES])
    return summary.head(top) if top else summary


@per_trace
def whole_trace_summary(trace: Trace, name: str, by_launch_config: bool, which_ops: str) -> pd.DataFrame:
    """The kernel summary of the whole trace (``which_ops``: kernels or all), asked for by several tables of a
    report: computed once per trace and choice."""
    columns = summary_columns(name, by_launch_config)
    return summarize_kernels(trace.columns("gpu_ops", columns), name, by_launch_config, kernel_mask(trace, which_ops))


def selected_rows(
    trace: Trace,
    which_ops: str,
    ranges: list[str] | None,
    same_thread: bool,
    domain: str | None = None,
    window: np.ndarray | None = None,
) -> tuple[np.ndarray | None, int]:
    """Mask of GPU ops to summarize and the number of range instances they come from (1 for a whole
    trace); ``window`` is a mask the ops must also be in (HTA's step window)."""
    rows = kernel_mask(trace, which_ops)
    if window is not None:
        rows = window if rows is None else rows & window
    if not ranges:
        return rows, 1
    chosen = select_ranges(trace, ranges, domain)
    inside = ops_in_ranges(trace, chosen, same_thread)
    if rows is not None:
        inside &= rows
    if not inside.any():
        raise NoGpuDataError(
            f"no GPU {'kernels' if which_ops == 'kernels' else 'operations'} were launched inside "
            f"{', '.join(ranges)} in {trace.name}"
            + (
                f" on the ranges' own threads (without {named('same_thread')}, other threads count)"
                if same_thread
                else ""
            )
        )
    outermost = chosen["outermost"].to_numpy()
    cutoff = last_step_start(trace) if window is not None else None
    if cutoff is not None:  # an instance of the left-out step is no instance
        outermost = outermost & (chosen["start"].to_numpy() < cutoff)
    return inside, int(outermost.sum())


def _per_instance(table: pd.DataFrame, instances: int, columns: list[str]) -> pd.DataFrame:
    table = table.copy()
    for column in columns:
        table[column] = table[column].to_numpy(float) / instances
    return table


def summarize_categories(trace: Trace, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Share of GPU time per kernel category of the ``rows`` of ``trace.gpu_ops``. Columns: Category,
    Time (%), Total Time (ns), Instances, Kernels.

    Every category appears, zeros included, so the tables of two traces have the same rows (merges and
    comparisons rely on it); ``shown`` leaves out the empty ones for people.
    """
    ops = trace.columns("gpu_ops", CATEGORY_COLUMNS)
    categories = op_categories(trace)
    names = ops["name"].cat.codes.to_numpy().astype(np.int64)
    durations = ops["duration"].to_numpy()
    if rows is not None:
        categories, names, durations = categories[rows], names[rows], durations[rows]
    count = len(CATEGORIES)
    totals = np.bincount(categories, weights=durations, minlength=count).astype(np.int64)
    instances = np.bincount(categories, minlength=count)
    # distinct kernels per category: distinct (category, name) pairs
    pairs = np.unique(categories * (int(names.max(initial=0)) + 1) + names) if len(names) else np.empty(0, np.int64)
    kernels = np.bincount(pairs // (int(names.max(initial=0)) + 1), minlength=count)
    result = pd.DataFrame(
        {
            CATEGORY: CATEGORIES,
            stats.TIME_PCT: stats.percent_of_total(totals),
            stats.TOTAL: totals,
            stats.INSTANCES: instances,
            KERNEL_COUNT: kernels,
        }
    )
    # Largest first; the stable sort keeps the fixed category order among equal totals (the zeros).
    return result.sort_values(stats.TOTAL, ascending=False, kind="stable").reset_index(drop=True)


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """A category table without the categories no op fell in (rows that carry no information)."""
    return table.loc[table[stats.INSTANCES] > 0].reset_index(drop=True)


def category_table(
    trace: Trace,
    which_ops: str = "kernels",
    ranges: list[str] | None = None,
    per_instance: bool = False,
    same_thread: bool = False,
    domain: str | None = None,
) -> pd.DataFrame:
    """``kernels`` by category (optionally of the ops inside ``ranges``, per instance)."""
    rows, instances = selected_rows(trace, which_ops, ranges, same_thread, domain)
    return _categories_of(trace, rows, instances, per_instance)


def _categories_of(trace: Trace, rows: np.ndarray | None, instances: int, per_instance: bool) -> pd.DataFrame:
    table = summarize_categories(trace, rows)
    return _per_instance(table, instances, [stats.TOTAL, stats.INSTANCES]) if per_instance else table


def unclassified_note(trace: Trace, table: pd.DataFrame, rows: np.ndarray | None, shown: int = 3) -> list[str]:
    """A note naming the largest kernels no rule classifies ("other"), so a user sees what is missing."""
    other = table.loc[table[CATEGORY] == "other"]
    if other.empty or other[stats.TOTAL].iloc[0] == 0 or other[stats.TIME_PCT].iloc[0] < SHOWN_SHARE:
        return []  # nothing unclassified, or less than the 0.05 % a share shows
    mask = op_categories(trace) == CATEGORIES.index("other")
    if rows is not None:
        mask &= rows
    ops = trace.columns("gpu_ops", ["short_name", "duration"])
    short = ops["short_name"]
    totals = np.bincount(short.cat.codes.to_numpy()[mask], weights=ops["duration"].to_numpy()[mask])
    largest = np.argsort(-totals, kind="stable")[:shown]
    labels = np.asarray(short.cat.categories, dtype=object)
    names = ", ".join(f"{labels[code]} ({totals[code] / 1e6:,.3f} ms)" for code in largest if totals[code] > 0)
    return [f"unclassified ('other'): {other[stats.TIME_PCT].iloc[0]:.1f}% of the time; largest: {names}"]


def _pack_dims(ops: pd.DataFrame, axis: str) -> np.ndarray:
    """x, y, z of a launch configuration as one int64 (CUDA limits: x < 2^31, y and z < 2^16).

    Built in place: one extra array of the table's length at a time, not four.
    """
    packed = ops[f"{axis}_x"].to_numpy(np.int64)
    packed <<= 32
    part = ops[f"{axis}_y"].to_numpy(np.int64)
    part <<= 16
    packed |= part
    del part
    packed |= ops[f"{axis}_z"].to_numpy(np.int64)
    return packed


def _format_dims(packed: np.ndarray) -> list[str]:
    values = np.asarray(packed, dtype=np.int64)
    return [f"{x:4d} {y:4d} {z:4d}" for x, y, z in zip(values >> 32, (values >> 16) & 0xFFFF, values & 0xFFFF)]


def kernel_summary(trace: Trace, options: KernelsOptions | None = None) -> Result:
    """``kernels``: the kernel summary (``by`` "kernel"), the time per category ("category") or per HTA
    kernel type and overlap ("type", see ``kernel_types``); ``ranges`` (specs) select the ops launched
    inside them, in NVTX ``domain`` when given; ``drop_last_step`` applies HTA's step window."""
    options = options or KernelsOptions()
    by, top, name, by_launch_config, which_ops = (
        options.by,
        options.top,
        options.name,
        options.by_launch_config,
        options.ops,
    )
    ranges, per_instance, same_thread = list(options.ranges), options.per_instance, options.same_thread
    domain, drop_last_step = options.domain, options.drop_last_step
    where = f" inside {', '.join(ranges)}" + (" (per instance)" if per_instance else "") if ranges else ""
    # The columns this command reads, said before the first read so that one read fetches them all: a
    # range filter, a step window or the type split reads the whole table.
    columns = command_columns(by, name, by_launch_config, bool(ranges), drop_last_step)
    trace.need("gpu_ops", GPU_OPS.names if columns is None else columns)
    window, notes = None, list(trace.range_notes if domain else [])
    if drop_last_step:
        window, note = launched_before_last_step(trace)
        notes.append(note)
    if by in ("category", "type"):
        rows, instances = selected_rows(trace, which_ops, ranges, same_thread, domain, window)  # once: ranges cost most
        if by == "type":
            title = f"GPU time by kernel type and overlap (as HolisticTraceAnalysis){where}: {trace.name}"
            return Result.of("types", type_table(trace.gpu_ops, rows), title, notes + trace.warnings)
        table = _categories_of(trace, rows, instances, per_instance)
        notes += unclassified_note(trace, table, rows)
        return Result.of(
            "categories", shown(table), f"GPU time by category{where}: {trace.name}", notes + trace.warnings
        )
    table = kernel_table(
        trace,
        top=top,
        name=name,
        by_launch_config=by_launch_config,
        which_ops=which_ops,
        ranges=ranges,
        per_instance=per_instance,
        same_thread=same_thread,
        domain=domain,
        window=window,
    )
    if options.hardware:
        table = with_hardware(trace, table, name)
    return Result.of("kernels", table, f"GPU kernels{where}: {trace.name}", notes + trace.warnings)


def with_hardware(trace: Trace, table: pd.DataFrame, name: str) -> pd.DataFrame:
    """The summary with each kernel's Precision and Unit (from its name) and Occupancy (%), the theoretical
    occupancy of all its instances weighted by their time (``primitives.kernel_hardware``)."""
    ops = trace.gpu_ops
    hardware = kernel_hardware(trace)
    names = ops[NAME_COLUMNS[name]]
    kernel = (ops["kind"] == "kernel").to_numpy()
    frame = pd.DataFrame(
        {
            "name": names.astype(object).to_numpy()[kernel],
            "precision": hardware["precision"].astype(object).to_numpy()[kernel],
            "unit": hardware["unit"].astype(object).to_numpy()[kernel],
            "weighted": np.nan_to_num(hardware["occupancy"].to_numpy()[kernel]) * ops["duration"].to_numpy()[kernel],
            "timed": np.where(
                np.isnan(hardware["occupancy"].to_numpy()[kernel]), 0, ops["duration"].to_numpy()[kernel]
            ),
        }
    )
    per_name = frame.groupby("name", sort=False).agg(
        precision=("precision", "first"), unit=("unit", "first"), weighted=("weighted", "sum"), timed=("timed", "sum")
    )
    found = per_name.reindex(table[NAME].astype(object).to_numpy())
    table = table.copy()
    for column in ("precision", "unit"):  # None, not NaN, where the name does not say
        said = [value if isinstance(value, str) else None for value in found[column].to_numpy(object)]
        table.insert(len(table.columns) - 1, column.capitalize(), pd.Series(said, dtype=object, index=table.index))
    with np.errstate(divide="ignore", invalid="ignore"):
        occupancy = np.where(found["timed"] > 0, 100 * found["weighted"] / found["timed"], np.nan)
    table.insert(len(table.columns) - 1, "Occupancy (%)", occupancy)
    return table
