"""Work a fused kernel would do in one pass: attention computed as separate kernels.

Unfused attention (``primitives.attention_patterns``): on one stream, a matmul (Q·Kᵀ), a softmax, then a
matmul (·V), with only elementwise, softmax, reduction or memory (copy) kernels between. Its time is the two matmuls and
what runs between them; a fused attention kernel (``scaled_dot_product_attention``'s
flash or memory-efficient backends) keeps the S x S scores on chip, so what it saves is at least the
kernels between the matmuls (the softmax and its elementwise passes over the scores, each a round trip
through memory): the finding's recoverable estimate.
"""

from __future__ import annotations

import numpy as np

from tracekit.analysis.advice.finding import Finding, evidence, ms
from tracekit.analysis.primitives.attention_patterns import attention_spans
from tracekit.analysis.primitives.categories import CATEGORIES, name_categories
from tracekit.model.trace import Trace

EVIDENCE_ROWS = 5


def unfused_attention(trace: Trace, origin: int) -> Finding | None:
    """The unfused-attention finding (see the module), or None."""
    ops = trace.gpu_ops
    spans = attention_spans(trace, name_categories(trace), CATEGORIES)
    if not len(spans.first):
        return None
    rows, first, last = spans.rows, spans.first, spans.last
    duration = ops["duration"].to_numpy()[rows]
    spent = np.concatenate(([0], np.cumsum(duration)))
    inner = spent[last] - spent[first + 1]  # the kernels between the matmuls
    whole = inner + duration[first] + duration[last]
    total_kernel = int(ops["duration"].to_numpy()[(ops["kind"] == "kernel").to_numpy()].sum())
    starts = ops["start"].to_numpy()[rows[first]]
    top = np.argsort(-whole, kind="stable")[:EVIDENCE_ROWS]
    codes, labels = ops["name"].cat.codes.to_numpy(), np.asarray(ops["name"].cat.categories, dtype=object)
    name = lambda at: _short(str(labels[codes[rows[at]]])) if codes[rows[at]] >= 0 else "?"
    devices, streams = ops["device"].to_numpy(), ops["stream"].to_numpy()
    proof = evidence(
        [f"{name(a)} -> {b - a - 1} kernels -> {name(b)}" for a, b in zip(first[top], last[top])],
        (starts[top] - origin).tolist(),
        whole[top].tolist(),
        [f"cuda:{int(devices[rows[a]])} stream {int(streams[rows[a]])}" for a in first[top]],
    )
    return Finding(
        "unfused attention",
        f"{len(first):,} attentions ran as matmul -> softmax -> matmul kernels for {ms(whole.sum())} "
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
