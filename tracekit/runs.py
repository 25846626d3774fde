"""Run folders, the one place that knows one: ``traces/<name>/`` holding trace.nsys-rep, trace.sqlite,
run.json (written last), memory.pickle, nsys.log, program.log; ``traces/latest`` pointing at the newest.

A run folder is complete when its run.json says ``"status": "complete"``; run.json is written only
once everything else is in place, so a folder without one is a capture that did not finish. A run is
written into a hidden sibling and moved into place when it ends (``capture.run_folder.NewRun``); run names are plain
folder names, and nothing but an earlier run's own folder is ever deleted. Nothing outside this module
builds a run folder's paths or reads its run.json.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import InputNotFoundError
from tracekit.files import write_text

if TYPE_CHECKING:
    import pandas as pd

MANIFEST = "run.json"
REPORT = "trace.nsys-rep"
EXPORT = "trace.sqlite"
TORCH_TRACE = "trace.pt.trace.json.gz"  # a torch.profiler capture's trace
MEMORY = "memory.pickle"
MEMORY_GZ = "memory.pickle.gz"  # the same, kept gzip-compressed
STREAM = "trace.qdstrm"
RESULT = "result.json"
FACTS = "facts.json"  # what a profiled program says of itself (merged into run.json, then removed)
LOG = "nsys.log"
PROGRAM_LOG = "program.log"
LATEST = "latest"
RUN_FILES = {MANIFEST, REPORT, EXPORT, TORCH_TRACE, MEMORY, MEMORY_GZ, STREAM, RESULT, FACTS, LOG, PROGRAM_LOG}
ACTIVATION_NOTE = "activation_note"  # run.json: the activation formula's total, beside the measured role
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
        """memory.pickle (or memory.pickle.gz), the CUDA memory snapshot (CUDA captures with --memory only)."""
        return self._file(MEMORY) or self._file(MEMORY_GZ)

    @property
    def torch_trace(self) -> Path | None:
        """trace.pt.trace.json.gz, the torch.profiler trace (``--profiler torch``)."""
        return self._file(TORCH_TRACE)

    @property
    def files(self) -> list[str]:
        """The run's files that exist: report, export, torch.profiler trace, manifest, snapshot."""
        return [
            name
            for name in (REPORT, EXPORT, TORCH_TRACE, MANIFEST, MEMORY, MEMORY_GZ)
            if (self.folder / name).is_file()
        ]

    @property
    def trace_file(self) -> Path | None:
        """The trace to read: the nsys export, else the report (exported on first use), else the
        torch.profiler trace."""
        return self.export or self.report or self.torch_trace

    @property
    def is_run(self) -> bool:
        """Whether the folder holds anything a capture writes (else it is some other folder)."""
        return any((self.folder / name).exists() for name in RUN_FILES)

    def require_trace(self) -> Path:
        found = self.trace_file
        if found is None:
            what = "a tracekit run folder without" if self.is_run else "a folder, not a tracekit run folder: no"
            raise InputNotFoundError(f"{self.folder} is {what} {EXPORT}, {REPORT} or {TORCH_TRACE}")
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
        except (OSError, ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
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
    def activation_note(self) -> str | None:
        """What the activation formula gives for this run's model, beside the measured activations: as
        capture wrote it into run.json (``ACTIVATION_NOTE``; None there: it does not apply), else, for a run
        captured before capture wrote it, from the configuration run.json records."""
        if ACTIVATION_NOTE in self.manifest:
            note = self.manifest[ACTIVATION_NOTE]
            return note if isinstance(note, str) else None
        from tracekit.activation_formula import formula_note

        return formula_note(self.config) if self.config else None

    @property
    def device(self) -> str:
        """ "NVIDIA H100 80GB HBM3 (cuda)", or "unknown" when the program did not say."""
        device = self._section("device")
        if not device.get("name"):
            return "unknown"
        return f"{device['name']} ({device['type']})" if device.get("type") else str(device["name"])

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
    def facts_file(self) -> Path:
        """Where a profiled program writes its steps, torch version and devices (``annotate.write_facts``)."""
        return self.folder / FACTS

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

    def torch_trace_target(self) -> Path:
        return self.folder / TORCH_TRACE

    @property
    def launch_note(self) -> Path:
        """Where the program launcher says it profiled the whole program (``program_launch``)."""
        return self.folder / ".launch-note"

    def write_manifest(self, manifest: dict) -> Path:
        """Write run.json atomically (a reader never sees half of it)."""
        path = write_text(self.folder / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
        self.__dict__["manifest"] = manifest
        return path

    def point_latest(self) -> Path | None:
        """Make ``<out>/latest`` a relative symlink to this folder (replaced atomically); None, touching
        nothing, when ``latest`` is there and not a link (the user's own file or folder)."""
        link = self.folder.parent / LATEST
        if link.exists() and not link.is_symlink():
            return None
        temporary = self.folder.parent / f".{LATEST}.{os.getpid()}"
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(self.folder.name, target_is_directory=True)
        os.replace(temporary, link)
        return link


def _number(value) -> float | None:
    """A finite number from run.json, or None (a hand-edited file may hold anything)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        return None
    return float(value)


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
