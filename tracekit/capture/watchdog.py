"""Watching an ``nsys profile`` process: it must end after the program it profiles, and leave no agent.

Two ways nsys 2022.4 misbehaves (seen in about 1 run in 3 without --sample=none --cpuctxsw=none): its agent, a daemon re-parented to init and
named by ``--session-name=profile-<app>-<nsys pid>``, can spin at 100% CPU after the program ended;
and nsys itself can keep waiting on it. We find processes through /proc by their command line (the
program by a marker path unique to this capture, the agent by the session name carrying nsys's pid)
and stop them by process id: never by name, which could hit another user's profiler.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

POLL_S = 0.2


@dataclass
class WatchResult:
    """How the watched nsys process ended, and what the watchdog had to stop."""

    returncode: int | None = None
    program_pid: int | None = None
    killed_nsys: bool = False
    killed_agents: list[int] = field(default_factory=list)
    interrupted: str | None = None  # "SIGINT" or "SIGTERM" when the user stopped the capture
    killed_tree: list[int] = field(default_factory=list)  # processes stopped after an interruption
    killed_lingering: list[int] = field(default_factory=list)  # the program's children left after it exited
    never_started: bool = False  # nsys ran start_timeout_s without starting the program


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while watching."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def command_lines() -> dict[int, list[str]]:
    """Command line of every process we can read."""
    lines = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if raw:
            lines[int(entry.name)] = raw.rstrip(b"\0").decode(errors="replace").split("\0")
    return lines


def find_program(executable: str, marker: str, exclude: set[int]) -> list[int]:
    """Process ids running ``executable`` with ``marker`` among their arguments.

    nsys's own command line holds the program's arguments too, so the executable (argv[0]) must match
    and nsys (in ``exclude``) is left out.
    """
    name = os.path.basename(executable)
    return [
        pid
        for pid, argv in command_lines().items()
        if pid not in exclude
        and pid != os.getpid()
        and (argv[0] == executable or os.path.basename(argv[0]) == name)
        and any(marker in arg for arg in argv[1:])
    ]


def agent_processes(nsys_pid: int) -> list[int]:
    """nsys agents of the profiling session started by ``nsys_pid``."""
    pattern = re.compile(rf"--session-name=\S*-{nsys_pid}$")
    return [pid for pid, argv in command_lines().items() if any(pattern.search(arg) for arg in argv)]


# How long nsys gets to write its report after a SIGTERM (a SIGINT gets interrupt_grace_s).
TERM_GRACE_S = 3.0


def stop(pid: int, grace_s: float = 5.0) -> bool:
    """SIGTERM, then SIGKILL after ``grace_s``; True if the process is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.05)
    return not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is missing


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (children, their children, ...), from /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, frontier = [], [root]
    while frontier:
        frontier = [child for pid in frontier for child in children.get(pid, [])]
        found += frontier
    return found


def watch(
    process: subprocess.Popen,
    program: str,
    program_marker: str,
    exit_grace_s: float,
    agent_grace_s: float = 3.0,
    start_timeout_s: float | None = None,
    interrupt_grace_s: float = 60.0,
) -> WatchResult:
    """Wait for ``process`` (nsys profile); stop it if it outlives the profiled program (``program``
    with ``program_marker`` in its arguments) by ``exit_grace_s``, or if it has not started the
    program ``start_timeout_s`` after it began; then stop any agent of its session still running
    ``agent_grace_s`` later.

    SIGINT (Ctrl-C) and SIGTERM interrupt the capture: nsys (in a session of its own, so no signal of
    ours reached it) is sent one SIGINT (it then stops collecting and writes what it has), given
    ``interrupt_grace_s`` to end, and then everything left of the tree (nsys, the program, their
    children, the session's agents) is stopped by process id. A second signal stops it at once.
    Children the program leaves running after it exits are stopped, so that nsys does not wait for them.
    """
    result = WatchResult()
    program_gone_at = None
    started = time.monotonic()

    def on_signal(number, frame):
        raise Interrupted(signal.Signals(number).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    known: set[int] = set()  # every process of the tree seen, so that orphans are found too
    program_tree: set[int] = set()  # the program's children and theirs, seen while it ran
    try:
        try:
            while process.poll() is None:
                known.update(descendants(process.pid))
                if result.program_pid is None:
                    found = find_program(program, program_marker, {process.pid})
                    result.program_pid = found[0] if found else None
                    # A program too quick to be seen has still written its result file (the marker) at the end.
                    if result.program_pid is None and program_gone_at is None and os.path.exists(program_marker):
                        program_gone_at = time.monotonic()
                    if (
                        result.program_pid is None
                        and program_gone_at is None
                        and start_timeout_s is not None
                        and time.monotonic() - started > start_timeout_s
                    ):
                        result.never_started = True
                        result.killed_nsys = stop(process.pid)
                        break
                elif program_gone_at is None and _alive(result.program_pid):
                    program_tree.update(descendants(result.program_pid))
                elif program_gone_at is None:
                    program_gone_at = time.monotonic()
                    # Children the program left running: nsys waits for them (for ever, or until the grace
                    # below kills nsys and loses the report); ended here, nsys finishes as for any program.
                    result.killed_lingering = [pid for pid in sorted(program_tree) if _alive(pid) and stop(pid, 1.0)]
                if program_gone_at is not None and time.monotonic() - program_gone_at > exit_grace_s:
                    result.killed_nsys = stop(process.pid)
                    break
                time.sleep(POLL_S)
        except Interrupted as interruption:
            result.interrupted = interruption.name
            # A Ctrl-C typed in the terminal reached nsys (our process group) already: a second
            # SIGINT could make it abandon what it is writing. A SIGTERM, or a SIGINT sent to us
            # alone, did not reach it.
            known.update(descendants(process.pid))
            # nsys runs in a session of its own (the capture starts it so): no signal of ours reached
            # it; it gets exactly one SIGINT, from here (a second makes it abandon its report).
            forward = True
            # SIGTERM comes from a process manager that sends SIGKILL soon after (docker: 10 s), which
            # would orphan nsys and the program: a short wind-down, so the whole tree is gone before it.
            grace = TERM_GRACE_S if interruption.name == "SIGTERM" else interrupt_grace_s
            _wind_down(process, grace, forward, lambda: known.update(descendants(process.pid)))
        result.returncode = process.wait()
    except Interrupted as interruption:  # a second signal while winding down: stop now
        result.interrupted = result.interrupted or interruption.name
        stop(process.pid, grace_s=1.0)
        result.returncode = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if result.interrupted:
        # The tree as last seen, and the program by its marker: nsys may have ended and left it to init.
        tree = known | set(descendants(process.pid)) | set(find_program(program, program_marker, {process.pid}))
        survivors = [pid for pid in tree if _alive(pid)] + agent_processes(process.pid)
        grace = 1.0 if result.interrupted == "SIGTERM" else 2.0
        result.killed_tree = sorted({pid for pid in survivors if stop(pid, grace_s=grace)})
        return result
    deadline = time.monotonic() + agent_grace_s
    agents = agent_processes(process.pid)
    while agents and time.monotonic() < deadline:
        time.sleep(POLL_S)
        agents = [pid for pid in agents if _alive(pid)]
    for pid in agents:
        if stop(pid):
            result.killed_agents.append(pid)
    return result


def _wind_down(process: subprocess.Popen, grace_s: float, forward: bool, collect: Callable[[], None]) -> None:
    """After an interruption: send nsys SIGINT when it did not get one (``forward``): it then stops
    collecting and writes what it has; stop it when it outlives ``grace_s``, noting its children first
    (``collect``), which its end would leave to init."""
    if forward and process.poll() is None:
        process.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while process.poll() is None and time.monotonic() < deadline:
        collect()
        time.sleep(POLL_S)
    if process.poll() is None:
        collect()
        stop(process.pid, grace_s=min(5.0, grace_s))
