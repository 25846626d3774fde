"""Run folders: ``traces/<name>/`` with trace.nsys-rep, trace.sqlite, run.json (written last), and
memory.pickle; ``traces/latest`` pointing at the newest.

A run folder is complete when its run.json says ``"status": "complete"``; run.json is written only
once everything else is in place, so a folder without one is a capture that did not finish.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime
from pathlib import Path

import pandas as pd

from tracekit.errors import CaptureError

MANIFEST = "run.json"
REPORT = "trace.nsys-rep"
EXPORT = "trace.sqlite"
MEMORY = "memory.pickle"
LATEST = "latest"
STREAM = "trace.qdstrm"
RESULT = "result.json"
RUN_FILES = {MANIFEST, REPORT, EXPORT, MEMORY, STREAM, RESULT}


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


def prepare(out: Path, name: str, replace: bool) -> Path:
    """Create the run folder. A default name that exists gets a suffix (-2, -3, ...); an explicit
    ``--name`` replaces an earlier tracekit run of that name but never a folder of something else."""
    out.mkdir(parents=True, exist_ok=True)
    folder = out / name
    if folder.exists() and replace:
        names = {path.name for path in folder.iterdir()}
        if names and not names & RUN_FILES:
            raise CaptureError(f"{folder} exists and is not a tracekit run folder; choose another --name")
        shutil.rmtree(folder)
    suffix = 2
    while folder.exists():
        folder = out / f"{name}-{suffix}"
        suffix += 1
    folder.mkdir()
    return folder


def write_manifest(folder: Path, manifest: dict) -> Path:
    """Write run.json atomically (a reader never sees half of it)."""
    path = folder / MANIFEST
    partial = folder / (MANIFEST + ".partial")
    partial.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    os.replace(partial, path)
    return path


def read_manifest(folder: Path) -> dict | None:
    path = Path(folder) / MANIFEST
    if not path.exists():
        return None
    return json.loads(path.read_text())


def point_latest(folder: Path) -> Path:
    """Make ``<out>/latest`` a relative symlink to the run folder (replaced atomically)."""
    link = folder.parent / LATEST
    temporary = folder.parent / f".{LATEST}.{os.getpid()}"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(folder.name, target_is_directory=True)
    os.replace(temporary, link)
    return link


def phase_table(manifest: dict) -> pd.DataFrame:
    """Per-phase step times (ms) the harness measured: Phase, Mean, Std, Median, Min, Max."""
    rows = [
        {"Phase": phase, **{f"{stat.capitalize()} (ms)": value for stat, value in stats.items()}}
        for phase, stats in manifest.get("timings_ms", {}).items()
    ]
    return pd.DataFrame(rows, columns=["Phase", "Mean (ms)", "Std (ms)", "Median (ms)", "Min (ms)", "Max (ms)"])
