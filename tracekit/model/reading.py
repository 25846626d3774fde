"""How urgent a read is: tables loaded ahead of need (``Trace.load_behind``) are read after the ones a
command is waiting for. Readers that queue work (``sources.nsys.sqlite_columns``) ask ``urgency``; the
standard library only, so a reader may ask before pandas is imported."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

NOW, LATER = 0, 1  # lower runs first
_STATE = threading.local()


@contextmanager
def reading_later() -> Iterator[None]:
    """Within (on this thread): reads queue behind every read of urgency NOW."""
    _STATE.urgency = LATER
    try:
        yield
    finally:
        _STATE.urgency = NOW


def urgency() -> int:
    """This thread's urgency: NOW unless inside ``reading_later``."""
    return getattr(_STATE, "urgency", NOW)
