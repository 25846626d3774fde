"""Run folders, the one place that knows one: ``traces/<name>/`` holding trace.nsys-rep, trace.sqlite,
run.json (written last), memory.pickle, nsys.log, program.log; ``traces/latest`` pointing at the newest.

A run folder is complete when its run.json says ``"status": "complete"``; run.json is written only
once everything else is in place, so a folder without one is a capture that did not finish. A run is
written into a hidden sibling and moved into place when it ends (``NewRun``); run names are plain
folder names, and nothing but an earlier run's own folder is ever deleted. Nothing outside this module
builds a run folder's paths or reads its run.json.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import CaptureError, InputNotFoundError
from tracekit.files import write_text

if TYPE_CHECKING:
    import pandas as pd

MANIFEST = "run.json"
REPORT = "trace.nsys-rep"
EXPORT = "trace.sqlite"
MEMORY = "memory.pickle"
STREAM = "trace.qdstrm"
RESULT = "result.json"
LOG = "nsys.log"
PROGRAM_LOG = "program.log"
LATEST = "latest"
RUN_FILES = {MANIFEST, REPORT, EXPORT, MEMORY, STREAM, RESULT, LOG, PROGRAM_LOG}
PHASE_COLUMNS = ["Phase", "Mean (ms)", "Std (ms)", "Median (ms)", "Min (ms)", "Max (ms)"]


class Run:
    """A run folder: its files (each None when absent) and its manifest."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    @classmethod
    def at(cls, path: str | Path) -> Run | None:
        """The run whose folder ``path`` is, or None when ``path`` is not a folder."""
        path = Path(path)
        return cls(path) if path.is_dir() else None

    def _file(self, name: str) -> Path | None:
        path = self.folder / name
        return path if path.is_file() else None

    @property
    def name(self) -> str:
        return self.folder.resolve().name

    @property
    def export(self) -> Path | None:
        """trace.sqlite, the nsys SQLite export."""
        return self._file(EXPORT)

    @property
    def report(self) -> Path | None:
        """trace.nsys-rep, the nsys report."""
        return self._file(REPORT)

    @property
    def snapshot(self) -> Path | None:
        """memory.pickle, the CUDA memory snapshot (CUDA captures with --memory only)."""
        return self._file(MEMORY)

    @property
    def files(self) -> list[str]:
        """The run's files that exist: report, export, manifest, snapshot."""
        return [name for name in (REPORT, EXPORT, MANIFEST, MEMORY) if (self.folder / name).is_file()]

    @property
    def trace_file(self) -> Path | None:
        """The trace to read: the export, else the report (exported on first use)."""
        return self.export or self.report

    @property
    def is_run(self) -> bool:
        """Whether the folder holds anything a capture writes (else it is some other folder)."""
        return any((self.folder / name).exists() for name in RUN_FILES)

    def require_trace(self) -> Path:
        found = self.trace_file
        if found is None:
            what = "a tracekit run folder without" if self.is_run else "a folder, not a tracekit run folder: no"
            raise InputNotFoundError(f"{self.folder} is {what} {EXPORT} or {REPORT}")
        return found

    def require_snapshot(self) -> Path:
        found = self.snapshot
        if found is None and not self.is_run:
            raise InputNotFoundError(
                f"{self.folder} is a folder, not a tracekit run folder (no {MANIFEST}, {EXPORT} or {MEMORY}): give a "
                "snapshot pickle or a run folder"
            )
        if found is None:
            raise InputNotFoundError(
                f"{self.folder} has no {MEMORY}: capture with `tracekit capture MODEL --memory` on a CUDA GPU "
                "(snapshots need CUDA)"
            )
        return found

    @cached_property
    def manifest(self) -> dict:
        """run.json ({} when there is none, or it is not JSON)."""
        try:
            data = json.loads((self.folder / MANIFEST).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def status(self) -> str | None:
        return self.manifest.get("status")

    def _section(self, key: str) -> dict:
        value = self.manifest.get(key)
        return value if isinstance(value, dict) else {}

    @property
    def config(self) -> dict:
        """The workload configuration (model, context, batch, mode, dtype, compile, attention, warmup, steps)."""
        return self._section("config")

    @property
    def device(self) -> str:
        """ "NVIDIA H100 80GB HBM3 (cuda)", or "unknown" when the program did not say."""
        device = self._section("device")
        return f"{device.get('name')} ({device.get('type')})" if device.get("name") else "unknown"

    @property
    def device_type(self) -> str | None:
        return self._section("device").get("type")

    @property
    def versions(self) -> dict[str, str]:
        """tracekit, nsys and Python of the capture, torch and the NVTX backend of the program."""
        program = {key: value for key, value in self._section("versions_program").items() if key != "python"}
        return {key: str(value) for key, value in {**self._section("versions"), **program}.items() if value}

    @property
    def trace_apis(self) -> str | None:
        """What nsys traced (its --trace list)."""
        return self.manifest.get("trace")

    @property
    def wall_s(self) -> dict:
        """Seconds the capture took: profile, import, export, total."""
        return self._section("wall_s")

    @property
    def program_error(self) -> str | None:
        """Why the profiled program failed (None when it did not)."""
        return self._section("program").get("error")

    @property
    def notes(self) -> list[str]:
        notes = self.manifest.get("notes")
        return [str(note) for note in notes] if isinstance(notes, list) else []

    @property
    def timings_ms(self) -> dict[str, dict[str, float | None]]:
        """Per phase, the harness's mean/std/median/min/max step time (ms). A run.json edited into
        another shape gives what of it has this one (a phase whose statistics are not a mapping is
        left out, a value that is not a number is None)."""
        timings = self.manifest.get("timings_ms")
        if not isinstance(timings, dict):
            return {}
        return {
            str(phase): {str(stat): _number(value) for stat, value in stats.items()}
            for phase, stats in timings.items()
            if isinstance(stats, dict)
        }

    @property
    def samples_ms(self) -> dict[str, list[float]]:
        """Per phase, the raw per-step times (ms); values that are not numbers are left out."""
        samples = self.manifest.get("samples_ms")
        if not isinstance(samples, dict):
            return {}
        return {
            str(phase): [number for number in map(_number, values) if number is not None]
            for phase, values in samples.items()
            if isinstance(values, list)
        }

    def phases(self) -> pd.DataFrame:
        """Per-phase step times (ms) the harness measured: Phase, Mean, Std, Median, Min, Max."""
        import pandas as pd

        rows = [
            {"Phase": phase, **{f"{stat.capitalize()} (ms)": value for stat, value in stats.items()}}
            for phase, stats in self.timings_ms.items()
        ]
        return pd.DataFrame(rows, columns=PHASE_COLUMNS)

    # Writing: capture makes the folder, writes its manifest, points `latest` at it.

    @property
    def stream(self) -> Path:
        """Where nsys leaves its raw stream when it cannot import it."""
        return self.folder / STREAM

    @property
    def result_file(self) -> Path:
        """Where the workload writes its measurements (merged into run.json, then removed)."""
        return self.folder / RESULT

    @property
    def log(self) -> Path:
        """nsys's own output."""
        return self.folder / LOG

    @property
    def program_log(self) -> Path:
        """The profiled program's output (standard output and error)."""
        return self.folder / PROGRAM_LOG

    @property
    def output_base(self) -> Path:
        """The name nsys is told to write to (it adds .nsys-rep / .qdstrm)."""
        return self.folder / Path(REPORT).stem

    def snapshot_target(self) -> Path:
        return self.folder / MEMORY

    def report_target(self) -> Path:
        return self.folder / REPORT

    @classmethod
    def create(cls, out: str | Path, name: str, replace: bool) -> NewRun:
        """A run being written: see ``NewRun``."""
        return NewRun(Path(out), name, replace)

    def write_manifest(self, manifest: dict) -> Path:
        """Write run.json atomically (a reader never sees half of it)."""
        path = write_text(self.folder / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
        self.__dict__["manifest"] = manifest
        return path

    def point_latest(self) -> Path:
        """Make ``<out>/latest`` a relative symlink to this folder (replaced atomically)."""
        link = self.folder.parent / LATEST
        temporary = self.folder.parent / f".{LATEST}.{os.getpid()}"
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(self.folder.name, target_is_directory=True)
        os.replace(temporary, link)
        return link


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
        self.final_name = name
        self.replace = replace
        self.lock = _claim(self.out / f".{name}.lock", name)
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
            old = None
            if self.replace and (final.exists() or final.is_symlink()):
                _replaceable(final)
                old = self.out / f".{self.final_name}.old-{uuid.uuid4().hex[:8]}"
                os.rename(final, old)
            suffix = 2
            while final.exists() or final.is_symlink():
                final = self.out / f"{self.final_name}-{suffix}"
                suffix += 1
            _user_modes(self.folder)
            os.rename(self.folder, final)
            if old is not None:
                shutil.rmtree(old)  # a real folder inside out, holding only run files (checked above)
        finally:
            self.lock.unlink(missing_ok=True)
        self.folder, self.published = final, True
        return Run(final)


def _number(value) -> float | None:
    """A finite number from run.json, or None (a hand-edited file may hold anything)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        return None
    return float(value)


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
    (hidden folders are tracekit's own), control characters, ``latest`` or more than 200 characters."""
    problem = None
    if not name or len(name) > 200:
        problem = "must have 1 to 200 characters"
    elif "/" in name or "\\" in name or os.sep in name:
        problem = "must be a single folder name, without / or \\"
    elif name.startswith("."):
        problem = "must not start with '.' (no '.', '..' or hidden names)"
    elif any(ord(char) < 32 or ord(char) == 127 for char in name):
        problem = "must not hold control characters"
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
    names = {path.name for path in folder.iterdir()}
    foreign = sorted(names - RUN_FILES)
    if foreign:
        shown = ", ".join(foreign[:3]) + (" ..." if len(foreign) > 3 else "")
        raise CaptureError(
            f"{folder} holds files a capture did not write ({shown}); move them or choose another --name"
        )


def default_name(
    model: str, context: int, mode: str, dtype: str, compiled: bool, attention: str, now: datetime | None = None
) -> str:
    """What was run, then when: "xl-ctx256-train-bf16-compiled-20261122-1403"."""
    parts = [model, f"ctx{context}", mode, dtype]
    if compiled:
        parts.append("compiled")
    if attention != "naive":
        parts.append(attention)
    parts.append((now or datetime.now()).strftime("%Y%m%d-%H%M"))
    return "-".join(parts)
