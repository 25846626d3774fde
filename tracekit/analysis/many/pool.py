"""Many inputs: which files they are, and reading them on a process pool or on Dask.

Every input is one task: open the trace (its cache when present), run the command's analysis on it
and return a ``Part`` (``analysis.many_inputs``): the file's own tables plus mergeable partial
aggregates, a few hundred KB even for a 1M-kernel export. The client folds parts as they arrive, so
its memory grows with the aggregates, not with the number of files; each worker holds one file at a
time. A file that cannot be read becomes a one-line ``Failure`` and the others go on (``strict``
stops at the first). On Dask, the same task runs on a ``LocalCluster`` started for the command or on
an existing scheduler: what crosses the network is the file's path (each worker must see the files at
the same path: a shared file system) and the Part back.
"""

from __future__ import annotations

import gc
import glob
import importlib
import os
import re
import sys
from collections.abc import Callable, Generator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.analysis.many.distinct import distinct_inputs
from tracekit.errors import InputNotFoundError, TracekitError, UsageError
from tracekit.files import not_a_file, protect, require_file_or_folder
from tracekit.model.options import Options, named
from tracekit.runs import Run
from tracekit.session import Session, Settings, current
from tracekit.signals import Interrupted, raising_interrupted
from tracekit.sources.kineto.ours import written_by_timeline

if TYPE_CHECKING:  # pandas comes with them: only the many-inputs path loads them (``is_many`` does not)
    from tracekit.analysis.many.inputs import Failure, Part
    from tracekit.model.option_fields import ManyOptions
    from tracekit.model.result import Result
    from tracekit.model.trace import Trace

TRACE_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".json", ".json.gz")
LABEL_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite", ".nsys-rep", ".qdrep")
RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])rank[_-]?(\d+)(?![0-9])", re.IGNORECASE)
Progress = Callable[[int, int], None]


def expand_inputs(arguments: list[str], skipped: list[str] | None = None) -> list[Path]:
    """The inputs named by paths, globs and folders, each once, in the order given (a folder's and a
    glob's in name order). A folder is one input when it is a run folder, else its traces and runs.
    An input named on its own must be a regular file or a folder (a FIFO would be waited on forever, a
    link loop never resolves): one error line otherwise; in a folder or a glob such an entry is left
    out, said in ``skipped``."""
    left_out: list[str] = []
    expanded = [path for argument in arguments for path in _expand(argument, left_out)]
    found, repeated = distinct_inputs(expanded)
    if skipped is not None and left_out:
        shown = ", ".join(left_out[:3]) + (f" and {len(left_out) - 3} more" if len(left_out) > 3 else "")
        skipped.append(f"{len(left_out)} {'entry' if len(left_out) == 1 else 'entries'} left out: not a regular file "
                       f"or folder ({shown})")  # fmt: skip
    if skipped is not None:
        skipped += repeated
    if not found:
        raise InputNotFoundError("no inputs: give trace files, run folders, folders of them, or globs")
    return found


def _expand(argument: str, left_out: list[str]) -> list[Path]:
    path = Path(argument)
    if not os.path.lexists(argument) and glob.has_magic(argument):
        matches = sorted(Path(match) for match in glob.glob(argument))
        if not matches:
            raise InputNotFoundError(f"{argument}: no file matches this pattern")
        usable = [match for match in matches if _usable(match, left_out)]
        return [found for match in usable for found in (_folder_inputs(match, left_out) if _is_plain_folder(match)
                                                        else [match])]  # fmt: skip
    require_file_or_folder(path)
    return _folder_inputs(path, left_out) if _is_plain_folder(path) else [path]


def _usable(path: Path, left_out: list[str]) -> bool:
    """Whether a folder's or a glob's entry is a regular file or a folder; else it is noted and skipped."""
    what = not_a_file(path)
    if what is not None:
        left_out.append(f"{path}: {what}")
    return what is None


def names_many(argument: str) -> bool:
    """Whether one argument names many inputs: a glob, or a folder that is not a run folder."""
    path = Path(argument)
    return (not os.path.lexists(argument) and glob.has_magic(argument)) or _is_plain_folder(path)


def _is_plain_folder(path: Path) -> bool:
    return path.is_dir() and not Run(path).is_run


def _folder_inputs(folder: Path, left_out: list[str]) -> list[Path]:
    """A folder's traces (an .nsys-rep only when no export of it sits beside it) and run folders;
    entries that are not regular files or folders (FIFOs, devices, sockets, link loops) left out."""
    entries = sorted(folder.iterdir())
    names = {entry.name for entry in entries}
    inputs = []
    for entry in entries:
        if not entry.name.endswith(TRACE_SUFFIXES) and not entry.is_dir():
            continue
        if not _usable(entry, left_out):
            continue
        if entry.is_dir():
            if Run(entry).is_run:
                inputs.append(entry)
        else:
            if entry.suffix in (".nsys-rep", ".qdrep") and entry.with_suffix(".sqlite").name in names:
                continue  # the report's export beside it is the same capture
            if written_by_timeline(entry):
                left_out.append(f"{entry.name} (a tracekit timeline of other traces)")
                continue
            inputs.append(entry)
    if not inputs:
        raise InputNotFoundError(f"{folder} is not a tracekit run folder, and holds no traces or run folders")
    return inputs


def protect_inputs(paths: list[Path]) -> None:
    """Mark every input as one ``-o`` must not write over, in this process (the one that writes): a
    file, and every file inside a run folder. Workers protect what they open; only this one writes."""
    for path in paths:
        if path.is_dir():
            protect(*(entry for entry in path.iterdir() if entry.is_file()))
        else:
            protect(path)


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system says, else all of them)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def labels_for(paths: list[Path]) -> list[str]:
    """A short, distinct name per input: the run folder's or the file's name without trace suffixes;
    the parent folder is added where two would read the same."""

    def short(path: Path, parents: int) -> str:
        name = path.name
        for suffix in LABEL_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        return "/".join([*path.resolve().parent.parts[-parents:], name] if parents else [name])

    labels = [short(path, 0) for path in paths]
    for depth in range(1, 4):
        if len(set(labels)) == len(labels):
            break
        labels = [short(path, depth) if labels.count(label) > 1 else label for path, label in zip(paths, labels)]
    return labels


def rank_in_name(label: str) -> int | None:
    """A rank written in a file name ("trace_rank3", "rank-12.sqlite"), as torchrun jobs name them."""
    found = RANK_IN_NAME.search(label)
    return int(found.group(1)) if found else None


def new_part(source: str, label: str, trace: Trace) -> Part:
    """The Part an input starts as: its rank (the trace's, else one written in its name) and, for a run
    folder, its configuration."""
    from tracekit.analysis.many.inputs import Part

    run = Run.at(source)
    rank = trace.meta.rank if trace.meta.rank is not None else rank_in_name(label)
    return Part(source, label, rank, config=run.config if run is not None and run.is_run else {})


def read_part(
    source: str, label: str, part: str, options: Options, limit: int, settings: Settings, naming: Any = None
) -> Part | Failure:
    """One input's Part, or its Failure; the task a worker runs (never raises for a bad file). ``part``
    is the command's part function ("module:function", from the registry); the worker reads with the
    client's ``settings``, one decoding process per file (the files already use the cores), and names
    options in its notes as the client does (``naming``: the command line's flags; None: as the API)."""
    from tracekit.analysis.many.inputs import Failure

    try:
        with Session(settings.replace(decode_workers=1), option_name=naming):
            from tracekit.sources import open_trace

            module, _, function = part.partition(":")
            trace = open_trace(source)
            return getattr(importlib.import_module(module), function)(trace, new_part(source, label, trace), options,
                                                                      limit)  # fmt: skip
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
    labels = labels_for(paths)
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
    runner = _on_dask(tasks, workers, scheduler) if many.use_dask or scheduler is not None else _on_pool(tasks, workers)
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
        raise TracekitError(f"interrupted ({interruption.name}): {len(accumulator.parts) + len(accumulator.failures)} of "
                            f"{len(tasks)} inputs finished; the rest were cancelled") from None  # fmt: skip
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
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)


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
