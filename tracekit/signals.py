"""SIGINT and SIGTERM as an exception, so that every command cleans up before it exits.

By default SIGTERM ends a Python process at once (no ``finally`` runs: a file being written stays as
a hidden ``.partial``) and SIGINT raises KeyboardInterrupt wherever the main thread happens to be.
Inside ``raising_interrupted`` (the command line holds it around every command) both raise
``Interrupted`` (its ``name``: "Ctrl-C" or "SIGTERM"), so files being written are removed and the
previous output kept (``files.write_whole``, ``files.replace_folder``), a many-input run stops its
workers, and a capture stops the program's process tree, imports what was recorded and releases its
run folder. ``signals_held`` keeps both out of steps that must not be cut in two.
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
    """Inside, SIGINT and SIGTERM raise ``Interrupted`` in the main thread; outside, the handlers are
    what they were. In another thread (where handlers cannot be set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(number, frame):
        raise Interrupted(_name(number))

    wanted = [signal.SIGINT, *([signal.SIGTERM] if hasattr(signal, "SIGTERM") else [])]
    previous = {number: signal.signal(number, interrupt) for number in wanted}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextmanager
def signals_held() -> Iterator[None]:
    """Inside, SIGINT and SIGTERM wait (blocked for this thread); one that arrived is raised as the block
    ends. For steps that must happen together: a folder moved aside, its replacement moved in. Where
    signals cannot be blocked (not POSIX), nothing changes."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a held signal's handler runs here
