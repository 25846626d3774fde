"""Decoding a large torch.profiler trace on several cores.

Decoding and sorting events into columns (``kineto_events``) is most of a read and needs the GIL, so
threads would not help: chunks go to worker processes instead, which return their columns (names as
chunk-local codes, merged here in file order). The main process only reads, cuts and merges.

A chunk a worker cannot parse means a quick cut was wrong (``json_stream``: rare, e.g. a name that
holds "}, {"); then the whole file is read again in one process, which cuts exactly where needed.
Workers start from a fork server that has imported the decoder once, not by forking this process,
whose other threads (a command loads tables on threads) might hold locks at the moment of a fork.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from tracekit.session import current
from tracekit.sources.kineto.events import EventColumns
from tracekit.sources.kineto.json_stream import JsonTraceError, Skeleton, decoded_chunks

IN_FLIGHT_PER_WORKER = 2  # chunks queued per worker: bounds memory, keeps workers busy


class Refused(Exception):
    """A worker found a chunk that is not well-formed JSON."""


def worker_count(path: Path) -> int:
    """Worker processes for ``path``: 0 (decode here) for small files, one core, or the session's
    ``decode_workers`` 0 or 1 (TRACEKIT_WORKERS; a many-input worker's session sets it to 1)."""
    settings = current().settings
    count = settings.decode_workers if settings.decode_workers is not None else min(os.cpu_count() or 1, 4)
    return count if count > 1 and path.stat().st_size >= settings.decode_min_bytes and _has_forkserver() else 0


def _has_forkserver() -> bool:
    return "forkserver" in multiprocessing.get_all_start_methods()


def decode_chunk(chunk: bytes) -> EventColumns | None:
    """One chunk's columns (in a worker); None when it is not well-formed JSON."""
    part = EventColumns()
    return part if part.decode(chunk) else None


def parallel_columns(path: Path, skeleton: Skeleton, workers: int) -> EventColumns:
    """Every event's columns, decoded by ``workers`` processes; Refused when a quick cut was wrong."""
    columns = EventColumns()
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tracekit.sources.kineto.events"])
    queued: deque[Future] = deque()

    def take_oldest() -> None:
        part = queued.popleft().result()
        if part is None:
            raise Refused
        columns.merge(part)

    def submit(chunk: bytes) -> Future:
        while len(queued) >= workers * IN_FLIGHT_PER_WORKER:
            take_oldest()
        queued.append(pool.submit(decode_chunk, chunk))
        return queued[-1]

    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        try:
            for _ in decoded_chunks(path, skeleton, submit):
                pass
            while queued:
                take_oldest()
        except JsonTraceError:
            # Unchecked quick cuts can lose track of where events start (a wrong one is only found out
            # by its worker): the one-process read decides whether the file is really damaged.
            raise Refused from None
        finally:
            for future in queued:
                future.cancel()
    return columns
