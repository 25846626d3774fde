"""``tracekit sequences`` with ``operator`` NAME: HolisticTraceAnalysis 0.5's ``get_frequent_cuda_kernel_sequences``.

The instances: operators or ranges (not GPU-side annotations) whose name contains NAME, the outermost on
their thread (one inside another counts once, as part of the outer); each one's GPU ops are those
launched by the calls it covers on its thread, in the order they ran on the GPU; instances that launched
``length`` ops or more count. A pattern is the instance's name followed by its ops' names; per pattern:
Count, Kernel Time (ns, the ops' time summed), Operator Time (ns, the instances' own time summed).

With ``as_hta`` the instances are HTA's: only those at the smallest call depth among all that match
(HTA's depth counts python_function events, which tracekit does not read, so on traces recorded with
Python stacks the two can pick different instances); the backward thread's outermost ranges counted
under the main thread's "## backward ##" annotation (else ProfilerStep#N) that covers them, as HTA's
call graph links them; and HTA's GPU rows: copies, sets and kernels, and the synchronizations on a
stream (Stream Wait Event, Event Sync). HTA also matches NAME against GPU kernel and runtime call
names; tracekit against operators and ranges only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.kernels.sequences_command import SequencesOptions
from tracekit.analysis.primitives.covering import covering_range, parent_rows
from tracekit.analysis.primitives.joins import match_calls, op_launches
from tracekit.analysis.primitives.sequence_keys import group_sequences
from tracekit.analysis.primitives.step_window import last_step_start
from tracekit.errors import NoGpuDataError
from tracekit.model.range_specs import shown_op_name
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace

# HTA's names of torch.profiler's GPU-side synchronizations, by tracekit's kind
SYNC_NAMES = {
    "stream_sync": "Stream Sync",
    "context_sync": "Context Sync",
    "event_sync": "Event Sync",
    "stream_wait_event": "Stream Wait Event",
    "unknown": "Sync",
}
STEP_PREFIX, BACKWARD_PREFIX, AUTOGRAD = "ProfilerStep#", "## backward ##", "autograd::"


def shown_names(ranges: pd.DataFrame) -> list[str]:
    """Per range name category: the name shown (an operator without its domain and emit_nvtx's suffix)."""
    return [shown_op_name(str(name)) for name in ranges["name"].cat.categories]


def top_ancestor(parent: np.ndarray) -> np.ndarray:
    """Per range: the row of its outermost ancestor on its thread (itself when outermost)."""
    top = np.arange(len(parent))
    while True:
        up = parent[top]
        climbing = up >= 0
        if not climbing.any():
            return top
        top = np.where(climbing, up, top)


@dataclass
class BackwardLink:
    """How HTA's call graph hangs the backward thread under the main thread: per range, the row of the
    main-thread annotation its subtree hangs under (-1: none), the two threads (pid, tid) and a mask of
    the annotations."""

    link: np.ndarray
    main: tuple[int, int] | None = None
    backward: tuple[int, int] | None = None
    targets: np.ndarray | None = None


def backward_link(ranges: pd.DataFrame, names: np.ndarray, parent: np.ndarray) -> BackwardLink:
    """HTA links when exactly one thread holds ProfilerStep#N (main) and one other holds autograd:: ranges
    (backward): each outermost event of the backward thread inside a "## backward ##" annotation of main
    (else a ProfilerStep#N) hangs under it."""
    none = BackwardLink(np.full(len(ranges), -1, dtype=np.int64))
    thread = pd.MultiIndex.from_arrays([ranges["pid"].to_numpy(), ranges["tid"].to_numpy()]).factorize()[0]
    is_step = np.asarray([name.startswith(STEP_PREFIX) for name in names], dtype=bool)
    is_autograd = np.asarray([AUTOGRAD in name for name in names], dtype=bool)
    main_threads = np.unique(thread[is_step])
    backward_threads = np.setdiff1d(np.unique(thread[is_autograd]), main_threads)
    if len(main_threads) != 1 or len(backward_threads) != 1:
        return none
    on_main = thread == main_threads[0]
    is_backward = np.asarray([name.startswith(BACKWARD_PREFIX) for name in names], dtype=bool)
    targets = on_main & (is_backward if (on_main & is_backward).any() else is_step)
    key = lambda rows: (int(ranges["pid"].to_numpy()[rows[0]]), int(ranges["tid"].to_numpy()[rows[0]]))
    main, backward = key(np.flatnonzero(on_main)), key(np.flatnonzero(thread == backward_threads[0]))
    outermost = np.flatnonzero((thread == backward_threads[0]) & (parent < 0))
    link = none.link.copy()
    link[outermost] = covering_range(
        ranges,
        np.full(len(outermost), main[0]),
        np.full(len(outermost), main[1]),
        ranges["start"].to_numpy()[outermost],
        ranges["end"].to_numpy()[outermost],
        targets,
    )
    return BackwardLink(link[top_ancestor(parent)], main, backward, targets)


def hanging_target(ranges: pd.DataFrame, linked: BackwardLink, pid, tid, start, end) -> np.ndarray:
    """Per call (thread, start..end ns): the main-thread annotation HTA hangs it under (-1: none): its
    outermost range's, or, for a call outside every range of the backward thread, the one covering it."""
    own = covering_range(ranges, pid, tid, start, end)
    target = np.where(own >= 0, linked.link[np.maximum(own, 0)], -1)
    if linked.main is None or linked.targets is None or linked.backward is None:
        return target
    outside = np.flatnonzero((own < 0) & (pid == linked.backward[0]) & (tid == linked.backward[1]))
    target[outside] = covering_range(
        ranges,
        np.full(len(outside), linked.main[0]),
        np.full(len(outside), linked.main[1]),
        start[outside],
        end[outside],
        linked.targets,
    )
    return target


def gpu_side_match(trace: Trace, wanted: str) -> bool:
    """Whether a GPU-side annotation's name contains ``wanted``: HTA gives those depth -1, the smallest, so
    they become its only instances, and they launch nothing."""
    ranges = trace.ranges
    names = ranges.loc[(ranges["domain"].astype(str) == "gpu").to_numpy(), "name"].astype(str).unique()
    return any(wanted in name.removeprefix("gpu:") for name in names)


def instances(trace: Trace, options: SequencesOptions) -> tuple[pd.DataFrame, np.ndarray, BackwardLink]:
    """The ranges, a mask of the instances among them, and how the backward thread hangs under the main
    thread (``as_hta``; else not at all)."""
    ranges = trace.ranges
    ranges = ranges.loc[(ranges["domain"].astype(str) != "gpu").to_numpy()].reset_index(drop=True)
    shown = np.asarray(shown_names(ranges), dtype=object)
    names = shown[ranges["name"].cat.codes.to_numpy()] if len(ranges) else np.zeros(0, dtype=object)
    wanted = options.operator or ""
    matching = np.asarray([wanted in name for name in shown], dtype=bool)
    match = matching[ranges["name"].cat.codes.to_numpy()] if len(ranges) else np.zeros(0, dtype=bool)
    parent = parent_rows(ranges)
    linked = BackwardLink(np.full(len(ranges), -1, dtype=np.int64))
    if not match.any():
        return ranges, match, linked
    if options.drop_last_step and (cutoff := last_step_start(trace)) is not None:
        match &= ranges["start"].to_numpy() < cutoff
        if not match.any():  # every instance is in the last step
            return ranges, match, linked
    depth = ranges["depth"].to_numpy().astype(np.int64)
    if options.as_hta and gpu_side_match(trace, wanted):
        return ranges, np.zeros(len(ranges), dtype=bool), linked
    if options.as_hta:
        linked = backward_link(ranges, names, parent)
        link = linked.link
        depth = np.where(link >= 0, depth + depth[np.maximum(link, 0)] + 1, depth)
        return ranges, match & (depth == depth[match].min()), linked
    inside_match = np.zeros(len(ranges), dtype=bool)  # a matching range encloses it
    for level in range(1, int(depth.max()) + 1):  # parents before children: one vector pass per level
        rows = np.flatnonzero((depth == level) & (parent >= 0))
        inside_match[rows] = match[parent[rows]] | inside_match[parent[rows]]
    return ranges, match & ~inside_match, linked


def gpu_rows(trace: Trace, as_hta: bool, name: str) -> tuple[pd.DataFrame, list[str]]:
    """The GPU rows a pattern lists (start, duration ns; the launching call's row, -1: none; a code into
    the names returned): every GPU op, and with ``as_hta`` the synchronizations on a stream (HTA's GPU
    rows with a correlation). Names stay codes: a trace has a million ops of a few hundred names."""
    ops = trace.gpu_ops
    names = ops["short_name" if name == "short" else "name"]
    labels = [str(label) for label in names.cat.categories]
    frame = pd.DataFrame(
        {
            "start": ops["start"].to_numpy(),
            "duration": ops["duration"].to_numpy(),
            "call": op_launches(trace).row,
            "code": names.cat.codes.to_numpy().astype(np.int64),
        }
    )
    syncs = trace.optional("gpu_syncs") if as_hta else None
    if syncs is None or syncs.empty:
        return frame, labels
    syncs = syncs.loc[(syncs["stream"] > 0).to_numpy() & (syncs["correlation_id"] >= 0).to_numpy()]
    call = match_calls(trace.launches, syncs["pid"].to_numpy(), syncs["correlation_id"].to_numpy())
    kinds = list(SYNC_NAMES)
    kind_codes = pd.Categorical(syncs["kind"].astype(str), categories=kinds).codes.astype(np.int64)
    extra = pd.DataFrame(
        {
            "start": syncs["start"].to_numpy(),
            "duration": syncs["duration"].to_numpy(),
            "call": call,
            "code": len(labels) + kind_codes,
        }
    )
    return pd.concat([frame, extra], ignore_index=True), labels + [SYNC_NAMES[kind] for kind in kinds]


def operator_sequences(trace: Trace, options: SequencesOptions) -> Result:
    """HolisticTraceAnalysis's frequent kernel sequences per operator (see the module docstring)."""
    ranges, roots, linked = instances(trace, options)
    shown = np.asarray(shown_names(ranges), dtype=object)
    if not len(ranges) or not any((options.operator or "") in name for name in shown):
        raise NoGpuDataError(f"{trace.name}: no operator or range's name contains {options.operator!r}")
    rows, labels = gpu_rows(trace, options.as_hta, options.name)
    calls = trace.launches
    keep = rows["call"].to_numpy() >= 0
    if options.drop_last_step and (cutoff := last_step_start(trace)) is not None and keep.any():
        keep[keep] = calls["start"].to_numpy()[rows["call"].to_numpy()[keep]] < cutoff
    rows = rows.loc[keep]
    call = rows["call"].to_numpy()
    pick = lambda column: calls[column].to_numpy()[call]
    root = covering_range(ranges, pick("pid"), pick("tid"), pick("start"), pick("end"), roots)
    if linked.main is not None:  # a backward call belongs where HTA hangs it
        target = hanging_target(ranges, linked, pick("pid"), pick("tid"), pick("start"), pick("end"))
        alone = np.flatnonzero((root < 0) & (target >= 0))
        target = target[alone]
        of_target = lambda column: ranges[column].to_numpy()[target]
        root[alone] = covering_range(
            ranges, of_target("pid"), of_target("tid"), of_target("start"), of_target("end"), roots
        )
    rows = rows.assign(root=root).loc[root >= 0]
    rows = rows.sort_values(["root", "start"], kind="stable")  # each instance's ops in GPU order
    counts = rows.groupby("root", sort=True).size()
    rows = rows.loc[rows["root"].map(counts).to_numpy() >= options.length]
    groups, sequence_id, texts = group_sequences(rows["root"].to_numpy(), rows["code"].to_numpy(), labels)
    per_instance = pd.DataFrame(
        {
            "operator": shown[ranges["name"].cat.codes.to_numpy()[groups]],
            "sequence": texts[sequence_id],
            "time": rows.groupby("root", sort=True)["duration"].sum().to_numpy(),
            "operator_time": ranges["duration"].to_numpy()[groups],
            "ops": rows.groupby("root", sort=True).size().to_numpy(),
        }
    )
    per = (
        per_instance.groupby(["operator", "sequence"], sort=False)
        .agg(Count=("ops", "size"), Ops=("ops", "first"), time=("time", "sum"), operator_time=("operator_time", "sum"))
        .reset_index()
    )
    per = per.loc[per["Count"] >= options.min_count]
    per = per.sort_values(["Count", "operator", "sequence"], ascending=[False, True, True], kind="stable")
    table = pd.DataFrame(
        {
            "Operator": per["operator"].to_numpy(),
            "Count": per["Count"].to_numpy(np.int64),
            "GPU Ops": per["Ops"].to_numpy(np.int64),
            "Kernel Time (ns)": per["time"].to_numpy(np.int64),
            "Operator Time (ns)": per["operator_time"].to_numpy(np.int64),
            "Sequence": per["sequence"].to_numpy(),
        }
    ).head(options.top)
    notes = [
        f"instances: the outermost operators or ranges named *{options.operator}* on their thread"
        + (" at the smallest call depth (HolisticTraceAnalysis's choice)" if options.as_hta else "")
        + f", with {options.length}+ GPU ops launched inside; per pattern, their GPU ops in GPU order "
        "(HolisticTraceAnalysis's get_frequent_cuda_kernel_sequences)"
    ]
    if rows.empty:
        notes.append(
            f"no instance launched {options.length} GPU ops or more"
            + (
                ": HolisticTraceAnalysis's only instances are the GPU-side annotations named so (depth -1, the smallest)"
                if options.as_hta and gpu_side_match(trace, options.operator or "")
                else ""
            )
        )
    elif table.empty:
        notes.append(f"no pattern repeats {options.min_count} times or more")
    title = f"GPU op sequences of {options.operator!r}: {trace.name}"
    return Result([Table("sequences", table, title)], notes + list(trace.warnings))
