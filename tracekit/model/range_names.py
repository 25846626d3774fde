"""Range names against specs, on tables of ranges: which names match, nesting among a selection, the
ranges matching a spec and what lies inside a range. Selecting from a ``Trace`` (reading only the
ranges specs can match) is ``tracekit.analysis.primitives.selection``; the grammar is ``range_specs``."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from fnmatch import translate

import numpy as np
import pandas as pd

from tracekit.model.nesting import nest_ranges, thread_key
from tracekit.model.range_specs import DEFAULT_DOMAIN, EMIT_NVTX_SUFFIX, Pattern, parse_spec


def _one_regex(patterns: Collection[Pattern]) -> re.Pattern:
    """One regex that matches (from the start) what any pattern matches: an exact name, or the glob's
    ``fnmatch`` translation (anchored at the end), so each name is tested once, in C."""
    return re.compile(
        "|".join(
            f"(?:{re.escape(p.exact)}\\Z)" if p.exact is not None else f"(?:{translate(p.pattern)})" for p in patterns
        )
    )


def _op_names(names: pd.Series) -> pd.Series:
    """``range_specs.op_name`` of each name: what precedes emit_nvtx's first ", seq = " (or the like)."""
    return names.str.replace(f"(?:{EMIT_NVTX_SUFFIX.pattern}).*", "", n=1, regex=True, flags=re.DOTALL)


def names_matching(names: pd.Series, patterns: Collection[Pattern], loose: bool = False) -> np.ndarray:
    """Mask of a name column whose names (or op names) match any pattern, each distinct name tested once.
    ``loose`` (for reads that are matched again later) also tries the text after a "domain:" prefix (a
    superset: the match that follows knows each range's domain)."""
    names = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    codes = names.cat.codes.to_numpy()
    if not patterns or not len(names.cat.categories):
        return np.zeros(len(codes), dtype=bool)
    categories = pd.Series([str(name) for name in names.cat.categories], dtype=object)
    candidates = [categories, _op_names(categories)]
    if loose:
        text = categories.str.split(":", n=1).str[-1]
        candidates += [text, _op_names(text)]
    regex = _one_regex(patterns)
    hit = np.zeros(len(categories), dtype=bool)
    for candidate in candidates:
        hit |= candidate.str.match(regex).to_numpy(dtype=bool)
    return np.where(codes >= 0, hit[np.maximum(codes, 0)], False)


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


def select_named(ranges: pd.DataFrame, patterns: Collection[Pattern]) -> pd.DataFrame:
    """The ranges whose names (or op names) match ``patterns``, nested among themselves."""
    return renest(ranges.loc[names_matching(ranges["name"], patterns, loose=True)].reset_index(drop=True))


def parent_rows(ranges: pd.DataFrame) -> np.ndarray:
    """Each range's parent as a row position in ``ranges`` (-1: none, or not in this table)."""
    position = pd.Series(np.arange(len(ranges)), index=ranges["range_id"].to_numpy())
    return position.reindex(ranges["parent"].to_numpy()).fillna(-1).to_numpy(np.int64)


def domain_names(ranges: pd.DataFrame, domain: str | None) -> tuple[pd.Series, np.ndarray]:
    """The names specs match against, and which ranges may match at all: every range by its full name,
    or (``domain``) only that domain's ranges ("default": the default domain's) by their text."""
    names = ranges["name"]
    if domain is None:
        return names, np.ones(len(ranges), dtype=bool)
    wanted = "" if domain == DEFAULT_DOMAIN else domain
    allowed = (ranges["domain"] == wanted).to_numpy()
    if not wanted:
        return names, allowed
    prefix = f"{wanted}:"
    return relabel(names, lambda name: name[len(prefix) :] if name.startswith(prefix) else name), allowed


def relabel(names: pd.Series, label: Callable[[str], str]) -> pd.Series:
    """A categorical name column with every name replaced by ``label(name)``: one call per distinct
    name, not per row; names that get the same label become one category."""
    labels = [label(str(name)) for name in names.cat.categories]
    label_codes, uniques = pd.factorize(pd.Series(labels, dtype=object))
    codes = names.cat.codes.to_numpy()
    mapped = np.where(codes >= 0, label_codes[np.maximum(codes, 0)] if len(labels) else -1, -1)
    categorical = pd.Categorical.from_codes(mapped, categories=pd.Index(uniques, dtype=object))
    return pd.Series(categorical, index=names.index)


def match(ranges: pd.DataFrame, spec: str, domain: str | None = None) -> np.ndarray:
    """Mask of the ranges matching ``spec``: named its last part, inside ranges named the earlier parts
    in order (of ``domain`` only, when given). ``ranges`` must carry depth/parent (any selection holding
    the spec's names will do)."""
    parts = parse_spec(spec)
    names, allowed = domain_names(ranges, domain)
    matched = names_matching(names, [parts[-1]]) & allowed
    current = np.arange(len(ranges))  # per candidate: the row from which to look further up
    parents = parent_rows(ranges)
    depth = ranges["depth"].to_numpy()
    for part in reversed(parts[:-1]):
        ancestor = _nearest_ancestor(parents, names_matching(names, [part]) & allowed, depth)
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


def inside_another(ranges: pd.DataFrame, matched: np.ndarray) -> np.ndarray:
    """Per row: has an ancestor that is itself matched (counting both would count one instance twice)."""
    parents = parent_rows(ranges)
    depth = ranges["depth"].to_numpy()
    inside = np.zeros(len(ranges), dtype=bool)
    for level in range(1, int(depth.max(initial=0)) + 1):
        rows = np.flatnonzero((depth == level) & (parents >= 0))
        above = parents[rows]
        inside[rows] = matched[above] | inside[above]
    return inside


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
