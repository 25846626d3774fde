"""Which inputs are one input: the same file named twice (however spelled or linked), or the same open
trace given twice, is read once, and said. Every command that takes several inputs comes here (the many-
input commands through ``run_command`` and ``input_paths.expand_inputs``, ``report``, ``timeline``), so an input
never counts twice in a sum, a comparison or a picture."""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")


def distinct_inputs(items: list[T]) -> tuple[list[T], list[str]]:
    """``items`` (paths, or traces already open) with each input once, in the order given, and a note
    when some were dropped: the same path twice, two spellings of one file (``./A`` and ``A``, a symbolic
    link, a hard link), the same open trace twice."""
    kept: dict[object, T] = {}
    dropped: list[str] = []
    for item in items:
        key = _identity(item)
        if key in kept:
            first, again = _shown(kept[key]), _shown(item)
            dropped.append(again if again == first else f"{again} (the same file as {first})")
        else:
            kept[key] = item
    if not dropped:
        return list(kept.values()), []
    shown = ", ".join(dropped[:3]) + (f" and {len(dropped) - 3} more" if len(dropped) > 3 else "")
    return list(kept.values()), [
        f"{len(dropped)} input{'s' if len(dropped) != 1 else ''} given more than once, read once: dropped {shown}"
    ]


def _shown(item: object) -> str:
    """An input as a note names it: its path as given, or the source of an open trace."""
    if isinstance(item, (str, os.PathLike)):
        return str(os.fspath(item))
    meta = getattr(item, "meta", None)
    return str(getattr(meta, "source", item))


def _identity(item: object) -> object:
    """What tells one input from another: a file's device and inode (one file however it is spelled or
    linked), else its absolute path; an open trace is itself."""
    if not isinstance(item, (str, os.PathLike)):
        return id(item)
    try:
        found = os.stat(item)
    except (OSError, ValueError):  # missing, a link loop, a NUL in the name: its own error comes later
        return os.path.abspath(item)
    return (found.st_dev, found.st_ino)
