"""Many inputs read on a process pool or on Dask (which files they are: ``sources.input_paths``).

Every input is one task: open the trace (its cache when present), run the command's analysis on it
and return a ``Part`` (``many.inputs``): the file's own tables plus mergeable partial
aggregates, a few hundred KB even for a 1M-kernel export. The client folds parts as they arrive, so
its memory grows with the aggregates, not with the number of files; each worker holds one file at a
time. A file that cannot be read becomes a one-line ``Failure`` and the others go on (``strict``
stops at the first). On Dask, the same task runs on a ``LocalCluster`` started for the command or on
an existing scheduler: what crosses the network is the file's path (each worker must see the files at
the same path: a shared file system) and the Part back. One input alone (without Dask) is read in this
process, as any one-input command reads its trace: a worker costs a second to start and gains nothing.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Callable, Generator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tracekit.errors import TracekitError, UsageError
from tracekit.model.options import Options, named
from tracekit.runs import Run
from tracekit.session import Session, Settings, current
from tracekit.signals import Interrupted, raising_interrupted
from tracekit.sources.input_paths import expand_inputs, input_labels, protect_inputs, rank_in_name

if TYPE_CHECKING:  # pandas comes with them: only the many-inputs path loads them (``is_many`` does not)
    from tracekit.analysis.many.inputs import Failure, Part
    from tracekit.model.option_fields import ManyOptions
    from tracekit.model.result import Result
    from tracekit.model.trace import Trace

Progress = Callable[[int, int], None]


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system says, else all of them)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def new_part(source: str, label: str, trace: Trace) -> Part:
    """The Part an input starts as: its rank (the trace's, else one written in its name) and, for a run
    folder, its configuration."""
    from tracekit.analysis.many.inputs import Part

    run = Run.at(source)
    rank = trace.meta.rank if trace.meta.rank is not None else rank_in_name(label)
    return Part(source, label, rank, config=run.config if run is not None and run.is_run else {})


def read_part(
    source: str,
    label: str,
    part: str,
    options: Options,
    limit: int,
    settings: Settings,
    naming: Any = None,
    decode_workers: int | None = 1,
) -> Part | Failure:
    """One input's Part, or its Failure; the task a worker runs (never raises for a bad file). ``part``
    is the command's part function ("module:function", from the registry); the worker reads with the
    client's ``settings``, ``decode_workers`` decoding processes per file (one: the files already use the
    cores; None: the settings' own, for the only input), and names options in its notes as the client does
    (``naming``: the command line's flags; None: as the API)."""
    from tracekit.analysis.many.inputs import Failure

    try:
        reading = settings if decode_workers is None else settings.replace(decode_workers=decode_workers)
        with Session(reading, option_name=naming):
            from tracekit.sources import open_trace

            module, _, function = part.partition(":")
            trace = open_trace(source)
            return getattr(importlib.import_module(module), function)(
                trace, new_part(source, label, trace), options, limit
            )
    except TracekitError as error:
        return Failure(source, str(error))
    except MemoryError:
        return Failure(source, "out of memory while reading it")
    except OSError as error:
        return Failure(source, f"{error.strerror or error}{f': {error.filename}' if error.filename else ''}")
    except Exception as error:  # a bug must not lose the other files' results: reported with the file
        return Failure(source, f"could not be analysed ({type(error).__name__}: {error})")
    finally:
        # A Trace's tables sit in reference cycles (loaders and memos refer back to it) that only the
        # cycle collector frees; a worker reading file after file would otherwise keep every one.
        gc.collect()


def read_many(
    arguments: list[str],
    part: str,
    options: Options,
    merger: Any,
    title: str,
    many: ManyOptions,
    settings: Settings,
    progress: Progress | None = None,
) -> Result:
    """A command over every input: per-input tables and the aggregate, folded as parts arrive. ``part``:
    the command's part function ("module:function"); ``many``: workers, Dask, strictness, median limit.

    Every input is protected from ``-o`` here, before anything is written. ``workers`` is capped at the
    CPUs this process may use (a note says so when a request is lowered). Ctrl-C or SIGTERM stop the
    run within a second: queued files are cancelled, running workers are stopped, and the error says
    how many inputs had finished; no worker process outlives the command."""
    from tracekit.analysis.many.inputs import Accumulator, Failure

    workers, scheduler, strict, limit = many.workers, many.scheduler, many.strict, many.exact_median_limit
    notes: list[str] = []
    paths = expand_inputs(arguments, notes)
    protect_inputs(paths)
    labels = input_labels(paths)
    cpus = available_cpus()
    if workers is not None and workers > cpus and scheduler is None:
        notes.append(f"{named('workers')} {workers} lowered to {cpus}: the CPUs this process may use")
        workers = cpus
    workers = max(1, min(workers or cpus, len(paths)))
    naming = current().sendable_option_name()  # workers name options in notes as this process does
    tasks = [(str(path), label, part, options, limit, settings, naming) for path, label in zip(paths, labels)]
    accumulator = Accumulator(merger, title)
    if scheduler is not None:  # the address's form before any file is read (an empty one is no address)
        from tracekit.analysis.many.dask_client import parse_address

        parse_address(scheduler)
    if many.use_dask or scheduler is not None:
        runner = _on_dask(tasks, workers, scheduler)
    elif len(tasks) == 1:  # one input: read here, as any one-input command reads it (no worker to start)
        runner = _here(tasks[0])
    else:
        runner = _on_pool(tasks, workers)
    done = 0
    try:
        with raising_interrupted():
            for done, (index, read) in enumerate(runner, start=1):
                if isinstance(read, Failure) and strict:
                    raise TracekitError(read.where())
                accumulator.add(index, read)
                if progress:
                    progress(done, len(tasks))
    except Interrupted as interruption:
        raise TracekitError(
            f"interrupted ({interruption.name}): {len(accumulator.parts) + len(accumulator.failures)} of "
            f"{len(tasks)} inputs finished; the rest were cancelled"
        ) from None
    finally:
        runner.close()  # stops the workers now (the generator's cleanup), not when it is collected
    if not accumulator.parts:
        if len(tasks) == 1:  # its reason alone, as one input's command says it
            raise TracekitError(accumulator.failures[0][1].where())
        reasons = "; ".join(f"{failure.source}: {failure.reason}" for _, failure in accumulator.failures[:3])
        raise TracekitError(f"none of the {len(tasks)} inputs could be read ({reasons})")
    result = accumulator.result()
    result.notes[1:1] = notes  # after "N inputs read"
    return result


def _worker_start() -> None:
    """In each pool worker: Ctrl-C at a terminal reaches the whole process group, and the main process
    alone handles it (it stops the workers); on Linux a worker also dies with its parent, so a killed
    tracekit leaves none behind."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError, TypeError):
            pass


def _here(task: tuple) -> Generator[tuple[int, Part | Failure], None, None]:
    """The only task, read in this process with the session's own decoding (a worker process costs about a
    second to start and gains nothing for one file); Ctrl-C interrupts it as it does any command."""
    yield 0, read_part(*task, decode_workers=None)


def _on_pool(tasks: list[tuple], workers: int) -> Generator[tuple[int, Part | Failure], None, None]:
    """The tasks on ``workers`` local processes (fresh interpreters, started by this process: spawn).
    When the caller stops early (an error, ``strict``, a signal), queued tasks are cancelled and the
    workers stopped at once, rather than after every queued file."""
    import multiprocessing

    from tracekit.analysis.many.inputs import Failure

    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_start)
    finished = False
    try:
        with _main_kept_from_workers():  # the workers start at the submits
            futures: dict[Future, int] = {pool.submit(read_part, *task): index for index, task in enumerate(tasks)}
        for future in as_completed(futures):
            index = futures.pop(future)
            try:
                yield index, future.result()
            except Exception as error:  # the worker process died (killed for memory, a crash)
                yield index, Failure(tasks[index][0], f"its worker process stopped ({type(error).__name__})")
        finished = True
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:
            _stop_pool(pool)


@contextmanager
def _main_kept_from_workers() -> Generator[None, None, None]:
    """Start workers without the caller's ``__main__``: spawn runs a script's top level again in each
    worker (a script calling ``tracekit.kernels([a, b])`` without an ``if __name__ == "__main__"``
    guard would start pools recursively and break). Workers run tracekit's functions on tracekit's
    options only, so they need nothing of it. Multiprocessing finds ``__main__`` by its ``__spec__``
    and ``__file__``: both are hidden while the workers start."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {name: main.__dict__[name] for name in ("__spec__", "__file__") if name in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__dict__["__spec__"] = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the workers now (a worker in the middle of a file is killed)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    # (taken before shutdown, which forgets both)
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)
    # the pool's manager thread notices its workers gone and closes its wake-up pipe; ended here, it cannot
    # do so while the interpreter's exit wakes it (Python 3.11 has no lock there: "Bad file descriptor")
    if manager is not None:
        manager.join(timeout=2)


def _on_dask(
    tasks: list[tuple], workers: int, scheduler: str | None
) -> Generator[tuple[int, Part | Failure], None, None]:
    """The tasks on Dask: a LocalCluster of ``workers`` single-threaded processes, or ``scheduler``."""
    from tracekit.analysis.many.inputs import Failure

    try:
        # Optional (the dask extra): absent, one line below; pyright runs before the extra is installed.
        from dask.distributed import Client, LocalCluster  # pyright: ignore[reportMissingImports]
        from dask.distributed import as_completed as dask_completed  # pyright: ignore[reportMissingImports]
    except ImportError:
        raise UsageError(
            f"{named('use_dask')} needs Dask: pip install 'tracekit[dask]' (dask and distributed)"
        ) from None
    import logging

    from tracekit.analysis.many.dask_client import connect

    if scheduler:
        client = connect(scheduler)
        cluster = None
    else:
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,  # pyright: ignore[reportArgumentType]  (None: no dashboard, as documented)
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
    try:
        futures = {client.submit(read_part, *task, pure=False): index for index, task in enumerate(tasks)}
        for future in dask_completed(list(futures)):
            index = futures[future]
            try:
                yield index, future.result()
            except Exception as error:  # the worker died or the task was lost
                yield index, Failure(tasks[index][0], f"its Dask task failed ({type(error).__name__}: {error})")
            future.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
