"""``tracekit idle``: why each GPU sat idle, gap by gap.

A device is busy while any of its ops (kernel, copy, set) runs; its idle time is the gaps between the
merged busy intervals, from its first op to its last (``busy``: the same Idle). Each gap gets one cause,
tried in this order, decided by the op that ends the gap (the first to start after it, "next op") and its
launching call:
1. sync: a blocking host call of the process (``syncs``: synchronize, synchronous memcpy) was running
   when the gap began: the CPU was waiting for the GPU, so nothing new was queued. (A blocking call that
   starts inside the gap returns at once, the GPU having nothing left to finish: it does not explain it.)
2. launch latency: the next op's launching call started at or before the gap began (its work was
   already queued when the GPU went idle, and not yet running), and no stream wait preceded it.
3. other stream or device: as 2, but the process called cudaStreamWaitEvent between the previous op's
   launch and the next op's launch: the next op waited on work recorded on another stream or device.
4. host not launching: the next op's launching call started after the gap began: the GPU had nothing
   queued; the CPU was late (Python, data loading, a CPU-side op).
5. other: the next op has no launching call in the trace.
The causes of a device add up to its idle time.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.attribution import merge_intervals, op_launches
from tracekit.analysis.busy import known_devices
from tracekit.analysis.kernels import kernel_mask
from tracekit.analysis.launch_delays import api_name
from tracekit.analysis.syncs import BLOCKING
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace

CAUSES = ("sync", "launch latency", "other stream or device", "host not launching", "other")
STREAM_WAIT = re.compile(r"^(cudaStreamWaitEvent|cuStreamWaitEvent)$")
METHOD = (
    "method: per GPU, each gap between busy intervals gets the first cause that holds: sync (a blocking host "
    "call was running when it began), launch latency (the next op was launched before the gap began), other stream or device "
    "(as launch latency, after a cudaStreamWaitEvent), host not launching (the next op was launched during the "
    "gap), other (no launching call in the trace)"
)


def _calls_matching(trace: Trace, pattern: re.Pattern) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, pid) of the host calls whose API name matches, sorted by start."""
    calls = trace.launches
    names = calls["name"]
    wanted = np.asarray([bool(pattern.match(api_name(str(name)))) for name in names.cat.categories], dtype=bool)
    rows = np.flatnonzero(wanted[names.cat.codes.to_numpy()]) if len(wanted) else np.zeros(0, np.int64)
    order = rows[np.argsort(calls["start"].to_numpy()[rows], kind="stable")]
    return (calls["start"].to_numpy()[order], calls["end"].to_numpy()[order], calls["pid"].to_numpy()[order])


def idle_gaps(trace: Trace) -> pd.DataFrame:
    """Every idle gap of every device: GPU, Start (ns), Idle (ns), Cause."""
    kernel_mask(trace, "all")  # a clear error for a trace without GPU work
    ops = trace.gpu_ops
    launches = op_launches(trace)
    start, end, devices = ops["start"].to_numpy(), ops["end"].to_numpy(), ops["device"].to_numpy()
    sync_start, sync_end, sync_pid = _calls_matching(trace, BLOCKING)
    wait_start, _, wait_pid = _calls_matching(trace, STREAM_WAIT)
    frames = []
    for device in known_devices(devices):  # an op on an unknown device (-1) has no gaps of its own
        mine = np.flatnonzero(devices == device)
        low, high = merge_intervals(start[mine], end[mine])
        if len(low) < 2:
            continue
        gap_start, gap_end = high[:-1], low[1:]
        # the op that ends each gap: the first of the device's ops to start at the next interval's start
        order = mine[np.lexsort((end[mine], start[mine]))]
        next_op = order[np.searchsorted(start[order], gap_end, side="left")]
        found = launches.found[next_op]
        launch_start = launches.start[next_op]
        pid = np.where(found, launches.pid[next_op], ops["pid"].to_numpy()[next_op])
        previous_launch = np.where(found, _previous_launch(launches, order, start, gap_start), -1)
        cause = np.full(len(gap_start), CAUSES.index("other"))
        cause = np.where(found & (launch_start > gap_start), CAUSES.index("host not launching"), cause)
        pending = found & (launch_start <= gap_start)
        waited = _any_between(wait_start, wait_pid, pid, previous_launch, launch_start)
        cause = np.where(pending & waited, CAUSES.index("other stream or device"), cause)
        cause = np.where(pending & ~waited, CAUSES.index("launch latency"), cause)
        synced = _running_at(sync_start, sync_end, sync_pid, pid, gap_start)
        cause = np.where(synced, CAUSES.index("sync"), cause)
        frames.append(pd.DataFrame({"GPU": f"cuda:{int(device)}", "Start (ns)": gap_start, "Idle (ns)": gap_end -
                                    gap_start, "Cause": np.asarray(CAUSES, dtype=object)[cause]}))  # fmt: skip
    if not frames:
        return pd.DataFrame({"GPU": [], "Start (ns)": [], "Idle (ns)": [], "Cause": []})
    return pd.concat(frames, ignore_index=True)


def _previous_launch(launches, order: np.ndarray, start: np.ndarray, gap_start: np.ndarray) -> np.ndarray:
    """Per gap: the launch start of the last op (in start order) that started before the gap began."""
    before = np.searchsorted(start[order], gap_start, side="left") - 1
    op = order[np.maximum(before, 0)]
    return np.where(before >= 0, launches.start[op], -1)


def _any_between(times: np.ndarray, pids: np.ndarray, pid: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Per row: whether a call of the row's process started in [low, high]."""
    result = np.zeros(len(pid), dtype=bool)
    for process in np.unique(pid):
        calls = times[pids == process]
        rows = pid == process
        result[rows] = np.searchsorted(calls, high[rows], "right") > np.searchsorted(calls, low[rows], "left")
    return result


def _running_at(call_start, call_end, call_pid, pid, time) -> np.ndarray:
    """Per row: whether a call of the row's process was running at ``time`` (started at or before it, ended
    after it; calls sorted by start)."""
    result = np.zeros(len(pid), dtype=bool)
    for process in np.unique(pid):
        mine = call_pid == process
        starts, ends = call_start[mine], call_end[mine]
        if not len(starts):
            continue
        latest_end = np.maximum.accumulate(ends)  # of the calls that started up to a time
        rows = pid == process
        before = np.searchsorted(starts, time[rows], "right") - 1
        result[rows] = (before >= 0) & (latest_end[np.maximum(before, 0)] > time[rows])
    return result


def idle_by_cause(trace: Trace, top: int = 15) -> Result:
    """Per GPU and cause: gaps, idle time and share of the GPU's idle; then the longest gaps."""
    gaps = idle_gaps(trace)
    grouped = gaps.groupby(["GPU", "Cause"], as_index=False, sort=True).agg(
        Gaps=("Idle (ns)", "size"), **{"Idle (ns)": ("Idle (ns)", "sum")}
    )
    totals = grouped.groupby("GPU")["Idle (ns)"].transform("sum").to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        grouped["Share (%)"] = np.where(totals > 0, stats.round_half_away(grouped["Idle (ns)"] * 100 / totals), 0.0)
    rank = {cause: index for index, cause in enumerate(CAUSES)}
    grouped = grouped.sort_values(["GPU", "Cause"], key=lambda column: column.map(rank) if column.name == "Cause"
                                  else column, kind="stable", ignore_index=True)  # fmt: skip
    origin = int(trace.gpu_ops["start"].min())
    longest = gaps.nlargest(top, "Idle (ns)").assign(**{"Start (ns)": lambda frame: frame["Start (ns)"] - origin})
    notes = [METHOD, *trace.warnings]
    return Result(
        [Table("idle", grouped, f"GPU idle time by cause: {trace.name}"),
         Table("gaps", longest.reset_index(drop=True), f"The {top} longest gaps (Start from the first GPU op)")],
        notes,
    )  # fmt: skip
