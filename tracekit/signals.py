"""SIGINT, SIGTERM and SIGHUP as an exception, so that every command cleans up before it exits.

By default SIGTERM and SIGHUP (the terminal closed, an ssh session dropped) end a Python process at once
(no ``finally`` runs: a file being written stays as a hidden ``.partial``) and SIGINT raises
KeyboardInterrupt wherever the main thread happens to be. Inside ``raising_interrupted`` (the command line
holds it around every command) they raise ``Interrupted`` (its ``name``: "Ctrl-C", "SIGTERM" or "SIGHUP"),
so files being written are removed and the
previous output kept (``files.write_whole``, ``files.replace_folder``), a many-input run stops its
workers, and a capture stops the program's process tree, imports what was recorded and releases its
run folder. ``signals_held`` keeps them out of steps that must not be cut in two. A SIGHUP ignored when
the program started (``nohup``) stays ignored.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(BaseException):
    """Ctrl-C (SIGINT) or SIGTERM arrived; ``name`` says which ("Ctrl-C", "SIGTERM"). A BaseException, as
    KeyboardInterrupt is: code that turns any error into a fallback (``except Exception``: a damaged
    cache read again from the export, a worker counted as failed) must not swallow a request to stop."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _name(number: int) -> str:
    return "Ctrl-C" if number == signal.SIGINT else signal.Signals(number).name


@contextmanager
def raising_interrupted() -> Iterator[None]:
    """Inside, SIGINT, SIGTERM and SIGHUP raise ``Interrupted`` in the main thread; outside, the handlers are
    what they were. In another thread (where handlers cannot be set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(number, frame):
        raise Interrupted(_name(number))

    previous = {number: signal.signal(number, interrupt) for number in _wanted()}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextmanager
def signals_held() -> Iterator[None]:
    """Inside, SIGINT, SIGTERM and SIGHUP wait: one that arrives is noted and delivered again as the block ends,
    to the handler that was in place. For steps that must happen together (a folder moved aside, its
    replacement moved in). Handlers, not the signal mask: a signal the kernel gives to another thread
    (reading threads, cache writers) still runs its Python handler in the main thread at once. Outside the
    main thread, where Python runs no handler and none can be set, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(number, frame):
        arrived.append(number)

    previous = {number: signal.signal(number, note) for number in _wanted()}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)  # None: a handler set outside Python
        if arrived:
            signal.raise_signal(arrived[0])  # its handler runs here (Interrupted, under ``raising_interrupted``)


def _wanted() -> list[int]:
    """The signals that stop a command: SIGINT, SIGTERM, and SIGHUP unless it was ignored when the program
    started (``nohup`` ignores it so that the command outlives its terminal)."""
    hangup = getattr(signal, "SIGHUP", None)  # (not on Windows)
    if hangup is not None and signal.getsignal(hangup) is signal.SIG_IGN:
        hangup = None
    return [signal.SIGINT, *([signal.SIGTERM] if hasattr(signal, "SIGTERM") else []), *([hangup] if hangup else [])]
