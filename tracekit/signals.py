"""SIGINT and SIGTERM as an exception, so that long commands clean up before they exit.

By default SIGTERM ends a Python process at once (no ``finally`` runs) and SIGINT raises
KeyboardInterrupt wherever the main thread happens to be. Inside ``raising_interrupted`` both raise
``Interrupted`` (its ``name``: "Ctrl-C" or "SIGTERM"), so a many-input run can stop its workers and a
capture can stop the program's process tree, import what was recorded and release its run folder.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(Exception):
    """Ctrl-C (SIGINT) or SIGTERM arrived; ``name`` says which ("Ctrl-C", "SIGTERM")."""

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
