"""A run folder being written by a capture: hidden while it runs, moved into place when it ends.

Run names are plain folder names; a lock keeps two captures of one name apart; only an earlier run's
own folder is ever replaced; files get the user's umask, not the one nsys gives its program.
"""

from __future__ import annotations

import os
import unicodedata
import uuid
from pathlib import Path

from tracekit.errors import CaptureError
from tracekit.files import foreign_entries, swap_folder
from tracekit.runs import LATEST, RUN_FILES, Run


class NewRun(Run):
    """A run being captured. It is written into a hidden sibling (``out/.NAME.partial-XXXX``) and moved
    to ``out/NAME`` by ``publish``, so no reader ever takes a half-written folder for a run, and a
    capture killed midway leaves only the hidden folder. While it runs, ``out/.NAME.lock`` (holding
    its process id) keeps a second capture of the same name out: that one fails clearly instead of
    deleting this one's folder.

    ``replace`` (an explicit ``--name``): an earlier run of that name is replaced when published, but
    only a real folder directly inside ``out`` that holds nothing but files a capture writes; a
    default name that exists gets a suffix (-2, -3, ...) instead.
    """

    def __init__(self, out: Path, name: str, replace: bool):
        check_run_name(name)
        out.mkdir(parents=True, exist_ok=True)
        self.out = out.resolve()
        self.replace = replace
        if replace:
            self.lock = _claim(self.out / f".{name}.lock", name)
        else:  # a default name another capture holds (one started the same second), or a run has: a suffix
            base = name
            while True:
                name = _free_name(self.out, base)
                try:
                    self.lock = _claim(self.out / f".{name}.lock", name)
                    break
                except CaptureError:  # claimed between the look and the claim: the next one
                    continue
        self.final_name = name
        try:
            if replace:
                _replaceable(self.out / name)  # refuse now, not after a long capture
            folder = self.out / f".{name}.partial-{uuid.uuid4().hex[:8]}"
            folder.mkdir()
        except BaseException:
            self.lock.unlink(missing_ok=True)
            raise
        super().__init__(folder)
        self.published = False

    def publish(self) -> Run:
        """Move the finished (or failed, or interrupted) run into place and release the name; returns
        the run at its final folder. Idempotent."""
        if self.published:
            return Run(self.folder)
        try:
            final = self.out / self.final_name
            _user_modes(self.folder)
            if self.replace and (final.exists() or final.is_symlink()):
                _replaceable(final)
                swap_folder(self.folder, final)  # a real folder inside out, holding only run files (checked)
            else:
                suffix = 2
                while final.exists() or final.is_symlink():
                    final = self.out / f"{self.final_name}-{suffix}"
                    suffix += 1
                os.rename(self.folder, final)
        finally:
            self.lock.unlink(missing_ok=True)
        self.folder, self.published = final, True
        return Run(final)


def _free_name(out: Path, name: str) -> str:
    """``name``, or ``name-2``, ``name-3``, ...: the first that no run folder has and no live capture holds."""
    candidate, suffix = name, 2
    while (out / candidate).exists() or (out / candidate).is_symlink() or _held(out / f".{candidate}.lock"):
        candidate, suffix = f"{name}-{suffix}", suffix + 1
    return candidate


def _held(lock: Path) -> bool:
    try:
        holder = int(lock.read_text().strip() or 0)
    except (OSError, ValueError):
        return False
    return bool(holder) and _process_alive(holder)


def user_umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _user_modes(folder: Path) -> None:
    """Give the files in ``folder`` the modes the user's umask gives new files: nsys runs its program
    with umask 0, which would leave the snapshot, the result and nsys's own files writable by anyone."""
    mask = user_umask()
    for path in folder.iterdir():
        if path.is_file() and not path.is_symlink():
            os.chmod(path, 0o666 & ~mask)


def check_run_name(name: str) -> None:
    """A run name is one plain path component: CaptureError for separators, "." or "..", a leading dot
    (hidden folders are tracekit's own), control or format characters, ``latest`` or more than 200 characters."""
    problem = None
    if not name or len(name) > 200:
        problem = "must have 1 to 200 characters"
    elif not name.strip() or name != name.strip():
        problem = "must not be blank or start or end with spaces"
    elif "/" in name or "\\" in name or os.sep in name:
        problem = "must be a single folder name, without / or \\"
    elif name.startswith("."):
        problem = "must not start with '.' (no '.', '..' or hidden names)"
    elif any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in name):
        # C0/C1 controls, and format characters such as U+202E that reorder how a name is shown
        problem = "must not hold control or format characters"
    elif name == LATEST:
        problem = f"'{LATEST}' is the link to the newest run"
    if problem:
        raise CaptureError(f"run name {name!r} {problem}: give a plain name such as xl-bf16")


def _claim(lock: Path, name: str) -> Path:
    """Create ``lock`` holding our process id; CaptureError when a live process holds it already (a lock
    left by a process that died is taken over)."""
    for _ in range(2):
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                holder = 0
            if holder and _process_alive(holder):
                raise CaptureError(
                    f"another capture (pid {holder}) is writing run {name!r} in {lock.parent}; wait for it to "
                    "finish or choose another --name"
                ) from None
            lock.unlink(missing_ok=True)  # its process is gone
            continue
        with os.fdopen(descriptor, "w") as handle:
            handle.write(str(os.getpid()))
        return lock
    raise CaptureError(f"could not claim run name {name!r} in {lock.parent}: {lock} keeps coming back")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _replaceable(folder: Path) -> None:
    """CaptureError unless ``folder`` is absent or an earlier run tracekit may delete: a real folder
    (not a link) that holds only the files a capture writes."""
    if not (folder.exists() or folder.is_symlink()):
        return
    if folder.is_symlink() or not folder.is_dir():
        raise CaptureError(f"{folder} exists and is not a run folder (a link or a file); choose another --name")
    foreign = foreign_entries(folder, lambda name: name in RUN_FILES)
    if foreign:
        shown = ", ".join(foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        raise CaptureError(
            f"{folder} holds files a capture did not write ({shown}); move them or choose another --name"
        )
