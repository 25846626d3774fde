"""``kernels``, ``ranges`` and ``breakdown`` over many inputs: what one trace contributes (``*_part``)
and how contributions merge into the aggregate tables (``*Merger``).

Exact merges: counts, totals, minima, maxima, means and sample standard deviations (``merge_stats``),
category and type times (sums), busy/span/idle (sums over every GPU of every input). The median of a
group over many inputs is exact while the group has at most ``limit`` instances in all, else from a
quantile sketch; the ``Med Exact`` column says which.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.kernels.columns import command_columns, summary_columns
from tracekit.analysis.kernels.kernels_command import KernelsOptions
from tracekit.analysis.kernels.summary import (
    BLOCK,
    CATEGORY,
    GRID,
    KERNEL_COUNT,
    NAME,
    kernel_groups,
    selected_rows,
    shown,
    summarize_categories,
    unclassified_note,
)
from tracekit.analysis.many import merge_stats
from tracekit.analysis.many.inputs import Part
from tracekit.analysis.primitives.busy import ANY, MEAN, SUM
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.analysis.primitives.kernel_types import SHARE, TIME, TYPE, type_table
from tracekit.analysis.primitives.op_selection import NAME_COLUMNS
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.analysis.ranges.breakdown import (
    PHASE,
    breakdown_times,
    category_shares,
    copy_table,
    gpu_table,
    phase_notes,
    time_column,
)
from tracekit.analysis.ranges.breakdown_command import BreakdownOptions
from tracekit.analysis.ranges.ranges_command import RangesOptions
from tracekit.analysis.ranges.summary import (
    DEPTH,
    EXTRA_COLUMNS,
    RANGE,
    STYLE,
    annotations_by_default,
    range_groups,
    range_rows,
)
from tracekit.model.options import named
from tracekit.model.result import Table
from tracekit.model.schema import GPU_OPS
from tracekit.model.trace import Trace


def kernels_part(trace: Trace, part: Part, options: KernelsOptions, limit: int) -> Part:
    """``kernels`` of one trace (by kernel, category or type) and its mergeable pieces."""
    by, which_ops, ranges = options.by, options.ops, list(options.ranges)
    name, by_launch_config = options.name, options.by_launch_config
    columns = command_columns(by, name, by_launch_config, bool(ranges), options.drop_last_step)
    trace.need("gpu_ops", GPU_OPS.names if columns is None else columns)  # one read of what is used
    window = None
    if options.drop_last_step:
        window, note = launched_before_last_step(trace)
        part.notes.append(note)
    rows, _ = selected_rows(trace, which_ops, ranges, options.same_thread, options.domain, window)
    where = f" inside {', '.join(ranges)}" if ranges else ""
    if by == "type":
        table = type_table(trace.gpu_ops, rows)
        part.tables.append(Table("types", table, f"GPU time by kernel type and overlap{where}: {trace.name}"))
        part.pieces["types"] = table.loc[:, [TYPE, TIME]]
    elif by == "category":
        table = summarize_categories(trace, rows)
        part.notes += unclassified_note(trace, table, rows)
        part.tables.append(Table("categories", shown(table), f"GPU time by category{where}: {trace.name}"))
        part.pieces["categories"] = table.loc[:, [CATEGORY, stats.TOTAL, stats.INSTANCES]]
        part.pieces["names"] = _category_names(trace, rows)
    else:
        table_ops = trace.columns("gpu_ops", summary_columns(name, by_launch_config))
        codes, keys_of = kernel_groups(table_ops, name, by_launch_config, rows)
        durations = table_ops["duration"].to_numpy()
        table = stats.grouped_stats(codes, durations)
        keys = keys_of(table.index.to_numpy())
        own = stats.finish(table, keys)
        own = own.loc[:, stats.STAT_COLUMNS + [column for column in (GRID, BLOCK) if column in keys] + [NAME]]
        top = options.top
        part.tables.append(Table("kernels", own.head(top) if top else own, f"GPU kernels{where}: {trace.name}"))
        part.pieces["kernels"] = merge_stats.partial_of(codes, durations, table, pd.DataFrame(keys), list(keys), limit)
    part.notes += trace.warnings
    return part


def _category_names(trace: Trace, rows: np.ndarray | None) -> pd.DataFrame:
    """The distinct (category, kernel name) pairs of the rows: distinct kernels per category merge as sets."""
    names = trace.columns("gpu_ops", [NAME_COLUMNS["demangled"]])[NAME_COLUMNS["demangled"]]
    codes = names.cat.codes.to_numpy().astype(np.int64)
    categories = op_categories(trace)
    if rows is not None:
        codes, categories = codes[rows], categories[rows]
    pairs = np.unique(categories * (int(codes.max(initial=0)) + 1) + codes)
    radix = int(codes.max(initial=0)) + 1
    labels = np.asarray(names.cat.categories, dtype=object)
    return pd.DataFrame({CATEGORY: np.asarray(CATEGORIES, dtype=object)[pairs // radix], NAME: labels[pairs % radix]})


class KernelsMerger:
    """The aggregate of ``kernels_part``'s pieces: the kernel summary, categories or types of all inputs."""

    def __init__(self, options: KernelsOptions, limit: int):
        self.top, self.limit = options.top, limit
        self.partial: merge_stats.StatsPartial | None = None
        self.sums: dict[str, pd.DataFrame] = {}

    def add(self, index: int, pieces: dict[str, Any]) -> None:
        if "kernels" in pieces:
            partials = [pieces["kernels"]] if self.partial is None else [self.partial, pieces["kernels"]]
            self.partial = merge_stats.merge(partials, self.limit)
        for name, keys in (("types", [TYPE]), ("categories", [CATEGORY]), ("names", [CATEGORY, NAME])):
            if name in pieces:
                frames = [frame for frame in (self.sums.get(name), pieces[name]) if frame is not None]
                stacked = pd.concat(frames, ignore_index=True)
                merged = (
                    stacked.drop_duplicates(ignore_index=True)
                    if name == "names"
                    else stacked.groupby(keys, sort=False, as_index=False).sum()
                )
                self.sums[name] = cast(pd.DataFrame, merged)

    def tables(self, labels: dict[int, Any], column: str) -> tuple[list[Table], list[str]]:
        if "types" in self.sums:
            table = self.sums["types"].sort_values(TIME, ascending=False, kind="stable", ignore_index=True)
            total = int(table[TIME].sum())
            table.insert(1, SHARE, 100 * table[TIME] / total if total else 0.0)
            return [Table("types", table, "GPU time by kernel type and overlap")], []
        if "categories" in self.sums:
            table = self.sums["categories"]
            kernels = self.sums["names"].groupby(CATEGORY).size()
            table[KERNEL_COUNT] = kernels.reindex(table[CATEGORY]).fillna(0).to_numpy(np.int64)
            table.insert(1, stats.TIME_PCT, stats.percent_of_total(table[stats.TOTAL].to_numpy()))
            table = table.sort_values(stats.TOTAL, ascending=False, kind="stable", ignore_index=True)
            return [Table("categories", shown(table), "GPU time by category")], []
        assert self.partial is not None
        merged = merge_stats.statistics(self.partial)
        keys = {key: self.partial.groups[key].to_numpy() for key in self.partial.keys}
        table = stats.finish(merged, keys, {merge_stats.MED_EXACT: merged[merge_stats.MED_EXACT].to_numpy()})
        order = stats.STAT_COLUMNS + [key for key in (GRID, BLOCK) if key in keys] + [merge_stats.MED_EXACT, NAME]
        top = self.top
        table = table.loc[:, order]
        return [Table("kernels", table.head(top) if top else table, "GPU kernels")], _median_notes(table, self.limit)


def _median_notes(table: pd.DataFrame, limit: int) -> list[str]:
    approximate = int((~table[merge_stats.MED_EXACT]).sum())
    if not approximate:
        return []
    return [
        f"Med of {approximate} row(s) is approximate (Med Exact false): more than {limit:,} instances in all "
        f"({named('exact_median_limit')}), so it comes from a quantile sketch within {merge_stats.ALPHA:.1%}"
    ]


def ranges_part(trace: Trace, part: Part, options: RangesOptions, limit: int) -> Part:
    """``ranges`` of one trace and its mergeable pieces."""
    domain, notes = annotations_by_default(trace, options.domain)
    part.notes += notes
    group, durations, describe = range_groups(trace, options.same_thread, options.raw_names, domain)
    table = stats.grouped_stats(group, durations)
    described = describe(table.index.to_numpy())
    part.tables.append(Table("ranges", range_rows(table, described, options.top), f"NVTX ranges: {trace.name}"))
    part.pieces["ranges"] = merge_stats.partial_of(
        group, durations, table, described, [RANGE, STYLE], limit, minimum=(DEPTH,)
    )
    part.notes += (trace.range_notes if notes or domain else []) + trace.warnings
    return part


class RangesMerger:
    """The aggregate of ``ranges_part``'s pieces: nvtxsum's statistics and the GPU columns of all inputs."""

    def __init__(self, options: RangesOptions, limit: int):
        self.top, self.limit = options.top, limit
        self.partial: merge_stats.StatsPartial | None = None

    def add(self, index: int, pieces: dict[str, Any]) -> None:
        partials = [pieces["ranges"]] if self.partial is None else [self.partial, pieces["ranges"]]
        self.partial = merge_stats.merge(partials, self.limit)

    def tables(self, labels: dict[int, Any], column: str) -> tuple[list[Table], list[str]]:
        assert self.partial is not None
        merged = merge_stats.statistics(self.partial)
        described = self.partial.groups.loc[:, [RANGE, STYLE, *EXTRA_COLUMNS]]
        described[merge_stats.MED_EXACT] = merged[merge_stats.MED_EXACT].to_numpy()
        table = range_rows(merged, described, None, [*EXTRA_COLUMNS, merge_stats.MED_EXACT])
        top = self.top
        return [Table("ranges", table.head(top) if top else table, "NVTX ranges")], _median_notes(table, self.limit)


def breakdown_part(trace: Trace, part: Part, options: BreakdownOptions, limit: int) -> Part:
    """``breakdown`` of one trace and its pieces (times, not shares: times add up)."""
    phases, same_thread, which_ops, domain = list(options.phases), options.same_thread, options.ops, options.domain
    drop = options.drop_last_step
    times = breakdown_times(trace, phases, same_thread, which_ops, domain, drop)
    gpus = gpu_table(trace, phases, same_thread, domain, drop)
    copies = copy_table(trace, phases, same_thread, domain, drop)
    if drop:
        part.notes.append(launched_before_last_step(trace)[1])
    part.notes += phase_notes(trace, phases, domain, same_thread=same_thread)  # which ranges its phases are
    part.tables += [
        Table("breakdown", category_shares(times, which_ops), f"GPU time by phase and category: {trace.name}"),
        Table("gpus", gpus, "Busy and idle time per GPU"),
    ]
    if not copies.empty:
        part.tables.append(Table("copies", copies, "Memory copies and sets"))
    part.pieces.update(times=times, gpus=gpus.loc[~gpus["GPU"].isin([SUM, MEAN, ANY])], copies=copies)
    part.notes += trace.warnings
    return part


class BreakdownMerger:
    """The aggregate of ``breakdown_part``'s pieces: phases summed over inputs, every GPU of every input."""

    def __init__(self, options: BreakdownOptions, limit: int):
        self.which_ops = options.ops
        self.sums: dict[str, pd.DataFrame] = {}

    def add(self, index: int, pieces: dict[str, Any]) -> None:
        gpus = pieces["gpus"].assign(GPUs=1)
        for name, frame, keys in (
            ("times", pieces["times"], [PHASE]),
            ("gpus", gpus, [PHASE]),
            ("copies", pieces["copies"], [PHASE, "Operation"]),
        ):
            numeric = frame.drop(columns=[column for column in ("GPU", "Idle (%)") if column in frame])
            stacked = pd.concat([f for f in (self.sums.get(name), numeric) if f is not None], ignore_index=True)
            self.sums[name] = cast(pd.DataFrame, stacked.groupby(keys, sort=False, as_index=False).sum())

    def tables(self, labels: dict[int, Any], column: str) -> tuple[list[Table], list[str]]:
        table = category_shares(self.sums["times"], self.which_ops)
        gpus = self.sums["gpus"]
        rows = []
        for record in gpus.to_dict("records"):
            busy, span, idle = (int(record[column]) for column in ("Busy (ns)", "Span (ns)", "Idle (ns)"))
            count = int(record["GPUs"])
            share = idle * 100.0 / span if span else 0.0
            rows.append(
                {
                    PHASE: record[PHASE],
                    "GPU": SUM,
                    "GPUs": count,
                    "Busy (ns)": busy,
                    "Span (ns)": span,
                    "Idle (ns)": idle,
                    "Idle (%)": share,
                }
            )
            rows.append(
                {
                    PHASE: record[PHASE],
                    "GPU": MEAN,
                    "GPUs": count,
                    "Busy (ns)": busy / count,
                    "Span (ns)": span / count,
                    "Idle (ns)": idle / count,
                    "Idle (%)": share,
                }
            )
        tables = [
            Table("breakdown", table, f"GPU time by phase and category ({time_column(self.which_ops)} summed)"),
            Table("gpus", pd.DataFrame(rows), "Busy and idle time of every GPU of every input"),
        ]
        if not self.sums["copies"].empty:
            tables.append(Table("copies", self.sums["copies"], "Memory copies and sets"))
        return tables, []
