"""Work a fused kernel would do in one pass: attention computed as separate kernels.

Unfused attention: on one stream, a matmul (Q·Kᵀ), a softmax, then a matmul (·V), with only elementwise,
softmax or reduction kernels between the two matmuls (scaling, masking, dropout, dtype casts). Its time is
the two matmuls and what runs between them; a fused attention kernel (``scaled_dot_product_attention``'s
flash or memory-efficient backends) keeps the S x S scores on chip, so what it saves is at least the
kernels between the matmuls (the softmax and its elementwise passes over the scores, each a round trip
through memory): the finding's recoverable estimate. Found with a few cumulative arrays over the kernels
of each stream, no loop per kernel.
"""

from __future__ import annotations

import numpy as np

from tracekit.analysis.advice.finding import Finding, evidence, ms
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.model.trace import Trace

BETWEEN = ("elementwise", "softmax", "reduction")  # what may run between the two matmuls of one attention
MAX_BETWEEN = 8  # kernels between them: more is not one attention
EVIDENCE_ROWS = 5


def unfused_attention(trace: Trace, origin: int) -> Finding | None:
    """The unfused-attention finding (see the module), or None."""
    ops = trace.gpu_ops
    kernel = np.flatnonzero((ops["kind"] == "kernel").to_numpy())
    if not len(kernel):
        return None
    category = op_categories(trace)[kernel]
    matmul, softmax = CATEGORIES.index("matmul"), CATEGORIES.index("softmax")
    if not (category == softmax).any() or not (category == matmul).any():
        return None
    between = np.isin(category, [CATEGORIES.index(name) for name in BETWEEN])
    device, stream = ops["device"].to_numpy()[kernel], ops["stream"].to_numpy()[kernel]
    order = np.lexsort((ops["start"].to_numpy()[kernel], stream, device))
    rows, category, between = kernel[order], category[order], between[order]
    lane = np.concatenate(([0], np.cumsum((np.diff(device[order]) != 0) | (np.diff(stream[order]) != 0))))
    position = np.arange(len(rows))
    is_matmul = category == matmul
    # per kernel: the last matmul before it and the next after it, on its own stream
    previous = np.maximum.accumulate(np.where(is_matmul, position, -1))
    following = np.minimum.accumulate(np.where(is_matmul, position, len(rows))[::-1])[::-1]
    candidates = np.flatnonzero(category == softmax)
    before = np.concatenate(([-1], previous[:-1]))[candidates]
    after = np.concatenate((following[1:], [len(rows)]))[candidates]
    valid = (before >= 0) & (after < len(rows))
    candidates, before, after = candidates[valid], before[valid], after[valid]
    valid = (lane[before] == lane[candidates]) & (lane[after] == lane[candidates]) & (after - before - 1 <= MAX_BETWEEN)
    # nothing but elementwise, softmax or reductions strictly between the two matmuls
    others = np.concatenate(([0], np.cumsum(~between & ~is_matmul)))
    valid &= others[after] - others[before + 1] == 0
    if not valid.any():
        return None
    pairs = np.unique(np.stack([before[valid], after[valid]], axis=1), axis=0).astype(np.int64)
    duration = ops["duration"].to_numpy()[rows]
    spent = np.concatenate(([0], np.cumsum(duration)))
    inner = spent[pairs[:, 1]] - spent[pairs[:, 0] + 1]  # the kernels between the matmuls
    whole = inner + duration[pairs[:, 0]] + duration[pairs[:, 1]]
    total_kernel = int(ops["duration"].to_numpy()[kernel].sum())
    starts = ops["start"].to_numpy()[rows[pairs[:, 0]]]
    top = np.argsort(-whole, kind="stable")[:EVIDENCE_ROWS]
    codes, labels = ops["name"].cat.codes.to_numpy(), np.asarray(ops["name"].cat.categories, dtype=object)
    name = lambda at: _short(str(labels[codes[rows[at]]])) if codes[rows[at]] >= 0 else "?"
    proof = evidence(
        [
            f"{name(first)} -> {after_first - first - 1} kernels -> {name(after_first)}"
            for first, after_first in pairs[top]
        ],
        (starts[top] - origin).tolist(),
        whole[top].tolist(),
        [f"cuda:{int(device[order][first])} stream {int(stream[order][first])}" for first, _ in pairs[top]],
    )
    return Finding(
        "unfused attention",
        f"{len(pairs):,} attentions ran as matmul -> softmax -> matmul kernels for {ms(whole.sum())} "
        f"({100 * whole.sum() / max(total_kernel, 1):.0f} % of kernel time), {ms(inner.sum())} of it the softmax "
        "and elementwise passes over the scores between the matmuls",
        int(inner.sum()),
        "estimate: the kernels between the two matmuls (a fused kernel keeps the scores on chip; the matmuls' own "
        "traffic of the scores comes on top)",
        "use torch.nn.functional.scaled_dot_product_attention (flash or memory-efficient backend) instead of "
        "matmul + softmax + matmul; in Hugging Face models attn_implementation='sdpa' or 'flash_attention_2'",
        proof,
    )


def _short(name: str) -> str:
    return name.split("(")[0][:60]
