"""``tracekit syncs``: host calls that block until the GPU catches up, where they sat, and the GPU idle
that followed them.

Blocking calls, by API name (``_vNNNNN`` suffixes dropped): device, stream and event synchronisation
(runtime and driver API), and the synchronous copies (``cudaMemcpy``, ``cudaMemcpy2D``, to/from symbol,
driver ``cuMemcpyDtoH``/``HtoD``/``DtoD``). ``cudaMemcpyAsync`` is not counted: it blocks only for
pageable host memory, which the trace does not say (a tensor's ``.item()`` shows as the
``cudaStreamSynchronize`` after it).

Per call: its duration (ns: the time the CPU waited), the innermost range open on its thread when it
started (emit_nvtx ranges "aten::copy_, seq = 3, op_id = 7" by their op, as ``ranges`` groups them), and the GPU idle it caused: the process's GPUs (all its devices, taken together) had run out of
work by the time the call returned, and stayed idle until the next op started: that gap, counted once
(for the last blocking call that returned in it).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.covering import covering_range
from tracekit.analysis.primitives.intervals import merge_intervals
from tracekit.analysis.waits.launches import api_name
from tracekit.analysis.waits.syncs_command import SyncsOptions
from tracekit.model.range_specs import op_name
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace

BLOCKING = re.compile(
    r"^(cuda(Device|Stream|Event|Ctx|Thread)Synchronize|cudaMemcpy(2D|3D|ToSymbol|FromSymbol)?"
    r"|cu(Ctx|Stream|Event)Synchronize|cuMemcpy(DtoH|HtoD|DtoD|AtoH|HtoA)(_v2)?)$"
)
NO_RANGE = "(no range)"
WAIT, IDLE = "Wait (ns)", "GPU Idle After (ns)"


def blocking_calls(trace: Trace) -> pd.DataFrame:
    """The trace's blocking host calls: start, end, API name, pid, tid, range, GPU Idle After (ns)."""
    calls = trace.launches
    names = calls["name"]
    labels = np.asarray([api_name(str(name)) for name in names.cat.categories], dtype=object)
    blocking = np.asarray([bool(BLOCKING.match(label)) for label in labels], dtype=bool)
    codes = names.cat.codes.to_numpy()
    rows = np.flatnonzero(blocking[codes]) if len(labels) else np.zeros(0, dtype=np.int64)
    chosen = calls.iloc[rows]
    table = pd.DataFrame(
        {
            "start": chosen["start"].to_numpy(),
            "end": chosen["end"].to_numpy(),
            "API": labels[codes[rows]],
            "pid": chosen["pid"].to_numpy(),
            "tid": chosen["tid"].to_numpy(),
        }
    )
    table = outermost_calls(table).sort_index(kind="stable").reset_index(drop=True)
    table["Range"] = innermost_range(trace.ranges, table)
    table[IDLE] = _idle_after(trace.gpu_ops, table)
    return table


def outermost_calls(calls: pd.DataFrame) -> pd.DataFrame:
    """The calls less those inside another of the same API on the same thread: nsys 2022.4 records a
    runtime call twice, as cudaStreamSynchronize and cudaStreamSynchronize_v3020, one in the other (a wait
    counted once, not twice)."""
    ordered = calls.sort_values(["pid", "tid", "API", "start"], kind="stable")
    ends = ordered["end"].to_numpy()
    keys = [ordered[column].to_numpy() for column in ("pid", "tid", "API")]
    first = np.ones(len(ordered), dtype=bool)
    if len(ordered) > 1:
        first[1:] = np.any([key[1:] != key[:-1] for key in keys], axis=0)
    group = np.cumsum(first)
    latest = pd.Series(ends).groupby(group).cummax().shift().to_numpy()  # the latest end of the calls before
    inside = ~first & (np.nan_to_num(latest.astype(np.float64), nan=-np.inf) >= ends)
    return ordered.loc[~inside]


def innermost_range(ranges: pd.DataFrame, calls: pd.DataFrame) -> np.ndarray:
    """Per call: the name of the innermost range open on its thread at its start, else NO_RANGE."""
    found = np.full(len(calls), NO_RANGE, dtype=object)
    if ranges.empty or calls.empty:
        return found
    at = calls["start"].to_numpy()
    row = covering_range(ranges, calls["pid"].to_numpy(), calls["tid"].to_numpy(), at, at)
    labels = np.asarray([op_name(str(name)) for name in ranges["name"].cat.categories], dtype=object)
    inside = row >= 0
    found[inside] = labels[ranges["name"].cat.codes.to_numpy()[row[inside]]]
    return found


def _idle_after(ops: pd.DataFrame, calls: pd.DataFrame) -> np.ndarray:
    """Per call: the GPU gap (of its process's ops, all devices) it returned in, if the GPU had run out of
    work by then; each gap counted once, for the last call that returned in it."""
    idle = np.zeros(len(calls), dtype=np.int64)
    ends = calls["end"].to_numpy()
    for pid in np.unique(calls["pid"].to_numpy()):
        mine = (ops["pid"].to_numpy() == pid) if (ops["pid"].to_numpy() >= 0).any() else np.ones(len(ops), bool)
        if not mine.any():
            continue
        low, high = merge_intervals(ops["start"].to_numpy()[mine], ops["end"].to_numpy()[mine])
        which = np.flatnonzero(calls["pid"].to_numpy() == pid)
        index = np.searchsorted(low, ends[which], side="right") - 1
        in_gap = (index >= 0) & (index + 1 < len(low)) & (ends[which] >= high[np.maximum(index, 0)])
        gap = np.where(in_gap, low[np.minimum(index + 1, len(low) - 1)] - high[np.maximum(index, 0)], 0)
        # one call per gap: the last to return in it
        order = np.lexsort((ends[which], index))
        last = np.ones(len(which), dtype=bool)
        last[order[:-1]] = index[order[:-1]] != index[order[1:]]
        idle[which] = np.where(in_gap & last, gap, 0)
    return idle


def sync_summary(trace: Trace, options: SyncsOptions | None = None) -> Result:
    """Per API and range: count, the CPU's wait and the GPU idle after; and the ``top`` longest calls."""
    top = (options or SyncsOptions()).top
    calls = blocking_calls(trace)
    notes = list(trace.warnings)
    if calls.empty:
        notes.append("no blocking host calls (synchronize, synchronous memcpy) in this trace")
        return Result.of("syncs", pd.DataFrame(columns=["API", "Range", "Calls", WAIT, IDLE]), "Blocking calls", notes)
    calls[WAIT] = calls["end"] - calls["start"]
    summary = calls.groupby(["API", "Range"], as_index=False, sort=False).agg(
        Calls=("start", "size"), **{WAIT: (WAIT, "sum"), IDLE: (IDLE, "sum")}
    )
    summary = summary.sort_values(WAIT, ascending=False, kind="stable", ignore_index=True)
    origin = int(trace.gpu_ops["start"].min()) if len(trace.gpu_ops) else int(calls["start"].min())
    longest = calls.nlargest(top, WAIT).assign(**{"Start (ns)": lambda frame: frame["start"] - origin})
    longest = longest.loc[:, ["Start (ns)", "API", WAIT, IDLE, "Range", "pid", "tid"]].rename(
        columns={"pid": "PID", "tid": "TID"}
    )
    notes.append(
        f"{len(calls):,} blocking calls: {calls[WAIT].sum() / 1e6:,.3f} ms of CPU waiting, followed by "
        f"{calls[IDLE].sum() / 1e6:,.3f} ms of GPU idle"
    )
    return Result(
        [
            Table("syncs", summary, f"Blocking host calls by API and range: {trace.name}"),
            Table("longest", longest.reset_index(drop=True), f"The {top} longest (Start from the first GPU op)"),
        ],
        notes,
    )
