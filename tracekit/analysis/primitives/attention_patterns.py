"""Attention computed as separate kernels, found in the kernel order of each stream: a matmul (Q·Kᵀ), a
softmax, then a matmul (·V), with only elementwise, softmax or reduction kernels, or copy kernels, between
the two matmuls (scaling, masking, dropout, dtype casts, the copy of a ``.contiguous()``; not other memory
kernels: a fill starts other work), eight at most. Found from the kernels' name categories with a few
cumulative arrays over each stream's kernels, no loop per kernel.

``op_categories`` counts these kernels as attention (what they compute), and ``advise``'s unfused-attention
finding is made of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.model.trace import Trace

BETWEEN = ("elementwise", "softmax", "reduction")
COPY = re.compile(r"copy", re.IGNORECASE)  # a copy kernel (direct_copy_kernel_cuda: .contiguous(), a cast)
MAX_BETWEEN = 8


@dataclass(frozen=True)
class AttentionSpans:
    """Each unfused attention as the rows (of ``gpu_ops``) of its first and last matmul and every kernel
    between them on its stream: ``first``/``last`` index ``rows`` (the stream-ordered kernels)."""

    rows: np.ndarray  # gpu_ops rows of the kernels, by device, stream, start
    first: np.ndarray  # per attention: position in ``rows`` of its first matmul
    last: np.ndarray  # per attention: position in ``rows`` of its second matmul

    def members(self) -> np.ndarray:
        """The gpu_ops rows of every kernel of every attention (matmuls included), once each."""
        if not len(self.first):
            return np.zeros(0, dtype=np.int64)
        count = self.last - self.first + 1
        offsets = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
        return np.unique(self.rows[np.repeat(self.first, count) + offsets])


def attention_spans(trace: Trace, name_codes: np.ndarray, categories: list[str]) -> AttentionSpans:
    """The unfused attentions of ``trace``, from each GPU op's name category (``name_codes``: indices into
    ``categories``)."""
    none = AttentionSpans(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    matmul, softmax = categories.index("matmul"), categories.index("softmax")
    if not (name_codes == softmax).any() or not (name_codes == matmul).any():
        return none  # decided from the names alone: no more columns read
    ops = trace.columns("gpu_ops", ("kind", "device", "stream", "start"))
    kernel = np.flatnonzero((ops["kind"] == "kernel").to_numpy())
    category = name_codes[kernel]
    device, stream = ops["device"].to_numpy()[kernel], ops["stream"].to_numpy()[kernel]
    order = np.lexsort((ops["start"].to_numpy()[kernel], stream, device))
    rows, category = kernel[order], category[order]
    between = np.isin(category, [categories.index(name) for name in BETWEEN]) | _copies(trace, kernel[order])
    lane = np.concatenate(([0], np.cumsum((np.diff(device[order]) != 0) | (np.diff(stream[order]) != 0))))
    position = np.arange(len(rows))
    is_matmul = category == matmul
    # per kernel: the last matmul before it and the next after it (then checked to be on its own stream)
    previous = np.maximum.accumulate(np.where(is_matmul, position, -1))
    following = np.minimum.accumulate(np.where(is_matmul, position, len(rows))[::-1])[::-1]
    softmaxes = np.flatnonzero(category == softmax)
    before = np.concatenate(([-1], previous[:-1]))[softmaxes]
    after = np.concatenate((following[1:], [len(rows)]))[softmaxes]
    valid = (before >= 0) & (after < len(rows))
    softmaxes, before, after = softmaxes[valid], before[valid], after[valid]
    valid = (lane[before] == lane[softmaxes]) & (lane[after] == lane[softmaxes]) & (after - before - 1 <= MAX_BETWEEN)
    others = np.concatenate(([0], np.cumsum(~between & ~is_matmul)))
    valid &= others[after] - others[before + 1] == 0  # nothing else strictly between the two matmuls
    if not valid.any():
        return none
    pairs = np.unique(np.stack([before[valid], after[valid]], axis=1), axis=0).astype(np.int64)
    return AttentionSpans(rows.astype(np.int64), pairs[:, 0], pairs[:, 1])


def _copies(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Whether each GPU op at ``rows`` is a copy kernel, by its name (each distinct name read once)."""
    names = trace.gpu_ops["name"]
    labels = pd.Series(np.asarray(names.cat.categories, dtype=object), dtype=object)
    copy = np.append(labels.str.contains(COPY).to_numpy(bool), False)  # code -1 (no name): not a copy
    return copy[names.cat.codes.to_numpy()[rows]]
