"""``tracekit capture``: a workload under ``nsys profile``, and a run folder with everything it produced.

The workload (``python -m workloads``, the benchmark harness) wraps its measured steps in the NVTX
range ``tracekit-capture``; nsys records only inside it (``--capture-range=nvtx``), so warm-up stays
out of the trace, and ``--capture-range-end=stop`` lets the program finish (the default,
stop-shutdown, kills it). ``--sample=none --cpuctxsw=none`` avoid the 2022.4 agent hang; the
watchdog covers the rest. When nsys cannot find its importer (Debian's package) we import the
.qdstrm ourselves, then export SQLite. run.json is written last.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from tracekit import __version__, nsys_cli, runs, watchdog
from tracekit.errors import CaptureError, NoGpuDataError, TracekitError
from workloads.config import RunConfig

CAPTURE_RANGE = "tracekit-capture"  # the same name as workloads.annotate.CAPTURE_RANGE (no torch import here)
GPU_TRACE = "cuda,nvtx,osrt"
CPU_TRACE = "nvtx"
PHASES = ("forward", "backward", "optimizer", "step")
LOG = "nsys.log"


@dataclass
class CaptureOptions:
    """What to run (the workload configuration) and how to record it (see ``tracekit capture --help``)."""

    run: RunConfig
    memory: bool = False
    out: Path = Path("traces")
    name: str | None = None
    nsys: str | None = None
    trace: str | None = None
    nsys_args: tuple[str, ...] = ()
    exit_grace_s: float = 600.0


@dataclass
class Capture:
    """A finished capture: its folder, manifest, per-phase times, top kernels (None without kernels)."""

    folder: Path
    manifest: dict
    phases: pd.DataFrame
    top_kernels: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)


def gpu_present() -> bool:
    """Whether an NVIDIA GPU is visible, without importing torch (slow) in this process."""
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir() and any(gpus.iterdir()):
        return True
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
            return listed.returncode == 0 and "GPU" in listed.stdout
        except (OSError, subprocess.TimeoutExpired):
            return False
    return False


def program_command(options: CaptureOptions, folder: Path) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "workloads",
        *options.run.arguments(),
        "--capture-range",
        "--result",
        str(folder / runs.RESULT),
    ]
    if options.memory:
        command += ["--memory", str(folder / runs.MEMORY)]
    return command


def nsys_command(nsys: str, trace: str, folder: Path, extra: tuple[str, ...], program: list[str]) -> list[str]:
    return [
        nsys,
        "profile",
        f"--trace={trace}",
        "--sample=none",
        "--cpuctxsw=none",
        "--capture-range=nvtx",
        f"--nvtx-capture={CAPTURE_RANGE}",
        "--capture-range-end=stop",
        "--force-overwrite=true",
        "--output",
        str(folder / "trace"),
        *extra,
        *program,
    ]


def capture(options: CaptureOptions) -> Capture:
    """Profile one workload configuration; returns the run folder's contents. Raises NsysNotFoundError
    (with how to install nsys) and CaptureError (nsys wrote no report, Ctrl-C, ...)."""
    started = time.monotonic()
    nsys = nsys_cli.find_nsys(options.nsys)
    trace = options.trace or (GPU_TRACE if gpu_present() else CPU_TRACE)
    run = options.run
    name = options.name or runs.default_name(run.model, run.context, run.mode, run.dtype, run.compile, run.attention)
    folder = runs.prepare(Path(options.out), name, replace=options.name is not None)
    command = nsys_command(nsys, trace, folder, tuple(options.nsys_args), program_command(options, folder))
    # nsys matches capture-range names against registered NVTX strings only unless told otherwise;
    # torch.cuda.nvtx (the fallback when the nvtx package is missing) does not register them.
    environment = {**os.environ, "NSYS_NVTX_PROFILER_REGISTER_ONLY": "0", "PYTHONUNBUFFERED": "1"}
    manifest = {
        "status": "running",
        "name": folder.name,
        "created_utc": _now(),
        "config": _config(options),
        "trace": trace,
        "command": command,
        "versions": {"tracekit": __version__, "nsys": nsys_cli.nsys_version(nsys), "python": sys.version.split()[0]},
    }
    notes: list[str] = []
    with open(folder / LOG, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)
        watched = watchdog.watch(process, sys.executable, str(folder / runs.RESULT), options.exit_grace_s)
    profiled = time.monotonic()
    if watched.killed_nsys:
        notes.append(
            f"nsys (pid {process.pid}) did not exit {options.exit_grace_s:.0f} s after the program "
            "ended; the watchdog stopped it"
        )
    if watched.killed_agents:
        notes.append(
            f"the nsys agent (pid {', '.join(map(str, watched.killed_agents))}) kept running after the "
            "program ended; the watchdog stopped it"
        )
    result = _read_result(folder)
    manifest.update(_from_result(result))
    manifest["program"] = {
        "status": result.get("status", "failed"),
        "error": result.get("error"),
        "nsys_exit_status": watched.returncode,
    }
    manifest["watchdog"] = {"killed_nsys": watched.killed_nsys, "killed_agents": watched.killed_agents}
    if watched.interrupted:
        _finish(folder, manifest, "interrupted", notes, started, profiled)
        raise CaptureError(f"capture interrupted (Ctrl-C); what nsys saved is in {folder} (run.json: interrupted)")

    report = _report(folder, nsys, manifest, notes, started, profiled)
    imported = time.monotonic()
    export = nsys_cli.export_sqlite(report, nsys)
    manifest["wall_s"] = {"import": round(imported - profiled, 3), "export": round(time.monotonic() - imported, 3)}
    manifest["files"] = {
        "report": report.name,
        "export": export.name,
        "memory": runs.MEMORY if (folder / runs.MEMORY).exists() else None,
    }
    if options.memory and not (folder / runs.MEMORY).exists():
        device_type = manifest["device"].get("type") or "unknown device"
        notes.append(
            f"memory snapshots need CUDA: this run was on the {device_type}, so there is no memory.pickle"
            if device_type != "cuda"
            else "the program wrote no memory snapshot"
        )
    status = {"ok": "complete", "oom": "oom"}.get(manifest["program"]["status"], "failed")
    top_kernels = _top_kernels(export, notes)
    _finish(folder, manifest, status, notes, started, profiled)
    runs.point_latest(folder)
    (folder / runs.RESULT).unlink(missing_ok=True)  # merged into run.json
    if status == "failed":
        reason = manifest["program"]["error"] or _last_log_line(folder)
        raise CaptureError(f"the workload failed: {reason} (run folder {folder}, log {folder / LOG})")
    return Capture(folder, manifest, runs.phase_table(manifest), top_kernels, notes)


def _report(folder: Path, nsys: str, manifest: dict, notes: list[str], started: float, profiled: float) -> Path:
    """The .nsys-rep, importing the .qdstrm when nsys could not (Debian's nsys lacks its importer path)."""
    report, stream = folder / runs.REPORT, folder / runs.STREAM
    if not report.exists() and stream.exists():
        try:
            nsys_cli.import_qdstrm(stream, report, nsys)
        except TracekitError:
            _finish(folder, manifest, "failed", notes, started, profiled)  # the folder says what happened
            raise
        stream.unlink()
    if not report.exists():
        _finish(folder, manifest, "failed", notes, started, profiled)
        raise CaptureError(
            f"nsys wrote no report in {folder}: {_last_log_line(folder)} (full log: {folder / LOG})"
            + "".join(f"; {note}" for note in notes)
        )
    return report


def _finish(folder: Path, manifest: dict, status: str, notes: list[str], started: float, profiled: float) -> None:
    manifest["status"] = status
    manifest["notes"] = notes
    manifest.setdefault("wall_s", {})
    manifest["wall_s"].update({"profile": round(profiled - started, 3), "total": round(time.monotonic() - started, 3)})
    runs.write_manifest(folder, manifest)


def _config(options: CaptureOptions) -> dict:
    return {**asdict(options.run), "memory": options.memory}


def _read_result(folder: Path) -> dict:
    path = folder / runs.RESULT
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except json.JSONDecodeError:
        return {}


def _from_result(result: dict) -> dict:
    """The harness's measurements and environment, as run.json keeps them."""
    summary = result.get("summary", {})
    timings = {
        phase: {
            stat: summary.get(f"{phase.capitalize()} {stat.capitalize()} (ms)")
            for stat in ("mean", "std", "median", "min", "max")
        }
        for phase in PHASES
        if summary.get(f"{phase.capitalize()} Mean (ms)") is not None
    }
    return {
        "device": {"name": result.get("device"), "type": result.get("device_type")},
        "versions_program": {
            "torch": result.get("torch_version"),
            "python": result.get("python_version"),
            "nvtx_backend": result.get("nvtx_backend"),
        },
        "timings_ms": timings,
        "samples_ms": result.get("samples_ms", {}),
        "peak_memory_bytes": result.get("peak_memory_bytes"),
    }


def _top_kernels(export: Path, notes: list[str]) -> pd.DataFrame | None:
    from tracekit.analysis.kernels import kernel_table
    from tracekit.sources.nsys import read_nsys_export

    try:
        return kernel_table(read_nsys_export(export), top=5, name="short")
    except NoGpuDataError:
        notes.append("no CUDA kernels in this trace (a CPU run): it holds the NVTX ranges only")
        return None


def _last_log_line(folder: Path) -> str:
    try:
        lines = [line.strip() for line in (folder / LOG).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["nsys printed nothing"])[-1][:300]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
