"""The steady state of a trace: the stretch that repeats, where a fix pays on every step, apart from the
warm-up and start-up a trace also holds (``one_time``).

Found, first that applies (host time, ns):
1. steps (``step_window.step_rows``: ProfilerStep#N, ``step`` ranges, or a given range name), two or more:
   from the first step that is not warm-up to the end of the last. Leading steps are warm-up while they
   last more than 1.5x the median of the later steps or hold one-time costs for a tenth of their time;
2. a user range that repeats: the name at the outermost depth with three or more instances that do not
   overlap and cover the most time (``iteration``, ``Optimizer.step#SGD.step``, a benchmark's ``forward``;
   never an operator's, a library's or a setup name), each instance marking an iteration that runs to
   the next one's start, taken as steps as above;
3. after the start-up: when one-time costs were found, from the end of the last that began in the
   trace's first half, if the stretch after it holds half the GPU's busy time or more, and the one-time
   costs cover less than half the trace (first one-time cost or GPU op to last GPU op) and its kernels
   repeat (half of them or more of a name that runs more than once); else it is a cold first pass: no
   steady state (``cold_reason``);
4. none: the whole trace, said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.intervals import merge_intervals
from tracekit.analysis.primitives.one_time import one_time_costs
from tracekit.analysis.primitives.one_time_names import is_setup_name
from tracekit.analysis.primitives.step_window import step_labels, step_rows
from tracekit.model.trace import Trace

WARMUP_FACTOR = 1.5  # a leading step this much longer than the median of the later ones is warm-up
WARMUP_ONE_TIME_SHARE = 0.1  # or one whose time is this much one-time costs
REPEATS = 3
# ranges of libraries and of operators: never a loop's iteration marks
LIBRARY_DOMAINS = {"cpu_op", "python_function", "gpu", "MPI", "NCCL", "CCCL", "cuBLAS", "cuDNN", "NVSHMEM", "OSHMEM"}
OPERATOR_NAME = re.compile(r"aten::|autograd::|op_id =|seq =|^cpu_op:|^nccl|^MPI|^cuda")
AFTER_STARTUP_BUSY_SHARE = 0.5
COLD_SHARE = 0.5  # of the GPU span: a trace this much start-up is a cold first pass
REPEATED_SHARE = 0.5  # of the kernels: fewer of a name that runs twice or more, and nothing repeats


@dataclass(frozen=True)
class SteadyState:
    """The window judged: [start, end) ns (None: the whole trace), how it was found, and the one-time costs."""

    start: int | None
    end: int | None
    how: str
    one_time: pd.DataFrame

    @property
    def whole(self) -> bool:
        return self.start is None


def steady_state(trace: Trace, step_range: str | None = None) -> SteadyState:
    """The steady state of ``trace`` (see the module); ``step_range``: the steps' range name."""
    one_time = one_time_costs(trace)
    steps = step_rows(trace, step_range).reset_index(drop=True)
    if len(steps) >= 2:
        return _after_warmup(steps, one_time, "steps")
    repeated = _repeated_ranges(trace)
    if repeated is not None:
        return _after_warmup(repeated, one_time, f"the repeated range {repeated['name'].iloc[0]!r}")
    startup = _after_startup(trace, one_time)
    if startup is not None:
        return startup
    cold = cold_reason(trace, one_time)
    if cold is not None:
        return SteadyState(None, None, f"a cold first pass ({cold}): the whole trace", one_time)
    return SteadyState(None, None, "no steps, repeated ranges or start-up found: the whole trace", one_time)


def steady_steps(trace: Trace, step_range: str | None = None) -> pd.DataFrame:
    """The trace's steps (``step_rows``) after the leading warm-up ones (see the module), by start; empty
    without steps."""
    steps = step_rows(trace, step_range).sort_values("start", kind="stable").reset_index(drop=True)
    if len(steps) < 2:
        return steps
    return steps.iloc[_warmup_count(steps, one_time_costs(trace)) :].reset_index(drop=True)


def _warmup_count(steps: pd.DataFrame, one_time: pd.DataFrame) -> int:
    """How many of the leading ``steps`` (by start) are warm-up."""
    start, end = steps["start"].to_numpy(np.int64), steps["end"].to_numpy(np.int64)
    duration = end - start
    warm = 0
    while warm < len(steps) - 1:
        later = float(np.median(duration[warm + 1 :]))
        costs = covered_time(one_time, int(start[warm]), int(end[warm]))
        if duration[warm] > WARMUP_FACTOR * later or costs >= WARMUP_ONE_TIME_SHARE * max(duration[warm], 1):
            warm += 1
            continue
        break
    return warm


def _after_warmup(steps: pd.DataFrame, one_time: pd.DataFrame, found: str) -> SteadyState:
    steps = steps.sort_values("start", kind="stable").reset_index(drop=True)
    start, end = steps["start"].to_numpy(np.int64), steps["end"].to_numpy(np.int64)
    labels = step_labels(steps)
    warm = _warmup_count(steps, one_time)
    kept = len(steps) - warm
    how = f"{found} {labels[warm]} to {labels[-1]} ({kept} of {len(steps)})"
    if warm:
        how += f"; {', '.join(map(str, labels[:warm]))} {'was' if warm == 1 else 'were'} warm-up"
    return SteadyState(int(start[warm]), int(end.max()), how, one_time)


def _repeated_ranges(trace: Trace) -> pd.DataFrame | None:
    """The iterations a repeated user range marks (see the module), as steps: each from one instance's start
    to the next one's (the last: its own end); None."""
    ranges = trace.ranges
    if ranges.empty:
        return None
    domain = ranges["domain"].astype(str)
    user = ~domain.isin(LIBRARY_DOMAINS).to_numpy()
    outer = ranges.loc[(ranges["depth"] == 0).to_numpy() & user]
    if outer.empty:
        return None
    named = outer.assign(name=outer["name"].astype(str))
    totals = named.groupby("name", sort=False).agg(count=("duration", "size"), time=("duration", "sum"))
    wanted = totals.index.map(lambda name: not is_setup_name(name) and not OPERATOR_NAME.search(name)).to_numpy(bool)
    totals = totals.loc[(totals["count"] >= REPEATS).to_numpy() & wanted]
    for name in totals.sort_values("time", ascending=False, kind="stable").index:
        instances = named.loc[named["name"] == name].sort_values("start", kind="stable").reset_index(drop=True)
        begins, ends = instances["start"].to_numpy(), instances["end"].to_numpy()
        if not (begins[1:] >= ends[:-1]).all():  # nested or overlapping calls, not iterations
            continue
        # an iteration runs from one mark to the next
        return instances.assign(end=np.append(begins[1:], ends[-1]), name=name)
    return None


def _after_startup(trace: Trace, one_time: pd.DataFrame) -> SteadyState | None:
    if one_time.empty:
        return None
    if cold_reason(trace, one_time) is not None:
        return None  # a cold first pass, with no steady state after it
    ops = trace.columns("gpu_ops", ("start", "end"))
    first, last = int(ops["start"].min()), int(ops["end"].max())
    early = one_time.loc[(one_time["start"] < first + (last - first) / 2).to_numpy()]
    if early.empty:
        return None
    begin = int(early["end"].max())
    duration = (ops["end"] - ops["start"]).to_numpy()
    after = int(duration[(ops["start"] >= begin).to_numpy()].sum())
    if after < AFTER_STARTUP_BUSY_SHARE * max(int(duration.sum()), 1):
        return None
    return SteadyState(
        begin,
        last + 1,
        f"after the start-up: from the end of its last one-time cost ({early['what'].iloc[-1]}) on",
        one_time,
    )


def cold_reason(trace: Trace, one_time: pd.DataFrame) -> str | None:
    """Why ``trace`` is a cold first pass, or None: it has one-time costs, and they cover half of it or more
    (from its first GPU op, or first one-time cost: the context is made before any GPU op, to its last GPU
    op), or its kernels do not repeat (under ``REPEATED_SHARE`` of them of a name run twice or more: every
    kernel a first launch, a first call of a benchmark)."""
    if one_time.empty:
        return None
    ops = trace.columns("gpu_ops", ("start", "end"))
    first = min(int(ops["start"].min()), int(one_time["start"].min()))
    last = int(ops["end"].max())
    if covered_time(one_time, first, last + 1) >= COLD_SHARE * max(last - first, 1):
        return "one-time costs cover half of it or more"
    names = trace.gpu_ops["name"]
    codes = names.cat.codes.to_numpy()[(trace.gpu_ops["kind"] == "kernel").to_numpy()]
    codes = codes[codes >= 0]
    repeated = float((np.bincount(codes)[codes] >= 2).mean()) if len(codes) else 1.0
    if repeated < REPEATED_SHARE:
        return f"its kernels do not repeat: {100 * (1 - repeated):.0f} % of them ran once"
    return None


def covered_time(one_time: pd.DataFrame, start: int | None = None, end: int | None = None) -> int:
    """The length of the union of ``one_time``'s intervals (clipped to [start, end) when given), ns."""
    if one_time.empty:
        return 0
    low, high = one_time["start"].to_numpy(np.int64), one_time["end"].to_numpy(np.int64)
    if start is not None and end is not None:
        low, high = np.clip(low, start, end), np.clip(high, start, end)
    merged_low, merged_high = merge_intervals(low, high)
    return int((merged_high - merged_low).sum())


def covered_within(one_time: pd.DataFrame, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per interval [``starts``, ``ends``) (ns): how much of it the union of ``one_time``'s intervals covers,
    ns; columnar (the union's cumulative length, looked up at both ends)."""
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    if one_time.empty or not len(starts):
        return np.zeros(len(starts), dtype=np.int64)
    low, high = merge_intervals(one_time["start"].to_numpy(np.int64), one_time["end"].to_numpy(np.int64))
    before = np.concatenate(([0], np.cumsum(high - low)))  # covered length before each merged interval

    def covered_until(at: np.ndarray) -> np.ndarray:
        index = np.searchsorted(low, at, side="right") - 1  # the last merged interval begun by ``at``
        inside = np.where(index >= 0, np.minimum(at, high[np.maximum(index, 0)]) - low[np.maximum(index, 0)], 0)
        return (
            before[index + 1] - np.where(index >= 0, high[np.maximum(index, 0)] - low[np.maximum(index, 0)], 0) + inside
        )

    return covered_until(ends) - covered_until(starts)
