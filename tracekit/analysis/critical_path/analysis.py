"""``tracekit critical-path``: per step, the chain of dependent work that decides its time, split by what
bounds it. ``definition="hta"``: as HolisticTraceAnalysis 0.5's ``critical_path_analysis`` defines it
(``graph``, ``longest``); the default, ``"tracekit"``, corrects two of its artifacts (``definition``): a
stream's gap longer than a queue takes is a wait (the path follows the work that ran meanwhile), and the
path stops at its step's end.

Each edge on the path is one of, in ns:
- CPU: an operator's or call's own time on its thread (nothing running under it);
- GPU Compute / Communication: a GPU op's time (NCCL kernels are communication, copies and sets compute);
- Kernel-Kernel Overhead: the gap between two ops of a stream when the second was queued behind the first
  (tracekit: at most ``definition.QUEUE_GAP``; or the time from the op of another stream it waited for);
- Launch Overhead: from a launch call's start to its op's start, when the op's stream was idle;
- dependencies, syncs and waits weigh 0 (their time is on the other side of them).
Path = their sum. It leaves out CPU idle between outermost operators, time blocked in synchronizing
calls and (tracekit) a stream's waits, so it can be shorter than the step (Wall); under HTA's definition
it is longer when GPU work the step launched ran past the step's end. Steps are ``steps.step_rows``'s; a
trace without steps is one window from its first event to its last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.critical_path_command import CriticalPathOptions
from tracekit.analysis.critical_path.definition import QUEUE_GAP, corrected
from tracekit.analysis.critical_path.events import (
    DEPENDENCY,
    GPU,
    KERNEL_KERNEL,
    LAUNCH,
    OP_COLUMNS,
    RANGE_COLUMNS,
    SYNC_DEPENDENCY,
    WAIT,
    Events,
    trace_events,
)
from tracekit.analysis.critical_path.graph import build, window_rows
from tracekit.analysis.critical_path.longest import longest_path
from tracekit.analysis.primitives.hta import hta_rounded
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.step_window import step_labels, step_rows
from tracekit.errors import NoGpuDataError, UsageError
from tracekit.model.options import named
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace

CPU, COMPUTE, COMMUNICATION = "CPU", "GPU Compute", "Communication"
KERNEL_OVERHEAD, LAUNCH_OVERHEAD = "Kernel-Kernel Overhead", "Launch Overhead"
BOUNDS = (CPU, COMPUTE, COMMUNICATION, KERNEL_OVERHEAD, LAUNCH_OVERHEAD)
WHOLE_TRACE = "(whole trace)"
STEP_COLUMNS = ("name", "pid", "start", "end")  # of the step ranges
# The work of a window is about 1 µs and 140 bytes per event it holds (CPU events, the GPU ops they launched;
# the trace's events as arrays and its tables take about as much again: 2.3 GB at 7.8M events). advise and the
# report trace a whole trace without steps only up to WHOLE_TRACE_LIMIT events (about a second); no window is
# traced past WINDOW_LIMIT events (some 5 GB): above it, a step at a time.
WHOLE_TRACE_LIMIT = 1_000_000
WINDOW_LIMIT = 16_000_000
HINTS = {
    CPU: "the GPU waits on the host: fewer, larger ops (torch.compile) or CUDA graphs shorten it; the launch-bound "
         "and host-stall findings say where",
    COMPUTE: "the GPU's own work decides the step: the kernels with most time on the path are where speed comes from",
    COMMUNICATION: "collectives decide the step: overlap them with computation (bucketing, async collectives)",
    KERNEL_OVERHEAD: "gaps between queued kernels decide the step: fewer, fused kernels (torch.compile)",
    LAUNCH_OVERHEAD: "launch latency decides the step: CUDA graphs",
}  # fmt: skip


@dataclass
class StepPath:
    """One window's critical path: its label, process, bounds (ns), path length (ns), and per path edge
    (in order): its source node (2 x row of the trace's ``Events``, + 1 for an event's end), weight (ns,
    negatives as 0), what bounds it (index into ``BOUNDS``, -1 for a dependency, sync or wait) and the
    event it is attributed to (row of ``Events``). Under tracekit's definition: ``waited``, the ns of gaps
    on streams on the path that were waits (weight 0); ``behind``, how far past the window's end the GPU
    ops its CPU events launched ran (ns, 0 when none did), the time the path leaves out."""

    label: str
    pid: int | None
    start: int
    end: int
    length: int
    source: np.ndarray
    weight: np.ndarray
    bound: np.ndarray
    event: np.ndarray
    waited: int = 0
    behind: int = 0

    def time_by_bound(self) -> np.ndarray:
        """ns per ``BOUNDS`` entry."""
        return np.asarray(
            [np.sum(self.weight, where=self.bound == index) for index in range(len(BOUNDS))], dtype=np.int64
        )


def step_path(
    events: Events, label: str, start: int, end: int, pid: int | None, definition: str = "tracekit"
) -> StepPath:
    """The critical path of the window [start, end] (ns) of process ``pid`` (None: all), by ``definition``
    ("tracekit" or "hta"); UsageError past ``WINDOW_LIMIT`` events."""
    rows = window_rows(events, start, end, pid, running=definition == "tracekit")
    if len(rows) > WINDOW_LIMIT:
        raise UsageError(
            f"{label}: {len(rows):,} events in one window, more than the {WINDOW_LIMIT:,} traced at once "
            "(about 300 bytes each): trace a step at a time, naming the range that is one step with "
            f"{named('step_range')} (or one step with {named('step')})"
        )
    graph = build(events, rows)
    if definition == "tracekit":
        graph = corrected(events, graph, start, end)
    path = longest_path(graph)
    kind, event = path.kind, path.attributed
    # later rules win: CPU, then an op's own time on the GPU (communication for NCCL kernels), the delays,
    # and none for dependencies, syncs and waits
    bound = np.full(len(kind), BOUNDS.index(CPU), dtype=np.int8)
    on_gpu = np.flatnonzero(path.on_gpu)
    bound[on_gpu] = np.where(events.communication[event[on_gpu]], BOUNDS.index(COMMUNICATION), BOUNDS.index(COMPUTE))
    bound[kind == LAUNCH] = BOUNDS.index(LAUNCH_OVERHEAD)
    bound[kind == KERNEL_KERNEL] = BOUNDS.index(KERNEL_OVERHEAD)
    waits = kind == WAIT
    bound[(kind == DEPENDENCY) | (kind == SYNC_DEPENDENCY) | waits] = -1
    weight = np.maximum(path.weight, 0, out=path.weight)
    if definition == "hta":
        return StepPath(label, pid, start, end, path.length, path.source, weight, bound, event)
    gpu = rows[events.role[rows] == GPU]
    own = gpu[np.isin(events.partner[gpu], rows)]  # launched in the window (the others ran in it)
    behind = max(int(events.end[own].max()) - end, 0) if len(own) else 0
    waited = int(path.uncounted.sum(where=waits))
    return StepPath(label, pid, start, end, path.length, path.source, weight, bound, event, waited, behind)


def step_paths(trace: Trace, options: CriticalPathOptions) -> tuple[list[StepPath], Events]:
    """The critical path of each step (``options.step``: one), or of the whole trace without steps."""
    # one read of each table's columns used, the tables side by side
    trace.need("ranges", {*RANGE_COLUMNS, *STEP_COLUMNS})
    trace.need("gpu_ops", OP_COLUMNS)
    trace.load_together(["ranges", "launches", "gpu_ops"])
    events = trace_events(trace, options.as_hta)
    if not (events.role >= GPU).any():
        kernel_mask(trace, "all")  # a trace without GPU work at all: says how to capture one
        raise NoGpuDataError(f"{trace.name}: no GPU operations: a critical path needs the GPU work and its launches")
    if not ((events.role == GPU) & (events.partner >= 0)).any():
        raise NoGpuDataError(
            f"{trace.name}: none of its GPU operations has its launching CUDA call in the trace: a "
            "critical path needs both sides (capture the CUDA runtime calls too)"
        )
    steps = step_rows(trace, options.step_range, STEP_COLUMNS)
    if steps.empty:
        if options.step is not None or options.step_range:
            raise UsageError(
                f"{trace.name}: no steps (no ProfilerStep#N or step ranges"
                f"{f', no range named {options.step_range!r}' if options.step_range else ''})"
            )
        whole = step_path(events, WHOLE_TRACE, int(events.start.min()), int(events.end.max()), None, options.definition)
        return [whole], events
    steps = steps.reset_index(drop=True)
    labels = step_labels(steps).tolist()
    chosen = range(len(steps)) if options.step is None else [_chosen(labels, options.step, trace.name)]
    starts, ends = steps["start"].to_numpy(), steps["end"].to_numpy()
    if options.as_hta:
        starts, ends = hta_rounded(starts, ends)
    pids = steps["pid"].to_numpy()
    return [
        step_path(events, labels[i], int(starts[i]), int(ends[i]), int(pids[i]), options.definition) for i in chosen
    ], events


def typical_path(trace: Trace) -> tuple[StepPath, Events, str]:
    """The critical path of the step of median wall time (the whole trace without steps, when it holds at
    most ``WHOLE_TRACE_LIMIT`` events for the graph), by tracekit's definition, with a sentence saying what
    bounds it and what the path leaves out; UsageError when there is none to trace."""
    steps = step_rows(trace)
    if steps.empty:
        events = trace_events(trace)
        held = len(window_rows(events, int(events.start.min()), int(events.end.max()))) if len(events) else 0
        if held > WHOLE_TRACE_LIMIT:
            raise UsageError(
                f"no steps, and the whole trace's {held:,} CPU events and GPU ops are too many to trace "
                "here (`tracekit critical-path` traces them)"
            )
        which, step = "the whole trace", None
    else:
        steps = steps.reset_index(drop=True)
        median = int(np.argsort(steps["duration"].to_numpy(), kind="stable")[len(steps) // 2])
        step = str(step_labels(steps)[median])
        which = f"{step} (the step of median wall time)" if len(steps) > 1 else step
    (path,), events = step_paths(trace, CriticalPathOptions(step=step))
    times = path.time_by_bound()
    if not path.length:
        return path, events, f"the critical path of {which} is empty: no operator, call or GPU op in it"
    bound = BOUNDS[int(np.argmax(times))]
    share = 100 * times.max() / path.length
    said = f"the critical path of {which} is {share:.0f} % {bound}: {HINTS[bound]}"
    return path, events, "; ".join([said, *left_out([path])])


def _chosen(labels: list[str], step: str, source: str) -> int:
    for index, label in enumerate(labels):
        if label == step or label.rsplit("#", 1)[-1].strip() == step:
            return index
    shown = ", ".join(labels[:5]) + (", ..." if len(labels) > 5 else "")
    raise UsageError(f"{source}: no step {step!r} (its steps: {shown}; `tracekit steps` lists them)")


def critical_path(trace: Trace, options: CriticalPathOptions | None = None) -> Result:
    """The critical path of each step (see the module docstring): tables "steps" (per step, the path's
    time by what bounds it), "ops" (the operators and GPU ops with most time on the paths) and, for one
    window, "path" (the path as runs on the CPU or the GPU)."""
    options = options or CriticalPathOptions()
    paths, events = step_paths(trace, options)
    tables = [
        Table("steps", steps_table(paths), f"Critical path per step: {trace.name}"),
        Table("ops", top_path_events(paths, events, options.top), "Most time on the critical path"),
    ]
    if len(paths) == 1:
        tables.append(Table("path", segments_table(paths[0], events), f"The path of {paths[0].label}, in order"))
    return Result(tables, notes=_notes(trace, events, options, paths))


def steps_table(paths: list[StepPath]) -> pd.DataFrame:
    """Per window: Wall, the path's length, its time by bound (ns) and the bound with most of it."""
    times = np.array([path.time_by_bound() for path in paths]).reshape(len(paths), len(BOUNDS))
    table = pd.DataFrame({"Step": [path.label for path in paths]})
    if len({path.pid for path in paths}) > 1:
        table["PID"] = [path.pid for path in paths]
    table["Wall (ns)"] = [path.end - path.start for path in paths]
    table["Path (ns)"] = [path.length for path in paths]
    for index, bound in enumerate(BOUNDS):
        table[f"{bound} (ns)"] = times[:, index]
    table["Bound By"] = [BOUNDS[int(np.argmax(row))] if row.sum() else "" for row in times]
    return table


def _names(events: Events, rows: np.ndarray) -> np.ndarray:
    return np.asarray(events.names, dtype=object)[events.name[rows]]


def top_path_events(paths: list[StepPath], events: Events, top: int) -> pd.DataFrame:
    """The events with most time on the paths, by name and bound: time, share of the paths, count (by
    time, then name; equal ones in the order they first come on the paths)."""
    event, bound, weight = (
        np.concatenate([getattr(path, field) for path in paths]) if len(paths) > 1 else getattr(paths[0], field)
        for field in ("event", "bound", "weight")
    )
    counted = np.flatnonzero((bound >= 0) & (event >= 0) & (bound != BOUNDS.index(LAUNCH_OVERHEAD)))
    event, bound, weight = event[counted], bound[counted], weight[counted]
    # groups coded in the order they first come (events.names is sorted: a name's code is its place by name)
    group, keys = pd.factorize(events.name[event] * len(BOUNDS) + bound)
    time = _sums(group, weight, len(keys))
    count = np.zeros(len(keys), dtype=np.int64)  # distinct events per group: an event has one name
    for index in np.unique(keys % len(BOUNDS)).tolist():
        mine = keys % len(BOUNDS) == index
        bounded = event[bound == index]
        if len(bounded) > len(events) // 16:  # many: marked in a mask over the events (no sort)
            seen = np.zeros(len(events), dtype=bool)
            seen[bounded] = True
            named = events.name[seen]
        else:
            named = events.name[np.unique(bounded)]
        count[mine] = np.bincount(named, minlength=len(events.names))[keys[mine] // len(BOUNDS)]
    order = np.lexsort((np.arange(len(keys)), keys // len(BOUNDS), -time))[:top]
    total = sum(path.length for path in paths)
    return pd.DataFrame(
        {
            "Name": np.asarray(events.names, dtype=object)[keys[order] // len(BOUNDS)],
            "Bound By": np.asarray(BOUNDS, dtype=object)[keys[order] % len(BOUNDS)],
            "Path Time (ns)": time[order],
            "Share (%)": 100.0 * time[order] / total if total else 0.0,
            "Events": count[order],
        }
    )


def _sums(group: np.ndarray, weight: np.ndarray, groups: int) -> np.ndarray:
    """Per group, the sum of ``weight`` (ns, at least 0), exact: by floats where every sum stays below 2^53
    (104 days), else integer by integer."""
    if int(weight.sum()) < 2**53:
        return np.bincount(group, weights=weight, minlength=groups).astype(np.int64)
    sums = np.zeros(groups, dtype=np.int64)
    np.add.at(sums, group, weight)
    return sums


def segments_table(path: StepPath, events: Events) -> pd.DataFrame:
    """The path as runs on one side, the CPU or the GPU (a launch delay leads into its GPU run): per run,
    its start (from the window's start), its time on the path, the bound with most of it, its edges,
    and the event with most time in it (the first such)."""
    counted = np.flatnonzero(path.bound >= 0)
    bound, weight, event = path.bound[counted], path.weight[counted], path.event[counted]
    on_gpu = bound != BOUNDS.index(CPU)
    starts = np.flatnonzero(np.concatenate([[True], on_gpu[1:] != on_gpu[:-1]])) if len(counted) else counted
    runs, sizes = len(starts), np.diff(np.append(starts, len(counted)))
    by_bound = np.zeros((runs, len(BOUNDS)), dtype=np.int64)
    longest = np.full(runs, "", dtype=object)
    if runs:  # sums and maxima over each run by reductions over their starts, in one scratch array
        scratch = np.empty_like(weight)
        for index in np.unique(bound).tolist():
            np.multiply(weight, bound == index, out=scratch)
            by_bound[:, index] = np.add.reduceat(scratch, starts)
        np.copyto(scratch, weight)
        scratch[event < 0] = -1  # the largest weight of an edge with an event, then its first edge of it
        largest = np.maximum.reduceat(scratch, starts)
        hits = np.flatnonzero(scratch == np.repeat(largest, sizes))
        heaviest = hits[np.searchsorted(hits, starts)]
        named = event[heaviest] >= 0
        longest[named] = _names(events, event[heaviest[named]])
    source = path.source[counted[starts]]
    row = source >> 1
    return pd.DataFrame(
        {
            "Start (ns)": np.where((source & 1) == 1, events.end[row], events.start[row]) - path.start,
            "On": np.where(on_gpu[starts], "GPU", "CPU"),
            "Path Time (ns)": by_bound.sum(axis=1),
            "Bound By": np.asarray(BOUNDS, dtype=object)[np.argmax(by_bound, axis=1)] if runs else [],
            "Edges": sizes,
            "Longest": longest,
        }
    )


def left_out(paths: list[StepPath]) -> list[str]:
    """What the paths leave out under tracekit's definition, a sentence each: the waits on streams, and the
    time past their steps' ends (the step whose GPU work ran furthest past its end named)."""
    said = []
    waited = [path for path in paths if path.waited]
    if waited:
        total = sum(path.waited for path in waited)
        said.append(
            f"{total / 1e6:,.3f} ms of gaps on a stream on the path{_in_steps(waited, paths)} are waits, not overhead "
            f"(a queued op that started more than {QUEUE_GAP / 1e3:g} µs after the op before it waited for other "
            "work, on another stream or the host, that no op of its GPU ending just before it shows): they weigh 0"
        )
    behind = [path for path in paths if path.behind]
    if behind:
        most = max(behind, key=lambda path: path.behind)
        said.append(
            f"the GPU runs behind the host: the GPU work {most.label} launched ran on {most.behind / 1e6:,.3f} ms "
            f"past its end{f' (and {len(behind) - 1:,} more steps past theirs)' if len(behind) > 1 else ''}; "
            "that time is left out, and a path counts what ran within its step (GPU work queued earlier included)"
        )
    return said


def _in_steps(chosen: list[StepPath], paths: list[StepPath]) -> str:
    return f" of {len(chosen):,} of the {len(paths):,} steps" if len(paths) > 1 else ""


def _notes(trace: Trace, events: Events, options: CriticalPathOptions, paths: list[StepPath]) -> list[str]:
    if options.definition == "hta":
        notes = [
            "as HolisticTraceAnalysis 0.5 defines it: Path leaves out CPU idle between outermost operators and "
            "time blocked in synchronizing calls, so it can be shorter than Wall; it is longer when GPU work the "
            "step launched runs past the step's end"
        ]
    else:
        notes = [
            f"tracekit's definition (HolisticTraceAnalysis 0.5's with {named('definition')} hta): Path leaves out CPU "
            "idle between outermost operators, time blocked in synchronizing calls and a stream's waits, so it can "
            "be shorter than Wall, and counts only what ran within its step",
            *left_out(paths),
        ]
    if options.as_hta:
        notes.append("times rounded inward to whole µs as HolisticTraceAnalysis reads a trace")
    syncs = trace.optional("gpu_syncs")
    if syncs is None or syncs.empty:
        notes.append(
            "no GPU-side synchronization records in the trace (torch.profiler's cuda_sync events, nsys's "
            "CUDA synchronization activity): no path returns from the GPU to a waiting CPU call"
        )
    else:
        waits = syncs["kind"].isin(["stream_wait_event", "event_sync"]).to_numpy()
        unlinked = int((waits & (syncs["event_stream"].to_numpy() < 0)).sum())
        if unlinked:
            notes.append(
                f"{unlinked:,} event syncs and stream waits without their event's recording stream (nsys: "
                "capture with CUDA event tracing): no edge from the op they waited for"
            )
    return notes + list(trace.warnings)
