"""FLOPs and bytes of the matrix products: mm, addmm, bmm, baddbmm, matmul, linear, einsum (when its
equation is recorded), addmv, mv, dot, _scaled_mm, and the convolutions (forward and backward).

FLOPs count a multiply-add as 2 and nothing else, as ``torch.utils.flop_counter`` does: an addmm's bias,
alpha and beta, a convolution's bias are not counted, so the numbers equal flop_counter's wherever it counts
the op. The one place they differ on purpose: for a grouped convolution's backward, flop_counter counts the
weight gradient ``groups`` times too many; here each gradient costs what the forward does.
Bytes are the minimum: each input read once, each output written once (in the output's dtype).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from tracekit.analysis.hardware.op_count_args import Arg, Count, OpArgs, Rules, Unknown, broadcast, numel


def _matrix(arg: Arg, ndim: int) -> tuple[int, ...]:
    if len(arg.shape) != ndim:
        raise Unknown(f"a {len(arg.shape)}-d operand where a {ndim}-d one is expected")
    return arg.shape


def _product(
    a: OpArgs, first: int, batched: bool, out_dtype: str | None, bias: int | None = None, sum_batch: bool = False
) -> Count:
    """(b)mm-shaped products: operands at ``first`` and ``first + 1``; ``bias`` an input added to the result;
    ``sum_batch``: the products are summed into one matrix (addbmm)."""
    left, right = a.tensor(first), a.tensor(first + 1)
    ndim = 3 if batched else 2
    *batch, m, k = _matrix(left, ndim)
    *batch2, k2, n = _matrix(right, ndim)
    if k != k2 or batch != batch2:
        raise Unknown("operand shapes do not multiply")
    out = (1 if sum_batch else math.prod(batch)) * m * n
    traffic = a.traffic()
    traffic.tensor(left)
    traffic.tensor(right)
    traffic.tensor(a.optional_tensor(bias) if bias is not None else None)
    a.write(traffic, out, out_dtype or left.dtype)
    return Count(2.0 * math.prod(batch) * m * k * n, traffic)


def mm(a: OpArgs) -> Count:
    """mm(self, mat2[, out_dtype])."""
    return _product(a, 0, False, a.dtype_code(2))


def bmm(a: OpArgs) -> Count:
    return _product(a, 0, True, a.dtype_code(2))


def addmm(a: OpArgs) -> Count:
    """addmm(self, mat1, mat2, beta, alpha): the bias is read, its addition not counted."""
    return _product(a, 1, False, None, bias=0)


def baddbmm(a: OpArgs) -> Count:
    return _product(a, 1, True, None, bias=0)


def addbmm(a: OpArgs) -> Count:
    """addbmm(self, batch1, batch2): the batch of products summed into one [m, n] matrix."""
    return _product(a, 1, True, None, bias=0, sum_batch=True)


def scaled_mm(a: OpArgs) -> Count:
    """_scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)."""
    count = _product(a, 0, False, a.dtype_code(6))
    for index in (2, 3, 4, 5):
        count.traffic.tensor(a.optional_tensor(index))
    return count


def matmul(a: OpArgs) -> Count:
    """torch.matmul's rules: 1-d operands, broadcast batch dimensions."""
    left, right = a.tensor(0), a.tensor(1)
    x, y = left.shape, right.shape
    if not x or not y:
        raise Unknown("matmul of a 0-d tensor")
    if len(x) == 1 and len(y) == 1:
        if x != y:
            raise Unknown("operand shapes do not multiply")
        batch, m, k, n = (), 1, x[0], 1
    else:
        m, k = (1, x[0]) if len(x) == 1 else x[-2:]
        k2, n = (y[0], 1) if len(y) == 1 else y[-2:]
        if k != k2:
            raise Unknown("operand shapes do not multiply")
        batch = broadcast(x[:-2], y[:-2])
    traffic = a.traffic()
    traffic.tensor(left)
    traffic.tensor(right)
    a.write(traffic, math.prod(batch) * m * n, left.dtype)
    return Count(2.0 * math.prod(batch) * m * k * n, traffic)


def linear(a: OpArgs) -> Count:
    """linear(input[..., k], weight[n, k] or [k], bias)."""
    x, w = a.tensor(0), a.tensor(1)
    if not x.shape or len(w.shape) not in (1, 2) or w.shape[-1] != x.shape[-1]:
        raise Unknown("operand shapes do not multiply")
    rows = numel(x.shape[:-1])
    n = w.shape[0] if len(w.shape) == 2 else 1
    traffic = a.traffic()
    a.read_all(traffic, 0, 3)
    a.write(traffic, rows * n, x.dtype)
    return Count(2.0 * rows * x.shape[-1] * n, traffic)


def addmv(a: OpArgs) -> Count:
    """addmv(self, mat, vec): the vector added is read, not counted."""
    mat, vec = a.tensor(1), a.tensor(2)
    return _matrix_vector(a, mat, vec, a.optional_tensor(0))


def mv(a: OpArgs) -> Count:
    return _matrix_vector(a, a.tensor(0), a.tensor(1), None)


def _matrix_vector(a: OpArgs, mat: Arg, vec: Arg, bias: Arg | None) -> Count:
    m, k = _matrix(mat, 2)
    if vec.shape != (k,):
        raise Unknown("operand shapes do not multiply")
    traffic = a.traffic()
    for arg in (mat, vec, bias):
        traffic.tensor(arg)
    a.write(traffic, m, mat.dtype)
    return Count(2.0 * m * k, traffic)


def dot(a: OpArgs) -> Count:
    x, y = a.tensor(0), a.tensor(1)
    if len(x.shape) != 1 or x.shape != y.shape:
        raise Unknown("operand shapes do not multiply")
    traffic = a.traffic()
    a.read_all(traffic, 0, 2)
    a.write(traffic, 1, x.dtype)
    return Count(2.0 * x.shape[0], traffic)


def einsum(a: OpArgs) -> Count:
    """einsum(equation, tensors, path). torch.profiler records neither the equation (a string) nor the
    dtypes of the TensorList, so only a caller that has the equation gets a count: a two-operand
    equation that is a batched matrix product (every index in both operands, or in one operand and the
    output)."""
    equation = a.value(0)
    if not isinstance(equation, str):
        raise Unknown("einsum equation not recorded")
    shapes = a.tensors(1)
    flops, out = einsum_matmul(equation, shapes)
    traffic = a.traffic()
    operands = a.get(1)
    traffic.tensor(operands)
    traffic.add(out, operands.itemsize if operands else None)  # the output has the operands' dtype
    return Count(flops, traffic)


def einsum_matmul(equation: str, shapes: tuple[tuple[int, ...], ...]) -> tuple[float, int]:
    """FLOPs and output elements of a two-operand einsum that is a batched matrix product, or Unknown."""
    spec = equation.replace(" ", "")
    inputs, arrow, output = spec.partition("->")
    operands = inputs.split(",")
    if len(operands) != 2 or len(shapes) != 2 or not re.fullmatch(r"[a-zA-Z,]*(->[a-zA-Z]*)?", spec):
        raise Unknown("einsum not reducible to a matmul")
    if not arrow:  # implicit output: the indices seen once, in alphabetical order
        output = "".join(sorted(c for c in set(inputs) - {","} if inputs.count(c) == 1))
    sizes: dict[str, int] = {}
    for letters, shape in zip(operands, shapes, strict=False):
        if len(letters) != len(shape) or len(set(letters)) != len(letters):
            raise Unknown("einsum not reducible to a matmul")
        for letter, size in zip(letters, shape, strict=True):
            if sizes.setdefault(letter, size) != size and 1 not in (size, sizes[letter]):
                raise Unknown("einsum operand sizes disagree")
            sizes[letter] = max(size, sizes[letter])
    left, right = set(operands[0]), set(operands[1])
    if set(output) - (left | right) or len(set(output)) != len(output):
        raise Unknown("einsum not reducible to a matmul")
    if (left ^ right) - set(output):  # an index summed within one operand: a reduction, then a product
        raise Unknown("einsum not reducible to a matmul")
    return 2.0 * math.prod(sizes.values()), math.prod(sizes[c] for c in output)


# Where each convolution op keeps its arguments: (bias, stride, padding, dilation, transposed, output_padding,
# groups, kernel_size). An int is a position; None means the default (no bias, stride 1, padding 0 ...);
# True/False for ``transposed`` is fixed by the op.
ConvLayout = tuple[int | None, int | None, int | None, int | None, int | bool, int | None, int | None, int | None]
CONV_LAYOUTS: dict[str, ConvLayout] = {
    "aten::convolution": (2, 3, 4, 5, 6, 7, 8, None),
    "aten::_convolution": (2, 3, 4, 5, 6, 7, 8, None),
    "aten::convolution_overrideable": (2, 3, 4, 5, 6, 7, 8, None),
    "aten::conv1d": (2, 3, 4, 5, False, None, 6, None),
    "aten::conv2d": (2, 3, 4, 5, False, None, 6, None),
    "aten::conv3d": (2, 3, 4, 5, False, None, 6, None),
    "aten::_convolution_mode": (2, 3, 4, 5, False, None, 6, None),
    "aten::cudnn_convolution_relu": (2, 3, 4, 5, False, None, 6, None),
    "aten::conv_transpose1d": (2, 3, 4, 7, True, 5, 6, None),
    "aten::conv_transpose2d": (2, 3, 4, 7, True, 5, 6, None),
    "aten::conv_transpose3d": (2, 3, 4, 7, True, 5, 6, None),
    "aten::cudnn_convolution": (None, 3, 2, 4, False, None, 5, None),
    "aten::cudnn_convolution_transpose": (None, 4, 2, 5, True, 3, 6, None),
    "aten::miopen_convolution": (2, 4, 3, 5, False, None, 6, None),
    "aten::mkldnn_convolution": (2, 4, 3, 5, False, None, 6, None),
    "aten::_slow_conv2d_forward": (3, 4, 5, None, False, None, None, 2),
    "aten::thnn_conv2d": (3, 4, 5, None, False, None, None, 2),
    "aten::slow_conv3d": (3, 4, 5, None, False, None, None, 2),
    "aten::slow_conv3d_forward": (3, 4, 5, None, False, None, None, 2),
    "aten::slow_conv_dilated2d": (3, 4, 5, 6, False, None, None, 2),
    "aten::slow_conv_dilated3d": (3, 4, 5, 6, False, None, None, 2),
    "aten::_conv_depthwise2d": (3, 4, 5, 6, False, None, None, 2),
    "aten::slow_conv_transpose2d": (3, 4, 5, 7, True, 6, None, 2),
    "aten::slow_conv_transpose3d": (3, 4, 5, 7, True, 6, None, 2),
}


def _conv_flops(batch: int, spatial: tuple[int, ...], weight: tuple[int, ...]) -> float:
    """2 x batch x positions x kernel volume x weight[0] x weight[1] (weight[1] is per group): the
    output's positions for a convolution, the input's for a transposed one (flop_counter's rule)."""
    return 2.0 * batch * numel(spatial) * numel(weight[2:]) * weight[0] * weight[1]


def _batched(x: Arg, weight: Arg) -> tuple[int, int, tuple[int, ...]]:
    """(batch, channels, spatial sizes) of a convolution's input, unbatched inputs included."""
    if len(weight.shape) < 3:
        raise Unknown("convolution weight is not a kernel")
    if len(x.shape) == len(weight.shape) - 1:
        return 1, x.shape[0], x.shape[1:]
    if len(x.shape) != len(weight.shape):
        raise Unknown("convolution input and weight ranks disagree")
    return x.shape[0], x.shape[1], x.shape[2:]


def convolution(layout: ConvLayout) -> Callable[[OpArgs], Count]:
    bias_at, stride_at, padding_at, dilation_at, transposed_at, output_padding_at, groups_at, _ = layout

    def count(a: OpArgs) -> Count:
        x, weight = a.tensor(0), a.tensor(1)
        batch, _, spatial = _batched(x, weight)
        rank = len(spatial)
        stride = a.int_list(stride_at, rank, 1, "stride")
        padding = a.int_list(padding_at, rank, 0, "padding")
        dilation = a.int_list(dilation_at, rank, 1, "dilation")
        transposed = transposed_at if isinstance(transposed_at, bool) else a.flag(transposed_at)
        extra = a.int_list(output_padding_at if transposed else None, rank, 0, "output_padding")
        groups = a.value(groups_at, 1) if groups_at is not None else 1
        if type(groups) is not int or groups < 1:
            raise Unknown("convolution groups not recorded")
        kernel = weight.shape[2:]
        if transposed:
            out = tuple(
                (i - 1) * s - 2 * p + d * (k - 1) + e + 1
                for i, k, s, p, d, e in zip(spatial, kernel, stride, padding, dilation, extra, strict=True)
            )
            channels = weight.shape[1] * groups
        else:
            out = tuple(
                (i + 2 * p - d * (k - 1) - 1) // s + 1 if s > 0 else 0
                for i, k, s, p, d in zip(spatial, kernel, stride, padding, dilation, strict=True)
            )
            channels = weight.shape[0]
        if min(out, default=1) < 1 or min(stride, default=1) < 1:
            raise Unknown("convolution sizes do not fit")
        traffic = a.traffic()
        traffic.tensor(x)
        traffic.tensor(weight)
        traffic.tensor(a.optional_tensor(bias_at) if bias_at is not None else None)
        a.write(traffic, batch * channels * numel(out), x.dtype)
        return Count(_conv_flops(batch, spatial if transposed else out, weight.shape), traffic)

    return count


# Convolution backwards: (position of ``transposed`` or its fixed value, of output_mask, of bias_sizes).
CONV_BACKWARDS: dict[str, tuple[int | bool, int, int | None]] = {
    "aten::convolution_backward": (7, 10, 3),
    "aten::_slow_conv2d_backward": (False, 6, None),
}


def convolution_backward(layout: tuple[int | bool, int, int | None]) -> Callable[[OpArgs], Count]:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask) and _slow_conv2d_backward(grad_output, input, weight, kernel_size,
    stride, padding, output_mask): the input's and the weight's gradients each cost the forward's FLOPs
    (the output's positions are grad_output's); the bias gradient is a sum, not counted."""
    transposed_at, mask_at, bias_at = layout

    def count(a: OpArgs) -> Count:
        grad, x, weight = a.tensor(0), a.tensor(1), a.tensor(2)
        batch, _, spatial = _batched(x, weight)
        _, channels, out_spatial = _batched(grad, weight)
        mask = a.value(mask_at)
        if not isinstance(mask, list) or len(mask) != 3:
            raise Unknown("output_mask not recorded")
        transposed = transposed_at if isinstance(transposed_at, bool) else a.flag(transposed_at)
        forward = _conv_flops(batch, spatial if transposed else out_spatial, weight.shape)
        traffic = a.traffic()
        traffic.tensor(grad)
        if mask[0] is True:
            traffic.tensor(weight)
            a.write(traffic, x.elements, x.dtype)
        if mask[1] is True:
            traffic.tensor(x)
            a.write(traffic, weight.elements, weight.dtype)
        if mask[2] is True:
            bias = a.value(bias_at) if bias_at is not None else [channels]
            if not isinstance(bias, list) or not all(type(size) is int and size >= 0 for size in bias):
                traffic.unknown("bias_sizes not recorded")
            else:
                a.write(traffic, math.prod(bias), grad.dtype)
        return Count(forward * ((mask[0] is True) + (mask[1] is True)), traffic)

    return count


RULES: Rules = {
    **{
        name: ("matmul", formula)
        for name, formula in {
            "aten::mm": mm,
            "aten::bmm": bmm,
            "aten::addmm": addmm,
            "aten::baddbmm": baddbmm,
            "aten::addbmm": addbmm,
            "aten::_scaled_mm": scaled_mm,
            "aten::matmul": matmul,
            "aten::linear": linear,
            "aten::addmv": addmv,
            "aten::mv": mv,
            "aten::dot": dot,
            "aten::vdot": dot,
            "aten::einsum": einsum,
        }.items()
    },
    **{name: ("convolution", convolution_backward(layout)) for name, layout in CONV_BACKWARDS.items()},
    **{name: ("convolution", convolution(layout)) for name, layout in CONV_LAYOUTS.items()},
}
