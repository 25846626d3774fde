"""Findings about memory copies and sets:

- pageable copies: copies from or to pageable host memory (the driver stages them through a pinned
  buffer, and an async copy becomes synchronous);
- synchronous copies and sets: nsys's cuda-sync-memcpy and cuda-sync-memset rows;
- copies on a compute stream: host-device copies issued between two kernels of the same stream (so
  the stream's kernels wait for them), counted for the part of their time no kernel of the device ran
  alongside (copies before the first kernel or after the last, loading a model say, are left alone).

Each copy counts in one finding only: synchronous first, then pageable, then on a compute stream.
Recoverable time is the copies' own GPU time: an upper bound. For copies on compute streams, on the
GPU where it is largest, their exposed time or the device's kernel busy time, whichever is smaller
(moved to a side stream, a copy hides behind kernels, never behind more than there are).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.advice.finding import Finding, evidence, ms
from tracekit.analysis.advice.nsys_rules import sync_memcpy, sync_memset
from tracekit.analysis.primitives.copies import copy_details
from tracekit.analysis.primitives.intervals import merge_intervals
from tracekit.model.trace import Trace

EVIDENCE_ROWS = 5
HOST_DEVICE = ("HtoD", "DtoH")


def copy_findings(trace: Trace, origin: int) -> list[Finding]:
    """The copy findings of ``trace`` (evidence times from ``origin``)."""
    copies = copy_details(trace)
    if copies.empty:
        return []
    found = []
    # each copy counts in one finding: synchronous first, then pageable, then on a compute stream; an
    # export that records each runtime call twice (nsys 2022.4) joins a copy to both: it counts once
    synchronous = pd.concat([sync_memcpy(trace, rows=None), sync_memset(trace, rows=None)], ignore_index=True)
    synchronous = synchronous.drop_duplicates(["Start (ns)", "Duration (ns)", "Device", "Stream"])
    if len(synchronous):
        found.append(_synchronous(synchronous, origin))
    identity = pd.MultiIndex.from_arrays(
        [copies[column].to_numpy(np.int64) for column in ("device", "stream", "start")]
    )
    taken = identity.isin(
        pd.MultiIndex.from_arrays(
            [synchronous[column].to_numpy(np.int64) for column in ("Device", "Stream", "Start (ns)")]
        )
    )
    pageable = ((copies["src_kind"] == "Pageable") | (copies["dst_kind"] == "Pageable")).to_numpy() & ~taken
    if pageable.any():
        found.append(_pageable(copies.loc[pageable], origin))
    serial, busy = _between_kernels(trace, copies.loc[~taken & ~pageable])
    if len(serial) and (serial["exposed"] > 0).any():
        found.append(_serialized(serial, busy, origin))
    return found


def _copy_evidence(rows: pd.DataFrame, origin: int) -> pd.DataFrame:
    longest = rows.sort_values("duration", ascending=False, kind="stable").head(EVIDENCE_ROWS)
    return evidence(
        [
            f"{kind} {direction or ''} {size:,} bytes, {source} -> {target}".replace("  ", " ")
            for kind, direction, size, source, target in zip(
                longest["kind"].astype(str),
                longest["direction"],
                longest["bytes"],
                longest["src_kind"].astype(str),
                longest["dst_kind"].astype(str),
            )
        ],
        longest["start"].to_numpy() - origin,
        longest["duration"].to_numpy(),
        [f"cuda:{device} stream {stream}" for device, stream in zip(longest["device"], longest["stream"])],
    )


def _pageable(rows: pd.DataFrame, origin: int) -> Finding:
    total = int(rows["duration"].sum())
    return Finding(
        "pageable copies",
        f"{len(rows):,} copies to or from pageable host memory ({int(rows['bytes'].sum()):,} bytes) took {ms(total)} "
        "on the GPU and made the host wait",
        total,
        "upper bound: the copies' GPU time (pinned copies run asynchronously and faster)",
        "pin the host memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to('cuda', non_blocking=True)",
        _copy_evidence(rows, origin),
    )


def _synchronous(rows: pd.DataFrame, origin: int) -> Finding:
    total = int(rows["Duration (ns)"].sum())
    longest = rows.head(EVIDENCE_ROWS)
    proof = evidence(
        [
            f"{api}: {size:,} bytes, {source} -> {target}"
            for api, size, source, target in zip(
                longest["API Name"], longest["Bytes"], longest["Src Kind"], longest["Dst Kind"]
            )
        ],
        longest["Start (ns)"].to_numpy() - origin,
        longest["Duration (ns)"].to_numpy(),
        [f"cuda:{device} stream {stream}" for device, stream in zip(longest["Device"], longest["Stream"])],
    )
    return Finding(
        "synchronous copies",
        f"{len(rows):,} synchronous cudaMemcpy/cudaMemset calls (nsys rules cuda-sync-memcpy, cuda-sync-memset) "
        f"blocked the host for copies and sets taking {ms(total)}",
        total,
        "upper bound: their GPU time (the asynchronous calls let the host go on)",
        "use the asynchronous calls (cudaMemcpyAsync/cudaMemsetAsync on a stream); in PyTorch copy with "
        "non_blocking=True from pinned memory",
        proof,
    )


def _between_kernels(trace: Trace, copies: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, int]]:
    """Host-device copies with a kernel of their own stream before and after them, each with the part of
    its time no kernel of its device ran alongside ("exposed", ns); and each device's kernel busy time
    (ns): what those copies could at most hide behind."""
    ops = trace.columns("gpu_ops", ("start", "end", "kind", "device", "stream"))
    kernels = ops[(ops["kind"] == "kernel").to_numpy()]
    chosen = copies.loc[(copies["kind"] == "memcpy").to_numpy() & copies["direction"].isin(HOST_DEVICE).to_numpy()]
    parts, busy, merged = [], {}, {}
    pairs = chosen[["device", "stream"]].drop_duplicates().sort_values(["device", "stream"]).to_numpy().tolist()
    for device, stream in pairs:
        mine = chosen.loc[(chosen["device"] == device).to_numpy() & (chosen["stream"] == stream).to_numpy()]
        on_device = kernels.loc[(kernels["device"] == device).to_numpy()]
        same = on_device.loc[(on_device["stream"] == stream).to_numpy()]
        if same.empty:
            continue
        start, end = mine["start"].to_numpy(), mine["end"].to_numpy()
        inside = (start >= same["end"].min()) & (end <= same["start"].max())
        if int(device) not in merged:  # a device's kernels merged once, whatever its streams
            merged[int(device)] = merge_intervals(on_device["start"].to_numpy(), on_device["end"].to_numpy())
        low, high = merged[int(device)]
        busy[int(device)] = int((high - low).sum())
        covered = _covered(low, high, end) - _covered(low, high, start)
        parts.append(mine.loc[inside].assign(exposed=((end - start) - covered)[inside]))
    return (pd.concat(parts, ignore_index=True) if parts else chosen.iloc[0:0].assign(exposed=0)), busy


def _covered(low: np.ndarray, high: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per time in ``at``: how much of the disjoint sorted intervals [low, high) lies before it (ns)."""
    if not len(low):
        return np.zeros(len(at), dtype=np.int64)
    done = np.concatenate([[0], np.cumsum(high - low)])  # done[k]: the first k intervals' length
    index = np.searchsorted(low, at, side="right")  # intervals started by each time
    last = np.maximum(index - 1, 0)
    return done[last] + np.where(index > 0, np.minimum(at, high[last]) - low[last], 0)


def _serialized(rows: pd.DataFrame, busy: dict[int, int], origin: int) -> Finding:
    # hidden behind kernels, a copy saves at most the kernel time there is to hide it behind
    bounded = {
        int(d): min(int(rows.loc[(rows["device"] == d).to_numpy(), "exposed"].sum()), busy.get(int(d), 0))
        for d in rows["device"].unique()
    }
    device = max(bounded, key=lambda key: bounded[key])
    exposed = int(rows.loc[(rows["device"] == device).to_numpy(), "exposed"].sum())
    mine = rows.loc[(rows["device"] == device).to_numpy()]
    streams = sorted({f"stream {stream}" for stream in mine["stream"]})
    return Finding(
        "copies on compute streams",
        f"{len(mine):,} host-device copies on cuda:{device} ran between kernels of their own stream "
        f"({', '.join(streams[:3])}{', ...' if len(streams) > 3 else ''}): {ms(exposed)} of them with no kernel "
        "running alongside",
        bounded[device],
        f"upper bound: the copies' exposed time on cuda:{device} ({ms(exposed)}) or its kernels' busy time "
        f"({ms(busy.get(device, 0))}), whichever is smaller: on a side stream they can hide behind kernels, no more",
        "prefetch: copy the next batch on a side stream (torch.cuda.Stream) with non_blocking=True from pinned "
        "memory while this one computes, and make the compute stream wait on an event",
        _copy_evidence(mine, origin),
    )
