"""Which files the inputs are: paths, globs and folders expanded into traces and run folders, each once;
a short, distinct label per input, and a rank written in its name. Every command that takes several
inputs comes here (the many-input commands, ``report``, ``timeline``).
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from tracekit.errors import InputNotFoundError
from tracekit.files import not_a_file, protect, require_file_or_folder
from tracekit.runs import Run
from tracekit.sources.distinct import distinct_inputs
from tracekit.sources.kineto.ours import written_by_timeline

TRACE_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".json", ".json.gz")
LABEL_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite", ".nsys-rep", ".qdrep")
RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])rank[_-]?(\d+)(?![0-9])", re.IGNORECASE)


def expand_inputs(arguments: list[str], skipped: list[str] | None = None) -> list[Path]:
    """The inputs named by paths, globs and folders, each once, in the order given (a folder's and a
    glob's in name order). A folder is one input when it is a run folder, else its traces and runs.
    An input named on its own must be a regular file or a folder (a FIFO would be waited on forever, a
    link loop never resolves): one error line otherwise; in a folder or a glob such an entry is left
    out, said in ``skipped``."""
    left_out: list[str] = []
    expanded = [path for argument in arguments for path in _expand(argument, left_out)]
    found, repeated = distinct_inputs(expanded)
    if skipped is not None and left_out:
        shown = ", ".join(left_out[:3]) + (f" and {len(left_out) - 3} more" if len(left_out) > 3 else "")
        skipped.append(
            f"{len(left_out)} {'entry' if len(left_out) == 1 else 'entries'} left out: not a regular file "
            f"or folder ({shown})"
        )
    if skipped is not None:
        skipped += repeated
    if not found:
        raise InputNotFoundError("no inputs: give trace files, run folders, folders of them, or globs")
    return found


def _expand(argument: str, left_out: list[str]) -> list[Path]:
    path = Path(argument)
    if not os.path.lexists(argument) and glob.has_magic(argument):
        matches = sorted(Path(match) for match in glob.glob(argument))
        if not matches:
            raise InputNotFoundError(f"{argument}: no file matches this pattern")
        usable = [match for match in matches if _usable(match, left_out)]
        return [
            found
            for match in usable
            for found in (_folder_inputs(match, left_out) if _is_plain_folder(match) else [match])
        ]
    require_file_or_folder(path)
    return _folder_inputs(path, left_out) if _is_plain_folder(path) else [path]


def _usable(path: Path, left_out: list[str]) -> bool:
    """Whether a folder's or a glob's entry is a regular file or a folder; else it is noted and skipped."""
    what = not_a_file(path)
    if what is not None:
        left_out.append(f"{path}: {what}")
    return what is None


def names_many(argument: str) -> bool:
    """Whether one argument names many inputs: a glob, or a folder that is not a run folder."""
    path = Path(argument)
    return (not os.path.lexists(argument) and glob.has_magic(argument)) or _is_plain_folder(path)


def _is_plain_folder(path: Path) -> bool:
    return path.is_dir() and not Run(path).is_run


def _folder_inputs(folder: Path, left_out: list[str]) -> list[Path]:
    """A folder's traces (an .nsys-rep only when no export of it sits beside it) and run folders;
    entries that are not regular files or folders (FIFOs, devices, sockets, link loops) left out."""
    entries = sorted(folder.iterdir())
    names = {entry.name for entry in entries}
    inputs = []
    for entry in entries:
        if not entry.name.endswith(TRACE_SUFFIXES) and not entry.is_dir():
            continue
        if not _usable(entry, left_out):
            continue
        if entry.is_dir():
            if Run(entry).is_run:
                inputs.append(entry)
        else:
            if entry.suffix in (".nsys-rep", ".qdrep") and entry.with_suffix(".sqlite").name in names:
                continue  # the report's export beside it is the same capture
            if written_by_timeline(entry):
                left_out.append(f"{entry.name} (a tracekit timeline of other traces)")
                continue
            inputs.append(entry)
    if not inputs:
        raise InputNotFoundError(f"{folder} is not a tracekit run folder, and holds no traces or run folders")
    return inputs


def protect_inputs(paths: list[Path]) -> None:
    """Mark every input as one ``-o`` must not write over, in this process (the one that writes): a
    file, and every file inside a run folder. Workers protect what they open; only this one writes."""
    for path in paths:
        if path.is_dir():
            protect(*(entry for entry in path.iterdir() if entry.is_file()))
        else:
            protect(path)


def input_labels(paths: list[Path]) -> list[str]:
    """A short, distinct name per input: the run folder's or the file's name without trace suffixes;
    the parent folder is added where two would read the same."""

    def short(path: Path, parents: int) -> str:
        name = path.name
        for suffix in LABEL_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        return "/".join([*path.resolve().parent.parts[-parents:], name] if parents else [name])

    labels = [short(path, 0) for path in paths]
    for depth in range(1, 4):
        if len(set(labels)) == len(labels):
            break
        labels = [short(path, depth) if labels.count(label) > 1 else label for path, label in zip(paths, labels)]
    return labels


def rank_in_name(label: str) -> int | None:
    """A rank written in a file name ("trace_rank3", "rank-12.sqlite"), as torchrun jobs name them."""
    found = RANK_IN_NAME.search(label)
    return int(found.group(1)) if found else None
