"""Range selection, in one place: the spec grammar, name matching, nesting lookups.

A range spec names range instances:
- ``forward``: every range named forward;
- ``aten::linear*``: a glob (``*``, ``?``, ``[...]``, as Python's ``fnmatch``, case-sensitive);
- ``step/backward``: every backward range nested at any depth inside a step range on the same thread;
  each part may be a glob.

An analysis calls ``select(trace, specs)`` once: it reads only the ranges the specs name (the reader
may filter at the source), nests them among themselves, and answers, per spec, which of them match.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tracekit.errors import UsageError
from tracekit.model.nesting import nest_ranges, thread_key

if TYPE_CHECKING:
    from tracekit.model.trace import Trace


def is_pattern(name: str) -> bool:
    """Whether a range name given by a user is a glob pattern (``*``, ``?`` or ``[...]``)."""
    return any(char in name for char in "*?[")


def spec_parts(spec: str) -> list[str]:
    """The names along a spec's path ("step/backward" -> ["step", "backward"])."""
    parts = [part for part in spec.split("/") if part]
    if not parts:
        raise UsageError(
            f"empty range spec {spec!r}: give a range name such as forward, or a path such as step/backward"
        )
    return parts


def spec_names(specs: Collection[str]) -> set[str]:
    """Every name or glob the specs mention: what a selective read must load."""
    return {part for spec in specs for part in spec_parts(spec)}


def names_matching(names: pd.Series, patterns: Collection[str]) -> np.ndarray:
    """Mask of a name column matching any name or glob (each distinct name tested once)."""
    names = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    categories = [str(name) for name in names.cat.categories]
    hit = np.array(
        [
            any(fnmatchcase(name, pattern) if is_pattern(pattern) else name == pattern for pattern in patterns)
            for name in categories
        ],
        dtype=bool,
    )
    codes = names.cat.codes.to_numpy()
    return np.where(codes >= 0, hit[np.maximum(codes, 0)] if len(hit) else False, False)


def renest(ranges: pd.DataFrame) -> pd.DataFrame:
    """Depth and parent of a selection of ranges recomputed among the selection only."""
    if ranges.empty:
        return ranges
    same_thread = (ranges["end_tid"] == ranges["tid"]).to_numpy()
    thread = thread_key(ranges["pid"].to_numpy(), ranges["tid"].to_numpy())
    parent_row, depth = nest_ranges(thread, ranges["start"].to_numpy(), ranges["end"].to_numpy(), same_thread)
    ids = ranges["range_id"].to_numpy()
    ranges = ranges.copy()
    ranges["depth"] = depth
    ranges["parent"] = np.where(parent_row >= 0, ids[np.maximum(parent_row, 0)], -1)
    return ranges


def select_named(ranges: pd.DataFrame, patterns: Collection[str]) -> pd.DataFrame:
    """The ranges whose names match ``patterns``, nested among themselves."""
    return renest(ranges.loc[names_matching(ranges["name"], patterns)].reset_index(drop=True))


def parent_rows(ranges: pd.DataFrame) -> np.ndarray:
    """Each range's parent as a row position in ``ranges`` (-1: none, or not in this table)."""
    position = pd.Series(np.arange(len(ranges)), index=ranges["range_id"].to_numpy())
    return position.reindex(ranges["parent"].to_numpy()).fillna(-1).to_numpy(np.int64)


def match(ranges: pd.DataFrame, spec: str) -> np.ndarray:
    """Mask of the ranges matching ``spec``: named its last part, inside ranges named the earlier parts
    in order. ``ranges`` must carry depth/parent (any selection holding the spec's names will do)."""
    parts = spec_parts(spec)
    matched = names_matching(ranges["name"], [parts[-1]])
    current = np.arange(len(ranges))  # per candidate: the row from which to look further up
    parents = parent_rows(ranges)
    depth = ranges["depth"].to_numpy()
    for part in reversed(parts[:-1]):
        ancestor = _nearest_ancestor(parents, names_matching(ranges["name"], [part]), depth)
        found = ancestor[current] >= 0
        matched &= found
        current = np.where(found, ancestor[current], current)
    return matched


def _nearest_ancestor(parents: np.ndarray, wanted: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Per row, the nearest strict ancestor whose ``wanted`` is set (row index), or -1. One pass per level."""
    nearest = np.full(len(parents), -1, dtype=np.int64)
    for level in range(1, int(depth.max(initial=0)) + 1):
        rows = np.flatnonzero(depth == level)
        above = parents[rows]
        valid = above >= 0
        rows, above = rows[valid], above[valid]
        nearest[rows] = np.where(wanted[above], above, nearest[above])
    return nearest


def _inside_another(ranges: pd.DataFrame, matched: np.ndarray) -> np.ndarray:
    """Per row: has an ancestor that is itself matched (counting both would count one instance twice)."""
    parents = parent_rows(ranges)
    depth = ranges["depth"].to_numpy()
    inside = np.zeros(len(ranges), dtype=bool)
    for level in range(1, int(depth.max(initial=0)) + 1):
        rows = np.flatnonzero((depth == level) & (parents >= 0))
        above = parents[rows]
        inside[rows] = matched[above] | inside[above]
    return inside


@dataclass
class Selection:
    """What a list of specs selects from one trace.

    ``ranges`` holds every range any spec names, nested among themselves; ``matches[spec]`` is each
    spec's mask over it.
    """

    ranges: pd.DataFrame
    matches: dict[str, np.ndarray]

    def of(self, spec: str) -> pd.DataFrame:
        """The instances of one spec."""
        return self.ranges.loc[self.matches[spec]]

    def any(self) -> bool:
        return any(mask.any() for mask in self.matches.values())

    def chosen(self) -> pd.DataFrame:
        """Instances matching any spec, with an ``outermost`` column (not nested in another match)."""
        matched = np.zeros(len(self.ranges), dtype=bool)
        for mask in self.matches.values():
            matched |= mask
        chosen = self.ranges[matched].copy()
        chosen["outermost"] = ~_inside_another(self.ranges, matched)[matched]
        return chosen


def select(trace: Trace, specs: Sequence[str], load_too: Collection[str] = ()) -> Selection:
    """Read the ranges ``specs`` name (with the tables in ``load_too``, concurrently) and match each spec."""
    names = spec_names(specs)
    ranges = trace.load_together(list(load_too), names) if load_too else trace.ranges_named(names)
    assert ranges is not None
    return Selection(ranges, {spec: match(ranges, spec) for spec in specs})


def select_ranges(trace: Trace, specs: Sequence[str]) -> pd.DataFrame:
    """Instances matching any of ``specs`` (with ``outermost``); UsageError listing the trace's range
    names when nothing matches."""
    selection = select(trace, specs)
    if not selection.any():
        raise UsageError(f"no NVTX range matches {', '.join(specs)} in {trace.name}; {known_names(trace)}")
    return selection.chosen()


def known_names(trace: Trace) -> str:
    """A few of the trace's range names, most frequent first, for error messages."""
    names = trace.ranges["name"].value_counts()
    if names.empty:
        return "it has no NVTX ranges (capture with --trace=nvtx and annotate the code)"
    shown = ", ".join(str(name) for name in names.index[:8])
    return f"its ranges include: {shown}" + (" ..." if len(names) > 8 else "")


def subtree(ranges: pd.DataFrame, root_id: int) -> pd.DataFrame:
    """The range ``root_id`` and every range nested inside it (by parent links)."""
    keep = ranges["range_id"].to_numpy() == root_id
    frontier = {root_id}
    parents = ranges["parent"].to_numpy()
    ids = ranges["range_id"].to_numpy()
    while frontier:  # one pass per nesting level
        children = np.isin(parents, list(frontier)) & ~keep
        keep |= children
        frontier = set(ids[children].tolist())
    return ranges.loc[keep]
