"""``tracekit capture``: a workload under ``nsys profile``, and a run folder with everything it produced.

The workload (the benchmark harness, started by ``launch.py``) wraps its measured steps in the NVTX
range ``tracekit-capture``; nsys records only inside it (``--capture-range=nvtx``), so warm-up stays
out of the trace, and ``--capture-range-end=stop`` lets the program finish (the default,
stop-shutdown, kills it). ``--sample=none --cpuctxsw=none`` avoid the 2022.4 agent hang; the
watchdog covers the rest. When nsys cannot find its importer (Debian's package) we import the
.qdstrm ourselves, then export SQLite; nsys.log then says so in place of nsys's lines about the missing
importer, which read as a failure of a capture that worked. run.json is written last.
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

from tracekit import annotate, nsys_tool
from tracekit.activation_formula import formula_note
from tracekit.capture import watchdog
from tracekit.capture.run_folder import NewRun
from tracekit.errors import CaptureError, TracekitError
from tracekit.files import write_text
from tracekit.run_config import PHASES, STATS, RunConfig, phase_field
from tracekit.runs import ACTIVATION_NOTE, Run, default_name
from tracekit.signals import raising_interrupted
from tracekit.version import __version__

CAPTURE_RANGE = annotate.CAPTURE_RANGE
GPU_TRACE = "cuda,nvtx,osrt"
CPU_TRACE = "nvtx"
# What nsys 2022.4 prints when it cannot find its importer (then it leaves the raw .qdstrm).
IMPORTER_MISSING = ("Importer error status:", "Unable to retrieve the importer version")


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
    start_timeout_s: float = 300.0


@dataclass
class Capture:
    """A finished capture: its run folder (manifest, files, harness phases) and what to tell the user."""

    run: Run
    latest: Path | None  # None when <out>/latest is the user's own file, left alone
    notes: list[str] = field(default_factory=list)


def gpu_present() -> bool:
    """Whether an NVIDIA GPU is visible, without importing torch (slow) in this process."""
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir() and any(gpus.iterdir()):
        return True
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            listed = subprocess.run([smi, "-L"], capture_output=True, text=True, errors="replace", timeout=30)
            return listed.returncode == 0 and "GPU" in listed.stdout
        except (OSError, subprocess.TimeoutExpired):
            return False
    return False


# The workload starts through this file, never `-m workloads` (which the current directory could shadow).
LAUNCHER = Path(__file__).resolve().with_name("launch.py")


def program_command(options: CaptureOptions, run: Run) -> list[str]:
    command = [
        sys.executable,
        str(LAUNCHER),
        *options.run.arguments(),
        "--capture-range",
        "--result",
        str(run.result_file),
    ]
    if options.memory:
        command += ["--memory", str(run.snapshot_target())]
    return command


def nsys_command(nsys: str, trace: str, run: Run, extra: tuple[str, ...], program: list[str]) -> list[str]:
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
        str(run.output_base),
        *extra,
        *program,
    ]


def capture(options: CaptureOptions) -> Capture:
    """Profile one workload configuration into a run folder. Raises NsysNotFoundError (with how to
    install nsys) and CaptureError (nsys wrote no report, Ctrl-C, the workload failed, ...).

    The run is recorded into a hidden sibling folder and moved into place at the end, whatever the
    outcome (``run_folder.NewRun``); messages name the folder where it ends up."""
    started = time.monotonic()
    nsys = nsys_tool.find_nsys(options.nsys)
    config = options.run
    name = (
        options.name
        if options.name is not None
        else default_name(config.model, config.context, config.mode, config.dtype, config.compile, config.attention)
    )
    with raising_interrupted():  # SIGTERM too ends in the cleanup below: lock released, folder published
        run = NewRun(options.out, name, replace=options.name is not None)
        partial = run.folder
        try:
            notes = _record(run, nsys, options, started)
        except BaseException as error:
            final = run.publish()
            name_final_folder(final, partial)
            if isinstance(error, TracekitError):  # say where the run folder is now, not where it was written
                raise type(error)(str(error).replace(str(partial), str(final.folder))) from None
            if isinstance(error, OSError):  # a full disk, say: one line naming where the run is now
                raise CaptureError(f"{error.strerror or error} while writing {final.folder}") from None
            raise
        final = run.publish()
        name_final_folder(final, partial)
    latest = final.point_latest()
    if final.status == "failed":
        raise CaptureError(f"the workload failed: {program_failure(final)} (run folder {final.folder})")
    return Capture(final, latest, notes)


def name_final_folder(run: Run, partial: Path) -> None:
    """After ``run_folder.NewRun.publish``: run.json names the folder the run was published as (a default name may have gained a suffix), and
    nsys.log the files where they are now, not in the hidden folder they were recorded in."""
    if run.manifest and run.manifest.get("name") != run.folder.name:
        run.write_manifest({**run.manifest, "name": run.folder.name})
    try:
        log = run.log.read_text(errors="replace")
        if str(partial) in log:
            write_text(run.log, log.replace(str(partial), str(run.folder)))
    except OSError:
        pass  # no log (nsys never started), or one that cannot be rewritten: it stays as nsys wrote it


def _record(run: Run, nsys: str, options: CaptureOptions, started: float) -> list[str]:
    """Profile into ``run``'s folder, import and export the report, write run.json; returns the notes
    for the user. Raises CaptureError when nsys left no report or the capture was interrupted."""
    trace = options.trace or (GPU_TRACE if gpu_present() else CPU_TRACE)
    command = nsys_command(nsys, trace, run, tuple(options.nsys_args), program_command(options, run))
    # nsys matches capture-range names against registered NVTX strings only unless told otherwise;
    # torch.cuda.nvtx (the fallback when the nvtx package is missing) does not register them.
    environment = {
        **os.environ,
        "NSYS_NVTX_PROFILER_REGISTER_ONLY": "0",
        "PYTHONUNBUFFERED": "1",
        "TRACEKIT_PROGRAM_LOG": str(run.program_log),  # the program's output apart from nsys's (launch.py)
        annotate.ENV_PROFILER: "nsys",  # the workload's tracekit.annotate ranges are NVTX ranges
    }
    manifest = {
        "status": "running",
        "name": run.folder.name,
        "created_utc": _now(),
        "config": _config(options),
        ACTIVATION_NOTE: formula_note(_config(options)),  # what `memory --by role` sets beside the activations
        "trace": trace,
        "command": command,
        "versions": {"tracekit": __version__, "nsys": nsys_tool.nsys_version(nsys), "python": sys.version.split()[0]},
    }
    notes: list[str] = []
    with open(run.log, "w") as log:
        # a session of its own: a signal to our process group reaches nsys once, from the watchdog
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
        watched = watchdog.watch(
            process, sys.executable, str(run.result_file), options.exit_grace_s, start_timeout_s=options.start_timeout_s
        )
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
    result = read_result(run)
    manifest.update(from_result(result))
    manifest["program"] = {
        "status": result.get("status", "failed"),
        "error": result.get("error"),
        "nsys_exit_status": watched.returncode,
    }
    manifest["watchdog"] = {
        "killed_nsys": watched.killed_nsys,
        "killed_agents": watched.killed_agents,
        "killed_after_interruption": watched.killed_tree,
        "killed_lingering": watched.killed_lingering,
    }
    if watched.killed_lingering:
        notes.append(
            f"the program left {len(watched.killed_lingering)} child process(es) running after it exited; "
            "they were stopped so that nsys could finish"
        )
    if watched.interrupted:
        how = "Ctrl-C" if watched.interrupted == "SIGINT" else watched.interrupted
        saved = _saved_after_interruption(run, nsys)  # a complete recording is imported, never thrown away
        _finish(run, manifest, "interrupted", notes, started, profiled)
        raise CaptureError(
            f"capture interrupted ({how}): nsys, the program and its agents were stopped; "
            + (
                f"what nsys recorded is in {run.folder} ({', '.join(saved)}; run.json: interrupted)"
                if saved
                else f"nsys saved nothing; {run.folder} holds its log (run.json: interrupted)"
            )
        )
    if watched.never_started:
        _finish(run, manifest, "failed", notes, started, profiled)
        raise CaptureError(
            f"nsys did not start the program within {options.start_timeout_s:.0f} s and was stopped: "
            f"{_tail(run.log, errors_only=True)} (full log: {run.log}; --start-timeout waits longer)"
        )

    report = _report(run, nsys, manifest, notes, started, profiled)
    imported = time.monotonic()
    export = nsys_tool.export_sqlite(report, nsys)
    manifest["wall_s"] = {"import": round(imported - profiled, 3), "export": round(time.monotonic() - imported, 3)}
    snapshot = run.snapshot
    manifest["files"] = {"report": report.name, "export": export.name, "memory": snapshot.name if snapshot else None}
    if options.memory and snapshot is None:
        device_type = manifest["device"].get("type") or "unknown device"
        notes.append(
            f"memory snapshots need CUDA: this run was on the {device_type}, so there is no memory.pickle"
            if device_type != "cuda"
            else "the program wrote no memory snapshot"
        )
    status = {"ok": "complete", "oom": "oom"}.get(manifest["program"]["status"], "failed")
    _finish(run, manifest, status, notes, started, profiled)
    run.result_file.unlink(missing_ok=True)  # merged into run.json
    return notes


def _saved_after_interruption(run: Run, nsys: str) -> list[str]:
    """After an interruption: the report nsys wrote (importing its raw stream when it left one) and its
    export; the files there are. A second interruption while importing gives up the import, keeping
    what was on disk."""
    from tracekit.signals import Interrupted

    try:
        if not run.report_target().exists() and run.stream.exists():
            import_stream(run, nsys)
        if run.report_target().exists():
            nsys_tool.export_sqlite(run.report_target(), nsys)
    except (TracekitError, Interrupted):
        pass
    return [path.name for path in (run.report_target(), run.folder / "trace.sqlite", run.stream) if path.exists()]


def _report(run: Run, nsys: str, manifest: dict, notes: list[str], started: float, profiled: float) -> Path:
    """The .nsys-rep, importing the .qdstrm when nsys could not (Debian's nsys 2022.4 looks for its
    importer in ../host-linux-x64 beside its binary, where Debian's package does not put it)."""
    report, stream = run.report_target(), run.stream
    if not report.exists() and stream.exists():
        try:
            import_stream(run, nsys)
        except TracekitError:
            _finish(run, manifest, "failed", notes, started, profiled)  # the folder says what happened
            raise
    if not report.exists():
        _finish(run, manifest, "failed", notes, started, profiled)
        program = manifest["program"]
        cause = (  # the program's own failure first: nsys often ends with errors of its own after it
            f"the workload failed: {program_failure(run)}"
            if program["status"] not in ("ok", "oom") and (program.get("error") or _printed(run.program_log))
            else f"nsys exited with status {program['nsys_exit_status']}: {_tail(run.log, errors_only=True)} "
            f"(full log: {run.log})"
        )
        raise CaptureError(f"nsys wrote no report in {run.folder}: {cause}" + "".join(f"; {note}" for note in notes))
    return report


def import_stream(run: Run, nsys: str) -> None:
    """The run's .nsys-rep from the raw .qdstrm nsys left when it found no importer of its own (Debian's
    nsys 2022.4), imported with the importer tracekit finds; the .qdstrm is removed, and nsys.log says
    how the report was made instead of nsys's lines about its missing importer (an "error status" of a
    capture that worked). Raises NsysExportError: no importer, or a failed import."""
    nsys_tool.import_qdstrm(run.stream, run.report_target(), nsys)
    run.stream.unlink()
    importer = nsys_tool.find_importer(nsys) or "QdstrmImporter"
    said = (
        f"tracekit: nsys found no importer of its own and left the raw {run.stream.name}; tracekit imported it "
        f"into {run.report_target().name} with {importer} (then removed the .qdstrm)"
    )
    try:
        lines = run.log.read_text(errors="replace").splitlines()
        kept = [line for line in lines if not line.strip().startswith(IMPORTER_MISSING)]
        write_text(run.log, "\n".join([*kept, said]) + "\n")
    except OSError:
        pass  # the log stays as nsys wrote it: the report itself is whole


def _finish(run: Run, manifest: dict, status: str, notes: list[str], started: float, profiled: float) -> None:
    manifest["status"] = status
    manifest["notes"] = notes
    manifest.setdefault("wall_s", {})
    manifest["wall_s"].update({"profile": round(profiled - started, 3), "total": round(time.monotonic() - started, 3)})
    run.write_manifest(manifest)


def _config(options: CaptureOptions) -> dict:
    return {**asdict(options.run), "memory": options.memory}


def read_result(run: Run) -> dict:
    try:
        return json.loads(run.result_file.read_text()) if run.result_file.exists() else {}
    except (OSError, ValueError, RecursionError):  # the program's own file, but it may have died writing it
        return {}


def from_result(result: dict) -> dict:
    """The harness's measurements and environment, as run.json keeps them."""
    summary = result.get("summary", {})
    timings = {
        phase: {stat: summary.get(phase_field(phase, stat).key) for stat in STATS}
        for phase in PHASES
        if summary.get(phase_field(phase, "mean").key) is not None
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


def program_failure(run: Run) -> str:
    """Why the profiled program failed, in its own words: the error its result recorded (CUDA not
    available, out of memory, a missing module), else the last line it printed (log: program.log)."""
    error = run.program_error or read_result(run).get("error")
    return f"{error or _tail(run.program_log)} (its output: {run.program_log})"


def _printed(log: Path) -> bool:
    return log.is_file() and log.stat().st_size > 0


def _tail(log: Path, errors_only: bool = False) -> str:
    """The last line of ``log`` (with ``errors_only``, the last one that mentions an error), shortened."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    if errors_only:
        lines = [line for line in lines if "error" in line.lower()] or lines
    return (lines or ["nothing printed"])[-1][:300]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
