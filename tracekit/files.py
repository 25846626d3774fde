"""Writing a file whole: into a temporary file beside it, renamed over it only when complete, so a
reader never sees half a file and a failed write leaves the old one (or none) in place.

The temporary file is made with ``open`` (the user's umask decides its mode, as for any file they
write); a file being replaced keeps its mode; a symbolic link is written through, not replaced; a
device or pipe (``/dev/null``, a FIFO) is written into, never replaced.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from tracekit.errors import UsageError

# Files this process read as inputs (real paths, and (device, inode) so a hard link counts too):
# never written over (see ``protect``).
_INPUTS: set[str] = set()
_INPUT_IDS: set[tuple[int, int]] = set()


def _identity(path: str | Path) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def protect(*paths: str | Path | None) -> None:
    """Mark files as inputs of the running command: ``check_target`` refuses to write over them, so a
    mistyped ``-o`` cannot destroy the trace it was reading."""
    _INPUTS.update(os.path.realpath(path) for path in paths if path is not None)
    _INPUT_IDS.update(identity for path in paths if path is not None and (identity := _identity(path)))


def forget_inputs() -> None:
    """A new command starts (the CLI calls this; in-process tests run many)."""
    _INPUTS.clear()
    _INPUT_IDS.clear()


def check_target(path: str | Path) -> Path:
    """The file ``path`` names (through symbolic links); UsageError, naming ``path``, when its folder
    does not exist, it is itself a folder, or it is one of the command's inputs."""
    target = Path(os.path.realpath(path))
    if str(target) in _INPUTS or (_INPUT_IDS and _identity(target) in _INPUT_IDS):
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
        with open(temporary, "rb") as source, open(target, "wb") as sink:
            shutil.copyfileobj(source, sink)
    return target


def write_text(path: str | Path, text: str) -> Path:
    return write_whole(path, lambda temporary: temporary.write_text(text))
