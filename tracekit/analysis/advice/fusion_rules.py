"""Work a fused kernel would do in one pass: attention computed as separate kernels, and chains of
elementwise kernels.

Unfused elementwise chains: on one stream, ``CHAIN_LENGTH`` or more elementwise kernels back to back
(nothing else between them on that stream; those of an unfused attention left to it), each a pass over
memory of ``MIN_PASS_NS`` or more (shorter ones are launch costs: the launch-bound finding's), none of them
already fused (Inductor's and Triton's ``fused``/``triton_`` kernels: what a compiler could not fuse
further is not a torch.compile fix): each reads its inputs from memory and writes its output back, where
one fused kernel (``torch.compile``) makes one pass. Recoverable, an estimate: each chain's time less its longest kernel (the fused pass is at least as
long as the longest of the passes it replaces).

Unfused attention (``primitives.attention_patterns``): on one stream, a matmul (Q·Kᵀ), a softmax, then a
matmul (·V), with only elementwise, softmax, reduction or memory (copy) kernels between. Its time is the two matmuls and
what runs between them; a fused attention kernel (``scaled_dot_product_attention``'s
flash or memory-efficient backends) keeps the S x S scores on chip, so what it saves is at least the
kernels between the matmuls (the softmax and its elementwise passes over the scores, each a round trip
through memory): the finding's recoverable estimate. Where the trace records the matmuls' shapes and the
GPU's peaks are known, the roofline caps it too: a fused kernel still does the two matmuls' FLOPs, so it
can give back at most the attentions' time less the matmuls' roofline time (``efficiency``), said in
the bound.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.advice.finding import Finding, evidence, ms
from tracekit.analysis.primitives.attention_patterns import attention_spans
from tracekit.analysis.primitives.categories import CATEGORIES, name_categories
from tracekit.model.trace import Trace

EVIDENCE_ROWS = 5
CHAIN_LENGTH = 3  # elementwise kernels in a row: two could be a single op's own pair
MIN_PASS_NS = 10_000  # an elementwise kernel shorter than this is mostly its fixed cost, not a memory pass
FUSED = re.compile(r"fused|triton_", re.IGNORECASE)


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
        "traffic of the scores comes on top)" + _roofline_ceiling(trace, rows[first], rows[last], whole),
        "use torch.nn.functional.scaled_dot_product_attention (flash or memory-efficient backend) instead of "
        "matmul + softmax + matmul; in Hugging Face models attn_implementation='sdpa' or 'flash_attention_2'",
        proof,
    )


def elementwise_chains(trace: Trace, origin: int) -> Finding | None:
    """The unfused-elementwise-chains finding (see the module), or None."""
    ops = trace.gpu_ops
    codes = name_categories(trace)
    elementwise = codes == CATEGORIES.index("elementwise")
    if elementwise.sum() < CHAIN_LENGTH:
        return None
    kernel = np.flatnonzero((ops["kind"] == "kernel").to_numpy())
    device, stream = ops["device"].to_numpy()[kernel], ops["stream"].to_numpy()[kernel]
    order = np.lexsort((ops["start"].to_numpy()[kernel], stream, device))
    rows = kernel[order]
    labels = np.asarray(ops["name"].cat.categories, dtype=object)
    name_codes = ops["name"].cat.codes.to_numpy()
    fused = np.append(pd.Series(labels, dtype=object).str.contains(FUSED).to_numpy(bool), False)[name_codes]
    member = (
        elementwise[rows]
        & ~fused[rows]
        & (ops["duration"].to_numpy()[rows] >= MIN_PASS_NS)
        & ~np.isin(rows, attention_spans(trace, codes, CATEGORIES).members())
    )
    lane_change = np.concatenate(([True], (np.diff(device[order]) != 0) | (np.diff(stream[order]) != 0)))
    # a run starts where a member follows a non-member or a new lane
    starts = member & (lane_change | ~np.concatenate(([False], member[:-1])))
    run = np.cumsum(starts) - 1
    chosen = np.flatnonzero(member)
    run_of = run[chosen]
    lengths = np.bincount(run_of)
    duration = ops["duration"].to_numpy()[rows[chosen]].astype(np.int64)
    totals = np.bincount(run_of, weights=duration).astype(np.int64)
    longest = np.zeros(len(lengths), dtype=np.int64)
    np.maximum.at(longest, run_of, duration)
    chains = np.flatnonzero(lengths >= CHAIN_LENGTH)
    if not len(chains):
        return None
    saved = totals[chains] - longest[chains]
    first_row = rows[chosen[np.searchsorted(run_of, chains)]]
    top = np.argsort(-saved, kind="stable")[:EVIDENCE_ROWS]
    name = lambda row: _short(str(labels[name_codes[row]])) if name_codes[row] >= 0 else "?"
    proof = evidence(
        [f"{lengths[chains[at]]} elementwise kernels in a row from {name(first_row[at])}" for at in top],
        (ops["start"].to_numpy()[first_row[top]] - origin).tolist(),
        totals[chains[top]].tolist(),
        [f"cuda:{int(ops['device'].iloc[row])} stream {int(ops['stream'].iloc[row])}" for row in first_row[top]],
    )
    return Finding(
        "unfused elementwise chains",
        f"{len(chains):,} chains of {CHAIN_LENGTH}+ elementwise kernels back to back on a stream "
        f"({int(lengths[chains].sum()):,} kernels, {ms(totals[chains].sum())}): each pass reads and writes memory",
        int(saved.sum()),
        "estimate: each chain's time less its longest kernel (a fused pass is at least as long as that)",
        "fuse them: torch.compile the module (Inductor fuses pointwise ops into one kernel), or write the chain as "
        "one op (a fused activation, torch.addcmul, a custom Triton kernel)",
        proof,
    )


def _roofline_ceiling(trace: Trace, first: np.ndarray, last: np.ndarray, whole: np.ndarray) -> str:
    """ "; at most ..." where the FLOPs of both matmuls of some attentions are known (``first``/``last``: their
    gpu_ops rows; ``whole``: each attention's time, ns), else "". A fused kernel does those FLOPs at best at
    the GPU's peak for their precision; their bytes are left out (a fused kernel does not move the scores)."""
    from tracekit.analysis.efficiency.roofline import roofline_times, trace_peaks
    from tracekit.analysis.efficiency.work import gpu_work
    from tracekit.analysis.primitives.operators import operator_inputs

    if not len(operator_inputs(trace)):  # no shapes recorded: no FLOPs (gpu_work not paid for)
        return ""
    work = gpu_work(trace)
    pairs = np.concatenate([first, last])
    compute, _, _ = roofline_times(work.iloc[pairs].assign(bytes=np.nan), trace_peaks(trace))
    need = (compute[: len(first)] + compute[len(first) :]) * 1e9  # ns
    known = ~np.isnan(need)
    if not known.any():
        return ""
    ceiling = np.clip(whole[known] - need[known], 0, None).sum()
    return (
        f"; at most {ms(ceiling)} by the roofline for the {int(known.sum()):,} attentions whose matmul shapes are "
        f"recorded (their matmuls' FLOPs need {ms(need[known].sum())} at the GPU's peak; the attentions took "
        f"{ms(whole[known].sum())})"
    )


def _short(name: str) -> str:
    return name.split("(")[0][:60]
