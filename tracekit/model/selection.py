r"""Range selection, in one place: the spec grammar, name matching, nesting lookups.

The grammar of a range spec (``--range``, ``--phases``, ``--within``):
- ``forward``: every range named forward. Matching is case-sensitive and exact.
- ``aten::linear*``: a glob with Python's ``fnmatch`` meaning: ``*``, ``?``, ``[seq]``, ``[!seq]``.
- ``step/backward``: every backward range nested, at any depth, inside a step range on the same thread.
  Each part may be a glob.
- A backslash makes the next character literal: ``a\/b`` is the name "a/b", ``\*`` a star,
  ``\[`` a bracket, ``\,`` a comma in a ``--phases`` list, ``\\`` a backslash. Inside a bracket
  expression (``[*?]``) every character is literal already, as in fnmatch: a backslash there is itself.
- ``=`` first makes the whole rest one literal name, whatever it holds: ``={'op': 'add'}``,
  ``=aten::mm, seq = 3``. In a ``--phases`` list such a spec is the rest of its ``--phases`` value.
A range matches a name or glob by its name as nsys shows it ("domain:text" outside the default
domain) or by its op name: ``torch.autograd.profiler.emit_nvtx`` names ranges
"aten::linear, seq = 12, op_id = 345, sizes = [...]", whose op is "aten::linear". With a domain
(``--domain NCCL``, ``--domain default``), only that domain's ranges count and specs match their text
without the "domain:" prefix.

An analysis calls ``select(trace, specs)`` once: it reads only the ranges the specs can match (the
reader may filter at the source with ``Pattern.chunks``), nests them among themselves, and answers,
per spec, which of them match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tracekit.errors import UsageError
from tracekit.model.nesting import nest_ranges, thread_key

if TYPE_CHECKING:
    from tracekit.model.trace import Trace

LITERAL = "="
DEFAULT_DOMAIN = "default"
# emit_nvtx appends these to an op's name; what precedes the first of them is the op.
EMIT_NVTX_SUFFIX = re.compile(r", (?:seq|op_id|sizes|input_op_ids|stashed_seq) = ")


def op_name(name: str) -> str:
    """ "aten::linear, seq = 12, op_id = 345, sizes = [[4, 8]]" -> "aten::linear"; other names as they are."""
    found = EMIT_NVTX_SUFFIX.search(name)
    return name[: found.start()] if found else name


@dataclass(frozen=True)
class Pattern:
    """One part of a spec: an ``fnmatch`` pattern (the name's own metacharacters bracketed), the exact
    name when the part has no wildcard, literal pieces every matching name contains (``chunks``) and
    the literal text it starts with (``prefix``, "" when it starts with a wildcard): what a reader may
    prefilter on (a superset; the pattern decides)."""

    pattern: str
    exact: str | None
    chunks: tuple[str, ...]
    prefix: str = ""

    def matches(self, name: str) -> bool:
        return name == self.exact if self.exact is not None else fnmatchcase(name, self.pattern)


def _literal(text: str) -> str:
    """``text`` as an fnmatch pattern that matches only itself."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in text)


def parse_spec(spec: str) -> list[Pattern]:
    """A spec's parts, outermost first (see the module docstring for the grammar)."""
    if spec.startswith(LITERAL):
        name = spec[len(LITERAL) :]
        if not name:
            raise UsageError("empty literal range name: give it after '=', e.g. ={'op': 'add'}")
        return [Pattern(_literal(name), name, (name,), name)]
    parts: list[Pattern] = []
    pattern, literal, chunks, wild, prefix = [], [], [], False, None
    index = 0

    def close_chunk() -> None:
        nonlocal prefix
        if prefix is None:  # the first wildcard ends the prefix
            prefix = "".join(literal)
        if literal:
            chunks.append("".join(literal))
            literal.clear()

    def close_part() -> None:
        nonlocal wild, prefix
        close_chunk()
        if pattern:
            text = "".join(pattern)
            parts.append(Pattern(text, None if wild else "".join(chunks), tuple(chunks), prefix or ""))
        pattern.clear()
        chunks.clear()
        wild, prefix = False, None

    while index < len(spec):
        char = spec[index]
        if char == "\\" and index + 1 < len(spec):
            index += 1
            pattern.append(_literal(spec[index]))
            literal.append(spec[index])
        elif char == "/":
            close_part()
        elif char in "*?":
            close_chunk()
            pattern.append(char)
            wild = True
        elif char == "[" and (end := _bracket_end(spec, index)) > 0:
            close_chunk()
            pattern.append(spec[index : end + 1])
            wild = True
            index = end
        else:
            pattern.append(_literal(char))
            literal.append(char)
        index += 1
    close_part()
    if not parts:
        raise UsageError(
            f"empty range spec {spec!r}: give a range name such as forward, or a path such as step/backward"
        )
    return parts


def _bracket_end(spec: str, start: int) -> int:
    """Index of the "]" closing the bracket expression at ``start`` as fnmatch reads it, or -1 (then
    fnmatch takes the "[" literally, and so do we)."""
    index = start + 1
    if index < len(spec) and spec[index] == "!":
        index += 1
    if index < len(spec) and spec[index] == "]":
        index += 1
    end = spec.find("]", index)
    return end


def split_specs(text: str) -> list[str]:
    """A comma-separated list of specs (``--phases``): commas split unless escaped (``\\,``); every other
    escape (``\\\\``, ``\\*``) is kept for ``parse_spec``; spaces around a spec are dropped; a spec that
    starts with "=" runs to the end of ``text``. UsageError when the list names no spec at all."""
    specs, current, index = [], [], 0
    while index < len(text):
        char = text[index]
        if not current and char.isspace():  # spaces before a spec ("a, =b") are not part of it
            index += 1
            continue
        if not current and char == LITERAL:
            current.append(text[index:])
            break
        if char == "\\" and index + 1 < len(text):
            # "\\," is a comma of the name (a plain character to parse_spec); any other escape ("\\\\",
            # "\\*") travels whole for parse_spec to read, so "\\\\," is a backslash, then a split.
            current.append("," if text[index + 1] == "," else text[index : index + 2])
            index += 1
        elif char == ",":
            specs.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        index += 1
    specs.append("".join(current).strip())
    specs = [spec for spec in specs if spec]
    if not specs:
        raise UsageError(f"no range spec in {text!r}: give names such as forward,backward")
    return specs


def spec_patterns(specs: Collection[str]) -> set[Pattern]:
    """Every pattern the specs mention: what a selective read must load."""
    return {part for spec in specs for part in parse_spec(spec)}


def _candidates(name: str, loose: bool) -> tuple[str, ...]:
    if not loose:
        return name, op_name(name)
    # A read for later matching also keeps "domain:text" names whose text may match under --domain
    # (a superset: the match that follows knows each range's domain).
    text = name.split(":", 1)[1] if ":" in name else name
    return name, op_name(name), text, op_name(text)


def names_matching(names: pd.Series, patterns: Collection[Pattern], loose: bool = False) -> np.ndarray:
    """Mask of a name column whose names (or op names) match any pattern, each distinct name tested once.
    ``loose`` (for reads that are matched again later) also tries the text after a "domain:" prefix."""
    names = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    categories = [str(name) for name in names.cat.categories]
    hit = np.array(
        [any(p.matches(candidate) for p in patterns for candidate in _candidates(name, loose)) for name in categories],
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


def select(trace: Trace, specs: Sequence[str], load_too: Collection[str] = (), domain: str | None = None) -> Selection:
    """Read the ranges ``specs`` can match (with the tables in ``load_too``, concurrently) and match each
    spec (within ``domain`` when given)."""
    patterns = spec_patterns(specs)
    ranges = trace.load_together(list(load_too), patterns) if load_too else trace.ranges_named(patterns)
    assert ranges is not None
    return Selection(ranges, {spec: match(ranges, spec, domain) for spec in specs})


def select_ranges(trace: Trace, specs: Sequence[str], domain: str | None = None) -> pd.DataFrame:
    """Instances matching any of ``specs`` (with ``outermost``); UsageError listing the trace's range
    names when nothing matches."""
    selection = select(trace, specs, domain=domain)
    if not selection.any():
        where = f" in domain {domain}" if domain else ""
        raise UsageError(
            f"no NVTX range matches {', '.join(specs)}{where} in {trace.name}; {known_names(trace, domain)}"
        )
    return selection.chosen()


def known_names(trace: Trace, domain: str | None = None) -> str:
    """A few of the trace's range names (of ``domain`` when given, as specs then match them), most
    frequent first, for error messages; why there are none when there are none."""
    names, allowed = domain_names(trace.ranges, domain)
    counts = names.loc[allowed].value_counts()
    counts = counts[counts > 0]
    if counts.empty:
        return no_ranges_reason(trace, domain)
    shown = ", ".join(str(name) for name in counts.index[:8])
    where = f" in domain {domain}" if domain else ""
    return f"its ranges{where} include: {shown}" + (" ..." if len(counts) > 8 else "")


def no_ranges_reason(trace: Trace, domain: str | None = None) -> str:
    """Why a trace offers no range to match: every NVTX row was unusable, the domain holds none, or
    nothing was annotated."""
    dropped = trace.dropped("ranges")
    if trace.ranges.empty and dropped:
        return f"all {dropped:,} of its NVTX ranges were left out: unusable values (see the note)"
    if domain is not None and not trace.ranges.empty:
        domains = sorted({DEFAULT_DOMAIN if not d else str(d) for d in trace.ranges["domain"].unique()})
        return f"it has no ranges in domain {domain}; its domains: {', '.join(domains)}"
    return "it has no NVTX ranges (capture with nsys --trace=nvtx and annotate the code)"


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
