"""NVTX ranges: nsys's ``nvtxsum`` statistics plus the GPU work each range launched; one instance of
an outermost range as a tree; the children of a range and their shares.

Ranges are named by specs (``model.range_specs``): a name, a glob, or a path such as ``step/backward``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import cast

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.primitives.attribution import GPU_OPS, GPU_SPAN, GPU_TIME, range_gpu_stats
from tracekit.analysis.primitives.joins import ATTRIBUTION_COLUMNS
from tracekit.analysis.primitives.selection import known_names, no_ranges_reason
from tracekit.analysis.ranges.gpu_side import gpu_side_spans, range_gpu_busy
from tracekit.analysis.ranges.ranges_command import RangesOptions
from tracekit.errors import UsageError
from tracekit.model.options import named
from tracekit.model.range_names import domain_names, match, relabel, subtree
from tracekit.model.range_specs import op_name
from tracekit.model.result import Result
from tracekit.model.trace import TORCH_PROFILER, Trace

RANGE = "Range"
STYLE = "Style"
DEPTH = "Depth"
GPU_OPS_COLUMN = "GPU Ops"
GPU_TIME_COLUMN = "GPU Time (ns)"
GPU_SPAN_COLUMN = "GPU Span (ns)"
GPU_BUSY_COLUMN = "GPU Busy (ns)"
GPU_BUSY = "gpu_busy"
NSYS_STYLES = {"pushpop": "PushPop", "startend": "StartEnd"}
EXTRA_COLUMNS = [DEPTH, GPU_OPS_COLUMN, GPU_TIME_COLUMN, GPU_SPAN_COLUMN]


STEP_NUMBER = re.compile(r"^((?:[\w.-]+:)?ProfilerStep)#\d+$")


def group_label(name: str) -> str:
    """The row a range name is counted in: an emit_nvtx range ("aten::mm, seq = 3, op_id = 7") in its op's
    ("aten::mm"), a numbered profiler step ("ProfilerStep#12") in "ProfilerStep#*" (the spec that selects
    them all), any other name in its own."""
    step = STEP_NUMBER.match(name)
    return f"{step.group(1)}#*" if step else op_name(name)


def grouped_names(names: pd.Series, raw_names: bool = False) -> pd.Series:
    """Range names as the tables group them (``group_label``), unless ``raw_names``; one string per
    distinct name, not per row."""
    return names if raw_names else relabel(names, group_label)


def ranges_of(trace: Trace, domain: str | None) -> pd.DataFrame:
    """The trace's ranges, or those of one domain ("default": the default domain)."""
    ranges = trace.ranges
    if domain is None:
        return ranges
    return ranges.loc[domain_names(ranges, domain)[1]]


def range_groups(
    trace: Trace, same_thread: bool = False, raw_names: bool = False, domain: str | None = None, gpu_side: bool = False
) -> tuple[np.ndarray, np.ndarray, Callable[[np.ndarray], pd.DataFrame]]:
    """Per range: its group code (name, emit_nvtx ranges by op unless ``raw_names``, and style) and CPU
    duration (ns); and a function giving, for group codes, Range, Style, the shallowest Depth and the
    GPU work launched inside (GPU Ops, GPU Time (ns), GPU Span (ns), with ``gpu_side`` GPU Busy (ns):
    sums over the group's ranges)."""
    # The GPU ops and calls that attribution needs load behind the ranges: their reads wait for the ranges'
    # and run while the ranges are nested. Without ranges the error comes at once, not after them.
    trace.need("gpu_ops", ATTRIBUTION_COLUMNS)
    attribution_tables_loaded = trace.load_behind(["launches", "gpu_ops"])
    ranges = ranges_of(trace, domain)
    if ranges.empty:
        raise UsageError(f"no NVTX ranges to list in {trace.name}: {no_ranges_reason(trace, domain)}")
    attribution_tables_loaded()
    gpu = range_gpu_stats(trace, ranges, same_thread)
    if gpu_side:
        gpu[GPU_BUSY] = range_gpu_busy(trace, ranges, same_thread)
    names = grouped_names(ranges["name"], raw_names)
    # Group on integer codes (name code * 2 + style code): factorizing millions of strings costs seconds.
    style_codes = ranges["style"].cat.codes.to_numpy().astype(np.int64)
    group = names.cat.codes.to_numpy().astype(np.int64) * 2 + style_codes
    durations = ranges["duration"].to_numpy()

    def describe(codes: np.ndarray) -> pd.DataFrame:
        size = int(codes.max(initial=-1)) + 1
        sums = {
            column: np.bincount(group, weights=gpu[source].to_numpy(), minlength=size)[codes].astype(np.int64)
            for column, source in (
                (GPU_OPS_COLUMN, GPU_OPS),
                (GPU_TIME_COLUMN, GPU_TIME),
                (GPU_SPAN_COLUMN, GPU_SPAN),
                (GPU_BUSY_COLUMN, GPU_BUSY),
            )
            if source in gpu
        }
        # A Series grouped and reduced is a Series; pandas annotates groupby reductions with every scalar type too.
        depth_per_group = cast(pd.Series, pd.Series(ranges["depth"].to_numpy()).groupby(group).min())
        styles = np.array([NSYS_STYLES[style] for style in ranges["style"].cat.categories], dtype=object)
        return pd.DataFrame(
            {
                RANGE: np.asarray(names.cat.categories, dtype=object)[codes // 2],
                STYLE: styles[codes % 2],
                DEPTH: depth_per_group.reindex(codes).to_numpy(),
                **sums,
            },
            index=pd.Index(codes, dtype=np.int64),
        )

    return group, durations, describe


def range_table(
    trace: Trace,
    same_thread: bool = False,
    top: int | None = None,
    raw_names: bool = False,
    domain: str | None = None,
    gpu_side: bool = False,
) -> pd.DataFrame:
    """``tracekit ranges``: per range name (emit_nvtx ranges by op unless ``raw_names``) and style,
    nsys nvtxsum's statistics of CPU durations plus the GPU work launched inside: GPU Ops, GPU Time (ns,
    summed op durations), GPU Span (ns, summed per-instance first-op-start to last-op-end), and the
    shallowest depth the name occurs at. With ``raw_names`` the rows are nvtxsum's rows.
    """
    group, durations, describe = range_groups(trace, same_thread, raw_names, domain, gpu_side)
    table = stats.grouped_stats(group, durations)
    described = describe(table.index.to_numpy())
    if not gpu_side:
        return range_rows(table, described, top)
    spans = gpu_side_spans(trace, (lambda name: name) if raw_names else group_label)
    if spans.empty:  # no GPU-side spans (nsys exports, most torch.profiler traces): no empty columns
        return range_rows(table, described, top, [*EXTRA_COLUMNS, GPU_BUSY_COLUMN])
    for column in spans.columns:
        described[column] = spans[column].reindex(described[RANGE].to_numpy()).fillna(0).to_numpy(np.int64)
    return range_rows(table, described, top, [*EXTRA_COLUMNS, GPU_BUSY_COLUMN, *spans.columns])


def range_rows(
    table: pd.DataFrame, described: pd.DataFrame, top: int | None = None, extra_columns: list[str] = EXTRA_COLUMNS
) -> pd.DataFrame:
    """nsys's rounding and column order for statistics ``table`` and their ``range_groups`` columns
    (aligned by row; ``extra_columns`` of them between the statistics and the name); largest total first."""
    extra = {column: described[column].to_numpy() for column in extra_columns}
    keys = {RANGE: described[RANGE].to_numpy(), STYLE: described[STYLE].to_numpy()}
    table = stats.finish(table.reset_index(drop=True), keys, extra)
    table = table.loc[:, stats.STAT_COLUMNS + [STYLE, *extra, RANGE]]  # nsys's order, the name last
    return table.head(top) if top else table


def range_tree(
    trace: Trace,
    root: str | None = None,
    instance: int | None = None,
    max_depth: int | None = None,
    same_thread: bool = False,
    domain: str | None = None,
) -> pd.DataFrame:
    """One instance of an outermost range as an indented tree (columns Range, Start (ns) from the
    root's start, CPU (ns), GPU Ops, GPU Time (ns), GPU Span (ns)); each range shows its own name.

    ``root`` (a name) defaults to the outermost range name with the most total time; ``instance``
    (0-based, in time order) to the instance of median duration, a typical one. With ``domain``, the
    root and the ranges under it are that domain's, named by their text.
    """
    ranges = trace.ranges
    names, allowed = domain_names(ranges, domain)
    if not allowed.any():
        raise UsageError(f"no NVTX ranges to draw as a tree in {trace.name}: {no_ranges_reason(trace, domain)}")
    depth = ranges["depth"].to_numpy()
    if root is None:  # the shallowest ranges of the domain are its outermost
        outer = allowed & (depth == depth[allowed].min())
        root = str(ranges["duration"].loc[outer].groupby(names.loc[outer], observed=True).sum().idxmax())
    candidates = ranges.loc[(names == root).to_numpy() & allowed].sort_values("start")
    if candidates.empty:
        raise UsageError(f"no NVTX range named {root!r} in {trace.name}; {known_names(trace, domain)}")
    if instance is None:
        instance = int(np.argsort(candidates["duration"].to_numpy(), kind="stable")[(len(candidates) - 1) // 2])
    if not 0 <= instance < len(candidates):
        raise UsageError(
            f"{root!r} has {len(candidates)} instances: {named('instance')} takes 0 to {len(candidates) - 1}"
        )
    top = candidates.iloc[instance]
    tree = subtree(ranges, int(top["range_id"]))
    if domain is not None:
        tree = tree.loc[allowed[ranges.index.get_indexer(tree.index)]]
    if max_depth is not None:
        tree = tree.loc[(tree["depth"] - top["depth"]).to_numpy() <= max_depth]
    gpu = range_gpu_stats(trace, tree, same_thread)
    order = _preorder(tree)
    tree, gpu = tree.iloc[order], gpu.iloc[order]
    indent = (tree["depth"] - top["depth"]).to_numpy()
    return pd.DataFrame(
        {
            RANGE: ["  " * level + str(name) for level, name in zip(indent, names.loc[tree.index])],
            "Start (ns)": (tree["start"] - top["start"]).to_numpy(),
            "CPU (ns)": tree["duration"].to_numpy(),
            GPU_OPS_COLUMN: gpu[GPU_OPS].to_numpy(),
            GPU_TIME_COLUMN: gpu[GPU_TIME].to_numpy(),
            GPU_SPAN_COLUMN: gpu[GPU_SPAN].to_numpy(),
        }
    )


def _preorder(tree: pd.DataFrame) -> np.ndarray:
    """Row order that prints parents before their children and siblings by start time."""
    # Sorting by (start, -end) is a pre-order walk for properly nested ranges of one thread.
    return np.lexsort((-tree["end"].to_numpy(), tree["start"].to_numpy()))


def range_within(
    trace: Trace, parent_spec: str, same_thread: bool = False, raw_names: bool = False, domain: str | None = None
) -> pd.DataFrame:
    """Children of the ranges matching ``parent_spec`` (in ``domain`` when given), by name (emit_nvtx
    ranges by op unless ``raw_names``): their CPU and GPU time and share of the parents' (e.g. attention
    scores vs softmax vs attention output inside attention).

    Columns: Range, Instances, CPU (ns), CPU (%), GPU Time (ns), GPU (%) of the parents' totals.
    """
    ranges = ranges_of(trace, domain)
    parents = ranges.loc[match(ranges, parent_spec, domain)] if not ranges.empty else ranges
    if parents.empty:
        raise UsageError(f"no NVTX range matches {parent_spec!r} in {trace.name}; {known_names(trace, domain)}")
    children = ranges.loc[np.isin(ranges["parent"].to_numpy(), parents["range_id"].to_numpy())]
    both = pd.concat([parents, children])
    gpu = range_gpu_stats(trace, both, same_thread)
    parent_gpu = gpu.iloc[: len(parents)]
    child_gpu = gpu.iloc[len(parents) :]
    cpu_total = float(parents["duration"].sum())
    gpu_total = float(parent_gpu[GPU_TIME].sum())
    frame = pd.DataFrame(
        {
            RANGE: grouped_names(children["name"], raw_names).astype(object).to_numpy(),
            "cpu": children["duration"].to_numpy(),
            "gpu": child_gpu[GPU_TIME].to_numpy(),
        }
    )
    grouped = frame.groupby(RANGE, sort=False).agg(Instances=("cpu", "size"), cpu=("cpu", "sum"), gpu=("gpu", "sum"))
    rest = pd.DataFrame(
        {
            "Instances": [len(parents)],
            "cpu": [cpu_total - grouped["cpu"].sum()],
            "gpu": [gpu_total - grouped["gpu"].sum()],
        },
        index=[f"(in {parent_spec} itself)"],
    )
    grouped = pd.concat([grouped.sort_values("cpu", ascending=False), rest])
    share = lambda part, whole: part * 100.0 / whole if whole else np.zeros(len(part))
    return pd.DataFrame(
        {
            RANGE: grouped.index.astype(object),
            "Instances": grouped["Instances"].to_numpy(np.int64),
            "CPU (ns)": grouped["cpu"].to_numpy(np.int64),
            "CPU (%)": share(grouped["cpu"].to_numpy(float), cpu_total),
            GPU_TIME_COLUMN: grouped["gpu"].to_numpy(np.int64),
            "GPU (%)": share(grouped["gpu"].to_numpy(float), gpu_total),
        }
    )


def annotations_by_default(trace: Trace, domain: str | None) -> tuple[str | None, list[str]]:
    """The domain ``tracekit ranges`` lists: the one asked for, else, in a torch.profiler trace, its
    record_function annotations (CPU operators outnumber them many times over), with a note saying
    where the rest is; in a trace that does not tell them apart (torch 1.8), everything."""
    if domain is not None or trace.meta.tool != TORCH_PROFILER:
        return domain, []
    annotations = domain_names(trace.ranges, "default")[1]
    if not annotations.any() or annotations.all():
        return domain, []
    note = (
        f"record_function annotations only: {int((~annotations).sum()):,} CPU operators and GPU-side spans are "
        f"domains cpu_op and gpu ({named('domain')} cpu_op lists the operators)"
    )
    return "default", [note]


def range_summary(trace: Trace, options: RangesOptions | None = None) -> Result:
    """``ranges``: the range table, or (``tree``) one instance as a tree, or (``within``) the children of
    the matching ranges. emit_nvtx ranges are grouped by op unless ``raw_names``; ``domain`` keeps one
    NVTX domain ("default" for the default one)."""
    options = options or RangesOptions()
    top, tree, root, instance, max_depth = options.top, options.tree, options.root, options.instance, options.max_depth
    within, same_thread, raw_names, domain = options.within, options.same_thread, options.raw_names, options.domain
    if tree:
        table = range_tree(trace, root, instance, max_depth, same_thread, domain)
        return Result.of("tree", table, f"Range tree: {trace.name}", trace.range_notes + trace.warnings)
    if within:
        table = range_within(trace, within, same_thread, raw_names, domain)
        return Result.of("within", table, f"Inside {within}: {trace.name}", trace.range_notes + trace.warnings)
    domain, notes = annotations_by_default(trace, domain)
    table = range_table(trace, same_thread, top, raw_names, domain, options.gpu_side)
    if options.gpu_side:
        notes.append(
            "GPU Busy: per instance the union of the GPU ops it launched (overlapping ops once), summed; "
            "GPU-Side Spans and Time, where the trace has them: torch.profiler's GPU-side spans of the "
            "range's name (domain gpu)"
        )
    if not raw_names:
        names = ranges_of(trace, domain)["name"].unique()
        rows = {group_label(str(name)) for name in names}
        if len(rows) < len(names):
            notes.append(
                f"numbered profiler steps and emit_nvtx ranges grouped: {len(names):,} names in {len(rows):,} "
                f"rows ({named('raw_names')} keeps every name apart, as nsys's nvtxsum does)"
            )
    return Result.of("ranges", table, f"NVTX ranges: {trace.name}", notes + trace.range_notes + trace.warnings)
