"""Running a command of the registry on what a caller gives: paths (files, run folders, globs, folders of
traces) or traces already open, one or many. The Python API and the command line both come here, so a
command behaves the same from either.

One input runs the command's ``run``. Many inputs (several, a glob, a folder of traces) map each input
to a Part and fold them with the command's merger: paths on a process pool or Dask (``parallel``), open
traces in this process. Options that only make sense for one input are refused for many, by name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit.commands.registry import Command, command
from tracekit.errors import UsageError
from tracekit.model.option_fields import ManyOptions
from tracekit.model.options import OptionError, Options, named
from tracekit.session import current

if TYPE_CHECKING:
    from typing import TypeAlias

    from tracekit.model.memory import MemoryTrace
    from tracekit.model.result import Result
    from tracekit.model.trace import Trace

    Source: TypeAlias = str | os.PathLike | Trace | MemoryTrace
Progress = Callable[[int, int], None]


def run_command(
    name: str | Command,
    inputs: Source | Sequence[Source],
    options: Options | None = None,
    many: ManyOptions | None = None,
    progress: Progress | None = None,
) -> Result:
    """``name`` (a registry command) on ``inputs`` with ``options`` (its options class; default: every
    default); ``many``: how many inputs are read; ``progress(done, total)`` after each input of many."""
    spec = command(name) if isinstance(name, str) else name
    options = spec.options() if options is None else options
    if not isinstance(options, spec.options):
        raise TypeError(f"{spec.name} takes {spec.options.__name__}, not {type(options).__name__}")
    items = _as_list(inputs)
    if not items:
        raise UsageError(f"{spec.name}: no input given")
    strange = [
        item
        for item in items
        if not (isinstance(item, (str, os.PathLike)) or hasattr(item, "meta") or hasattr(item, "events"))
    ]
    if strange:
        raise UsageError(f"{spec.name}: {strange[0]!r} is neither a path nor an open trace or snapshot")
    if spec.inputs == "snapshots":
        return _on_snapshots(spec, items, options)
    from tracekit.model.trace import command_notes

    with command_notes():  # what the analyses find in an open trace is this command's to say
        if spec.inputs == "pair":  # (A and B may be one file: comparing a run with itself is allowed)
            return _on_pair(spec, items, options)
        from tracekit.sources.distinct import distinct_inputs

        items, repeated = distinct_inputs(items)
        result = _on_traces(spec, items, options, many, progress)
    result.notes += [note for note in repeated if note not in result.notes]
    return result


def _on_traces(
    spec: Command, items: list[Source], options: Options, many: ManyOptions | None, progress: Progress | None
) -> Result:
    """A command over one trace or many (each input given once)."""
    if spec.inputs in ("trace", "traces") and len(items) == 1 and not _names_many(items[0]):
        snapshot = _snapshot(spec, items[0])
        if snapshot is not None:
            return spec.function("on_snapshot")(snapshot, options)
        return spec.function("run")(_open(spec, items[0], options), options)
    if spec.inputs == "trace":
        raise UsageError(f"{spec.name} takes one trace, not {_count(items)}")
    given = options.one_input_only()
    if given:
        names = [named(option) for option in given]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        raise OptionError(f"{listed} {'take' if len(names) > 1 else 'takes'} one trace")
    return _on_many(spec, items, options, many or ManyOptions(), progress)


def _as_list(inputs: Source | Sequence[Source]) -> list[Source]:
    if isinstance(inputs, (str, os.PathLike)) or not isinstance(inputs, Sequence):
        return [inputs]
    return list(inputs)


def _path(item: Source) -> str | None:
    """The path ``item`` names, or None for an object already open."""
    return os.fspath(item) if isinstance(item, (str, os.PathLike)) else None


def _names_many(item: Source) -> bool:
    path = _path(item)
    if path is None:
        return False
    from tracekit.sources.input_paths import names_many

    return names_many(path)


def _count(items: list[Source]) -> str:
    return f"{len(items)}" if len(items) > 1 else "a glob or folder of them"


def _snapshot(spec: Command, item: Source) -> MemoryTrace | None:
    """The memory snapshot ``item`` is or names, for a command that reads one given alone; else None."""
    if spec.on_snapshot is None:
        return None
    from tracekit.model.memory import MemoryTrace
    from tracekit.sources import is_snapshot_file, open_snapshot

    if isinstance(item, MemoryTrace):
        return item
    path = _path(item)
    return open_snapshot(path) if path is not None and is_snapshot_file(path) else None


def _open(spec: Command, item: Source, options: Options) -> Trace:
    """The trace ``item`` is or names (a path opens with the session's settings)."""
    from tracekit.model.trace import Trace

    if isinstance(item, Trace):
        return item
    path = _path(item)
    if path is None:
        raise UsageError(f"{spec.name} reads traces (paths or open traces), not {type(item).__name__}")
    if spec.prepare is not None:
        spec.function("prepare")(path, options)
    from tracekit.sources import open_trace

    return open_trace(path)


def _on_many(spec: Command, items: list[Source], options: Options, many: ManyOptions, progress: Progress | None):
    title = spec.title.format_map(vars(options))
    merger = spec.function("merger")(options, many.exact_median_limit)
    paths = [_path(item) for item in items]
    if all(path is not None for path in paths):
        from tracekit.analysis.many.pool import read_many

        return read_many(
            [path for path in paths if path is not None],
            spec.part or "",
            options,
            merger,
            title,
            many,
            current().settings,
            progress,
        )
    from tracekit.analysis.many.inputs import Accumulator
    from tracekit.analysis.many.pool import new_part
    from tracekit.sources.input_paths import input_labels

    traces = [_open(spec, item, options) for item in items]
    sources = [Path(path or str(trace.meta.source)) for path, trace in zip(paths, traces)]
    accumulator = Accumulator(merger, title)
    part_of = spec.function("part")
    for index, (trace, source, label) in enumerate(zip(traces, sources, input_labels(sources))):
        accumulator.add(index, part_of(trace, new_part(str(source), label, trace), options, many.exact_median_limit))
        if progress:
            progress(index + 1, len(traces))
    return accumulator.result()


def _on_pair(spec: Command, items: list[Source], options: Any) -> Result:
    """Two traces, A and B; the memory peaks of both when both are run folders with a snapshot."""
    if len(items) != 2:
        raise UsageError(f"{spec.name} takes two traces, A and B, not {len(items)}")
    first, second = (_open(spec, item, options) for item in items)
    snapshots, notes = None, []
    paths = [_path(item) for item in items]
    if options.by is None and all(path is not None for path in paths):
        from tracekit.sources import run_snapshots

        snapshots, notes = run_snapshots([path for path in paths if path is not None])
    labels = tuple(path or trace.name for path, trace in zip(paths, (first, second)))
    result = spec.function("run")(first, second, options, snapshots, labels)
    result.notes += notes
    return result


def _on_snapshots(spec: Command, items: list[Source], options: Any) -> Result:
    """One snapshot, or two compared (``compare``, or simply two given)."""
    from tracekit.model.memory import MemoryTrace
    from tracekit.sources import open_snapshot

    if options.compare and len(items) != 2:
        raise OptionError(f"{named('compare')} takes two snapshots: A B")
    if len(items) > 2:
        raise UsageError(f"{spec.name}: give one snapshot, or two to compare")
    snapshots = [item if isinstance(item, MemoryTrace) else open_snapshot(_path(item) or "") for item in items]
    result = spec.function("run")(snapshots, options)
    path = _path(items[0])
    if len(items) == 1 and options.by == "role" and path is not None:
        from tracekit.runs import Run

        run = Run.at(path)
        note = run.activation_note if run is not None else None
        if note:
            result.notes.append(note)
    return result
