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
    interrupted: bool = False


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


def watch(
    process: subprocess.Popen, program: str, program_marker: str, exit_grace_s: float, agent_grace_s: float = 3.0
) -> WatchResult:
    """Wait for ``process`` (nsys profile); stop it if it outlives the profiled program (``program``
    with ``program_marker`` in its arguments) by ``exit_grace_s``, then stop any agent of its session
    still running ``agent_grace_s`` later.

    Ctrl-C reaches nsys too (same process group): nsys then stops collecting and writes what it has;
    we wait for that (as for a normal end) and report ``interrupted``.
    """
    result = WatchResult()
    program_gone_at = None
    while True:
        try:
            if process.poll() is not None:
                break
            if result.program_pid is None:
                found = find_program(program, program_marker, {process.pid})
                result.program_pid = found[0] if found else None
                # A program too quick to be seen has still written its result file (the marker) at the end.
                if result.program_pid is None and program_gone_at is None and os.path.exists(program_marker):
                    program_gone_at = time.monotonic()
            elif program_gone_at is None and not _alive(result.program_pid):
                program_gone_at = time.monotonic()
            if program_gone_at is not None and time.monotonic() - program_gone_at > exit_grace_s:
                result.killed_nsys = stop(process.pid)
                break
            time.sleep(POLL_S)
        except KeyboardInterrupt:
            result.interrupted = True
            program_gone_at = program_gone_at or time.monotonic()  # give nsys the grace period to finish
    result.returncode = process.wait()
    deadline = time.monotonic() + agent_grace_s
    agents = agent_processes(process.pid)
    while agents and time.monotonic() < deadline:
        time.sleep(POLL_S)
        agents = [pid for pid in agents if _alive(pid)]
    for pid in agents:
        if stop(pid):
            result.killed_agents.append(pid)
    return result
