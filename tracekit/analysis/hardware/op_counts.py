"""FLOPs and bytes moved of one PyTorch operator, from what torch.profiler records with
``record_shapes=True`` (Input Dims, Input type, Concrete Inputs), or from the sizes of an
``emit_nvtx(record_shapes=True)`` range name (``shapes_from_nvtx_name``; no dtypes, no scalars there).

``count_op(name, dims, types, concrete, element_bytes)`` -> ``OpCount(flops, bytes, why_unknown, family)``.
FLOPs count a multiply-add as 2 (``torch.utils.flop_counter``'s convention, and its numbers wherever it
counts the op); bytes are the minimum an op moves: each input read once, each output written once, in each
tensor's dtype. What cannot be known is None, with the reason in ``why_unknown`` ("dtype not recorded",
"unknown op aten::foo" ...); odd input never raises. Results are cached per distinct signature, and
``count_ops(frame)`` counts a table of ops computing each distinct signature once.

Each op is counted on its own: a composite (linear, matmul, cross_entropy_loss, layer_norm) and the
children it calls (addmm, mm, nll_loss, native_layer_norm) each get their full count; which level to
add up is the caller's choice. The rules live by family in the op_count_* modules: matmul (products,
einsum, convolutions), attention, pointwise (elementwise, reductions), copies (copies, fills, factories,
views), norms (softmax and normalizations), lookups (embeddings and losses), optimizer (foreach and fused
steps); op_count_args reads the recorded arguments.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.hardware import (
    op_count_attention,
    op_count_copies,
    op_count_lookups,
    op_count_matmul,
    op_count_norms,
    op_count_optimizer,
    op_count_pointwise,
)
from tracekit.analysis.hardware.op_count_args import OpArgs, Rules, Unknown, freeze, shapes_from_nvtx_name
from tracekit.errors import UsageError

__all__ = ["FAMILIES", "RULES", "OpCount", "count_op", "count_ops", "shapes_from_nvtx_name"]

RULES: Rules = {
    **op_count_pointwise.RULES,
    **op_count_copies.RULES,
    **op_count_matmul.RULES,
    **op_count_attention.RULES,
    **op_count_norms.RULES,
    **op_count_lookups.RULES,
    **op_count_optimizer.RULES,
}
FAMILIES = tuple(
    "matmul convolution attention softmax normalization elementwise reduction embedding loss optimizer copy "
    "other".split()
)
_CACHE_SIZE = 1 << 16


@dataclass(frozen=True)
class OpCount:
    """What one operator call asked of the hardware.

    flops: floating-point operations (a multiply-add = 2); None when not known.
    bytes: bytes read + written, the minimum (each input read once, each output written once); None when
        not known.
    why_unknown: why a None is None ("no shapes recorded", "dtype not recorded", "unknown op aten::foo",
        "einsum equation not recorded" ...); None when both are known.
    family: "matmul", "convolution", "attention", "softmax", "normalization", "elementwise", "reduction",
        "embedding", "loss", "optimizer", "copy" or "other" (views, allocations, ops not known).
    """

    flops: float | None
    bytes: float | None
    why_unknown: str | None
    family: str


def count_op(
    name: str,
    dims: list | None,
    types: list[str] | None,
    concrete: list[str] | None = None,
    element_bytes: int | None = None,
) -> OpCount:
    """FLOPs and bytes of one call of operator ``name`` (as recorded: "aten::addmm").

    dims: Input Dims (a list per input: ints for a tensor, [] for a scalar or None, a list of lists for a
        TensorList). types: Input type ("float", "c10::BFloat16", "Scalar" ...), None when not recorded
        (NVTX): then bytes use ``element_bytes`` (bytes per element of every tensor), and are unknown
        without it. concrete: Concrete Inputs ("1", "False", "[2, 2]"; "" for tensors), None when not
        recorded. Never raises; results are cached per distinct input.
    """
    if not isinstance(name, str):
        return OpCount(None, None, "operator name is not text", "other")
    family = RULES[name][0] if name in RULES else "other"
    try:
        frozen = freeze(dims, types, concrete)
    except Unknown as unknown:
        return OpCount(None, None, str(unknown), family)
    size = element_bytes if type(element_bytes) is int and 0 < element_bytes <= 64 else None
    return _count(name, *frozen, size)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _count(name: str, dims: tuple | None, types: tuple | None, concrete: tuple | None, size: int | None) -> OpCount:
    """count_op on inputs made hashable by ``freeze`` (which they fully determine: the cache is exact)."""
    if name not in RULES:
        return OpCount(None, None, f"unknown op {name}", "other")
    family, formula = RULES[name]
    try:
        count = formula(OpArgs.parse(dims, types, concrete, size))
        flops, moved = _finite(count.flops), _finite(count.traffic.bytes)
    except Unknown as unknown:
        return OpCount(None, None, str(unknown), family)
    except (ArithmeticError, IndexError, KeyError, TypeError, ValueError) as error:
        # a formula meeting sizes no real call has (odd input must not raise): say so, count nothing
        return OpCount(None, None, f"inputs not understood ({type(error).__name__})", family)
    why = count.why if flops is None else None
    why = why or (count.traffic.missing if moved is None else None)
    return OpCount(flops, moved, why, family)


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise Unknown("sizes out of range")
    return value


COLUMNS = ("name", "dims", "types", "concrete")


def count_ops(frame: pd.DataFrame, element_bytes: int | None = None) -> pd.DataFrame:
    """count_op for every row of ``frame`` (columns name, dims, types, concrete: the recorded lists as
    JSON text, e.g. "[[32, 768], [768, 768]]"; types and concrete may be None or absent), computing each
    distinct row once. Returns, on frame's index: flops, bytes (float64, NaN when unknown), why_unknown
    (None when both are known) and family."""
    if "name" not in frame or "dims" not in frame:
        raise UsageError("count_ops needs the columns name and dims (and, when recorded, types and concrete)")
    columns = [frame[column] if column in frame else pd.Series(None, index=frame.index) for column in COLUMNS]
    signature = np.zeros(len(frame), dtype=np.int64)
    for column in columns:  # one code per distinct row, column by column (hashing, no sort of the rows)
        codes = _codes(column)
        signature = pd.factorize(signature * (int(codes.max(initial=-1)) + 2) + (codes + 1))[0]
    _, first, inverse = np.unique(signature, return_index=True, return_inverse=True)
    counts = []
    for row in first:  # one call per distinct signature, not per row
        name, dims, types, concrete = (column.iloc[row] for column in columns)
        counts.append(count_op(name, _loaded(dims), _loaded(types), _loaded(concrete), element_bytes))  # type: ignore[arg-type]
    inverse = inverse.reshape(-1)
    flops = np.array([np.nan if c.flops is None else c.flops for c in counts], dtype=np.float64)
    moved = np.array([np.nan if c.bytes is None else c.bytes for c in counts], dtype=np.float64)
    why = np.array([c.why_unknown for c in counts], dtype=object)
    family = np.array([c.family for c in counts], dtype=object)
    return pd.DataFrame(
        {
            "flops": flops[inverse],
            "bytes": moved[inverse],
            # object columns, as tracekit's text columns are: None (not NaN) where nothing is unknown
            "why_unknown": pd.Series(why[inverse], index=frame.index, dtype=object),
            "family": pd.Series(family[inverse], index=frame.index, dtype=object),
        },
        index=frame.index,
    )


def _codes(column: pd.Series) -> np.ndarray:
    """One integer per distinct value (-1 for a missing one); text for what is not hashable."""
    try:
        return pd.factorize(column)[0]
    except TypeError:
        return pd.factorize(column.map(lambda value: None if value is None else repr(value)))[0]


def _loaded(value: object) -> object:
    """A JSON cell as Python lists; None when missing or not JSON (the count then says so)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return "not JSON"
