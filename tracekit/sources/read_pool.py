"""The threads every SQLite read runs its chunks on (``sqlite_columns``): as many as cores, shared by
all reads of the process, the most urgent read first (``model.reading``)."""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from tracekit.model.reading import urgency

READ_THREADS = 2


class ReadPool:
    """READ_THREADS threads that every read's chunks run on: never more SQLite scans than cores, and the
    most urgent read first (``model.reading``: a table loaded ahead of need waits for those a command
    waits on), then in the order asked. Daemon threads: idle ones must not hold the program's exit."""

    def __init__(self) -> None:
        self.queue: queue.PriorityQueue = queue.PriorityQueue()
        self.order = itertools.count()  # ties broken by arrival; never compares the functions
        for number in range(READ_THREADS):
            threading.Thread(target=self._work, name=f"tracekit-read-{number}", daemon=True).start()

    def _work(self) -> None:
        while True:
            _, _, function, argument, future = self.queue.get()
            try:
                future.set_result(function(argument))
            except BaseException as error:  # handed to the reader waiting on it
                future.set_exception(error)

    def map(self, function: Callable, arguments: Iterable) -> list:
        """``function`` of each argument, on the pool; results in order (the first error raised)."""
        futures = []
        for argument in arguments:
            future: Future = Future()
            self.queue.put((urgency(), next(self.order), function, argument, future))
            futures.append(future)
        return [future.result() for future in futures]


_POOL: list[ReadPool] = []
_POOL_LOCK = threading.Lock()


def chunk_pool() -> ReadPool:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ReadPool())
        return _POOL[0]


# A process forked after the pool started holds its record but not its threads: it starts its own.
if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_POOL.clear)
