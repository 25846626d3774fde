"""``tracekit timeline``: traces as one Chrome trace-event file (JSON, or gzip when the name ends in .gz)
that Perfetto UI, chrome://tracing and TensorBoard open, and torch.profiler readers read back.

The file is written as a stream, table by table and ``tracks.ROWS`` rows at a time, into a temporary
file renamed into place at the end (``files.write_whole``): the text in memory at once is one slice's,
whatever the trace's size. Header fields torch.profiler writes before its events (``schemaVersion``,
``deviceProperties``, ``distributedInfo`` for one input of a known rank) come first, so readers that
take metadata from the start of the file find them.
"""

from __future__ import annotations

import gzip
import os
import threading
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from queue import Full, Queue
from typing import IO, Any

import numpy as np
import pandas as pd

from tracekit.analysis.memory.on_trace import memory_on_trace
from tracekit.errors import TracekitError, UsageError
from tracekit.files import write_whole
from tracekit.model.schema import PYTHON_CALLS
from tracekit.model.trace import TORCH_PROFILER, Trace
from tracekit.session import in_this_context
from tracekit.trace_events import tracks
from tracekit.trace_events.clock import Clock
from tracekit.trace_events.collective_track import collective_slices
from tracekit.trace_events.counter_tracks import bandwidth_counters, queue_counters
from tracekit.trace_events.events import Counters, Metadata, Slices
from tracekit.trace_events.json_format import header_fields
from tracekit.trace_events.merged_slices import merged_by_start
from tracekit.trace_events.output_names import PERFETTO_SUFFIXES, check_output, default_output
from tracekit.trace_events.sequence_track import sequence_events, sequence_slices, sequence_track_names
from tracekit.trace_events.track_lanes import track_lanes
from tracekit.trace_events.window import Window, WindowOptions, window_of

GZIP_LEVEL = 3  # gzip's default (6) takes twice as long for a few per cent less


@dataclass
class Written:
    """What was written: the file, its events by kind, its size in bytes, and notes."""

    path: Path
    events: Counter = field(default_factory=Counter)
    size: int = 0
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds = ", ".join(f"{count:,} {kind}" for kind, count in self.events.most_common() if count)
        return f"timeline: {self.path} ({_size_text(self.size)}; {kinds or 'no events'})"


def _size_text(size: int) -> str:
    """A file's size in the unit it reads in: 512 B, 6.2 KiB, 3.5 MiB (a small file read "0.0 MiB")."""
    if size < 2**10:
        return f"{size} B"
    return f"{size / 2**10:,.1f} KiB" if size < 2**20 else f"{size / 2**20:,.1f} MiB"


def sink_for(target: Path) -> Callable[[IO[bytes]], Any]:
    """The encoder of ``target``'s format, by its name."""
    if target.name.endswith(PERFETTO_SUFFIXES):
        from tracekit.trace_events.perfetto import PerfettoSink

        return PerfettoSink
    from tracekit.trace_events.json_format import JsonSink

    return JsonSink


def timeline(
    inputs: Sequence[str | os.PathLike | Trace],
    path: str | os.PathLike | None,
    options: WindowOptions | None = None,
    memory: str | os.PathLike | None = None,
) -> Written:
    """The timeline of ``inputs`` (paths, globs, folders of traces, or open traces) written to ``path`` (None:
    ``default_output``). Several inputs are read one after another, each released once written; each is
    named by its rank (the trace's, else one in its file name) or its name. ``memory``: a snapshot whose
    allocated and reserved memory becomes a counter track (a run folder's own is used without it)."""
    from tracekit.sources import open_trace
    from tracekit.sources.distinct import distinct_inputs
    from tracekit.sources.input_paths import expand_inputs, input_labels, protect_inputs, rank_in_name

    if isinstance(inputs, (str, os.PathLike, Trace)):
        inputs = [inputs]
    if not isinstance(inputs, Sequence) or not inputs:
        raise UsageError("timeline: give one or more traces (paths, globs, folders, or open traces)")
    strange = [item for item in inputs if not isinstance(item, (str, os.PathLike, Trace))]
    if strange:
        raise UsageError(f"timeline: {strange[0]!r} is neither a path nor a trace")
    if memory is not None and not isinstance(memory, (str, os.PathLike)):
        raise UsageError(f"timeline: memory is a snapshot's path, not {memory!r}")
    target = check_output(path) if path is not None else None
    options = options or WindowOptions()
    opened, said = distinct_inputs([item for item in inputs if not isinstance(item, (str, os.PathLike))])
    named = [os.fspath(item) for item in inputs if isinstance(item, (str, os.PathLike))]
    paths = expand_inputs(named, said) if named else []
    protect_inputs(paths)
    loaders: list[Loader] = [
        (label, lambda path=path: open_trace(str(path)), lambda path=path: _snapshot(path, memory))
        for label, path in zip(input_labels(paths), paths)
    ]
    loaders += [
        (Path(str(trace.meta.source)).name, lambda trace=trace: trace, lambda: _snapshot(None, memory))
        for trace in opened
    ]
    if memory is not None and len(loaders) > 1:
        raise UsageError("a memory snapshot goes with one trace: give one, or run folders (each has its own)")

    def name(label: str, trace: Trace) -> str:
        in_name = rank_in_name(label)
        if trace.meta.rank is None or trace.meta.rank == in_name:
            return f"rank {in_name}" if in_name is not None else label
        return f"{label} (rank {trace.meta.rank})"  # unrelated traces may all be a "rank 0"

    if target is None:
        first = loaders[0][1]()  # read once: its writing reads the same trace
        loaders[0] = (loaders[0][0], lambda: first, loaders[0][2])
        target = default_output(loaders[0][0], len(first.gpu_ops) * len(loaders))
    written = write_timeline(loaders, target, options, name)
    written.notes[:0] = said  # inputs given twice, entries of a folder left out
    return written


Loader = tuple[str, Callable[[], Trace], Callable[[], Any]]  # label, the trace, its snapshot (or None)


def _snapshot(path: Path | None, memory: str | os.PathLike | None) -> Any:
    from tracekit.sources import open_snapshot, run_snapshot

    if memory is not None:
        return open_snapshot(os.fspath(memory))
    return run_snapshot(path) if path is not None else None


def write_timeline(
    loaders: list[Loader],
    path: str | os.PathLike,
    options: WindowOptions | None = None,
    name: Callable[[str, Trace], str] = lambda label, trace: label,
) -> Written:
    """Write the traces ``loaders`` open (label, loader), one at a time, to ``path`` within the window
    ``options`` names. One input keeps its process ids; several get a process group each, named by
    ``name(label, trace)``."""
    target = check_output(path)
    options = options or WindowOptions()
    written = Written(target)
    single = loaders[0][1]() if len(loaders) == 1 else None  # its metadata heads the file

    def write_to(temporary: Path) -> None:
        with _open(temporary, target) as handle:
            sink = sink_for(target)(handle)
            try:
                _write_inputs(sink, loaders, single, options, name, written)
                written.size = sink.close()
            finally:
                sink.release()  # its threads end when the writing fails too (an error, Ctrl-C)

    write_whole(target, write_to)
    if target.name.endswith(".gz"):
        written.size = target.stat().st_size
    return written


def _write_inputs(
    sink, loaders: list[Loader], single: Trace | None, options: WindowOptions, name: Callable, written: Written
) -> None:
    sink.header(header_fields(single))
    failed = []
    clock = Clock(len(loaders))
    for index, (label, load, load_snapshot) in enumerate(loaders):
        try:
            trace = single if single is not None else load()
        except TracekitError as error:  # one input of many: said, and the others go on
            failed.append(f"{label}: {error}")
            continue
        label = name(label, trace) if single is None else ""
        offset = clock.offset(trace, label, written.notes)
        place = tracks.Place(index, label, offset)
        window = window_of(trace, options)
        _write_input(sink, trace, place, window, load_snapshot(), written, options.sequences)
        written.notes += [f"{place.label}: {note}" if place.label else note for note in trace.warnings]
        del trace  # the next input is read once this one is released
    if failed and len(failed) == len(loaders):
        raise TracekitError(f"none of the {len(loaders)} inputs could be read ({'; '.join(failed[:3])})")
    written.notes += [f"left out: {reason}" for reason in failed]


def _open(temporary: Path, target: Path) -> IO[bytes]:
    if target.name.endswith(".gz"):
        return gzip.open(temporary, "wb", compresslevel=GZIP_LEVEL)  # type: ignore[return-value]
    return open(temporary, "wb")


def _write_input(
    sink, trace: Trace, place: tracks.Place, window: Window, snapshot, written: Written, sequences: int = 0
) -> None:
    """Write one input's events, encoded on another thread while the previous chunk is written."""
    items = _events(trace, place, window, snapshot, written.notes, sequences)
    # closed here when writing fails: its thread ends now, not when the error's traceback is let go
    with closing(ahead((kind, item, sink.encode(item)) for kind, item in items)) as encoded_items:
        for kind, item, encoded in encoded_items:
            sink.put(encoded)
            if isinstance(kind, Counter):  # slices of several kinds in one chunk
                written.events.update(kind)
            else:
                written.events[kind] += len(item)
            if isinstance(item, Slices):
                written.events["flows"] += item.flows


def _events(
    trace: Trace, place: tracks.Place, window: Window, snapshot, notes: list[str], sequences: int = 0
) -> Iterator[tuple[str | Counter, Slices | Counters | Metadata]]:
    """(kind, events) of one input: its metadata first, then every track (``sequences``: tracks of the most
    frequent kernel sequences too)."""
    from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
    from tracekit.analysis.primitives.joins import op_launches

    ops, calls, ranges = trace.gpu_ops, trace.launches, trace.ranges
    op_rows = _rows(window, ops)
    call_rows = _rows(window, calls)
    launched = op_launches(trace)
    categories = pd.Categorical.from_codes(op_categories(trace), categories=CATEGORIES)
    # a call's correlation id in the file is its row, unique across inputs; an op points at its call's
    first_id = tracks.CORRELATION_BASE + place.index * tracks.CORRELATION_STRIDE
    correlation = np.where(launched.found, launched.row + first_id, -1)
    call_ids = np.arange(len(calls), dtype=np.int64) + first_id
    steps = _steps(trace, window)
    # idle gaps (an analysis of their own) are found on another thread while the GPU ops become text
    gaps = ThreadPoolExecutor(1, thread_name_prefix="tracekit-idle-gaps").submit(in_this_context(_gaps), trace, window)
    kept_ops = ops.iloc[op_rows]
    kept_ranges = window.cut(ranges)
    python_calls = trace.optional("python_calls")
    python_calls = PYTHON_CALLS.empty() if python_calls is None else window.cut(python_calls)
    gpu_domain = (kept_ranges["domain"] == "gpu").to_numpy()  # (the categorical's codes: no text per range)
    threads = pd.concat(
        [
            calls.iloc[call_rows][["pid", "tid"]],
            kept_ranges.loc[~gpu_domain, ["pid", "tid"]],
            python_calls.loc[:, ["pid", "tid"]],
        ]
    ).drop_duplicates()
    streams = kept_ops[["device", "stream"]].drop_duplicates().sort_values(["device", "stream"])
    gpus = trace.meta.gpus
    gpu_names = {int(gpu): str(name) for gpu, name in zip(gpus["id"], gpus["name"]) if isinstance(name, str) and name}
    devices = set(streams["device"].tolist())  # a GPU with idle gaps has ops
    slices = sequence_slices(trace, sequences, window)
    collectives = collective_slices(trace, window)
    torch_source = trace.meta.tool == TORCH_PROFILER
    on_gpu = torch_source & gpu_domain  # GPU-side annotations
    # slices that cross on a track (ops of a stream, an annotation and its kernels, a thread's ranges and
    # calls): lanes beside it
    lanes = track_lanes(kept_ops, kept_ranges, calls.iloc[call_rows], python_calls, on_gpu)
    named_tracks = [
        (int(place.gpu_pid(np.array([device]))[0]), tid, name)
        for device, tid, name in [
            *sequence_track_names(slices),
            *sequence_track_names(collectives.drop(columns=["name"]).rename(columns={"track": "name"})),
        ]
    ]
    host_names = trace.optional("thread_names")
    yield (
        "metadata",
        tracks.metadata_events(
            place, devices, streams, threads, len(steps) > 0, gpu_names, named_tracks, host_names, lanes
        ),
    )
    yield from (("steps", events) for events in tracks.step_events(steps, place))
    # an arrow for each op whose launching call is in the file too, numbered by the op's row (a graph
    # launch's call has one to each of its ops)
    call_kept = np.zeros(len(calls), dtype=bool)
    call_kept[call_rows] = True
    found_rows = op_rows[launched.found[op_rows]]  # (a trace without launch calls has none: no arrows)
    arrows = found_rows[call_kept[launched.row[found_rows]]]
    flow_id = np.full(len(ops), -1, dtype=np.int64)
    flow_id[arrows] = arrows + first_id
    op_events = tracks.gpu_op_events(
        kept_ops,
        categories[op_rows],
        correlation[op_rows],
        flow_id[op_rows],
        place,
        tracks.op_args(trace, op_rows),
        lanes.op_tids,
    )
    by_call = arrows[np.argsort(launched.row[arrows], kind="stable")]
    flow_counts = np.bincount(launched.row[arrows], minlength=len(calls))[call_rows]
    inputs = tracks.input_args(kept_ranges, trace.optional("op_shapes"))
    # the kinds that share tracks in one stream by start (``merged_slices``: Perfetto meets a track's events
    # of one timestamp in file order); ops with them only where GPU-side annotations share their streams
    shared = [
        (
            "api calls",
            tracks.launch_events(
                calls.iloc[call_rows], call_ids[call_rows], flow_counts, flow_id[by_call], place, lanes.call_tids
            ),
        ),
        ("ranges", tracks.range_events(kept_ranges, torch_source, place, inputs, lanes.range_tids)),
        ("python calls", tracks.python_events(python_calls, place, lanes.python_tids)),
    ]
    if on_gpu.any():
        shared.insert(0, ("gpu ops", op_events))
    else:
        yield from (("gpu ops", events) for events in op_events)
    yield from merged_by_start(shared)
    yield from (("idle gaps", events) for events in tracks.gap_events(gaps.result(), place))
    yield from (("kernel sequences", events) for events in sequence_events(slices, place.gpu_pid, offset=place.offset))
    yield from (
        ("collectives", events)
        for events in sequence_events(
            collectives.drop(columns=["track"]), place.gpu_pid, "tracekit_collective", place.offset
        )
    )
    yield from (("queue counters", events) for events in queue_counters(trace, window, place))
    yield from (("bandwidth counters", events) for events in bandwidth_counters(trace, window, place))
    if snapshot is not None:
        counters = memory_on_trace(snapshot, trace)
        if isinstance(counters, str):
            notes.append(counters)
        else:
            times, allocated, reserved, device = counters
            keep = window.overlapping(times, times)
            keep = slice(None) if keep is None else keep
            yield from (
                ("memory counters", events)
                for events in tracks.memory_events(times[keep], allocated[keep], reserved[keep], device, place)
            )


def ahead(items: Iterator, depth: int = 2) -> Generator:
    """``items``, made on another thread up to ``depth`` ahead: the next slice of events becomes text
    (Arrow's kernels run without the GIL) while this one is written."""
    queue: Queue = Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def make() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        queue.put((item, None), timeout=0.1)
                        break
                    except Full:
                        continue
                if stop.is_set():
                    return
            queue.put((done, None))
        except BaseException as error:  # handed to the writer, which raises it
            queue.put((done, error))

    thread = threading.Thread(target=in_this_context(make), name="tracekit-trace-events", daemon=True)
    thread.start()
    try:
        while True:
            item, error = queue.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()  # the writer gave up (an error, Ctrl-C): the maker stops at its next slice
        thread.join()


def _rows(window: Window, table: pd.DataFrame) -> np.ndarray:
    keep = window.overlapping(table["start"].to_numpy(), table["end"].to_numpy())
    return np.arange(len(table)) if keep is None else np.flatnonzero(keep)


def _steps(trace: Trace, window: Window) -> pd.DataFrame:
    from tracekit.analysis.primitives.step_window import step_rows

    return window.cut(step_rows(trace))


def _gaps(trace: Trace, window: Window) -> pd.DataFrame:
    from tracekit.analysis.waits.idle import idle_gaps

    if trace.gpu_ops.empty:
        return pd.DataFrame({"GPU": [], "Start (ns)": [], "Idle (ns)": [], "Cause": []})
    gaps = idle_gaps(trace)
    end = gaps["Start (ns)"] + gaps["Idle (ns)"]
    keep = window.overlapping(gaps["Start (ns)"].to_numpy(), end.to_numpy())
    return gaps if keep is None else gaps.loc[keep]  # (idle_gaps has none on an unknown device)
