"""Writing a file whole: into a temporary file beside it, renamed over it only when complete, so a
reader never sees half a file and a failed or interrupted write leaves the old one (or none) in place.
A folder of files (a report, an export) likewise: written into a hidden sibling folder that then takes
the old one's place (``replace_folder``), so a reader never sees a mix of two outputs.

The temporary file is made with ``open`` (the user's umask decides its mode, as for any file they
write); a file being replaced keeps its mode; a symbolic link is written through, not replaced; a
device or pipe (``/dev/null``, a FIFO) is written into, never replaced.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tracekit.errors import InputNotFoundError, UsageError
from tracekit.session import current
from tracekit.signals import signals_held

T = TypeVar("T")


def protect(*paths: str | Path | None) -> None:
    """Mark files as inputs of the current session (``tracekit.session``: one per command on the command
    line): ``check_target`` refuses to write over them, so a mistyped ``-o`` cannot destroy the trace
    it was reading."""
    current().protect(*paths)


KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def not_a_file(path: str | Path) -> str | None:
    """Why ``path`` is neither a regular file nor a folder (reading a FIFO would wait forever for a
    writer, a device never ends, a symbolic link loop never resolves), or None when it is one; "no
    such file" when nothing is there."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "a symbolic link that loops"
        return "a symbolic link to nothing" if os.path.islink(path) else "no such file or folder"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((what for test, what in KINDS if test(mode)), "not a regular file")


def require_file_or_folder(path: str | Path) -> Path:
    """``path`` when it is a regular file or a folder; InputNotFoundError saying what it is otherwise."""
    what = not_a_file(path)
    if what == "no such file or folder":
        raise InputNotFoundError(f"{path}: no such file or folder")
    if what is not None:
        raise InputNotFoundError(f"{path} is {what}, not a file: tracekit reads trace files, snapshots and run folders")
    return Path(path)


def check_target(path: str | Path) -> Path:
    """The file ``path`` names (through symbolic links); UsageError, naming ``path``, when its folder
    does not exist, it is itself a folder, or it is one of the command's inputs."""
    target = Path(os.path.realpath(path))
    _refuse_input(path, target)
    if target.is_dir() or str(path).endswith(os.sep):
        raise UsageError(f"{path} is a folder: give a file name")
    if not target.parent.is_dir():
        raise UsageError(f"{path}: the folder {Path(path).parent} does not exist")
    return target


def _refuse_input(path: str | Path, target: Path) -> None:
    if current().is_input(target):
        raise UsageError(f"{path} is an input of this command and would be overwritten: give another output name")


def write_whole(path: str | Path, write_to: Callable[[Path], object]) -> Path:
    """Call ``write_to(temporary)`` and move the result to ``path``; returns the path written."""
    return write_together([(path, write_to)])[0]


def write_together(files: list[tuple[str | Path, Callable[[Path], object]]]) -> list[Path]:
    """Write several files whole and as one (a table per file): each ``write_to(temporary)`` first, then
    every temporary renamed into place with SIGINT and SIGTERM held, so a failure or an interruption
    leaves all the previous files, never some new beside some old. Returns the paths written."""
    targets = [check_target(path) for path, _ in files]  # every file's folder before any file is written
    temporaries: list[tuple[Path, Path]] = []
    try:
        for target, (_, write_to) in zip(targets, files, strict=True):
            if target.exists() and not target.is_file():
                _write_into_special(target, write_to)
                continue
            temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.partial")
            temporaries.append((temporary, target))
            write_to(temporary)
            if target.exists():
                shutil.copymode(target, temporary)
        with signals_held():
            for temporary, target in temporaries:
                os.replace(temporary, target)
    except BaseException:
        for temporary, _ in temporaries:
            temporary.unlink(missing_ok=True)
        raise
    return targets


def _write_into_special(target: Path, write_to: Callable[[Path], object]) -> Path:
    """A device or a pipe (``-o /dev/null``, a FIFO): written into, never renamed over (a rename would
    replace the device node with a plain file). The content is made whole in a temporary folder first."""
    with tempfile.TemporaryDirectory(prefix="tracekit-") as folder:
        temporary = Path(folder) / target.name
        write_to(temporary)
        with open(temporary, "rb") as source, _open_for_writing(target) as sink:
            shutil.copyfileobj(source, sink)
    return target


def _open_for_writing(target: Path):
    """``target`` opened to write into; a FIFO only when a process is reading it (opening one without
    a reader would wait for ever): UsageError otherwise."""
    if not stat.S_ISFIFO(os.stat(target).st_mode):
        return open(target, "wb")
    try:
        descriptor = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise UsageError(
                f"{target} is a FIFO (named pipe) that no process is reading: start the reader first"
            ) from None
        raise
    os.set_blocking(descriptor, True)  # a reader is there: write at its pace
    return os.fdopen(descriptor, "wb")


def write_text(path: str | Path, text: str) -> Path:
    return write_whole(path, lambda temporary: temporary.write_text(text))


def foreign_entries(folder: Path, ours: Callable[[str], bool]) -> list[str]:
    """The sorted names in ``folder`` that are not plain files whose names ``ours`` accepts: one of our
    names on a folder or a link is not ours either (deleting it could delete what it holds)."""
    return sorted(
        entry.name for entry in folder.iterdir() if not ours(entry.name) or entry.is_symlink() or not entry.is_file()
    )


def replace_folder(
    path: str | Path, write_into: Callable[[Path], T], foreign: Callable[[Path], list[str]], what: str
) -> T:
    """Write the folder ``path`` whole: ``write_into(folder)`` fills a hidden sibling
    (``.NAME.XXXXXXXX.partial``), which then takes ``path``'s place (``swap_folder``), so a reader sees
    the previous folder or the new one, never a mix, and a failure or an interruption (Ctrl-C, SIGTERM)
    leaves the previous one as it was and no sibling behind. Returns what ``write_into`` returns.

    ``path`` (through symbolic links) must be absent, empty, or a previous output: a folder in which
    ``foreign`` finds no names (``what``: what such an output is, for the message). Anything else, or an
    input of the command inside, is a UsageError before anything is written, and checked again before
    the swap: nothing tracekit did not write is ever deleted."""
    target = Path(os.path.realpath(path))
    _check_replaceable(path, target, foreign, what)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.partial")
    staging.mkdir()  # the user's umask decides its mode
    try:
        written = write_into(staging)
        with signals_held():
            _check_replaceable(path, target, foreign, what)
            if target.is_dir():
                shutil.copymode(target, staging)
            swap_folder(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return written


def swap_folder(new: Path, final: Path) -> None:
    """Move the folder ``new`` to ``final``; a folder already there (the caller checked it may be deleted) is
    moved aside first and removed once ``new`` is in place. SIGINT and SIGTERM wait until it is done, so
    no interruption leaves ``final`` missing or the old folder hidden beside it."""
    with signals_held():
        old = None
        if final.exists() or final.is_symlink():
            old = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.old")
            os.rename(final, old)
        try:
            os.rename(new, final)
        except BaseException:
            if old is not None:
                os.rename(old, final)
            raise
        if old is not None:
            shutil.rmtree(old)


def _check_replaceable(path: str | Path, target: Path, foreign: Callable[[Path], list[str]], what: str) -> None:
    if not target.exists():
        return
    if not target.is_dir():
        raise UsageError(f"{path} is a file: give a folder")
    _refuse_input(path, target)
    for entry in target.iterdir():
        _refuse_input(entry, Path(os.path.realpath(entry)))
    names = foreign(target)
    if names:
        shown = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
        raise UsageError(f"{path} holds files that are not {what} ({shown}): give a new or empty folder, or move them")
