r"""The grammar of range specs: what a ``--range``, ``--phases`` or ``--within`` value names.

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

The standard library only: options are checked with it before pandas loads. Matching names of a
table is ``range_names``; selecting from a Trace is ``tracekit.analysis.primitives.selection``.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tracekit.errors import UsageError

LITERAL = "="
DEFAULT_DOMAIN = "default"
# emit_nvtx appends these to an op's name; what precedes the first of them is the op.
EMIT_NVTX_SUFFIX = re.compile(r", (?:seq|op_id|sizes|input_op_ids|stashed_seq) = ")


def op_name(name: str) -> str:
    """ "aten::linear, seq = 12, op_id = 345, sizes = [[4, 8]]" -> "aten::linear"; other names as they are."""
    found = EMIT_NVTX_SUFFIX.search(name)
    return name[: found.start()] if found else name


def shown_op_name(name: str) -> str:
    """A range's name as the operator tables show it: without torch.profiler's "cpu_op:" domain and
    emit_nvtx's suffix ("cpu_op:aten::mm" and "aten::mm, seq = 3, op_id = 7" -> "aten::mm")."""
    return op_name(name.removeprefix("cpu_op:"))


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
