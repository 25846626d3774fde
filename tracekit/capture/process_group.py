"""A profiled program's process group: stopped as a whole when a capture is interrupted, and whatever
the program left running ended once it exits (a profiler waits for the program's whole tree)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from tracekit.signals import Interrupted

# After Ctrl-C the program gets SIGINT (a program profiled whole writes its trace then), and this long
# to end before SIGTERM, then SIGKILL; after SIGTERM, a process manager's SIGKILL comes soon (docker: 10 s).
INTERRUPT_GRACE_S = {"Ctrl-C": 10.0, "SIGTERM": 3.0}
LINGER_GRACE_S = 2.0  # what the program's leftover children get between SIGTERM and SIGKILL


def stop_group(process: subprocess.Popen, grace_s: float) -> int:
    """SIGINT to ``process``'s group, then SIGTERM, then SIGKILL, ``grace_s`` apart (a second interruption
    meanwhile: SIGKILL at once); its exit status."""
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            _signal_group(process.pid, sig)
            try:
                return process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                continue
    except Interrupted:  # a second Ctrl-C: no more waiting
        pass
    _signal_group(process.pid, signal.SIGKILL)
    return process.wait()


def end_group(group: int, grace_s: float = LINGER_GRACE_S) -> None:
    """End what is left of process group ``group`` once its leader exited: SIGTERM, then SIGKILL."""
    if not _signal_group(group, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if not _signal_group(group, 0):
            return
    _signal_group(group, signal.SIGKILL)


def _signal_group(group: int, sig: int) -> bool:
    """Send ``sig`` to process group ``group``; False when no process is left in it."""
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member that changed its user: nothing we may do
        return False
    return True
