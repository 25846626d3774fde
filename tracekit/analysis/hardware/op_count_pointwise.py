"""FLOPs and bytes of elementwise operators and reductions.

Elementwise (add, mul, gelu, where, their in-place ``_`` forms and the activations' backwards): one FLOP
per output element per operator, whatever the function (a gelu, an exp or an add alike); addcmul and
addcdiv (a product, its scaling, a sum) and lerp (a difference, a product, a sum) count 3. Bytes: each
tensor input read once at its own size (a broadcast input is not read again), the output written once at
the broadcast size in the promoted dtype (bool for comparisons, self's for an in-place op, the ``out``
tensor's when one is given). A Python number passed to an op is recorded as a 0-dim double tensor: one
element read, like any 0-dim tensor. Random fills (normal_, uniform_ ...) count one FLOP per element and write only.

Reductions (sum, mean, max, norm ...): one FLOP per input element (a norm 2: the square and the sum; a
variance 3: the difference, its square, the sum); the input read once, the output written once, its shape
from the recorded ``dim`` and ``keepdim``.
"""

from __future__ import annotations

from collections.abc import Callable

from tracekit.analysis.hardware.op_count_args import (
    DTYPE_BYTES,
    Count,
    OpArgs,
    Rules,
    Unknown,
    broadcast,
    category,
    numel,
)

# (number of leading inputs that are operands, FLOPs per output element). Tensors after the operands are
# ``out`` tensors (written, not read).
ELEMENTWISE: dict[str, tuple[int, int]] = {
    **dict.fromkeys(
        "abs neg relu relu6 sigmoid tanh exp exp2 expm1 log log1p log2 log10 sqrt rsqrt reciprocal sin cos tan "
        "asin acos atan sinh cosh asinh acosh atanh erf erfc erfinv sign sgn floor ceil round trunc frac gelu "
        "silu mish elu celu selu leaky_relu hardtanh hardswish hardsigmoid softplus logit nan_to_num square "
        "threshold bitwise_not".split(),
        (1, 1),
    ),
    **dict.fromkeys(
        "add sub rsub mul div divide multiply subtract true_divide floor_divide remainder fmod pow atan2 hypot copysign xlogy maximum "
        "minimum fmax fmin clamp_min clamp_max bitwise_and bitwise_or bitwise_xor bitwise_left_shift "
        "bitwise_right_shift threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward "
        "hardswish_backward hardsigmoid_backward hardtanh_backward leaky_relu_backward softplus_backward "
        "mish_backward native_dropout_backward".split(),
        (2, 1),
    ),
    **dict.fromkeys("clamp clip where masked_fill".split(), (3, 1)),
    **dict.fromkeys("addcmul addcdiv lerp".split(), (3, 3)),
    "elu_backward": (6, 1),
}
# Elementwise operators whose result is bool, whatever their inputs.
PREDICATES = set("eq ne lt le gt ge logical_and logical_or logical_xor".split())
PREDICATES_UNARY = set("logical_not isnan isinf isfinite isneginf isposinf signbit".split())
ELEMENTWISE.update(dict.fromkeys(PREDICATES, (2, 1)))
ELEMENTWISE.update(dict.fromkeys(PREDICATES_UNARY, (1, 1)))
RANDOM_FILLS = "normal_ uniform_ bernoulli_ random_ exponential_ geometric_ cauchy_ log_normal_".split()


def promote(dtypes: list[tuple[str | None, bool]], scalars: list[object]) -> str | None:
    """The result dtype of an elementwise op over tensors (dtype, has dimensions) and Python scalars, by
    torch's promotion: dimensioned tensors decide, 0-dim tensors and scalars only when of a higher kind
    (then the default float32 for a float). Half with BFloat16 gives float32. None when one is unknown."""
    deciding = [dtype for dtype, has_dims in dtypes if has_dims] or [dtype for dtype, _ in dtypes]
    known = [dtype for dtype in deciding if dtype is not None and category(dtype) is not None]
    if not known or len(known) < len(deciding):
        return None
    top = max(category(dtype) or 0 for dtype in known)
    best = {dtype for dtype in known if category(dtype) == top}
    others = [category(dtype) for dtype, has_dims in dtypes if not has_dims] + [
        2 if isinstance(value, float) else 1 if type(value) is int else 0 for value in scalars if value is not None
    ]
    higher = max((kind for kind in others if kind is not None), default=-1)
    if higher > top:
        return "float" if higher == 2 else "c10::complex<float>"
    if best == {"c10::Half", "c10::BFloat16"}:
        return "float"
    return max(best, key=lambda dtype: DTYPE_BYTES[dtype])


def elementwise(base: str, operands: int, flops: int) -> Callable[[OpArgs], Count]:
    inplace_name = base.endswith("_")

    def count(a: OpArgs) -> Count:
        inputs = [arg for arg in a.args[:operands] if arg.kind == "tensor"]
        if not inputs:
            raise Unknown("no tensor operand recorded")
        shape = inputs[0].shape if inplace_name else broadcast(*(arg.shape for arg in inputs))
        out_arg = next((arg for arg in a.args[operands:] if arg.kind == "tensor"), None)
        if inplace_name:
            dtype = inputs[0].dtype
        elif out_arg is not None:
            dtype = out_arg.dtype
        elif base.rstrip("_") in PREDICATES | PREDICATES_UNARY:
            dtype = "bool"
        else:
            scalars = [arg.value for arg in a.args[:operands] if arg.kind == "value"] if a.values_recorded else []
            dtype = promote([(arg.dtype, bool(arg.shape)) for arg in inputs], scalars)
        traffic = a.traffic()
        for arg in inputs:
            traffic.tensor(arg)
        a.write(traffic, numel(shape), dtype)
        return Count(float(flops * numel(shape)), traffic)

    return count


def random_fill(a: OpArgs) -> Count:
    """normal_(self, ...) and the like: every element generated and written; nothing read."""
    self = a.tensor(0)
    traffic = a.traffic()
    traffic.tensor(self)
    return Count(float(self.elements), traffic)


def _reduced(shape: tuple[int, ...], dims: object, keepdim: bool) -> tuple[int, ...]:
    """The shape left by reducing ``shape`` over ``dims`` (None or [] for all, an int, a list of ints)."""
    if dims is None or dims == []:
        return tuple(1 for _ in shape) if keepdim else ()
    dims = [dims] if type(dims) is int else dims
    if not isinstance(dims, list) or not all(type(d) is int and -len(shape) <= d < max(len(shape), 1) for d in dims):
        raise Unknown("reduction dims not understood")
    axes = {d % max(len(shape), 1) for d in dims}
    return tuple(1 if axis in axes else size for axis, size in enumerate(shape) if keepdim or axis not in axes)


# Reductions: (FLOPs per input element, position of dim, position of keepdim, position of dtype, result:
# "same" the input's dtype (or the dtype argument), "index" int64, "bool", "sum" int64 for integer inputs).
REDUCTIONS: dict[str, tuple[int, int | None, int | None, int | None, str]] = {
    "sum": (1, 1, 2, 3, "sum"),
    "nansum": (1, 1, 2, 3, "sum"),
    "mean": (1, 1, 2, 3, "same"),
    "prod": (1, 1, 2, 3, "sum"),
    "amax": (1, 1, 2, None, "same"),
    "amin": (1, 1, 2, None, "same"),
    "argmax": (1, 1, 2, None, "index"),
    "argmin": (1, 1, 2, None, "index"),
    "all": (1, 1, 2, None, "bool"),
    "any": (1, 1, 2, None, "bool"),
    "count_nonzero": (1, 1, None, None, "index"),
    "logsumexp": (3, 1, 2, None, "same"),
    "linalg_vector_norm": (2, 2, 3, 4, "same"),
    "norm": (2, 2, 3, None, "same"),
    "var": (3, 1, 3, None, "same"),
    "std": (3, 1, 3, None, "same"),
    "var_mean": (3, 1, 3, None, "pair"),
    "std_mean": (3, 1, 3, None, "pair"),
    "max": (1, 1, 2, None, "values"),
    "min": (1, 1, 2, None, "values"),
}


def reduction(base: str) -> Callable[[OpArgs], Count]:
    flops, dim_at, keepdim_at, dtype_at, result = REDUCTIONS[base]

    def count(a: OpArgs) -> Count:
        self = a.tensor(0)
        if base in ("max", "min") and a.optional_tensor(1) is not None:  # max(self, other): elementwise
            return elementwise(base, 2, 1)(a)
        traffic = a.traffic()
        traffic.tensor(self)
        try:
            dims, dtype_from = (a.value(dim_at) if dim_at is not None else None), dtype_at
            if base in ("sum", "nansum", "mean", "prod") and len(a) <= 3:
                dims, dtype_from = None, 1  # sum(self, dtype): over everything
            if base in ("var", "std", "var_mean", "std_mean") and isinstance(dims, bool):
                dims = None  # var(self, unbiased): over everything
            if base == "norm" and len(a) == 3:
                dims = None  # norm(self, p, dtype)
            keepdim = a.flag(keepdim_at) if keepdim_at is not None and isinstance(dims, (int, list)) else False
            out = numel(_reduced(self.shape, dims, keepdim))
            dtype = (a.dtype_code(dtype_from) if dtype_from is not None else None) or self.dtype
            if result == "index" or (result == "sum" and category(self.dtype) in (0, 1)):
                dtype = "long int"
            a.write(traffic, out, "bool" if result == "bool" else dtype)
            if result == "pair" or (result == "values" and dims is not None):
                a.write(traffic, out, self.dtype if result == "pair" else "long int")
        except Unknown as unknown:
            traffic.unknown(str(unknown).replace("scalar arguments", "reduction dims"))
        return Count(float(flops * self.elements), traffic)

    return count


def cumulative(a: OpArgs) -> Count:
    """cumsum(self, dim, dtype), cumprod: one FLOP per element, an output as large as the input."""
    self = a.tensor(0)
    traffic = a.traffic()
    traffic.tensor(self)
    a.write(traffic, self.elements, a.dtype_code(2) or ("long int" if category(self.dtype) in (0, 1) else self.dtype))
    return Count(float(self.elements), traffic)


RULES: Rules = {
    **{f"aten::{name}": ("elementwise", elementwise(name, *spec)) for name, spec in ELEMENTWISE.items()},
    **{f"aten::{name}_": ("elementwise", elementwise(name + "_", *spec)) for name, spec in ELEMENTWISE.items()},
    **{f"aten::{name}": ("elementwise", random_fill) for name in RANDOM_FILLS},
    **{f"aten::{name}": ("reduction", reduction(name)) for name in REDUCTIONS},
    **{f"aten::{name}": ("reduction", cumulative) for name in ("cumsum", "cumsum_", "cumprod", "cumprod_")},
}
