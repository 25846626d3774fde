"""``tracekit capture [OPTIONS] -- COMMAND ...``: any program under nsys or torch.profiler, into a run folder.

The program learns which profiler records it from the environment (``tracekit.annotate``): under
nsys its ``annotate.steps`` open the NVTX capture range and nsys records only inside it; under
torch.profiler ``steps`` records the measured steps into the run folder's trace. A Python program
(``python SCRIPT`` or ``python -m MODULE``) starts through ``program_launch``, which also profiles it
whole under torch when it marks no steps. Whether the capture range is used under nsys is decided from
the script's text: a program that never calls ``annotate.steps`` would never open it, so nsys records
it whole instead (said in the summary). run.json is written last, as for the built-in workloads.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from tracekit import annotate, nsys_tool
from tracekit.activation_formula import formula_note
from tracekit.capture import watchdog
from tracekit.capture.nsys import from_result, import_stream, name_final_folder, read_result
from tracekit.capture.process_group import INTERRUPT_GRACE_S, end_group, stop_group
from tracekit.capture.run_folder import NewRun
from tracekit.errors import CaptureError, NsysNotFoundError, TracekitError
from tracekit.run_config import RunConfig
from tracekit.runs import ACTIVATION_NOTE, Run, default_name
from tracekit.signals import Interrupted, raising_interrupted
from tracekit.version import __version__

LAUNCHER = Path(__file__).resolve().with_name("program_launch.py")
PROFILERS = ("auto", "nsys", "torch")
GPU_TRACE, CPU_TRACE = "cuda,nvtx,osrt", "nvtx"
WHOLE_NOTE = (
    "the program marks no steps (tracekit.annotate.steps): it was profiled whole, warm-up included; "
    "wrap its training loop in `for batch in annotate.steps(loader, warmup=N):` to leave warm-up out"
)


@dataclass
class CommandOptions:
    """What to run and how (see ``tracekit capture --help``)."""

    command: tuple[str, ...]
    profiler: str = "auto"
    memory: bool = False
    out: Path = Path("traces")
    name: str | None = None
    nsys: str | None = None
    nsys_args: tuple[str, ...] = ()
    trace: str | None = None
    exit_grace_s: float = 600.0
    start_timeout_s: float = 300.0
    # A built-in workload run as a program (`capture MODEL --profiler torch`): its configuration and the
    # harness's measurements (device, versions, step timings) go into run.json as under nsys.
    workload: RunConfig | None = None


@dataclass
class CommandCapture:
    run: Run
    latest: Path | None
    profiler: str
    notes: list[str]


def capture_command(options: CommandOptions) -> CommandCapture:
    """Profile ``options.command`` into a new run folder; CaptureError names the real cause when the
    command is not found, fails (with the tail of its output) or writes no trace."""
    if not options.command:
        raise CaptureError("no command to profile: give one after `--`, e.g. `tracekit capture -- python train.py`")
    executable = shutil.which(options.command[0])
    if executable is None:
        raise CaptureError(f"command not found: {options.command[0]}")
    profiler, nsys = _choose_profiler(options)
    name = options.name if options.name is not None else _default_name(options.command, options.workload)
    with raising_interrupted():  # SIGTERM too ends in the cleanup below: lock released, folder published
        run = NewRun(options.out, name, replace=options.name is not None)
        partial = run.folder
        started = time.monotonic()
        try:
            notes = _record(run, options, profiler, nsys, started)
        except BaseException as error:
            final = run.publish()
            name_final_folder(final, partial)
            if isinstance(error, TracekitError):  # name the folder where the run is now
                raise type(error)(str(error).replace(str(partial), str(final.folder))) from None
            if isinstance(error, OSError):  # a full disk, say: one line naming where the run is now
                raise CaptureError(f"{error.strerror or error} while writing {final.folder}") from None
            raise
        final = run.publish()
    name_final_folder(final, partial)
    return CommandCapture(final, final.point_latest(), profiler, notes)


def _choose_profiler(options: CommandOptions) -> tuple[str, str | None]:
    """The profiler to use (auto: nsys when it is installed, else torch) and the nsys executable."""
    if options.profiler not in PROFILERS:
        raise CaptureError(f"unknown --profiler {options.profiler!r}; choose {', '.join(PROFILERS)}")
    if options.profiler in ("auto", "nsys"):
        try:
            return "nsys", nsys_tool.find_nsys(options.nsys)
        except NsysNotFoundError:
            if options.profiler == "nsys":
                raise
    if importlib.util.find_spec("torch") is None:
        raise CaptureError(
            f"--profiler torch needs torch: it is not installed for {sys.executable} (pip install torch)"
        )
    return "torch", None


def _default_name(command: tuple[str, ...], workload: RunConfig | None = None) -> str:
    if workload is not None:
        return default_name(
            workload.model, workload.context, workload.mode, workload.dtype, workload.compile, workload.attention
        )
    words = [word for word in command if not word.startswith("-")]
    program = Path(words[1] if len(words) > 1 and Path(words[0]).name.startswith("python") else words[0]).stem
    cleaned = "".join(char if char.isalnum() or char in "-_" else "-" for char in program)[:40] or "program"
    return f"{cleaned}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def _python_program(command: tuple[str, ...]) -> bool:
    """``python SCRIPT ...`` or ``python -m MODULE ...`` (no interpreter options before them)."""
    return (
        Path(command[0]).name.startswith("python")
        and len(command) > 1
        and not (command[1].startswith("-") and command[1] != "-m")
    )


def _marks_steps(command: tuple[str, ...]) -> bool:
    """Whether the script's (or the module's, found from the current folder as ``python -m`` finds it)
    text calls ``steps(``, so that nsys may wait for the capture range. Read, never imported."""
    if not _python_program(command):
        return False
    if command[1] == "-m":
        if len(command) < 3:
            return False
        base = Path.cwd().joinpath(*command[2].split("."))
        candidates = [base.with_suffix(".py"), base / "__main__.py"]
    else:
        candidates = [Path(command[1])]
    for source in candidates:
        try:
            return "steps(" in source.read_text(errors="replace")
        except OSError:
            continue
    return False


def _record(run: NewRun, options: CommandOptions, profiler: str, nsys: str | None, started: float) -> list[str]:
    marker = f"{run.folder}/{uuid.uuid4().hex[:8]}"
    python = _python_program(options.command)
    program = (
        [options.command[0], str(LAUNCHER), "--tracekit-run", marker, *options.command[1:]]
        if python
        else list(options.command)
    )
    if options.workload is not None:
        program += ["--result", str(run.result_file)]
    environment = {
        **os.environ,
        annotate.ENV_PROFILER: profiler,
        "PYTHONUNBUFFERED": "1",
        "TRACEKIT_LAUNCH_NOTE": str(run.launch_note),
        "TRACEKIT_PROGRAM_LOG": str(run.program_log),  # the launcher's output apart from nsys's
    }
    if options.memory:
        environment[annotate.ENV_MEMORY] = str(run.snapshot_target())
    if options.workload is None:  # a built-in workload reports through its result file instead
        environment[annotate.ENV_FACTS] = str(run.facts_file)
    notes: list[str] = []
    manifest = {
        "status": "running",
        "name": run.folder.name,
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": list(options.command),
        "profiler": profiler,
        "versions": {"tracekit": __version__, "python": sys.version.split()[0]},
    }
    if options.workload is not None:
        manifest["config"] = {**asdict(options.workload), "memory": options.memory}
        manifest[ACTIVATION_NOTE] = formula_note(manifest["config"])  # what `memory --by role` sets beside it
    interrupted = None
    if profiler == "torch":
        environment[annotate.ENV_TORCH_TRACE] = str(run.torch_trace_target())
        status, interrupted = _run_plain(program, environment, run)
    else:
        assert nsys is not None
        window = _marks_steps(options.command)
        if not window:
            notes.append(WHOLE_NOTE)
        trace = options.trace or (GPU_TRACE if _gpu_present() else CPU_TRACE)
        command = [
            nsys,
            "profile",
            f"--trace={trace}",
            "--sample=none",
            "--cpuctxsw=none",
            *(
                ["--capture-range=nvtx", f"--nvtx-capture={annotate.CAPTURE_RANGE}", "--capture-range-end=stop"]
                if window
                else []
            ),
            "--force-overwrite=true",
            "--output",
            str(run.output_base),
            *options.nsys_args,
            *program,
        ]
        environment["NSYS_NVTX_PROFILER_REGISTER_ONLY"] = "0"
        manifest.update({"trace": trace, "nsys_command": command})
        manifest["versions"]["nsys"] = nsys_tool.nsys_version(nsys)
        status, interrupted = _run_under_nsys(command, environment, run, marker if python else None, options)
    program_state: dict[str, object] = {"exit_status": status}
    manifest["program"] = program_state
    manifest.update(_program_facts(run))
    if options.workload is not None:
        result = read_result(run)
        manifest.update(from_result(result))
        program_state.update({"status": result.get("status", "failed"), "error": result.get("error")})
        run.result_file.unlink(missing_ok=True)  # merged into run.json
    if run.launch_note.exists():
        notes.append(WHOLE_NOTE)
        run.launch_note.unlink()
    if status != 0 and not interrupted:
        _finish(run, manifest, "failed", notes, started)
        raise CaptureError(
            f"the program exited with status {status}: {_tail(run.program_log)} (its output: {run.program_log})"
        )
    if profiler == "torch":
        if not run.torch_trace_target().exists():
            if interrupted:
                _finish(run, manifest, "interrupted", notes, started)
                raise CaptureError(
                    f"capture interrupted ({interrupted}): the program was stopped before it wrote "
                    f"its trace; its output is in {run.program_log}"
                )
            _finish(run, manifest, "failed", notes, started)
            raise CaptureError(
                "the program wrote no torch.profiler trace: a program started other than `python SCRIPT` or "
                "`python -m MODULE` must mark its steps with tracekit.annotate.steps"
            )
        files: dict[str, str | None] = {"trace": run.torch_trace_target().name}
    else:
        assert nsys is not None  # chosen with the profiler
        report = run.report_target()
        if not report.exists() and run.stream.exists():  # also after an interruption: the recording is kept
            import_stream(run, nsys)
        if not report.exists():
            _finish(run, manifest, "interrupted" if interrupted else "failed", notes, started)
            if interrupted:
                raise CaptureError(
                    f"capture interrupted ({interrupted}): nsys and the program were stopped before nsys wrote a report"
                )
            raise CaptureError(f"nsys wrote no report: {_tail(run.log)} (full log: {run.log})")
        export = nsys_tool.export_sqlite(report, nsys)
        files = {"report": report.name, "export": export.name}
    manifest["files"] = files
    if options.memory:
        snapshot = run.snapshot
        files["memory"] = snapshot.name if snapshot else None
        if snapshot is None:
            notes.append("no memory snapshot: they need CUDA and a program that marks its steps")
    if interrupted:
        _finish(run, manifest, "interrupted", notes, started)
        kept = ", ".join(name for name in run.files if name != "run.json")
        raise CaptureError(
            f"capture interrupted ({interrupted}): the program was stopped; what it recorded is in "
            f"{run.folder} ({kept}; run.json: interrupted)"
        )
    _finish(run, manifest, "complete", notes, started)
    return notes


def _program_facts(run: Run) -> dict:
    """What the program wrote of itself (``annotate.write_facts``), as run.json keeps it: the steps it
    measured and its warm-up (config), its device and torch's and CUDA's versions; {} when it wrote
    nothing (not Python, or it died first). The file is the program's: each value is checked."""
    try:
        facts = json.loads(run.facts_file.read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    finally:
        run.facts_file.unlink(missing_ok=True)
    if not isinstance(facts, dict):
        return {}

    def count(key: str) -> int | None:
        value = facts.get(key)
        return value if type(value) is int and value >= 0 else None

    def text(value) -> str | None:
        return value[:200] if isinstance(value, str) and value else None

    merged: dict = {}
    config = {key: count(key) for key in ("steps", "warmup") if count(key) is not None}
    if config:
        merged["config"] = config
    named = facts.get("device")
    device: dict = named if isinstance(named, dict) else {}
    if text(device.get("name")):
        merged["device"] = {"name": text(device.get("name")), "type": text(device.get("type"))}
    versions = {key: text(facts.get(key)) for key in ("torch", "cuda") if text(facts.get(key))}
    if versions:
        merged["versions_program"] = versions
    return merged


def _run_plain(program: list[str], environment: dict, run: Run) -> tuple[int, str | None]:
    """Run the program in a process group of its own; (its exit status, the interruption or None).

    Ctrl-C or SIGTERM to tracekit: the program's group gets SIGINT, then SIGTERM and SIGKILL if it does
    not end (``INTERRUPT_GRACE_S``); a second signal kills it at once. Children the program leaves
    running after it exits are ended (``end_group``)."""
    with open(run.program_log, "w") as log:
        try:
            process = subprocess.Popen(
                program, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
            )
        except OSError as error:
            raise CaptureError(f"cannot start {program[0]}: {error.strerror or error}") from None
        interrupted = None
        try:
            status = process.wait()
        except Interrupted as interruption:
            interrupted = interruption.name
            status = stop_group(process, INTERRUPT_GRACE_S.get(interruption.name, 3.0))
        end_group(process.pid)
        return status, interrupted


def _run_under_nsys(
    command: list[str], environment: dict, run: Run, marker: str | None, options
) -> tuple[int, str | None]:
    """nsys's own output goes to nsys.log, the program's to program.log (through the launcher's
    descriptors: nsys passes its own to the program, so both land in nsys.log for other programs).
    nsys runs in a session of its own: a signal to tracekit's process group reaches it once, from the
    watchdog (a second SIGINT makes nsys abandon its report outside the run folder)."""
    with open(run.log, "w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
        # The program is found by its marker (Python programs, through the launcher); others are not
        # watched for a late exit, and never counted as "not started".
        watched = watchdog.watch(
            process,
            options.command[0],
            marker or f"{run.folder}/unmatched",
            options.exit_grace_s,
            start_timeout_s=options.start_timeout_s if marker else None,
        )
    if marker is None:  # a program outside the launcher wrote into nsys's output
        shutil.copyfile(run.log, run.program_log)
    interrupted = {"SIGINT": "Ctrl-C"}.get(watched.interrupted or "", watched.interrupted)
    return (watched.returncode or 0), interrupted


def _gpu_present() -> bool:
    from tracekit.capture.nsys import gpu_present

    return gpu_present()


def _finish(run: Run, manifest: dict, status: str, notes: list[str], started: float) -> None:
    manifest["status"] = status
    manifest["notes"] = notes
    manifest["wall_s"] = {"total": round(time.monotonic() - started, 3)}
    run.write_manifest(manifest)


# What nsys itself prints around a program's output (a program outside the launcher shares nsys's log):
# left out of the lines that say why the program failed.
NSYS_LINE = re.compile(
    r"^(Collecting data|Generating|Generated|Processing|Importing|Exporting|Capture range|Stopping|"
    r"The target application|The application terminated|WARNING:|NOTICE:|SKIPPED:|\[\d+/\d+\])"
)


def _tail(log: Path, lines: int = 3) -> str:
    """The program's last lines: not libkineto's start/stop lines, nor nsys's own messages."""
    try:
        text = [
            line.strip()
            for line in log.read_text(errors="replace").splitlines()
            if line.strip() and not line.startswith("USDT:") and not NSYS_LINE.match(line.strip())
        ]
    except OSError:
        return "no output"
    return " | ".join(text[-lines:])[-600:] or "nothing printed"
