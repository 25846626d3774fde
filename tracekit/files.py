"""Writing a file whole: into a temporary file beside it, renamed over it only when complete, so a
reader never sees half a file and a failed write leaves the old one (or none) in place.

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

from tracekit.errors import InputNotFoundError, UsageError
from tracekit.session import current


def protect(*paths: str | Path | None) -> None:
    """Mark files as inputs of the current session (``tracekit.session``: one per command on the command
    line): ``check_target`` refuses to write over them, so a mistyped ``-o`` cannot destroy the trace
    it was reading."""
    current().protect(*paths)


KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip


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
    if current().is_input(target):
        raise UsageError(f"{path} is an input of this command and would be overwritten: give another output name")
    if target.is_dir() or str(path).endswith(os.sep):
        raise UsageError(f"{path} is a folder: give a file name")
    if not target.parent.is_dir():
        raise UsageError(f"{path}: the folder {Path(path).parent} does not exist")
    return target


def write_whole(path: str | Path, write_to: Callable[[Path], object]) -> Path:
    """Call ``write_to(temporary)`` and move the result to ``path``; returns the path written."""
    target = check_target(path)
    if target.exists() and not target.is_file():
        return _write_into_special(target, write_to)
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.partial")
    try:
        write_to(temporary)
        if target.exists():
            shutil.copymode(target, temporary)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target


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
