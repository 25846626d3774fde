"""What advise judges: the steady state (``primitives.steady_state``), or the stretch the user named (a window in
ms, a range's instances, steps A to B), or the whole trace; and the one-time costs, apart: a table of their own
that says which kinds recur inside the judged window (a steady-state cost then, said in a note), and a "cold
start" finding when a trace with no steady state is mostly start-up (its figures then describe a first pass,
not a training step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.advice.advise_command import AdviseOptions
from tracekit.analysis.advice.finding import Finding, evidence, ms
from tracekit.analysis.primitives.one_time import one_time_costs
from tracekit.analysis.primitives.selection import select_ranges
from tracekit.analysis.primitives.steady_state import SteadyState, cold_reason, covered_time, steady_state
from tracekit.analysis.primitives.step_window import step_labels, step_numbers, step_rows
from tracekit.analysis.primitives.trace_window import trace_window
from tracekit.errors import UsageError
from tracekit.model.options import named
from tracekit.model.trace import Trace

EVIDENCE_ROWS = 5
ONE_TIME_COLUMNS = ["Kind", "Count", "Time (ns)", "Longest", "Start (ns)", "In Window", "Repeats", "Fix"]
ONE_TIME_FIX = {
    "setup range": "setup that runs once: keep it out of the profiled window",
    "context creation": "once per process: warm the GPU up (torch.cuda.init(), a first small op) before the window",
    "module loading": "CUDA loads each kernel's module on its first launch (lazy loading): run one step before "
    "the window",
    "library setup": "cuDNN/cuBLAS handles and NCCL communicators are made once: outside the window",
    "autotuning": "cuDNN's benchmark mode and torch.compile's autotuning time candidates once per shape: run a "
    "step of each shape before the window (keep shapes fixed: pad, bucket)",
    "compilation": "torch.compile compiles on a first call and on each recompilation: run a step before the window; "
    "recompilations in it come from changing shapes or guards (mark_dynamic, TORCH_LOGS=recompiles)",
    "first collective": "NCCL makes and connects a communicator on its first collective: run one (a barrier or "
    "small all_reduce) before the window",
}


@dataclass(frozen=True)
class Judged:
    """The trace the findings are computed on, the window (ns, None: whole), and what to say about it."""

    trace: Trace
    state: SteadyState
    note: str


def judged_trace(trace: Trace, options: AdviseOptions, origin: int) -> Judged:
    """The window the findings judge: the one the options give (``window``, ms from ``origin``, the first GPU
    op; ``ranges``; ``steps``), else the steady state, else (``whole_trace``, or none found) the whole trace."""
    state = _given(trace, options, origin) or steady_state(trace, options.step_range)
    if state.whole:
        return Judged(trace, state, f"judged: {state.how}")
    window = trace_window(trace, int(state.start or 0), int(state.end or 0))
    given = options.window is not None or bool(options.ranges) or options.steps is not None
    if not (window.gpu_ops["kind"] == "kernel").any():
        if given:
            raise UsageError(f"{state.how} launched no kernel: judge a stretch that holds GPU work")
        state = SteadyState(None, None, f"{state.how}, but it launched no kernel: the whole trace", state.one_time)
        return Judged(trace, state, f"judged: {state.how}")
    judged = "" if given else "the steady state, "
    return Judged(window, state, f"judged: {judged}{state.how}; one-time costs apart (table one-time)")


def _given(trace: Trace, options: AdviseOptions, origin: int) -> SteadyState | None:
    """The stretch the options name (see ``judged_trace``); None: none named."""
    if options.whole_trace:
        return SteadyState(None, None, f"the whole trace ({named('whole_trace')})", one_time_costs(trace))
    if options.window_bounds is not None:
        low, high = options.window_bounds
        start = origin + round(low * 1e6) if low is not None else origin
        end = origin + round(high * 1e6) if high is not None else np.iinfo(np.int64).max
        how = f"the window {options.window} ms ({named('window')})"
        return SteadyState(int(start), int(end), how, one_time_costs(trace))
    if options.ranges:
        return _ranges_window(trace, options.ranges)
    if options.step_bounds is not None:
        return _steps_window(trace, options)
    return None


def _ranges_window(trace: Trace, specs: tuple[str, ...]) -> SteadyState:
    """From the first host-side instance of ``specs`` to the end of the last: the stretch between instances (the
    data loading between two train_step ranges) is part of what repeats."""
    chosen = select_ranges(trace, specs)  # a one-line error naming close names when none matches
    host = chosen.loc[chosen["outermost"].to_numpy() & (chosen["domain"].astype(str) != "gpu").to_numpy()]
    shown = ", ".join(repr(spec) for spec in specs)
    if host.empty:
        raise UsageError(f"{named('ranges')} {shown}: only GPU-side copies of it in {trace.name}, no host-side range")
    count = len(host)
    how = (
        f"the range {shown} ({count} instance{'s' if count > 1 else ''}, from the first one's start to the last "
        f"one's end; {named('ranges')})"
    )
    return SteadyState(int(host["start"].min()), int(host["end"].max()), how, one_time_costs(trace))


def _steps_window(trace: Trace, options: AdviseOptions) -> SteadyState:
    """Steps A to B by their numbers (``step_numbers``), all of them judged: no warm-up is taken out."""
    steps = step_rows(trace, options.step_range).reset_index(drop=True)
    if steps.empty:
        which = f"no range named {options.step_range!r}" if options.step_range else "no ProfilerStep#N or step ranges"
        raise UsageError(f"{named('steps')} {options.steps!r}: {trace.name} has no steps ({which})")
    labels = step_labels(steps)
    numbers = step_numbers(steps, labels)
    low, high = options.step_bounds or (None, None)
    first, last = int(numbers.min()), int(numbers.max())
    low, high = first if low is None else low, last if high is None else high
    chosen = (numbers >= low) & (numbers <= high)
    if low < first or high > last or not chosen.any():
        raise UsageError(
            f"{named('steps')} {options.steps!r}: {trace.name} has {len(steps)} step{'s' if len(steps) > 1 else ''}, "
            f"numbered {first} to {last} ({labels[np.argmin(numbers)]} to {labels[np.argmax(numbers)]})"
        )
    start, end = steps["start"].to_numpy()[chosen], steps["end"].to_numpy()[chosen]
    picked = labels[chosen]
    which = str(picked[0]) if len(picked) == 1 else f"steps {picked[np.argmin(start)]} to {picked[np.argmax(end)]}"
    how = f"{which} ({len(picked)} of {len(steps)}; {named('steps')} {options.steps})"
    return SteadyState(int(start.min()), int(end.max()), how, one_time_costs(trace))


def one_time_table(state: SteadyState, origin: int) -> tuple[pd.DataFrame, str | None]:
    """Per kind of ``state``'s one-time costs: how many, their time, the longest and where it began (ms from
    ``origin``), how many began inside the judged window ("In Window"; every one when the whole trace is
    judged), whether the kind repeats there, and what to do about it; and a note when some do: a cost the
    steady state pays again (a recompilation, a module loaded late) is a steady-state cost."""
    one_time = state.one_time
    if one_time.empty:
        return pd.DataFrame(columns=ONE_TIME_COLUMNS), None
    start = one_time["start"].to_numpy()
    inside = np.ones(len(one_time), dtype=bool) if state.whole else (start >= state.start) & (start < state.end)
    frame = one_time.assign(duration=(one_time["end"] - one_time["start"]).to_numpy(), inside=inside)
    longest = frame.sort_values("duration", ascending=False, kind="stable").drop_duplicates("kind").set_index("kind")
    table = frame.groupby("kind", sort=False).agg(
        count=("duration", "size"), time=("duration", "sum"), inside=("inside", "sum")
    )
    within = table["inside"].to_numpy(np.int64)
    repeats = [_repeats(n, state.whole) for n in within.tolist()]
    result = pd.DataFrame(
        {
            "Kind": table.index.to_numpy(object),
            "Count": table["count"].to_numpy(np.int64),
            "Time (ns)": table["time"].to_numpy(np.int64),
            "Longest": [f"{longest.loc[kind, 'what']} ({ms(longest.loc[kind, 'duration'])})" for kind in table.index],
            "Start (ns)": [int(longest.loc[kind, "start"]) - origin for kind in table.index],
            "In Window": within,
            "Repeats": repeats,
            "Fix": [ONE_TIME_FIX.get(str(kind), "") for kind in table.index],
        }
    ).sort_values("Time (ns)", ascending=False, kind="stable", ignore_index=True)
    if state.whole or not inside.any():
        return result, None
    again = frame.loc[inside].groupby("kind", sort=False)["duration"].agg(["size", "sum"])
    said = ", ".join(f"{kind} {_times(n)} ({ms(time)})" for kind, n, time in again.itertuples())
    return result, (
        f"one-time costs recur inside the judged window: {said}; the steady state pays them again, a steady-state "
        "cost (a recompilation: shapes or guards that change; a module loaded late: a kernel first run there)"
    )


def _repeats(inside: int, whole: bool) -> str:
    """Whether a kind of one-time cost recurs in the judged window, ``inside`` of them began there."""
    if whole:
        return "n/a: the whole trace is judged"
    return f"yes: {_times(inside)} in the judged window" if inside else "no"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def cold_start(judged: Judged, origin: int, span: int) -> Finding | None:
    """A finding when nothing steady was found and the trace is mostly one-time costs."""
    one_time = judged.state.one_time
    if not judged.state.whole or one_time.empty or span <= 0:
        return None
    why = cold_reason(judged.trace, one_time)
    if why is None:
        return None
    covered = covered_time(one_time)
    # the trace's extent: its GPU span, and the start-up before it (a context is made before any GPU op)
    span = origin + span - min(origin, int(one_time["start"].min()))
    kinds = one_time.groupby("kind", sort=False).size()
    top = one_time.assign(duration=one_time["end"] - one_time["start"]).nlargest(EVIDENCE_ROWS, "duration")
    return Finding(
        "cold start",
        f"{ms(covered)} of the trace's {ms(span)} (its start-up and GPU span) went to one-time costs ("
        + ", ".join(f"{count} {kind}" for kind, count in kinds.items())
        + f"), {why}: this is a first pass, not a steady state, and the other findings describe it",
        covered,
        "upper bound: the one-time costs' time (a warm run does not pay it)",
        "profile after a warm-up: torch.profiler's schedule(wait=1, warmup=1, active=N), or nsys "
        "profile with its capture range set to cudaProfilerApi around later steps; run more than one step",
        evidence(
            top["what"].astype(str).tolist(),
            (top["start"].to_numpy() - origin).tolist(),
            top["duration"].tolist(),
            [f"pid {pid} tid {tid}" for pid, tid in zip(top["pid"], top["tid"])],
        ),
        first=True,  # what every other finding of a cold pass is about: said before them
    )
