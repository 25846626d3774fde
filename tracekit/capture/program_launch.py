"""Start a user's Python program for ``tracekit capture -- python SCRIPT|-m MODULE ...``.

Run as ``python .../program_launch.py --tracekit-run MARKER SCRIPT ARGS...`` (or ``... -m MODULE``): the
marker, unique to the capture, lets the watchdog find the program among nsys's processes; it is
removed before the program sees its arguments. The program runs as ``python SCRIPT`` would
(``sys.argv``, ``__main__``, its folder first on ``sys.path``).

Under ``--profiler torch`` (TRACEKIT_PROFILER=torch) a program that never calls
``tracekit.annotate.steps`` is profiled whole: a torch.profiler starts before it and its trace is
written when it ends; ``steps`` stops that one and records its measured steps instead. Whether the
program was profiled whole is written to TRACEKIT_LAUNCH_NOTE for the capture's summary. When it ends,
what the capture cannot see from outside (torch's version, the devices) goes to TRACEKIT_PROGRAM_FACTS,
unless its ``annotate.steps`` wrote it already, with the steps it measured. Processes the program
leaves running when it ends are ended too (a profiler would wait for them).
"""

import os
import runpy
import sys
from pathlib import Path


def _start_whole_program_profiler():
    from tracekit import annotate

    try:
        import torch
    except ImportError:
        print("tracekit capture --profiler torch: torch is not installed for", sys.executable, file=sys.stderr)
        sys.exit(3)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    profiler = torch.profiler.profile(activities=activities, record_shapes=annotate.shapes_wanted())
    profiler.start()
    annotate.STATE.whole_program = profiler
    return annotate


def _finish_whole_program(annotate) -> None:
    profiler = annotate.STATE.whole_program
    note = os.environ.get("TRACEKIT_LAUNCH_NOTE")
    if profiler is None:  # steps() took over and wrote the measured steps
        return
    annotate.STATE.whole_program = None
    profiler.stop()
    annotate.write_trace(profiler, os.environ[annotate.ENV_TORCH_TRACE])
    if note:
        Path(note).write_text("whole")


def _redirect_output(log: str) -> None:
    """Standard output and error into ``log`` (under nsys, apart from nsys's own messages)."""
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    for stream in (1, 2):
        os.dup2(descriptor, stream)
    os.close(descriptor)


def main() -> None:
    if os.environ.get("TRACEKIT_PROGRAM_LOG") and os.environ.get("TRACEKIT_PROFILER") == "nsys":
        _redirect_output(os.environ["TRACEKIT_PROGRAM_LOG"])
    arguments = sys.argv[1:]
    if arguments[:1] == ["--tracekit-run"]:
        arguments = arguments[2:]
    if not arguments:
        sys.exit("tracekit capture: no program to run")
    # Our installation first, so that `from tracekit import annotate` finds this tracekit.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    annotate = _start_whole_program_profiler() if os.environ.get("TRACEKIT_PROFILER") == "torch" else None
    try:
        if arguments[0] == "-m":
            sys.argv = arguments[1:]
            sys.path.insert(0, os.getcwd())  # as `python -m` does
            runpy.run_module(arguments[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = arguments
            sys.path.insert(0, str(Path(arguments[0]).resolve().parent))
            runpy.run_path(arguments[0], run_name="__main__")
    finally:
        if annotate is not None:
            _finish_whole_program(annotate)
        from tracekit import annotate as marks

        marks.write_facts(replace=False)  # torch and devices of a program that marked no steps
        _end_children()


def _end_children(grace_s: float = 2.0) -> None:
    """End the processes the program started and left running (Linux: found through /proc's parent
    links): a profiler waits for the program's whole tree, so one lingering child would hold the
    capture open (nsys waits for ever) or lose its report. SIGTERM, then SIGKILL after ``grace_s``."""
    import signal
    import time

    def children_of(root: int) -> list[int]:
        parents = {}
        for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        found, frontier = [], [root]
        while frontier:
            frontier = [pid for pid, parent in parents.items() if parent in frontier]
            found += frontier
        return found

    left = children_of(os.getpid())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + grace_s
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = [pid for pid in left if _running(pid)]
        if not left:
            return


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder: the program must not import its neighbours as top-level modules
    main()
