"""Nsight Systems' expert rules (``nsys analyze``), computed from the trace's tables so that they give
nsys's rows on an nsys export and the same findings on a torch.profiler trace.

Each rule is defined as nsys 2022.4's rule script defines it (the rule names are nsys's):

- ``gpu-starv``: per process and GPU, the gaps between its GPU ops (kernels, copies, sets, plus the
  profiler's flush overhead, which nsys counts as use) longer than ``gap_ms``, from its first op to its last.
- ``gpu-low-util``: the same span cut into ``chunks`` equal chunks (their length rounded up to a whole
  ns, the last one clipped); a chunk's use is the op time inside it over its length (concurrent ops
  add up, so it may pass 100 %); chunks under ``threshold`` % are listed, consecutive ones merged with
  their length-weighted mean (rounded to 0.1 %, half away from zero, as SQLite rounds).
- ``cuda-sync-api``: cudaDeviceSynchronize and cudaStreamSynchronize calls.
- ``cuda-sync-memcpy``: copies issued by a synchronous cudaMemcpy* (no "Async" in the name), except
  host-to-device copies of 64,000 bytes or less and copies within one device.
- ``cuda-sync-memset``: sets of pinned or managed memory issued by a synchronous cudaMemset*.
- ``cuda-async-memcpy``: copies from or to pageable memory issued by cudaMemcpy*Async (pageable memory
  makes them synchronous).

Rows are ordered as nsys orders them (the longest first; low-utilization chunks by use, then length)
and the first ``rows`` are kept. Where tracekit and nsys 2022.4 differ (nsys joins a copy to its call
by correlation id alone, across processes; it takes a rule's first 50 gaps before ordering them; it
merges empty chunks of different GPUs that share a chunk number), tracekit keeps each process and
GPU apart: the rows agree wherever those cases do not arise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.copies import copy_details
from tracekit.model.derived import per_trace
from tracekit.model.trace import Trace

RULES = ("gpu-starv", "gpu-low-util", "cuda-sync-api", "cuda-sync-memcpy", "cuda-sync-memset", "cuda-async-memcpy")
TITLES = {
    "gpu-starv": "GPU starvation: gaps over {gap_ms:g} ms",
    "gpu-low-util": "GPU low utilization: chunks under {threshold:g} % (of {chunks} per GPU)",
    "cuda-sync-api": "Synchronous APIs",
    "cuda-sync-memcpy": "Synchronous memcpy",
    "cuda-sync-memset": "Synchronous memset",
    "cuda-async-memcpy": "Async memcpy with pageable memory",
}
SYNC_API = r"(?i)^(?:cudaDeviceSynchronize|cudaStreamSynchronize)"
SMALL_HTOD_BYTES = 64_000  # nsys leaves host-to-device copies this small out of cuda-sync-memcpy
PID_BITS = 40  # a process id below the device in a group key (nsys's are 24 bits, Linux's at most 22)
PID_MASK = (1 << PID_BITS) - 1
COPY_COLUMNS = ["Duration (ns)", "Start (ns)", "Src Kind", "Dst Kind", "Bytes", "PID", "Device", "Stream", "API Name"]


def named(names: pd.Series, pattern: str) -> np.ndarray:
    """Mask of a categorical name column whose names ``pattern`` finds, each distinct name tested once
    (a trace has millions of API calls and a few hundred API names)."""
    categories = pd.Series(names.cat.categories.astype(str))
    hit = categories.str.contains(pattern, regex=True).to_numpy(dtype=bool)
    codes = names.cat.codes.to_numpy()
    return (codes >= 0) & hit[np.maximum(codes, 0)] if len(hit) else np.zeros(len(codes), dtype=bool)


@per_trace
def gpu_use_intervals(trace: Trace) -> pd.DataFrame:
    """What nsys's GPU rules count as use: every GPU op that started after time 0 (start, end, pid,
    device), and the profiler's flush overhead of a process, on each of its GPUs, inside that GPU's span.
    Once per trace (both GPU rules ask)."""
    ops = trace.columns("gpu_ops", ("start", "end", "device", "pid"))
    started = ops["start"].to_numpy() > 0
    ops = pd.DataFrame(
        {
            "start": ops["start"].to_numpy()[started],
            "end": ops["end"].to_numpy()[started],
            "pid": ops["pid"].to_numpy(np.int64)[started],
            "device": ops["device"].to_numpy(np.int64)[started],
        }
    )
    overhead = trace.optional("profiler_overhead")
    if overhead is None or overhead.empty or ops.empty:
        return ops.reset_index(drop=True)
    spans = ops.groupby(["pid", "device"], as_index=False).agg(low=("start", "min"), high=("end", "max"))
    inside = overhead[["start", "end", "pid"]].merge(spans, on="pid")
    inside = inside.loc[((inside["start"] > inside["low"]) & (inside["end"] < inside["high"])).to_numpy()]
    return pd.concat([ops, inside[["start", "end", "pid", "device"]]], ignore_index=True)


def _groups(used: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's (process, GPU) group number, groups in (GPU, process) order (the order of nsys's
    ``GROUP BY deviceId, pid``, which decides which GPU nsys 2022.4 gives a shared empty chunk), and each
    group's pid and device. Hashed, not sorted: a million ops have a handful of groups."""
    device = (used["device"].to_numpy(np.int64) & 0xFFFF) ^ 0x8000  # signed 16 bits, in order, as 0..65535
    key = (device << PID_BITS) | (used["pid"].to_numpy(np.int64) & PID_MASK)
    codes, keys = pd.factorize(key)
    order = np.argsort(keys, kind="stable")
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(keys))
    keys = np.asarray(keys, dtype=np.int64)[order]
    return rank[codes], keys & PID_MASK, (keys >> PID_BITS) - 0x8000


def gpu_starvation(trace: Trace, gap_ms: float = 500, rows: int = 50) -> pd.DataFrame:
    """``gpu-starv``: gaps longer than ``gap_ms`` between a process's ops on a GPU, longest first."""
    used = gpu_use_intervals(trace)
    columns = ["Duration (ns)", "Start (ns)", "PID", "Device"]
    if used.empty:
        return pd.DataFrame({column: pd.Series([], dtype=np.int64) for column in columns})
    group, pids, devices = _groups(used)
    starts = np.lexsort((used["start"].to_numpy(), group))
    ends = np.lexsort((used["end"].to_numpy(), group))
    # the k-th start of a group after its k-th end (both in order): a gap when it comes later
    next_start, end, same = (
        used["start"].to_numpy()[starts[1:]],
        used["end"].to_numpy()[ends[:-1]],
        (group[starts[1:]] == group[ends[:-1]]),
    )
    gap = next_start - end
    keep = same & (gap > gap_ms * 1_000_000) & (end < next_start)
    owner = group[ends[:-1]][keep]
    found = pd.DataFrame(
        {"Duration (ns)": gap[keep], "Start (ns)": end[keep], "PID": pids[owner], "Device": devices[owner]}
    )
    return found.sort_values(["Duration (ns)", "Start (ns)"], ascending=[False, True]).head(rows).reset_index(drop=True)


def gpu_low_utilization(
    trace: Trace, threshold: float = 50, chunks: int = 30, rows: int = 50, as_nsys_2022: bool = False
) -> pd.DataFrame:
    """``gpu-low-util``: stretches of a process's span on a GPU used less than ``threshold`` %.

    ``as_nsys_2022``: as nsys 2022.4's query has it, chunk k of every GPU that has no op in it counts
    once, for the first (GPU, process) among them (its GROUP BY meets the empty chunks' NULL device
    and process as one group; the first of nsys's ``GROUP BY deviceId, pid`` order keeps it); the other
    GPUs' empty chunks vanish and their stretches split. For the parity test only: it misplaces idle
    time, and later nsys versions (the ``gpu_time_util`` rule) group by the chunk's own GPU, as tracekit does."""
    used = gpu_use_intervals(trace)
    columns = {
        "In-Use (%)": np.float64,
        "Duration (ns)": np.int64,
        "Start (ns)": np.int64,
        "PID": np.int64,
        "Device": np.int64,
    }
    if used.empty:
        return pd.DataFrame({column: pd.Series([], dtype=dtype) for column, dtype in columns.items()})
    group, pids, devices = _groups(used)
    start, end = used["start"].to_numpy(), used["end"].to_numpy()
    count = len(pids)
    low = np.full(count, np.iinfo(np.int64).max)
    high = np.full(count, np.iinfo(np.int64).min)
    np.minimum.at(low, group, start)
    np.maximum.at(high, group, end)
    size = np.ceil((high - low).astype(np.float64) / chunks)  # nsys: ceil(CAST(span AS FLOAT) / chunks)
    index = np.arange(chunks)
    chunk_start = (index[None, :] * size[:, None] + low[:, None]).astype(np.int64)
    chunk_end = np.minimum(chunk_start + size[:, None].astype(np.int64), high[:, None])
    # op time before t, per group: sum of clip(t - start, 0, duration) (concurrent ops add up)
    used_time = _op_time_before(group, start, end, count)
    busy = used_time(chunk_end)[0] - used_time(chunk_start)[0]
    length = (chunk_end - chunk_start).astype(np.float64)
    valid = chunk_start < chunk_end
    with np.errstate(divide="ignore", invalid="ignore"):
        percent = busy.astype(np.float64) / length * 100
    low_chunks = valid & (percent < threshold)
    if as_nsys_2022:
        # ops overlapping a chunk: those started before its end less those ended by its start
        empty = valid & (used_time(chunk_end)[1] - used_time(chunk_start, ended_by=True)[2] == 0)
        later = empty & (np.cumsum(empty, axis=0) > 1)  # not the first GPU with chunk k empty
        low_chunks &= ~later
    owner, number = np.nonzero(low_chunks)  # row-major: by group, then chunk number
    if not len(owner):
        return pd.DataFrame({column: pd.Series([], dtype=dtype) for column, dtype in columns.items()})
    # consecutive low chunks of one group merge into one stretch
    run = np.concatenate([[True], (owner[1:] != owner[:-1]) | (number[1:] != number[:-1] + 1)])
    first = np.flatnonzero(run)
    last = np.concatenate([first[1:], [len(owner)]]) - 1
    sizes, shares = length[owner, number], percent[owner, number]
    weighted = np.add.reduceat(sizes * shares, first) / np.add.reduceat(sizes, first)
    found = pd.DataFrame(
        {
            "In-Use (%)": np.floor(weighted * 10 + 0.5) / 10,  # SQLite's round(x, 1): half away from zero
            "Duration (ns)": chunk_end[owner[last], number[last]] - chunk_start[owner[first], number[first]],
            "Start (ns)": chunk_start[owner[first], number[first]],
            "PID": pids[owner[first]],
            "Device": devices[owner[first]],
        }
    )
    return found.sort_values(["In-Use (%)", "Duration (ns)"], kind="stable").head(rows).reset_index(drop=True)


def _op_time_before(group: np.ndarray, start: np.ndarray, end: np.ndarray, count: int):
    """A function of a (groups x points) array of times: each group's op time before each point (ns), the
    number of its ops started before each point and the number ended before it (``ended_by``: at or before)."""
    start_order, end_order = np.lexsort((start, group)), np.lexsort((end, group))
    starts, ends = start[start_order], end[end_order]
    start_sums = np.concatenate([[0], np.cumsum(starts)])
    end_sums = np.concatenate([[0], np.cumsum(ends)])
    bounds = np.searchsorted(group[start_order], np.arange(count + 1))  # each group's rows: [bounds[g], bounds[g+1])

    def before(points: np.ndarray, ended_by: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        time, started_count, ended_count = (np.zeros(points.shape, dtype=np.int64) for _ in range(3))
        for index in range(count):  # one searchsorted per group (a trace has a handful of process x GPU)
            lo, hi = bounds[index], bounds[index + 1]
            at = points[index]
            started = np.searchsorted(starts[lo:hi], at, side="left")
            ended = np.searchsorted(ends[lo:hi], at, side="left")
            time[index] = (started * at - (start_sums[lo + started] - start_sums[lo])) - (
                ended * at - (end_sums[lo + ended] - end_sums[lo])
            )
            started_count[index] = started
            ended_count[index] = np.searchsorted(ends[lo:hi], at, side="right") if ended_by else ended
        return time, started_count, ended_count

    return before


def sync_api_calls(trace: Trace, rows: int = 50) -> pd.DataFrame:
    """``cuda-sync-api``: device and stream synchronizations, longest first."""
    calls = trace.columns("launches", ("start", "duration", "name", "pid", "tid"))
    calls = calls.loc[named(calls["name"], SYNC_API)]
    found = pd.DataFrame(
        {
            "Duration (ns)": calls["duration"].to_numpy(),
            "Start (ns)": calls["start"].to_numpy(),
            "PID": calls["pid"].to_numpy(),
            "TID": calls["tid"].to_numpy(),
            "API Name": calls["name"].astype(str).to_numpy(dtype=object),
        }
    )
    return found.sort_values(["Duration (ns)", "Start (ns)"], ascending=[False, True]).head(rows).reset_index(drop=True)


def _copies_with_calls(trace: Trace, kind: str, call_name: str) -> pd.DataFrame:
    """Copies (or sets) of ``kind`` with the API call that issued them, where its name matches ``call_name``."""
    copies = copy_details(trace)
    copies = copies.loc[(copies["kind"] == kind).to_numpy() & (copies["correlation_id"] >= 0).to_numpy()]
    calls = trace.columns("launches", ("name", "correlation_id", "pid"))
    calls = calls.loc[named(calls["name"], call_name)]
    calls = pd.DataFrame(
        {
            "API Name": calls["name"].astype(str).to_numpy(dtype=object),
            "correlation_id": calls["correlation_id"].to_numpy(),
            "pid": calls["pid"].to_numpy(np.int64),
        }
    )
    return copies.merge(calls, on=["pid", "correlation_id"], how="inner")


def _copy_rows(found: pd.DataFrame, rows: int | None) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "Duration (ns)": found["duration"].to_numpy(np.int64),
            "Start (ns)": found["start"].to_numpy(np.int64),
            "Src Kind": found["src_kind"].astype(str).to_numpy(dtype=object),
            "Dst Kind": found["dst_kind"].astype(str).to_numpy(dtype=object),
            "Bytes": found["bytes"].to_numpy(np.int64),
            "PID": found["pid"].to_numpy(np.int64),
            "Device": found["device"].to_numpy(np.int64),
            "Stream": found["stream"].to_numpy(np.int64),
            "API Name": found["API Name"].to_numpy(dtype=object),
        }
    )
    table = table.sort_values(["Duration (ns)", "Start (ns)"], ascending=[False, True])
    return (table if rows is None else table.head(rows)).reset_index(drop=True)


def sync_memcpy(trace: Trace, rows: int | None = 50) -> pd.DataFrame:
    """``cuda-sync-memcpy``: copies a synchronous cudaMemcpy issued (not small host-to-device, not within a device)."""
    found = _copies_with_calls(trace, "memcpy", r"(?i)^cudaMemcpy(?!.*async)")
    small_upload = (found["bytes"] <= SMALL_HTOD_BYTES) & (found["direction"] == "HtoD")
    return _copy_rows(found.loc[(~small_upload & ~found["same_device"]).to_numpy()], rows)


def sync_memset(trace: Trace, rows: int | None = 50) -> pd.DataFrame:
    """``cuda-sync-memset``: sets of pinned or managed memory a synchronous cudaMemset issued."""
    found = _copies_with_calls(trace, "memset", r"(?i)^cudaMemset(?!.*async)")
    return _copy_rows(found.loc[found["dst_kind"].isin(["Pinned", "Managed"]).to_numpy()], rows)


def async_memcpy_pageable(trace: Trace, rows: int = 50) -> pd.DataFrame:
    """``cuda-async-memcpy``: copies from or to pageable memory issued by cudaMemcpy*Async."""
    found = _copies_with_calls(trace, "memcpy", r"(?i)^cudaMemcpy.*async")
    return _copy_rows(
        found.loc[((found["src_kind"] == "Pageable") | (found["dst_kind"] == "Pageable")).to_numpy()], rows
    )
