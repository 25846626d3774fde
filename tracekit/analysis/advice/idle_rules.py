"""Findings about GPU idle time, from ``idle``'s causes (each gap between a GPU's busy intervals has one):

- blocking sync: gaps that began while a blocking host call (synchronize, synchronous copy) ran, with
  the calls grouped by API and the innermost range that made them (``.item()`` shows as the
  cudaStreamSynchronize it makes, inside the range that called it). Without the call the host would
  have done what it did after it that much earlier: a gap shrinks by at most the call's duration, so
  that is what counts (the rest of the gap is the host's own work after the call: a host stall);
- launch-bound: gaps under ``idle.OVERHEAD_MAX_NS`` (30 us) between short kernels (median under
  ``SHORT_KERNEL_NS``), whether queued or launched late: the GPU finishes each kernel before the next
  arrives;
- host stall: longer gaps that ended with an op launched after the gap began: the CPU was busy
  elsewhere (data loading, Python, CPU ops), named by the innermost range of its launching thread
  that covers at least half the gap (else the one that covers most of it).
Their fixes follow the cause the ranges name (``causes``): DataLoader workers only where the launching thread
was in data loading, the sync's caller (``.item()``, a device-to-host copy, cuDNN's autotuning, the
allocator) for a blocking sync.

Recoverable time is the idle of the cause on the GPU that has most of it: removing the cause can at
most fill those gaps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.advice.causes import HOST_CAUSES, PYTHON_FIX, SYNC_CAUSES, SYNC_FIX, leading_cause
from tracekit.analysis.advice.finding import Finding, evidence, ms, worst
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.steady_state import covered_within
from tracekit.analysis.waits.idle import OVERHEAD_MAX_NS, gap_devices, idle_gaps
from tracekit.analysis.waits.syncs import IDLE, NO_RANGE, blocking_calls, innermost_range
from tracekit.model.range_specs import op_name
from tracekit.model.trace import Trace

SHORT_KERNEL_NS = 50_000  # median GPU op duration under which dispatch gaps make a trace launch-bound
EVIDENCE_ROWS = 5
CAUSE_ROWS = 50  # the longest gaps read for their cause
UNNAMED_FIX = (
    "find what the launching thread did in the gaps: annotate the loop (torch.profiler's record_function, NVTX "
    "ranges) or sample the CPU (nsys with CPU sampling, py-spy); then data loading, syncs or Python overhead"
)


def idle_findings(
    trace: Trace, origin: int, claimed: np.ndarray | None = None, one_time: pd.DataFrame | None = None
) -> list[Finding]:
    """The idle findings of ``trace`` (times in evidence from ``origin``, the first GPU op's start).
    ``claimed``: a mask over ``idle_gaps`` rows another finding counts already (an unfused optimizer's
    gaps): left out here, so no gap counts twice. ``one_time``: one-time costs (``primitives.one_time``):
    the part of a host stall they cover (a compilation, a module load between launches) is theirs, in
    their own table, not the host's."""
    gaps = idle_gaps(trace)
    if gaps.empty:
        return []
    if claimed is not None:
        gaps = gaps.loc[~claimed].reset_index(drop=True)
    gaps["device"] = gap_devices(gaps)
    launches = op_launches(trace)
    next_op = gaps["Next Op"].to_numpy(np.int64)
    idle = gaps["Idle (ns)"].to_numpy(np.int64)
    cause = gaps["Cause"].to_numpy(dtype=object)
    short_gap = idle < OVERHEAD_MAX_NS
    durations = trace.gpu_ops["duration"].to_numpy()
    median_op = float(np.median(durations)) if len(durations) else 0.0
    found = []
    synced = cause == "sync"
    after_sync = np.zeros(len(gaps), dtype=np.int64)  # the part of a sync gap that is host work after the call
    if synced.any():
        calls = blocking_calls(trace)  # with their ranges and the idle after them: found once, used twice
        waited = np.minimum(idle, _blocking_wait(calls, launches.pid[next_op], gaps["Start (ns)"].to_numpy(np.int64)))
        after_sync = np.where(synced, idle - waited, 0)
        gaps["Idle (ns)"] = np.where(synced, waited, idle)
        found.append(_sync_finding(calls, gaps, synced, origin))
        gaps["Idle (ns)"] = idle
    bound = short_gap & np.isin(cause, ["host not launching", "launch overhead"]) & (median_op < SHORT_KERNEL_NS)
    if bound.any():
        found.append(_launch_bound_finding(trace, gaps, bound, median_op, origin))
    starts = gaps["Start (ns)"].to_numpy(np.int64)
    host = np.where(synced, after_sync, idle)
    host = host - covered_within(one_time, starts + idle - host, starts + idle) if one_time is not None else host
    stalled = ((cause == "host not launching") | synced) & (host >= OVERHEAD_MAX_NS)
    if stalled.any():
        gaps["Idle (ns)"] = host
        found.append(_host_stall_finding(trace, gaps, stalled, launches, next_op, origin))
    return found


def _blocking_wait(calls: pd.DataFrame, pid: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per time: the duration of the blocking call (of ``syncs.blocking_calls``) of process ``pid`` running
    then (of those started by then, the one ending last; 0 when none runs)."""
    wait = np.zeros(len(at), dtype=np.int64)
    for process in np.unique(pid):
        mine = calls.loc[calls["pid"].to_numpy() == process].sort_values(by="start", kind="stable")
        if mine.empty:
            continue
        starts, ends = mine["start"].to_numpy(), mine["end"].to_numpy()
        # the index of the call with the latest end among the first k
        latest = np.maximum.accumulate(np.where(ends == np.maximum.accumulate(ends), np.arange(len(ends)), 0))
        rows = pid == process
        before = np.searchsorted(starts, at[rows], side="right") - 1
        call = latest[np.maximum(before, 0)]
        running = (before >= 0) & (ends[call] > at[rows])
        wait[rows] = np.where(running, ends[call] - starts[call], 0)
    return wait


def _worst_gpu(gaps: pd.DataFrame, rows: np.ndarray) -> tuple[int, int]:
    """(device, idle ns) of the GPU with the most idle time among ``rows``."""
    return worst(gaps["device"].to_numpy()[rows], gaps["Idle (ns)"].to_numpy(np.int64)[rows])


def _sync_finding(calls: pd.DataFrame, gaps: pd.DataFrame, rows: np.ndarray, origin: int) -> Finding:
    device, idle = _worst_gpu(gaps, rows)
    count = int((rows & (gaps["device"].to_numpy() == device)).sum())
    groups = (
        calls.assign(wait=calls["end"] - calls["start"])
        .groupby(["API", "Range"], as_index=False, sort=False)
        .agg(
            calls=("start", "size"),
            first=("start", "min"),
            wait=("wait", "sum"),
            idle=(IDLE, "sum"),
            pid=("pid", "first"),
            tid=("tid", "first"),
        )
        .sort_values(["wait", "idle"], ascending=False, kind="stable")
        .head(EVIDENCE_ROWS)
    )
    proof = evidence(
        [
            f"{api} x{count:,} in '{where}': CPU waited {ms(wait)}, GPU idle after {ms(after)}"
            for api, where, count, wait, after in zip(
                groups["API"], groups["Range"], groups["calls"], groups["wait"], groups["idle"]
            )
        ],
        groups["first"].to_numpy() - origin,
        groups["wait"].to_numpy(),
        [f"pid {pid} tid {tid}" for pid, tid in zip(groups["pid"], groups["tid"])],
    )
    top = f"; the host waited longest in {groups['API'].iloc[0]} in '{groups['Range'].iloc[0]}'" if len(groups) else ""
    callers = calls.assign(wait=calls["end"] - calls["start"])
    cause, share, fix = leading_cause(
        (callers["Range"].astype(str) + " " + callers["API"].astype(str)).tolist(),
        callers["wait"].to_numpy(np.int64),
        SYNC_CAUSES,
        SYNC_FIX,
    )
    if cause:
        top += f"; {100 * share:.0f} % of the waiting was {cause}"
    return Finding(
        "blocking sync",
        f"GPU cuda:{device} went idle {count:,} times while the host waited in a blocking call{top}; "
        f"without the calls the host could have launched {ms(idle)} sooner",
        idle,
        f"upper bound: per gap on cuda:{device}, the blocking call's duration or the gap, whichever is shorter",
        fix,
        proof,
    )


def _thread_ranges(trace: Trace, launches, next_op: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per gap: the innermost range open at ``at`` on the thread that launched the gap's next op."""
    calls = pd.DataFrame({"pid": launches.pid[next_op], "tid": launches.tid[next_op], "start": at})
    return innermost_range(trace.ranges, calls)


def _busiest_range(ranges: pd.DataFrame, pid: int, tid: int, low: int, high: int) -> str:
    """The innermost range of thread (pid, tid) covering at least half of [low, high), else the one covering
    most of it, by its op name; NO_RANGE when none overlaps it."""
    mine = ranges.loc[
        (ranges["pid"].to_numpy() == pid)
        & (ranges["tid"].to_numpy() == tid)
        & (ranges["start"].to_numpy() < high)
        & (ranges["end"].to_numpy() > low)
    ]
    if mine.empty:
        return NO_RANGE
    covered = np.minimum(mine["end"].to_numpy(), high) - np.maximum(mine["start"].to_numpy(), low)
    half = covered * 2 >= high - low
    best = (
        np.lexsort((covered, mine["depth"].to_numpy()))
        if half.any()
        else np.lexsort((mine["depth"].to_numpy(), covered))
    )
    best = best[half[best]][-1] if half.any() else best[-1]
    return op_name(str(mine["name"].iloc[best]))


def _launch_bound_finding(trace: Trace, gaps: pd.DataFrame, rows: np.ndarray, median_op: float, origin: int) -> Finding:
    device, idle = _worst_gpu(gaps, rows)
    on_device = rows & (gaps["device"].to_numpy() == device)
    op_count = int((trace.gpu_ops["device"].to_numpy() == device).sum())
    launches = op_launches(trace)
    chosen = np.flatnonzero(on_device)
    where = _thread_ranges(
        trace, launches, gaps["Next Op"].to_numpy(np.int64)[chosen], gaps["Start (ns)"].to_numpy(np.int64)[chosen]
    )
    by_range = (
        pd.DataFrame(
            {
                "range": where,
                "idle": gaps["Idle (ns)"].to_numpy(np.int64)[chosen],
                "start": gaps["Start (ns)"].to_numpy(np.int64)[chosen],
            }
        )
        .groupby("range", as_index=False)
        .agg(gaps=("idle", "size"), idle=("idle", "sum"), first=("start", "min"))
        .sort_values("idle", ascending=False, kind="stable")
        .head(EVIDENCE_ROWS)
    )
    proof = evidence(
        [
            f"{count:,} gaps under {OVERHEAD_MAX_NS / 1000:g} us, {ms(total)} idle, launched from '{name}'"
            for name, count, total in zip(by_range["range"], by_range["gaps"], by_range["idle"])
        ],
        by_range["first"].to_numpy() - origin,
        by_range["idle"].to_numpy(),
        [f"cuda:{device}"] * len(by_range),
    )
    return Finding(
        "launch-bound",
        f"cuda:{device} ran {op_count:,} GPU ops of median {median_op / 1000:,.1f} us with {int(on_device.sum()):,} gaps "
        f"under {OVERHEAD_MAX_NS / 1000:g} us between them: {ms(idle)} idle waiting for the next launch",
        idle,
        f"upper bound: the short gaps' idle on cuda:{device} (CUDA graphs remove most launch gaps)",
        "fewer, larger launches: capture the step in a CUDA graph (torch.compile(mode='reduce-overhead') or "
        "torch.cuda.graphs), fuse elementwise ops (torch.compile), use fused/foreach optimizers, raise the batch size",
        proof,
    )


def _host_stall_finding(
    trace: Trace, gaps: pd.DataFrame, rows: np.ndarray, launches, next_op: np.ndarray, origin: int
) -> Finding:
    device, idle = _worst_gpu(gaps, rows)
    chosen = np.flatnonzero(rows)
    # the longest gaps name the cause (a range lookup each: a bounded number)
    longest = chosen[np.argsort(-gaps["Idle (ns)"].to_numpy(np.int64)[chosen], kind="stable")[:CAUSE_ROWS]]
    starts = gaps["Start (ns)"].to_numpy(np.int64)[longest]
    where = [
        _busiest_range(trace.ranges, int(launches.pid[op]), int(launches.tid[op]), int(low), int(low + length))
        for op, low, length in zip(next_op[longest], starts, gaps["Idle (ns)"].to_numpy(np.int64)[longest])
    ]
    cause, share, fix = leading_cause(where, gaps["Idle (ns)"].to_numpy(np.int64)[longest], HOST_CAUSES, PYTHON_FIX)
    if cause:
        said = f"; in {100 * share:.0f} % of the longest gaps' idle the launching thread was in {cause}"
    elif all(name == NO_RANGE for name in where):
        said = "; no range of the launching thread covers the longest gaps: what it did is not recorded"
        fix = UNNAMED_FIX
    else:
        said = (
            "; the launching thread was in framework code (no data loading, sync, optimizer or logging range "
            "around the longest gaps)"
        )
    longest, starts, where = longest[:EVIDENCE_ROWS], starts[:EVIDENCE_ROWS], where[:EVIDENCE_ROWS]
    proof = evidence(
        [
            f"gap of {ms(gap)} while the launching thread was in '{name}'"
            for gap, name in zip(gaps["Idle (ns)"].to_numpy(np.int64)[longest], where)
        ],
        starts - origin,
        gaps["Idle (ns)"].to_numpy(np.int64)[longest],
        [
            f"{gpu}, launching thread pid {pid} tid {tid}"
            for gpu, pid, tid in zip(
                gaps["GPU"].to_numpy()[longest], launches.pid[next_op[longest]], launches.tid[next_op[longest]]
            )
        ],
    )
    return Finding(
        "host stall",
        f"cuda:{device} waited {ms(idle)} in {int((rows & (gaps['device'].to_numpy() == device)).sum()):,} gaps of "
        f"{OVERHEAD_MAX_NS / 1000:g} us or more for the CPU to launch its next op{said}",
        idle,
        f"upper bound: those gaps' idle on cuda:{device}",
        fix,
        proof,
    )
