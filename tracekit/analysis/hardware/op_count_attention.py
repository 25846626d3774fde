"""FLOPs and bytes of scaled-dot-product attention, forward and backward, in every form torch records it:
the composite ``scaled_dot_product_attention`` and its math path, the ``_scaled_dot_product_*`` ops (flash,
efficient, cuDNN, the CPU flash kernel, their ``_backward``), and the kernels' own entry points
``_flash_attention_forward/backward`` and ``_efficient_attention_forward/backward``.

The FLOPs are the two matrix products (``torch.utils.flop_counter.sdpa_flop_count``): 2·B·Hq·Sq·Sk·(D + Dv)
forward, and five products backward, 2·B·Hq·Sq·Sk·(3·D + 2·Dv) (2.5 times the forward when D = Dv:
the scores are recomputed). With grouped-query attention the key and value heads are shared: the products
run over the query's heads. A causal mask halves them (is_causal, or the efficient kernels'
custom_mask_type 1 or 2), as FlashAttention's own benchmarks count, where flop_counter does not; the
softmax and dropout are not counted. A sliding window, or variable-length batches (cumulative sequence
lengths: the lengths themselves are not recorded) leave the FLOPs unknown.

Bytes: every tensor input read once; the output (and the log-sum-exp, one float per query row, for the
kernels that return it) written once forward; one gradient per query, key and value written backward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tracekit.analysis.hardware.op_count_args import Count, OpArgs, Rules, Unknown, numel


@dataclass(frozen=True)
class AttentionLayout:
    """Where an attention op keeps its arguments. ``backward``: grad_out comes first, the query second;
    ``heads_first``: tensors are [batch, heads, seq, dim] (the ``_scaled_dot_product_*`` ops), else
    [batch, seq, heads, dim] (the kernels' entry points; [tokens, heads, dim] for variable lengths).
    ``causal``: position of is_causal; ``mask_type``: position of the efficient kernels'
    custom_mask_type; ``window``: positions of the window sizes; ``lse``: the forward writes a log-sum-exp."""

    backward: bool
    heads_first: bool
    causal: int | None = None
    mask_type: int | None = None
    window: tuple[int, ...] = ()
    lse: bool = False


LAYOUTS: dict[str, AttentionLayout] = {
    "aten::scaled_dot_product_attention": AttentionLayout(False, True, causal=5),
    "aten::_scaled_dot_product_attention_math": AttentionLayout(False, True, causal=5),
    "aten::_scaled_dot_product_flash_attention": AttentionLayout(False, True, causal=4, lse=True),
    "aten::_scaled_dot_product_flash_attention_for_cpu": AttentionLayout(False, True, causal=4, lse=True),
    "aten::_scaled_dot_product_efficient_attention": AttentionLayout(False, True, causal=6, lse=True),
    "aten::_scaled_dot_product_cudnn_attention": AttentionLayout(False, True, causal=6, lse=True),
    "aten::_scaled_dot_product_fused_attention_overrideable": AttentionLayout(False, True, causal=5, lse=True),
    "aten::_flash_attention_forward": AttentionLayout(False, False, causal=8, window=(11, 12), lse=True),
    "aten::_efficient_attention_forward": AttentionLayout(False, False, mask_type=9, window=(13,), lse=True),
    "aten::_scaled_dot_product_flash_attention_backward": AttentionLayout(True, True, causal=11),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": AttentionLayout(True, True, causal=7),
    "aten::_scaled_dot_product_efficient_attention_backward": AttentionLayout(True, True, causal=11),
    "aten::_scaled_dot_product_cudnn_attention_backward": AttentionLayout(True, True, causal=14),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": AttentionLayout(True, True, causal=13),
    "aten::_flash_attention_backward": AttentionLayout(True, False, causal=11, window=(15, 16)),
    "aten::_efficient_attention_backward": AttentionLayout(True, False, mask_type=14, window=(18,)),
}


@dataclass(frozen=True)
class _Sizes:
    batch_heads: int  # batch x query heads (the products run over the query's heads)
    query_rows: int
    key_rows: int
    dim: int
    value_dim: int


def _sizes(layout: AttentionLayout, query: tuple[int, ...], key: tuple[int, ...], value: tuple[int, ...]) -> _Sizes:
    if layout.heads_first:  # [..., heads, seq, dim]; sdpa also takes [batch, seq, dim]
        if len(query) < 3 or len(key) != len(query) or len(value) != len(query):
            raise Unknown("attention operands are not [batch, heads, seq, dim]")
        batch_heads, query_rows, dim = numel(query[:-2]), query[-2], query[-1]
        key_heads, key_rows, value_dim = numel(key[:-2]), key[-2], value[-1]
        value_rows = value[-2]
    else:  # [batch, seq, heads, dim]
        if len(query) != 4 or len(key) != 4 or len(value) != 4:
            raise Unknown("attention operands are not [batch, seq, heads, dim]")
        batch_heads, query_rows, dim = query[0] * query[2], query[1], query[3]
        key_heads, key_rows, value_dim = key[0] * key[2], key[1], value[3]
        value_rows = value[1]
    if key[-1] != dim or value_rows != key_rows or key_heads == 0 or batch_heads % key_heads:
        raise Unknown("attention operand shapes disagree")
    return _Sizes(batch_heads, query_rows, key_rows, dim, value_dim)


def _causal(a: OpArgs, layout: AttentionLayout) -> bool:
    if layout.mask_type is not None:
        mask_type = a.value(layout.mask_type)
        if type(mask_type) is not int:
            raise Unknown("custom_mask_type not recorded")
        return mask_type in (1, 2)
    if layout.causal is None:
        return False
    causal = a.value(layout.causal)
    if not isinstance(causal, bool):
        raise Unknown("is_causal not recorded")
    return causal


def attention(layout: AttentionLayout) -> Callable[[OpArgs], Count]:
    def count(a: OpArgs) -> Count:
        first = 1 if layout.backward else 0
        query, key, value = a.tensor(first), a.tensor(first + 1), a.tensor(first + 2)
        traffic = a.traffic()
        a.read_all(traffic)
        if layout.backward:
            for operand in (query, key, value):
                a.write(traffic, operand.elements, operand.dtype)
        elif query.shape and query.shape[-1] and value.shape:
            rows = query.elements // query.shape[-1]  # batch x heads x query rows
            a.write(traffic, rows * value.shape[-1], query.dtype)
            if layout.lse:
                a.write(traffic, rows, "float")
        try:
            if not layout.heads_first and len(query.shape) == 3:  # [total tokens, heads, dim]
                raise Unknown("variable-length attention: sequence lengths not recorded")
            for index in layout.window:
                window = a.value(index)
                if type(window) is int and window >= 0:
                    raise Unknown("sliding-window attention")
            sizes = _sizes(layout, query.shape, key.shape, value.shape)
            half = 0.5 if _causal(a, layout) else 1.0
        except Unknown as unknown:
            return Count(None, traffic, str(unknown))
        products = sizes.batch_heads * sizes.query_rows * sizes.key_rows
        per_row = 3 * sizes.dim + 2 * sizes.value_dim if layout.backward else sizes.dim + sizes.value_dim
        return Count(2.0 * products * per_row * half, traffic)

    return count


RULES: Rules = {name: ("attention", attention(layout)) for name, layout in LAYOUTS.items()}
