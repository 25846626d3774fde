"""NVTX ranges: nsys's ``nvtxsum`` statistics plus the GPU work each range launched; one step as a
tree; the children of a range and their shares.

Range specs name ranges for ``kernels --range`` and ``breakdown --phases``: ``forward`` is every
range named forward; ``step/backward`` is every backward range nested (at any depth) inside a step
range, on the same thread; each part may be a glob (``aten::linear*``, ``layer.*``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.attribution import GPU_OPS, GPU_SPAN, GPU_TIME, range_gpu_stats
from tracekit.errors import UsageError
from tracekit.trace import Trace, names_matching

RANGE = "Range"
STYLE = "Style"
DEPTH = "Depth"
GPU_OPS_COLUMN = "GPU Ops"
GPU_TIME_COLUMN = "GPU Time (ns)"
GPU_SPAN_COLUMN = "GPU Span (ns)"
NSYS_STYLES = {"pushpop": "PushPop", "startend": "StartEnd"}


def spec_names(specs: list[str]) -> set[str]:
    """All range names a list of specs mentions (what a selective read must load)."""
    names = set()
    for spec in specs:
        parts = [part for part in spec.split("/") if part]
        if not parts:
            raise UsageError(
                f"empty range spec {spec!r}: give a range name such as forward, or a path such as step/backward"
            )
        names.update(parts)
    return names


def match_spec(ranges: pd.DataFrame, spec: str) -> np.ndarray:
    """Mask of ranges matching ``spec``: named its last part, inside ranges named the earlier parts in order.

    ``ranges`` must carry depth/parent (any selection that contains the spec's names will do).
    """
    parts = [part for part in spec.split("/") if part]
    matched = names_matching(ranges["name"], [parts[-1]])
    position = np.arange(len(ranges))
    # "current" holds, per candidate, the row from which to look further up for the next part.
    current = position.copy()
    row_of_id = pd.Series(position, index=ranges["range_id"].to_numpy())
    parent_row = row_of_id.reindex(ranges["parent"].to_numpy()).fillna(-1).to_numpy(np.int64)
    for part in reversed(parts[:-1]):
        ancestor = _nearest_ancestor_named(
            parent_row, names_matching(ranges["name"], [part]), ranges["depth"].to_numpy()
        )
        found = ancestor[current] >= 0
        matched &= found
        current = np.where(found, ancestor[current], current)
    return matched


def _nearest_ancestor_named(parent_row: np.ndarray, is_named: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Per row, the nearest strict ancestor whose ``is_named`` is set (row index), or -1. One pass per level."""
    nearest = np.full(len(parent_row), -1, dtype=np.int64)
    for level in range(1, int(depth.max(initial=0)) + 1):
        rows = np.flatnonzero(depth == level)
        parents = parent_row[rows]
        valid = parents >= 0
        rows, parents = rows[valid], parents[valid]
        nearest[rows] = np.where(is_named[parents], parents, nearest[parents])
    return nearest


def select_ranges(trace: Trace, specs: list[str]) -> pd.DataFrame:
    """Range instances matching any of ``specs``, with an ``outermost`` column (not inside another match).

    Reads only the ranges the specs name. Raises UsageError listing the trace's range names when
    nothing matches.
    """
    selection = trace.ranges_named(spec_names(specs))
    matched = np.zeros(len(selection), dtype=bool)
    for spec in specs:
        matched |= match_spec(selection, spec)
    if not matched.any():
        raise UsageError(f"no NVTX range matches {', '.join(specs)} in {trace.name}; {_known_names(trace)}")
    chosen = selection[matched].copy()
    chosen["outermost"] = ~_inside_other(selection, matched)[matched]
    return chosen


def _inside_other(selection: pd.DataFrame, matched: np.ndarray) -> np.ndarray:
    """Per row: has an ancestor that is itself matched (so counting both would count one instance twice)."""
    position = pd.Series(np.arange(len(selection)), index=selection["range_id"].to_numpy())
    parent_row = position.reindex(selection["parent"].to_numpy()).fillna(-1).to_numpy(np.int64)
    depth = selection["depth"].to_numpy()
    inside = np.zeros(len(selection), dtype=bool)
    for level in range(1, int(depth.max(initial=0)) + 1):
        rows = np.flatnonzero((depth == level) & (parent_row >= 0))
        parents = parent_row[rows]
        inside[rows] = matched[parents] | inside[parents]
    return inside


def _known_names(trace: Trace) -> str:
    names = trace.ranges["name"].value_counts()
    if names.empty:
        return "it has no NVTX ranges (capture with --trace=nvtx and annotate the code)"
    shown = ", ".join(str(name) for name in names.index[:8])
    return f"its ranges include: {shown}" + (" ..." if len(names) > 8 else "")


def range_paths(ranges: pd.DataFrame) -> pd.Categorical:
    """Each range's path from its outermost enclosing range, e.g. "step/forward/layer.3/attention".

    Built per distinct (parent path, name) pair, level by level, so strings are made once per path.
    """
    count = len(ranges)
    position = pd.Series(np.arange(count), index=ranges["range_id"].to_numpy())
    parent_row = position.reindex(ranges["parent"].to_numpy()).fillna(-1).to_numpy(np.int64)
    name_codes = ranges["name"].cat.codes.to_numpy().astype(np.int64)
    name_values = np.asarray(ranges["name"].cat.categories, dtype=object)
    depth = ranges["depth"].to_numpy()
    path_code = np.full(count, -1, dtype=np.int64)
    paths: list[str] = []
    index: dict[tuple[int, int], int] = {}
    for level in range(int(depth.max(initial=0)) + 1):
        rows = np.flatnonzero(depth == level)
        parents = np.where(parent_row[rows] >= 0, path_code[np.maximum(parent_row[rows], 0)], -1)
        pairs, unique_pairs = pd.factorize(parents * (len(name_values) + 1) + name_codes[rows])
        codes = []
        for pair in unique_pairs:
            parent_path, name = divmod(int(pair), len(name_values) + 1)
            key = (parent_path, name)
            if key not in index:
                index[key] = len(paths)
                prefix = paths[parent_path] + "/" if parent_path >= 0 else ""
                paths.append(prefix + str(name_values[name]))
            codes.append(index[key])
        path_code[rows] = np.asarray(codes, dtype=np.int64)[pairs] if len(rows) else path_code[rows]
    return pd.Categorical.from_codes(path_code, categories=pd.Index(paths, dtype=object))


def range_table(trace: Trace, same_thread: bool = False, top: int | None = None) -> pd.DataFrame:
    """``tracekit ranges``: per range name (and style), nsys nvtxsum's statistics of CPU durations
    plus the GPU work launched inside: GPU Ops, GPU Time (ns, summed op durations), GPU Span (ns,
    summed per-instance first-op-start to last-op-end), and the shallowest depth the name occurs at.
    """
    ranges = trace.ranges
    if ranges.empty:
        raise UsageError(
            f"{trace.name} has no NVTX ranges: capture with nsys --trace=nvtx and annotate the code "
            "(the workloads here do; `tracekit capture` records them)"
        )
    gpu = range_gpu_stats(trace, ranges, same_thread)
    # Group on integer codes (name code * 2 + style code): factorizing millions of strings costs seconds.
    style_codes = ranges["style"].cat.codes.to_numpy().astype(np.int64)
    group = ranges["name"].cat.codes.to_numpy().astype(np.int64) * 2 + style_codes
    table = stats.grouped_stats(group, ranges["duration"].to_numpy())
    codes = table.index.to_numpy()
    sums = {
        column: np.bincount(group, weights=gpu[source].to_numpy(), minlength=int(codes.max()) + 1)[codes]
        for column, source in ((GPU_OPS_COLUMN, GPU_OPS), (GPU_TIME_COLUMN, GPU_TIME), (GPU_SPAN_COLUMN, GPU_SPAN))
    }
    depth = pd.Series(ranges["depth"].to_numpy()).groupby(group).min().reindex(codes).to_numpy()
    names = np.asarray(ranges["name"].cat.categories, dtype=object)[codes // 2]
    styles = np.array([NSYS_STYLES[style] for style in ranges["style"].cat.categories], dtype=object)[codes % 2]
    extra = {DEPTH: depth, **{column: values.astype(np.int64) for column, values in sums.items()}}
    table = stats.finish(table, {RANGE: names, STYLE: styles}, extra)
    table = table[stats.STAT_COLUMNS + [STYLE, *extra, RANGE]]  # nsys's order, the name last
    return table.head(top) if top else table


def range_tree(
    trace: Trace,
    root: str | None = None,
    instance: int | None = None,
    max_depth: int | None = None,
    same_thread: bool = False,
) -> pd.DataFrame:
    """One instance of an outermost range as an indented tree (columns Range, Start (ns) from the
    root's start, CPU (ns), GPU Ops, GPU Time (ns), GPU Span (ns)).

    ``root`` defaults to the outermost range name with the most total time; ``instance`` (0-based,
    in time order) to the instance of median duration, a typical one.
    """
    ranges = trace.ranges
    if ranges.empty:
        raise UsageError(f"{trace.name} has no NVTX ranges to draw as a tree")
    outer = ranges[ranges["depth"].to_numpy() == 0]
    if root is None:
        root = str(outer.groupby("name", observed=True)["duration"].sum().idxmax())
    candidates = ranges[(ranges["name"] == root).to_numpy()].sort_values("start")
    if candidates.empty:
        raise UsageError(f"no NVTX range named {root!r} in {trace.name}; {_known_names(trace)}")
    if instance is None:
        instance = int(np.argsort(candidates["duration"].to_numpy(), kind="stable")[(len(candidates) - 1) // 2])
    if not 0 <= instance < len(candidates):
        raise UsageError(f"{root!r} has {len(candidates)} instances: --instance takes 0 to {len(candidates) - 1}")
    top = candidates.iloc[instance]
    subtree = _subtree(ranges, int(top["range_id"]))
    if max_depth is not None:
        subtree = subtree[(subtree["depth"] - top["depth"]).to_numpy() <= max_depth]
    gpu = range_gpu_stats(trace, subtree, same_thread)
    order = _preorder(subtree)
    subtree, gpu = subtree.iloc[order], gpu.iloc[order]
    indent = (subtree["depth"] - top["depth"]).to_numpy()
    return pd.DataFrame(
        {
            RANGE: ["  " * level + str(name) for level, name in zip(indent, subtree["name"])],
            "Start (ns)": (subtree["start"] - top["start"]).to_numpy(),
            "CPU (ns)": subtree["duration"].to_numpy(),
            GPU_OPS_COLUMN: gpu[GPU_OPS].to_numpy(),
            GPU_TIME_COLUMN: gpu[GPU_TIME].to_numpy(),
            GPU_SPAN_COLUMN: gpu[GPU_SPAN].to_numpy(),
        }
    )


def _subtree(ranges: pd.DataFrame, root_id: int) -> pd.DataFrame:
    """The range and every range nested inside it (by parent links)."""
    keep = ranges["range_id"].to_numpy() == root_id
    frontier = {root_id}
    parents = ranges["parent"].to_numpy()
    ids = ranges["range_id"].to_numpy()
    while frontier:  # one pass per nesting level
        children = np.isin(parents, list(frontier)) & ~keep
        keep |= children
        frontier = set(ids[children].tolist())
    return ranges[keep]


def _preorder(subtree: pd.DataFrame) -> np.ndarray:
    """Row order that prints parents before their children and siblings by start time."""
    # Sorting by (start, -end) is a pre-order walk for properly nested ranges of one thread.
    return np.lexsort((-subtree["end"].to_numpy(), subtree["start"].to_numpy()))


def range_within(trace: Trace, parent_spec: str, same_thread: bool = False) -> pd.DataFrame:
    """Children of the ranges matching ``parent_spec``, by name: their CPU and GPU time and share of
    the parents' (e.g. attention scores vs softmax vs attention output inside attention).

    Columns: Range, Instances, CPU (ns), CPU (%), GPU Time (ns), GPU (%) of the parents' totals.
    """
    ranges = trace.ranges
    parents = ranges[match_spec(ranges, parent_spec)] if not ranges.empty else ranges
    if parents.empty:
        raise UsageError(f"no NVTX range matches {parent_spec!r} in {trace.name}; {_known_names(trace)}")
    children = ranges[np.isin(ranges["parent"].to_numpy(), parents["range_id"].to_numpy())]
    both = pd.concat([parents, children])
    gpu = range_gpu_stats(trace, both, same_thread)
    parent_gpu = gpu.iloc[: len(parents)]
    child_gpu = gpu.iloc[len(parents) :]
    cpu_total = float(parents["duration"].sum())
    gpu_total = float(parent_gpu[GPU_TIME].sum())
    frame = pd.DataFrame(
        {
            RANGE: children["name"].astype(object).to_numpy(),
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
    share = lambda part, whole: stats.round_half_away(part * 100.0 / whole) if whole else np.zeros(len(part))  # noqa: E731
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
