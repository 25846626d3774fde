"""Writing a file whole: into a temporary file beside it, renamed over it only when complete, so a
reader never sees half a file and a failed write leaves the old one (or none) in place.

The temporary file is made with ``open`` (the user's umask decides its mode, as for any file they
write); a file being replaced keeps its mode; a symbolic link is written through, not replaced.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from tracekit.errors import UsageError


def check_target(path: str | Path) -> Path:
    """The file ``path`` names (through symbolic links); UsageError, naming ``path``, when its folder
    does not exist or it is itself a folder."""
    target = Path(os.path.realpath(path))
    if target.is_dir() or str(path).endswith(os.sep):
        raise UsageError(f"{path} is a folder: give a file name")
    if not target.parent.is_dir():
        raise UsageError(f"{path}: the folder {Path(path).parent} does not exist")
    return target


def write_whole(path: str | Path, write_to: Callable[[Path], object]) -> Path:
    """Call ``write_to(temporary)`` and move the result to ``path``; returns the path written."""
    target = check_target(path)
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


def write_text(path: str | Path, text: str) -> Path:
    return write_whole(path, lambda temporary: temporary.write_text(text))
