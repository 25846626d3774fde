"""Phase x category: how a training step's GPU time splits into matmul, elementwise, softmax, ...
per phase (forward, backward, optimizer, found by name when not given: ``phases``) and for the whole
trace; the copies beside it; how busy each GPU was.

Per phase, its GPU ops are those launched while one of its ranges was open (see ``attribution``).
- Kernel Time and the category shares are kernels only, as ``kernels`` by category counts them on
  the same selection (their sum over concurrent streams: both count). Memory copies and sets are
  columns of their own (time and MiB), and a table by direction. ``ops="all"`` counts copies and sets
  in the time and the shares too (category "memory"), as ``kernels`` with ``ops="all"`` does.
- Busy, span and idle come per GPU, summed, averaged, and for "any GPU busy" (``busy``); every GPU op
  keeps a GPU busy, copies included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.primitives.attribution import interval_of_ops
from tracekit.analysis.primitives.busy import device_busy
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.analysis.primitives.op_selection import OPS_CHOICES, kernel_mask
from tracekit.analysis.primitives.phases import choose_phases
from tracekit.analysis.primitives.selection import select
from tracekit.analysis.primitives.step_window import last_step_start, launched_before_last_step
from tracekit.analysis.ranges.breakdown_command import BreakdownOptions
from tracekit.analysis.stats import SHOWN_SHARE
from tracekit.errors import UsageError
from tracekit.model.derived import per_trace
from tracekit.model.option_fields import DEFAULT_PHASES
from tracekit.model.options import OptionError, named
from tracekit.model.result import Chart, Result, Table
from tracekit.model.trace import Trace

WHOLE = "(whole trace)"
PHASE = "Phase"
MIB = 2**20


def count_column(which_ops: str) -> str:
    """The name of the counted-ops column: Kernels, or GPU Ops with ``which_ops`` "all"."""
    return "Kernels" if which_ops == "kernels" else "GPU Ops"


# The GPU-op columns a breakdown reads (kinds, times and sizes, the category's name, the device for busy
# time, the launch join's correlation and process): not the streams, short names and launch configurations.
BREAKDOWN_COLUMNS = ("kind", "start", "end", "duration", "device", "correlation_id", "pid", "name", "bytes")


def breakdown_ops(trace: Trace) -> pd.DataFrame:
    """The GPU-op columns of ``BREAKDOWN_COLUMNS`` (said needed first: read together, once)."""
    trace.need("gpu_ops", BREAKDOWN_COLUMNS)
    return trace.columns("gpu_ops", BREAKDOWN_COLUMNS)


def time_column(which_ops: str) -> str:
    """The name of the summed-time column: kernels only, or every GPU op with ``which_ops`` "all"."""
    return "Kernel Time (ns)" if which_ops == "kernels" else "GPU Op Time (ns)"


def phase_intervals(
    trace: Trace, phases: Sequence[str] | None, same_thread: bool = False, domain: str | None = None
) -> Mapping[str, tuple[np.ndarray, np.ndarray]]:
    """Per phase (by label: ``phases.choose_phases`` finds the default ones by name): the start (ns) of each of
    its range instances, and for every GPU op the merged phase interval its launch fell in (-1 outside
    the phase). Reads only the ranges the specs name; computed once per trace for the same phases
    (breakdown and a report's comparison both ask)."""
    return _phase_intervals(trace, choose_phases(trace, phases, domain).chosen, same_thread, domain)


@per_trace
def _phase_intervals(
    trace: Trace, chosen: tuple[tuple[str, str], ...], same_thread: bool, domain: str | None
) -> Mapping[str, tuple[np.ndarray, np.ndarray]]:
    """``phase_intervals`` of the (label, spec) pairs ``chosen``, once per trace and choice (read-only)."""
    trace.need("gpu_ops", BREAKDOWN_COLUMNS)  # the ops' columns load beside the ranges: only these
    selection = select(trace, [spec for _, spec in chosen], load_too=["gpu_ops", "launches"], domain=domain)
    return {
        label: (selection.of(spec)["start"].to_numpy(), interval_of_ops(trace, selection.of(spec), same_thread))
        for label, spec in chosen
    }


def phases_with_whole(
    trace: Trace,
    phases: Sequence[str] | None,
    same_thread: bool,
    domain: str | None = None,
    drop_last_step: bool = False,
) -> list[tuple[str, int, np.ndarray]]:
    """(phase, instances, interval per op) for each phase that has instances, then the whole trace as
    one instance (a phase that matches nothing is left out, and ``phase_notes`` says so). UsageError
    when phases were given and none matched. ``drop_last_step``: ops launched after the last
    ProfilerStep began are in no interval (HolisticTraceAnalysis's window)."""
    intervals = phase_intervals(trace, phases, same_thread, domain)  # loads the tables together: first
    kernel_mask(trace, "all")  # raises a clear error for a trace without GPU work
    given = phases is not None and tuple(phases) != tuple(DEFAULT_PHASES)
    if given and not any(len(starts) for starts, _ in intervals.values()):
        where = f" in domain {domain}" if domain else ""
        # Only the ranges these names can match were read: say what was left out of them, not more
        # (listing the trace's names would read millions of ranges for an error message).
        dropped = trace.dropped("ranges")
        why = f"; {dropped:,} ranges that could match were left out: unusable values" if dropped else ""
        raise UsageError(f"no NVTX range matches {', '.join(phases or ())}{where} in {trace.name}{why}")
    whole = np.zeros(len(breakdown_ops(trace)), dtype=np.int64)  # every op in one interval
    window, cutoff = None, None
    if drop_last_step:
        window, _ = launched_before_last_step(trace)
        cutoff = last_step_start(trace)
    parts = [(WHOLE, 1, whole)]
    for phase, (starts, interval) in intervals.items():
        # with the window, an instance of the left-out step is no instance, its ops in no interval
        instances = int((starts < cutoff).sum()) if cutoff is not None else len(starts)
        if len(starts):
            parts.insert(len(parts) - 1, (phase, instances, interval))
    if window is not None:
        parts = [(phase, instances, np.where(window, interval, -1)) for phase, instances, interval in parts]
    return parts


def phase_notes(
    trace: Trace, phases: Sequence[str] | None, domain: str | None = None, how: str = "", same_thread: bool = False
) -> list[str]:
    """What a table of ``phases`` should say about them: which ranges the found phases are (or that none
    was found), and each given phase that matched nothing (left out of the table, not shown as zeros).
    ``same_thread`` as the table's, so the phases' intervals it reads are the table's own (computed once)."""
    resolved = choose_phases(trace, phases, domain, how or named("phases"))
    intervals = phase_intervals(trace, phases, same_thread, domain)
    missing = [label for label, (starts, _) in intervals.items() if not len(starts)]
    notes = [resolved.note] if resolved.note else []
    if missing:
        notes.append(f"no range matches {', '.join(repr(label) for label in missing)} in {trace.name}: left out")
    return notes


def breakdown_table(
    trace: Trace,
    phases: Sequence[str] | None = None,
    same_thread: bool = False,
    which_ops: str = "kernels",
    domain: str | None = None,
    drop_last_step: bool = False,
) -> pd.DataFrame:
    """Rows: each phase, then the whole trace. Columns: Phase, Instances, Kernels (ops counted),
    Kernel Time (ns) (or GPU Op Time with ``which_ops`` "all"), Memcpy Time (ns), Memcpy (MiB), Memset Time
    (ns), Memset (MiB), then "<category> (%)" of the time for every category that has time anywhere."""
    return category_shares(breakdown_times(trace, phases, same_thread, which_ops, domain, drop_last_step), which_ops)


def breakdown_times(
    trace: Trace,
    phases: Sequence[str] | None = None,
    same_thread: bool = False,
    which_ops: str = "kernels",
    domain: str | None = None,
    drop_last_step: bool = False,
) -> pd.DataFrame:
    """``breakdown_table`` with each category's time ("<category> (ns)", every category) in place of
    its share: the columns add up over traces."""
    if which_ops not in OPS_CHOICES:
        raise OptionError(f"{named('ops')} {which_ops!r} is not one of {', '.join(OPS_CHOICES)}")
    parts = phases_with_whole(trace, phases, same_thread, domain, drop_last_step)
    gpu_ops = breakdown_ops(trace)
    kind = gpu_ops["kind"].to_numpy()
    counted = (kind == "kernel") if which_ops == "kernels" else np.ones(len(gpu_ops), dtype=bool)
    categories, durations = op_categories(trace), gpu_ops["duration"].to_numpy()
    sizes = gpu_ops["bytes"].to_numpy()
    rows = []
    for phase, instances, interval in parts:
        inside = interval >= 0
        chosen = inside & counted
        by_category = np.bincount(categories[chosen], minlength=len(CATEGORIES), weights=durations[chosen])
        row = {
            PHASE: phase,
            "Instances": instances,
            count_column(which_ops): int(chosen.sum()),
            time_column(which_ops): int(durations[chosen].sum()),
        }
        for name in ("memcpy", "memset"):
            mine = inside & (kind == name)
            row[f"{name.capitalize()} Time (ns)"] = int(durations[mine].sum())
            row[f"{name.capitalize()} (MiB)"] = float(sizes[mine].sum()) / MIB
        row.update({f"{category} (ns)": int(time) for category, time in zip(CATEGORIES, by_category)})
        rows.append(row)
    return pd.DataFrame(rows)


def category_shares(times: pd.DataFrame, which_ops: str) -> pd.DataFrame:
    """``breakdown_times`` with each category's time turned into its share of the row's time (%), as
    nsys rounds shares; only the categories that have time in some row."""
    table = times.drop(columns=[f"{category} (ns)" for category in CATEGORIES])
    category_times = times[[f"{category} (ns)" for category in CATEGORIES]].to_numpy(np.int64)
    shares = np.zeros(category_times.shape)
    for row, (values, total) in enumerate(zip(category_times, times[time_column(which_ops)].to_numpy())):
        if total:
            shares[row] = stats.percent_of_total(values)
    # a category whose share would print as 0.0 everywhere says nothing
    kept = [index for index, category in enumerate(CATEGORIES) if shares[:, index].max(initial=0) >= SHOWN_SHARE]
    for index in kept:
        table[f"{CATEGORIES[index]} (%)"] = shares[:, index]
    return table


def gpu_table(
    trace: Trace,
    phases: Sequence[str] | None = None,
    same_thread: bool = False,
    domain: str | None = None,
    drop_last_step: bool = False,
) -> pd.DataFrame:
    """Per phase (and the whole trace): each GPU's busy, span and idle, their sum, mean, and the "any
    GPU busy" figure (``busy.device_busy``). Columns: Phase, GPU, Busy (ns), Span (ns), Idle (ns),
    Idle (%)."""
    frames = []
    for phase, instances, interval in phases_with_whole(trace, phases, same_thread, domain, drop_last_step):
        if instances:
            table = device_busy(breakdown_ops(trace), interval)
            table.insert(0, PHASE, phase)
            frames.append(table)
    return pd.concat(frames, ignore_index=True)


def copy_table(
    trace: Trace,
    phases: Sequence[str] | None = None,
    same_thread: bool = False,
    domain: str | None = None,
    drop_last_step: bool = False,
) -> pd.DataFrame:
    """Memory copies and sets per phase and direction ("memcpy HtoD", "memset"): Phase, Operation,
    Count, Time (ns), MiB. Empty when the trace has none."""
    gpu_ops = breakdown_ops(trace)
    moves = (gpu_ops["kind"] != "kernel").to_numpy()
    names = gpu_ops["name"].astype(object).to_numpy()
    rows = []
    for phase, _, interval in phases_with_whole(trace, phases, same_thread, domain, drop_last_step):
        mine = moves & (interval >= 0)
        if not mine.any():
            continue
        frame = pd.DataFrame(
            {
                "name": names[mine],
                "duration": gpu_ops["duration"].to_numpy()[mine],
                "bytes": gpu_ops["bytes"].to_numpy()[mine],
            }
        )
        for name, group in frame.groupby("name", sort=True):
            operation = str(name).strip("[]").removeprefix("CUDA ")
            rows.append((phase, operation, len(group), int(group["duration"].sum()), group["bytes"].sum() / MIB))
    return pd.DataFrame(rows, columns=[PHASE, "Operation", "Count", "Time (ns)", "MiB"])


def phase_breakdown(trace: Trace, options: BreakdownOptions | None = None) -> Result:
    """``breakdown``: the phase x category table, each GPU's busy and idle time per phase, the copies by
    direction, and a chart of the category shares of the phases found. ``drop_last_step``: only GPU
    work launched before the last ProfilerStep began (HolisticTraceAnalysis's window)."""
    options = options or BreakdownOptions()
    phases, same_thread, which_ops = options.phases, options.same_thread, options.ops
    domain, drop_last_step = options.domain, options.drop_last_step
    table = breakdown_table(trace, phases, same_thread, which_ops, domain, drop_last_step)
    tables = [
        Table("breakdown", table, f"GPU time by phase and category: {trace.name}"),
        Table("gpus", gpu_table(trace, phases, same_thread, domain, drop_last_step), "Busy and idle time per GPU"),
    ]
    copies = copy_table(trace, phases, same_thread, domain, drop_last_step)
    if not copies.empty:
        tables.append(Table("copies", copies, "Memory copies and sets"))
    window = [launched_before_last_step(trace)[1]] if drop_last_step else []
    domains = trace.range_notes if domain else []
    result = Result(
        tables, notes=phase_notes(trace, phases, domain, same_thread=same_thread) + window + domains + trace.warnings
    )
    present = table.loc[(table["Instances"] > 0) | (table[PHASE] == WHOLE)]
    # bars to compare: a trace without phases has one (the whole trace), which the table already says
    if len(present) > 1 and present[time_column(which_ops)].sum() > 0:
        title = "Share of kernel time by category" if which_ops == "kernels" else "Share of GPU op time by category"
        result.charts["categories"] = Chart("category_bars", title, {"table": present, "categories": CATEGORIES})
    return result
