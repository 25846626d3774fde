"""``ranges`` with ``gpu_side``: each range's GPU time measured on the GPU side, beside its CPU time.

GPU Busy (ns): per range instance, the union of the intervals of the GPU ops it launched (ops that
overlap, on two streams, count once), summed over the instances. GPU Time sums the ops' durations and
counts overlap twice; GPU Span runs from the first op's start to the last op's end, idle included: Busy
lies between. torch.profiler also records a GPU-side span for each record_function annotation (the
"gpu" domain, HolisticTraceAnalysis's get_gpu_user_annotation_breakdown reads them): GPU-Side Spans and
GPU-Side Time (ns) are those of the range's name, where the trace has them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.attribution import call_segments
from tracekit.analysis.primitives.busy import union_length
from tracekit.analysis.primitives.intervals import segment_reduce
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.keyed_times import stream_keys
from tracekit.model.trace import Trace

GPU_DOMAIN_PREFIX = "gpu:"


def range_gpu_busy(trace: Trace, ranges: pd.DataFrame, same_thread: bool = False) -> np.ndarray:
    """Per range (rows of ``ranges``): the union of the intervals of the GPU ops it launched (ns)."""
    busy = np.zeros(len(ranges), dtype=np.int64)
    launches = op_launches(trace)
    if not len(ranges) or not launches.found.any():
        return busy
    segments = call_segments(trace, launches, ranges, same_thread)
    ops = trace.columns("gpu_ops", ("start", "end", "duration", "device", "stream"))
    rows = segments.ops
    start, end = ops["start"].to_numpy()[rows], ops["end"].to_numpy()[rows]
    stream_code = pd.factorize(stream_keys(ops)[rows])[0]
    low, high = segments.op_low[segments.low], segments.op_low[segments.high]  # each range's ops: low..high
    with_ops = np.flatnonzero(high > low)
    before = np.concatenate(([0], np.cumsum(ops["duration"].to_numpy()[rows])))
    time = before[high[with_ops]] - before[low[with_ops]]
    first_stream, last_stream, overlapping = segment_reduce(
        [
            (np.minimum, stream_code),
            (np.maximum, stream_code),
            (np.maximum, _overlaps_on_stream(stream_code, start, end)),
        ],
        low[with_ops],
        high[with_ops],
    )
    # ops of one stream run one after another (unless they overlap: programmatic dependent launch, clock
    # noise): their union is their summed time
    simple = (first_stream == last_stream) & (overlapping == 0)
    busy[with_ops[simple]] = time[simple]
    rest = np.flatnonzero(~simple)
    if len(rest):
        busy[with_ops[rest]] = _unions(start, end, low[with_ops[rest]], high[with_ops[rest]])
    return busy


def _overlaps_on_stream(stream: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per op: 1 where it starts before an earlier op of its stream has ended, else 0."""
    order = np.lexsort((start, stream))
    sorted_end = end[order]
    same = np.concatenate(([False], stream[order][1:] == stream[order][:-1]))
    reach = pd.Series(sorted_end).groupby(stream[order]).cummax().to_numpy()
    flag = np.zeros(len(order), dtype=np.int64)
    flag[order[1:]] = (same[1:] & (start[order][1:] < reach[:-1])).astype(np.int64)
    return flag


def _unions(start: np.ndarray, end: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Per segment ``low``..``high`` of the op intervals: the length of their union (ns)."""
    lengths = high - low
    segment = np.repeat(np.arange(len(low)), lengths)
    positions = (
        np.repeat(low, lengths) + np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    )
    return union_length(start[positions], end[positions], segment, len(low))


def gpu_side_spans(trace: Trace, label) -> pd.DataFrame:
    """Per range name as ``label`` groups it (the CPU-side table's Range), torch.profiler's GPU-side spans
    of that name: GPU-Side Spans and GPU-Side Time (ns); empty without any."""
    ranges = trace.ranges
    spans = ranges.loc[(ranges["domain"].astype(str) == "gpu").to_numpy()]
    if spans.empty:
        return pd.DataFrame(
            {"GPU-Side Spans": pd.Series(dtype=np.int64), "GPU-Side Time (ns)": pd.Series(dtype=np.int64)}
        )
    codes, names = pd.factorize(spans["name"].astype(str).to_numpy())
    labels = np.asarray([label(str(name).removeprefix(GPU_DOMAIN_PREFIX)) for name in names], dtype=object)[codes]
    grouped = spans["duration"].groupby(labels).agg(["size", "sum"])
    frame = pd.DataFrame(
        {"GPU-Side Spans": grouped["size"].to_numpy(np.int64), "GPU-Side Time (ns)": grouped["sum"].to_numpy(np.int64)},
        index=grouped.index,
    )
    # the spans' own rows (the "gpu" domain's table) are named with the domain: found under both names
    prefixed = frame.set_axis([f"{GPU_DOMAIN_PREFIX}{name}" for name in frame.index])
    return pd.concat([frame, prefixed.loc[~prefixed.index.isin(frame.index)]])
