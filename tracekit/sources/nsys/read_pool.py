"""The threads every SQLite read runs its chunks on (``sqlite_columns``): as many as cores, shared by
all reads of the session (``tracekit.session``), the most urgent read first (``model.reading``); the
session's ``close`` stops them."""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from tracekit.model.reading import urgency
from tracekit.session import current, in_this_context

READ_THREADS = 2
LAST = 99  # the urgency of the end-of-work marker: after every read


class ReadPool:
    """READ_THREADS threads that every read's chunks run on: never more SQLite scans than cores, and the
    most urgent read first (``model.reading``: a table loaded ahead of need waits for those a command
    waits on), then in the order asked. Daemon threads: idle ones must not hold the program's exit."""

    def __init__(self) -> None:
        self.queue: queue.PriorityQueue = queue.PriorityQueue()
        self.order = itertools.count()  # ties broken by arrival; never compares the functions
        self.threads = [
            threading.Thread(target=self._work, name=f"tracekit-read-{number}", daemon=True)
            for number in range(READ_THREADS)
        ]
        for thread in self.threads:
            thread.start()

    def _work(self) -> None:
        while True:
            _, _, function, argument, future = self.queue.get()
            if future is None:  # close(): this thread ends
                return
            try:
                future.set_result(function(argument))
            except BaseException as error:  # handed to the reader waiting on it
                future.set_exception(error)

    def map(self, function: Callable, arguments: Iterable) -> list:
        """``function`` of each argument, on the pool; results in order (the first error raised)."""
        futures = []
        for argument in arguments:
            future: Future = Future()
            # the pool's threads are the session's, started once: each read runs in its caller's context
            self.queue.put((urgency(), next(self.order), in_this_context(function), argument, future))
            futures.append(future)
        return [future.result() for future in futures]

    def close(self) -> None:
        """Stop the threads once the reads queued before are done."""
        for _ in self.threads:
            self.queue.put((LAST, next(self.order), None, None, None))
        for thread in self.threads:
            thread.join()


def chunk_pool() -> ReadPool:
    """The current session's reading threads (a forked process's session starts its own)."""
    return current().resource("read_pool", ReadPool)
