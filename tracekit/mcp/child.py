"""Each tool call runs in a process of its own, so that a call past its time can be stopped whole.

A thread cannot be stopped, and a command over many inputs starts a pool of processes (and a torch.profiler
trace's decoding another): a call runs in a child forked from a fork server (multiprocessing's
``forkserver``, which has imported pandas and the analyses once, so a call starts in milliseconds rather
than the second an interpreter takes), in a process group of its own. Past its time, or when the client
cancels it, the group gets SIGTERM (the command removes what it was writing, as on Ctrl-C), then SIGKILL
after ``GRACE_S``: the child, its pool and its decoders end together. The child sends back a small,
picklable answer (``Answer``), never a traceback: a ``TracekitError`` is its one line, anything else one
line naming the error, its traceback on the server's standard error (the client's log).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from tracekit.errors import TracekitError

GRACE_S = 2.0  # after SIGTERM, how long the call's processes have to clean up before SIGKILL
# Imported once by the fork server, so that each call's child has them already: pandas and the renderer
# (``work``), the readers, matplotlib, and (``preloaded``) every built-in command's analysis.
PRELOAD = [
    "tracekit.mcp.work",
    "tracekit.sources.nsys.export",
    "tracekit.sources.kineto.reader",
    "tracekit.sources.snapshot.reader",
    "tracekit.render.plots",
]


class CallTimeout(TracekitError):
    """A tool call ran past the server's ``--timeout``: it was stopped, with every process it started."""


@dataclass(frozen=True)
class Answer:
    """What a call's child sends back: ``value`` (the job's return), or ``error``, one line."""

    value: Any = None
    error: str | None = None


def preloaded() -> list[str]:
    """The modules the fork server imports: ``PRELOAD`` and those of the built-in commands' functions."""
    from tracekit.commands.registry import COMMANDS

    named = [getattr(command, which) for command in COMMANDS.values() for which in ("run", "part", "merger", "prepare")]
    return list(dict.fromkeys([*PRELOAD, *(name.partition(":")[0] for name in named if name)]))


def context() -> Any:
    """The fork server's context (started on first use, its preloads imported once)."""
    found = multiprocessing.get_context("forkserver")
    found.set_forkserver_preload(preloaded())
    return found


def warm_up() -> None:
    """Start the fork server now (it imports pandas and the analyses: seconds), not at the first call."""
    from multiprocessing import forkserver

    context()
    forkserver.ensure_running()


def _child(connection: Connection, job: Callable[..., Any], arguments: tuple) -> None:
    """In the call's process: a group of its own (so the pool it starts is stopped with it), the job under
    ``raising_interrupted`` (SIGTERM removes what it was writing), one ``Answer`` sent back."""
    os.setpgid(0, 0)
    from tracekit.render.safe_text import printable
    from tracekit.signals import Interrupted, raising_interrupted

    try:
        with raising_interrupted():
            answer = Answer(value=job(*arguments))
    except TracekitError as error:
        answer = Answer(error=printable(str(error)))
    except Interrupted as interruption:
        answer = Answer(error=f"stopped ({interruption.name})")
    except Exception as error:  # a defect: one line for the client, the traceback in the server's log
        traceback.print_exc(file=sys.stderr)
        answer = Answer(error=f"internal error ({type(error).__name__}): {printable(str(error))}")
    connection.send(answer)
    connection.close()


def start(job: Callable[..., Any], arguments: tuple) -> tuple[Any, Connection]:
    """Start ``job(*arguments)`` in a new child; its process and the end its answer arrives on."""
    receiving, sending = context().Pipe(duplex=False)
    process = context().Process(target=_child, args=(sending, job, arguments), name="tracekit-mcp-call")
    process.start()
    sending.close()
    return process, receiving


def wait(process: Any, receiving: Connection, timeout_s: float) -> Answer:
    """The child's answer within ``timeout_s`` (CallTimeout otherwise, the child left running: ``stop``)."""
    deadline = time.monotonic() + timeout_s
    if not receiving.poll(max(0.0, deadline - time.monotonic())):
        raise CallTimeout(f"the call ran past this server's time limit of {timeout_s:g} s (--timeout) and was stopped")
    try:
        answer = receiving.recv()
    except EOFError:  # the child died without a word: killed for memory, or a crash in a library
        process.join(GRACE_S)
        return Answer(error=f"the call's process ended without an answer (exit status {process.exitcode})")
    process.join(GRACE_S)
    return answer


def stop(process: Any) -> None:
    """End the call's process group, politely then not: SIGTERM, ``GRACE_S``, SIGKILL; reaped."""
    if process.pid is None:
        return
    for number in (signal.SIGTERM, signal.SIGKILL):
        if not process.is_alive() and not _group_alive(process.pid):
            break
        _signal_group(process.pid, number)
        process.join(GRACE_S)
        deadline = time.monotonic() + GRACE_S
        while _group_alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    process.join(GRACE_S)


def _signal_group(pid: int, number: int) -> None:
    try:
        os.killpg(pid, number)
    except ProcessLookupError:  # the child had not yet made its group, or all of it has ended
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass


def _group_alive(pid: int) -> bool:
    """Whether any process of the group ``pid`` leads is still running (zombies not counted)."""
    try:
        os.killpg(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return any(_state(entry) not in ("Z", "X", None) for entry in _members(pid))


def _members(group: int) -> list[str]:
    """The pids of the group's processes (Linux's /proc; elsewhere, the leader only)."""
    if not os.path.isdir("/proc"):
        return [str(group)]
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields is not None and fields[2] == str(group):
                found.append(entry)
    return found


def _state(pid: str) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields is not None else None


def _stat_fields(pid: str) -> list[str] | None:
    """/proc/PID/stat after the command name: state, ppid, pgrp, ... (None when the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            text = handle.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()
