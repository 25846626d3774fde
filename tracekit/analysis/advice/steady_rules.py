"""What advise judges: the steady state (``primitives.steady_state``), or a window the user gave, or the whole
trace; and the one-time costs, apart: a table of their own, and a "cold start" finding when a trace with no
steady state is mostly start-up (its figures then describe a first pass, not a training step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.advice.advise_command import AdviseOptions
from tracekit.analysis.advice.finding import Finding, evidence, ms
from tracekit.analysis.primitives.one_time import one_time_costs
from tracekit.analysis.primitives.steady_state import COLD_SHARE, SteadyState, covered_time, steady_state
from tracekit.analysis.primitives.trace_window import trace_window
from tracekit.errors import UsageError
from tracekit.model.options import named
from tracekit.model.trace import Trace

EVIDENCE_ROWS = 5
ONE_TIME_FIX = {
    "setup range": "setup that runs once: keep it out of the profiled window",
    "context creation": "once per process: warm the GPU up (torch.cuda.init(), a first small op) before the window",
    "module loading": "CUDA loads each kernel's module on its first launch (lazy loading): run one step before "
    "the window",
    "library setup": "cuDNN/cuBLAS handles and NCCL communicators are made once: outside the window",
}


@dataclass(frozen=True)
class Judged:
    """The trace the findings are computed on, the window (ns, None: whole), and what to say about it."""

    trace: Trace
    state: SteadyState
    note: str


def judged_trace(trace: Trace, options: AdviseOptions, origin: int) -> Judged:
    """The window the findings judge: ``window`` (ms from ``origin``, the first GPU op), else the steady state,
    else (``whole_trace``, or none found) the whole trace."""
    if options.whole_trace:
        state = SteadyState(None, None, f"the whole trace ({named('whole_trace')})", one_time_costs(trace))
    elif options.window_bounds is not None:
        low, high = options.window_bounds
        start = origin + round(low * 1e6) if low is not None else origin
        end = origin + round(high * 1e6) if high is not None else np.iinfo(np.int64).max
        state = SteadyState(
            int(start), int(end), f"the window {options.window} ms ({named('window')})", one_time_costs(trace)
        )
    else:
        state = steady_state(trace, options.step_range)
    if state.whole:
        return Judged(trace, state, f"judged: {state.how}")
    window = trace_window(trace, int(state.start or 0), int(state.end or 0))
    if not (window.gpu_ops["kind"] == "kernel").any():
        if options.window is not None:
            raise UsageError(f"the window {options.window} ms launched no kernel: give a window that holds GPU work")
        state = SteadyState(None, None, f"{state.how}, but it launched no kernel: the whole trace", state.one_time)
        return Judged(trace, state, f"judged: {state.how}")
    judged = "the window" if options.window is not None else "the steady state"
    return Judged(window, state, f"judged: {judged}, {state.how}; one-time costs apart (table one-time)")


def one_time_table(one_time: pd.DataFrame, origin: int) -> pd.DataFrame:
    """Per kind of one-time cost: how many, their time, the longest and where it began (ms from ``origin``),
    and what to do about it."""
    if one_time.empty:
        return pd.DataFrame(columns=["Kind", "Count", "Time (ns)", "Longest", "Start (ns)", "Repeats", "Fix"])
    frame = one_time.assign(duration=(one_time["end"] - one_time["start"]).to_numpy())
    longest = frame.sort_values("duration", ascending=False, kind="stable").drop_duplicates("kind").set_index("kind")
    table = frame.groupby("kind", sort=False).agg(count=("duration", "size"), time=("duration", "sum"))
    return pd.DataFrame(
        {
            "Kind": table.index.to_numpy(object),
            "Count": table["count"].to_numpy(np.int64),
            "Time (ns)": table["time"].to_numpy(np.int64),
            "Longest": [f"{longest.loc[kind, 'what']} ({ms(longest.loc[kind, 'duration'])})" for kind in table.index],
            "Start (ns)": [int(longest.loc[kind, "start"]) - origin for kind in table.index],
            "Repeats": "no: once per process",
            "Fix": [ONE_TIME_FIX.get(str(kind), "") for kind in table.index],
        }
    ).sort_values("Time (ns)", ascending=False, kind="stable", ignore_index=True)


def cold_start(judged: Judged, origin: int, span: int) -> Finding | None:
    """A finding when nothing steady was found and the trace is mostly one-time costs."""
    one_time = judged.state.one_time
    if not judged.state.whole or one_time.empty or span <= 0:
        return None
    covered = covered_time(one_time)
    # the trace's extent: its GPU span, and the start-up before it (a context is made before any GPU op)
    span = origin + span - min(origin, int(one_time["start"].min()))
    if covered < COLD_SHARE * span:
        return None
    kinds = one_time.groupby("kind", sort=False).size()
    top = one_time.assign(duration=one_time["end"] - one_time["start"]).nlargest(EVIDENCE_ROWS, "duration")
    return Finding(
        "cold start",
        f"{ms(covered)} of the trace's {ms(span)} (its start-up and GPU span) went to one-time costs ("
        + ", ".join(f"{count} {kind}" for kind, count in kinds.items())
        + "): this is a first pass, not a steady state, and the other findings describe it",
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
