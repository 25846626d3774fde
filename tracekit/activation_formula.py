"""Activation memory of a training step by formula: what autograd keeps for backward, in bytes, for the
models ``workloads`` builds (``run_config.SIZES``), without torch. ``workloads.activations`` measures
the same and keeps the two within 0.02 %; ``tracekit memory --by role`` sets the total beside a run's
measured "activations" role (``formula_note``: written into run.json by capture, derived from run.json's
config for runs captured before).

The formula follows this project's model (``workloads.models``: RMSNorm, RoPE, naive causal
attention, SwiGLU, untied head) op by op, counting what each op saves for its backward, in float32
(B batch, L context, d model width, H heads, F SwiGLU width, V vocabulary; bytes):

per layer
  residual stream   the layer's input x and the mid-layer sum x + attention(x)       2 B L d x 4
  RMSNorm, twice    x * rsqrt(mean(x^2)) and its product with the weight, each        4 B L d x 4
                    (two norms), and rsqrt itself                                      2 B L x 4
  q, k after RoPE   the two rotated tensors (the matmul's inputs)                     2 B L d x 4
  v                 batch 1: a view into the q/k/v projection's output, which stays   3 B L d x 4
                    alive whole; batch > 1: the copy batched matmul makes of it        B L d x 4
  softmax output    the attention weights (B H L L), saved once for both matmuls     B H L^2 x 4
  causal mask       the boolean L x L mask masked_fill keeps                           L^2 x 1
  attention output  the heads joined back (a copy) before the output projection        B L d x 4
  SwiGLU            gate(x), silu(gate(x)), up(x) and their product                   4 B L F x 4
final
  final RMSNorm     input, x * rsqrt, the product with the weight; rsqrt        3 B L d x 4 + B L x 4
  log-softmax       the cross-entropy's log-probabilities                            B L V x 4
  token ids         inputs and targets share one int64 tensor                   B (L + 1) x 8
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracekit.errors import TracekitError
from tracekit.run_config import model_config

FLOAT32 = 4


def activation_terms(model: str, context: int, batch: int) -> list[tuple[str, int, str]]:
    """(part, bytes for the whole step, how it is counted) per row of the module docstring's table."""
    spec = model_config(model, context)
    b, length, d, heads, ff = batch, context, spec.d_model, spec.num_heads, spec.d_ff
    layers, vocab, tokens = spec.num_layers, spec.vocab_size, b * length
    per_layer = [
        ("residual stream", 2 * tokens * d * FLOAT32, "2 B L d"),
        ("RMSNorm (two per layer)", (4 * tokens * d + 2 * tokens) * FLOAT32, "4 B L d + 2 B L"),
        ("q, k after RoPE", 2 * tokens * d * FLOAT32, "2 B L d"),
        ("v", (3 if b == 1 else 1) * tokens * d * FLOAT32, "3 B L d (batch 1: a view of q/k/v) or B L d"),
        ("softmax output", b * heads * length * length * FLOAT32, "B H L^2"),
        ("causal mask", length * length, "L^2 bytes"),
        ("attention output", tokens * d * FLOAT32, "B L d"),
        ("SwiGLU", 4 * tokens * ff * FLOAT32, "4 B L F"),
    ]
    terms = [(f"{name} x {layers} layers", size * layers, how) for name, size, how in per_layer]
    terms += [
        ("final RMSNorm", (3 * tokens * d + tokens) * FLOAT32, "3 B L d + B L"),
        ("log-softmax", tokens * vocab * FLOAT32, "B L V"),
        ("token ids", b * (length + 1) * 8, "B (L + 1) int64"),
    ]
    return terms


def formula_note(config: Mapping[str, Any]) -> str | None:
    """For a run's configuration (model, context, batch, mode, dtype: run.json's ``config``, whose context is
    ``context``, or a result row's, ``ctx``): the formula's activation total, to set beside the measured
    "activations" role of ``tracekit memory --by role``; None when it does not apply (not a training run
    of a known model in fp32)."""
    model, context, batch = config.get("model"), config.get("context", config.get("ctx")), config.get("batch")
    if config.get("mode", "train") != "train" or config.get("dtype", "fp32") != "fp32":
        return None
    if not isinstance(model, str) or not isinstance(context, int) or not isinstance(batch, int):
        return None
    try:
        total = sum(size for _, size, _ in activation_terms(model, context, batch))
    except (KeyError, ValueError, TracekitError):  # a model this project does not define
        return None
    return (
        f"the activation formula (`tracekit bench activations {model} --ctx {context} --batch {batch}`) gives "
        f"{total / 2**20:,.1f} MiB saved for backward for this run's model, to compare with the activations role"
    )
