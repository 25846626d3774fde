"""When the GPUs were busy: per device and across devices, over groups of GPU ops (phase instances).

A GPU is busy while any GPU op (kernel, memcpy or memset) runs on it; overlapping ops (concurrent
streams) count once. Over one group of ops (one phase instance), a device's span runs from its first
op's start to its last op's end, and its idle time is span - busy: the gaps in which it waited
(launch latency, synchronisation, the CPU). Per phase, busy, span and idle are summed over the
phase's instances. Across devices:
- "sum of GPUs" adds the devices' figures (GPU-seconds), "mean per GPU" divides the sum by the number
  of devices that ran anything in the phase;
- "any GPU busy" treats all devices as one: busy while at least one runs something, idle only when
  every device is idle, span from the first op on any device to the last; instances that run at the
  same time (each rank's own forward in a multi-process export) count their common time once.
Everything is vector work on sorted (group, time) keys (``keyed_times``), no loop over ops.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.intervals import merge_intervals
from tracekit.analysis.primitives.keyed_times import KeyedTimes
from tracekit.analysis.stats import round_half_away

SUM, MEAN, ANY = "sum of GPUs", "mean per GPU", "any GPU busy"


def union_length(start: np.ndarray, end: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Per group: total length of the union of its [start, end) intervals (overlaps counted once), ns."""
    result = np.zeros(groups, dtype=np.int64)
    if len(start) == 0:
        return result
    keyed = KeyedTimes(groups, [start, end])
    merged_start, merged_end = merge_intervals(keyed.key(group, start), keyed.key(group, end))
    owner, begin = keyed.split(merged_start)  # sorted: merged intervals come in group order
    finish = keyed.split(merged_end)[1]
    first = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
    result[owner[first]] = np.add.reduceat(finish - begin, first)
    return result


def first_last(start: np.ndarray, end: np.ndarray, group: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group code (0..groups-1): its first op's start and last op's end (first > last: no op)."""
    first = np.full(groups, np.iinfo(np.int64).max)
    last = np.full(groups, np.iinfo(np.int64).min)
    np.minimum.at(first, group, start)
    np.maximum.at(last, group, end)
    return first, last


def busy_span(start: np.ndarray, end: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group code (0..max): busy time (union of its ops) and span (last end - first start), ns."""
    groups = int(group.max()) + 1 if len(group) else 0
    busy = union_length(start, end, group, groups)
    first, last = first_last(start, end, group, groups)
    span = np.where(first <= last, last - first, 0)
    return busy, span


def any_gpu_busy(start: np.ndarray, end: np.ndarray, instance: np.ndarray) -> tuple[int, int, None]:
    """ "any GPU busy" over ops grouped in instances (ns): busy while at least one op of any instance runs,
    over the union of the instances' spans (first op start to last op end). Instances of one process
    follow each other, so this is their sum; those of several processes (one per rank of a DDP export)
    run at once, and overlapping time counts once. (None: idle is span - busy.)"""
    busy = int(union_length(start, end, np.zeros(len(start), dtype=np.int64), 1)[0])
    first, last = first_last(start, end, instance, int(instance.max()) + 1)
    used = first <= last
    low, high = merge_intervals(first[used], last[used])
    return busy, int((high - low).sum()), None


def known_devices(devices: np.ndarray) -> np.ndarray:
    """The distinct GPU indexes among ``devices``, without -1 (an op whose device the trace could not
    say ran on some GPU, but on none that a per-GPU figure can name)."""
    return np.unique(devices[devices >= 0])


def device_busy(ops: pd.DataFrame, instance: np.ndarray) -> pd.DataFrame:
    """Busy, span and idle (ns) of the ops with ``instance`` >= 0 (their phase instance): one row per
    device ("cuda:N"), then the sum of GPUs, the mean per GPU and "any GPU busy" (see the module
    docstring) when there are several (on one GPU they repeat its row; "any GPU busy" stays when some
    ops ran on an unknown device). Columns: GPU, Busy (ns), Span (ns), Idle (ns), Idle (%) of the span."""
    inside = instance >= 0
    start, end = ops["start"].to_numpy()[inside], ops["end"].to_numpy()[inside]
    device = ops["device"].to_numpy()[inside]
    owner = instance[inside].astype(np.int64)
    # An op whose device the trace could not say (-1) ran on some GPU: it counts in "any GPU busy", but in
    # no GPU's own row, nor in the sum and mean over GPUs.
    known = device >= 0
    devices, device_codes = np.unique(device[known], return_inverse=True)
    rows = []
    if len(devices):
        # one group per (instance, device): each device's span is measured inside each instance
        busy, span = busy_span(start[known], end[known], owner[known] * len(devices) + device_codes)
        # integer sums (a float bincount would round totals past 2^53 ns)
        by_device_busy, by_device_span = np.zeros(len(devices), np.int64), np.zeros(len(devices), np.int64)
        np.add.at(by_device_busy, np.arange(len(busy)) % len(devices), busy)
        np.add.at(by_device_span, np.arange(len(span)) % len(devices), span)
        for device, device_busy_ns, device_span_ns in zip(devices, by_device_busy, by_device_span):
            rows.append((f"cuda:{int(device)}", int(device_busy_ns), int(device_span_ns), None))
        if len(devices) > 1:  # on one GPU the sum, the mean and "any" are that GPU's row again
            total_busy, total_span = int(by_device_busy.sum()), int(by_device_span.sum())
            rows.append((SUM, total_busy, total_span, None))
            # the mean in whole ns (every column stays integer), idle from the exact mean, not the rounded two
            mean = lambda total: int(round_half_away(total / len(devices), 0))
            rows.append((MEAN, mean(total_busy), mean(total_span), mean(total_span - total_busy)))
    if len(start) and (len(devices) != 1 or not known.all()):
        rows.append((ANY, *any_gpu_busy(start, end, owner)))
    table = pd.DataFrame(
        [(gpu, busy_ns, span_ns, span_ns - busy_ns if idle is None else idle) for gpu, busy_ns, span_ns, idle in rows],
        columns=["GPU", "Busy (ns)", "Span (ns)", "Idle (ns)"],
        dtype=object,
    ).astype({"GPU": object, "Busy (ns)": np.int64, "Span (ns)": np.int64, "Idle (ns)": np.int64})
    span_ns, idle_ns = table["Span (ns)"].to_numpy(), table["Idle (ns)"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        table["Idle (%)"] = np.where(span_ns > 0, idle_ns * 100.0 / span_ns, 0.0)
    return table
