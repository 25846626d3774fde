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

from tracekit.analysis.ranges.attribution import call_segments, merge_intervals, op_launches, segment_reduce
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
    stream = ops["device"].to_numpy().astype(np.int64)[rows] * 2**32 + (
        ops["stream"].to_numpy().astype(np.int64)[rows] & 0xFFFFFFFF)  # fmt: skip
    stream_code = pd.factorize(stream)[0]
    low, high = segments.op_low[segments.low], segments.op_low[segments.high]  # each range's ops: low..high
    with_ops = np.flatnonzero(high > low)
    before = np.concatenate(([0], np.cumsum(ops["duration"].to_numpy()[rows])))
    time = before[high[with_ops]] - before[low[with_ops]]
    first_stream, last_stream, first_start = segment_reduce(
        [(np.minimum, stream_code), (np.maximum, stream_code), (np.minimum, start)], low[with_ops], high[with_ops])  # fmt: skip
    # ops of one stream run one after another: their union is their summed time
    one_stream = first_stream == last_stream
    busy[with_ops[one_stream]] = time[one_stream]
    several = np.flatnonzero(~one_stream)
    if len(several):
        busy[with_ops[several]] = _unions(start, end, low[with_ops[several]], high[with_ops[several]],
                                          first_start[several])  # fmt: skip
    return busy


def _unions(start: np.ndarray, end: np.ndarray, low: np.ndarray, high: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """Per segment ``low``..``high`` of the op intervals: the length of their union (ns). The segments'
    ops laid end to end, each segment's times shifted into a band of its own, merged once."""
    lengths = high - low
    segment = np.repeat(np.arange(len(low)), lengths)
    positions = (
        np.repeat(low, lengths) + np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    )
    relative_start = start[positions] - origin[segment]
    relative_end = end[positions] - origin[segment]
    band = int(relative_end.max(initial=0)) + 1
    if len(low) * band >= 2**62:  # bands would overflow int64: one segment at a time
        return np.array([_union_length(relative_start[segment == index], relative_end[segment == index])
                         for index in range(len(low))], dtype=np.int64)  # fmt: skip
    merged_start, merged_end = merge_intervals(segment * band + relative_start, segment * band + relative_end)
    return np.bincount(merged_start // band, weights=merged_end - merged_start, minlength=len(low)).astype(np.int64)


def _union_length(start: np.ndarray, end: np.ndarray) -> int:
    merged_start, merged_end = merge_intervals(start, end)
    return int((merged_end - merged_start).sum())


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
    return pd.DataFrame({"GPU-Side Spans": grouped["size"].to_numpy(np.int64),
                         "GPU-Side Time (ns)": grouped["sum"].to_numpy(np.int64)}, index=grouped.index)  # fmt: skip
