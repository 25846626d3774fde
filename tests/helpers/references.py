"""References to tracekit's modules and names in prose, checked against the code: a double-backquoted
dotted name in a docstring, a comment or a docs page (``analysis.memory.tables.timeline_chart``), or
any ``tracekit.<name>...`` there, names a module (a package, then modules, then attributes) that must
exist. Names are read relative to tracekit, or for a file inside one of tracekit's packages also
relative to any package of that part (``step_window`` in ``analysis/waits``); a name whose first part is
no module there (``trace.gpu_ops``, ``np.where``) is not a reference. A reference followed by ``(``
must be callable (a module named as if called is a stale pointer to a function)."""

from __future__ import annotations

import importlib
import inspect
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from helpers.paths import ROOT

PACKAGE = ROOT / "tracekit"
DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
QUOTED = re.compile(rf"``({DOTTED})(?:``)?(\()?")  # ``name``, ``name``( and ``name(...)``
NAMED = re.compile(r"(?<![\w./-])(tracekit(?:\.[A-Za-z_]\w*)+)(\()?")  # tracekit's own names, quoted or not
STATEMENT_STARTS = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)


def stale_references(path: Path) -> list[str]:
    """ "line: reference" for each reference in ``path``'s prose that names nothing in tracekit."""
    stale = []
    for first_line, text in _prose(path):
        found = [(match.group(1), bool(match.group(2)), match.start(), False) for match in QUOTED.finditer(text)]
        found += [(match.group(1), bool(match.group(2)), match.start(), True) for match in NAMED.finditer(text)]
        for reference, called, at, rooted in sorted(set(found), key=lambda match: match[2]):
            parts = reference.split(".")
            if parts[-1] == "py":  # a file's name: launch.py
                continue
            if parts[0] == "tracekit":
                results = [_resolve(PACKAGE, parts[1:], called, rooted=True)]
            elif rooted:
                continue
            else:
                results = [_resolve(base, parts, called) for base in _bases(path)]
            if any(result is True for result in results) or all(result is None for result in results):
                continue
            stale.append(f"{first_line + text.count(chr(10), 0, at)}: {reference}{'(' if called else ''}")
    return list(dict.fromkeys(stale))


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """(first line, text) of each comment and statement string (docstrings) of a Python file; a page whole."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        yield 1, text
        return
    previous = tokenize.ENCODING
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and previous in STATEMENT_STARTS):
            yield token.start[0], token.string
        if token.type not in (tokenize.COMMENT, tokenize.NL):
            previous = token.type


def _bases(path: Path) -> list[Path]:
    """The packages a file's references may be relative to: tracekit's, and those of the file's part."""
    if PACKAGE not in path.parents or len(path.relative_to(PACKAGE).parts) < 2:
        return [PACKAGE]
    part = PACKAGE / path.relative_to(PACKAGE).parts[0]
    return [init.parent for init in part.rglob("__init__.py")] + [PACKAGE]


def _module_file(folder: Path, name: str) -> Path | None:
    for candidate in (folder / name / "__init__.py", folder / f"{name}.py"):
        if candidate.exists():
            return candidate
    return None


def _resolve(base: Path, parts: list[str], called: bool, rooted: bool = False) -> bool | None:
    """Whether ``parts`` name something under ``base``: None when the first part is no module there
    (and the reference does not start with tracekit: then the package's own attributes count)."""
    folder: Path | None = base
    path, index = None, 0
    while folder is not None and index < len(parts) and (found := _module_file(folder, parts[index])):
        path, index = found, index + 1
        folder = found.parent if found.name == "__init__.py" else None
    if path is None and not rooted:
        return None
    path = path or PACKAGE / "__init__.py"
    if path.name == "__main__.py":
        return True  # importing it runs the CLI
    module = path.relative_to(ROOT).with_suffix("").parts
    try:
        value: object = importlib.import_module(".".join(module[:-1] if module[-1] == "__init__" else module))
    except ImportError:
        return True  # an optional library absent: nothing to check against
    for name in parts[index:]:
        if hasattr(value, name):
            value = getattr(value, name)
        elif inspect.isclass(value):  # a dataclass field without default, an attribute set in a method
            return name in getattr(value, "__dataclass_fields__", {}) or f"self.{name}" in inspect.getsource(value)
        else:
            return False
    return callable(value) or not called
