"""FLOPs and bytes of softmax and the normalizations (layer, RMS, group, batch), forward and backward.

``torch.utils.flop_counter`` counts none of these; the FLOPs here are the arithmetic of the textbook
formula, per element (row and channel statistics like a square root per row are left out):

- softmax and log_softmax 5: the row maximum, the difference, the exponential, the row sum, the division
  (a logarithm's difference for log_softmax); their backward 4: a product, a row sum, a difference, a
  product (log_softmax: an exponential, a row sum, a product, a difference).
- layer, group and batch norm (training) 5: the mean (a sum), the variance (a difference, its square, a
  sum), the product by 1/std; the affine weight and bias add 1 each. Batch norm in eval 2 (a difference, a
  product by the running 1/std) plus the affine.
- RMS norm 3: the square, the row sum, the product by 1/rms; plus 1 for the weight.
- backward, input gradient 10 (layer, group, batch in training): x̂ again (2), two row sums (3), the
  gradient (5); 1 more with a weight (dy·w). RMS norm 7; batch norm in eval 1. Weight gradient 2 (dy·x̂
  and a sum), bias gradient 1 (a sum).

Bytes: inputs read once, outputs written once: the normalized output in the input's dtype, the saved
mean and 1/std (one per row, group or channel) in the accumulate type (float32 for 16-bit inputs), the
gradients in their tensors' dtypes; the ``output_mask`` says which gradients a backward computes.
"""

from __future__ import annotations

from collections.abc import Callable

from tracekit.analysis.hardware.op_count_args import (
    Arg,
    Count,
    OpArgs,
    Rules,
    Traffic,
    Unknown,
    accumulate_dtype,
    numel,
)

SOFTMAX_FLOPS, SOFTMAX_BACKWARD_FLOPS = 5, 4
NORM_FLOPS, RMS_NORM_FLOPS, BATCH_NORM_EVAL_FLOPS = 5, 3, 2
NORM_BACKWARD_FLOPS, RMS_NORM_BACKWARD_FLOPS, BATCH_NORM_EVAL_BACKWARD_FLOPS = 10, 7, 1
WEIGHT_GRAD_FLOPS, BIAS_GRAD_FLOPS = 2, 1


def softmax(a: OpArgs, private: bool) -> Count:
    """_softmax(self, dim, half_to_float) (``private``) or softmax(self, dim, dtype); log_softmax alike."""
    self = a.tensor(0)
    dtype = self.dtype
    if a.values_recorded:
        dtype = ("float" if a.flag(2) else self.dtype) if private else (a.dtype_code(2) or self.dtype)
    traffic = a.traffic()
    traffic.tensor(self)
    a.write(traffic, self.elements, dtype)
    return Count(float(SOFTMAX_FLOPS * self.elements), traffic)


def softmax_backward(a: OpArgs) -> Count:
    """_softmax_backward_data(grad_output, output, dim, input_dtype): the gradient in the input's dtype."""
    grad, output = a.tensor(0), a.tensor(1)
    traffic = a.traffic()
    traffic.tensor(grad)
    traffic.tensor(output)
    a.write(traffic, grad.elements, (a.dtype_code(3) if a.values_recorded else None) or grad.dtype)
    return Count(float(SOFTMAX_BACKWARD_FLOPS * grad.elements), traffic)


def _mask(a: OpArgs, index: int | None) -> tuple[bool, bool, bool]:
    """A backward's output_mask (input, weight, bias gradients); all three when the op has none."""
    if index is None:
        return True, True, True
    mask = a.value(index)
    if not isinstance(mask, list) or len(mask) not in (2, 3):
        raise Unknown("output_mask not recorded")
    return mask[0] is True, mask[1] is True, len(mask) == 3 and mask[2] is True


def _statistics(a: OpArgs, traffic: Traffic, x: Arg, groups: int | None) -> None:
    """The saved mean and 1/std (or the 1/rms alone when ``groups`` is negative): ``abs(groups)`` of each."""
    if groups is None:
        traffic.unknown("normalized shape not recorded")
        return
    for _ in range(1 if groups < 0 else 2):
        a.write(traffic, abs(groups), accumulate_dtype(x.dtype))


def _rows(a: OpArgs, x: Arg, shape_at: int, weight: Arg | None) -> int | None:
    """How many rows a layer or RMS norm normalizes: elements / prod(normalized_shape)."""
    normalized = a.value(shape_at) if a.values_recorded else None
    size = (
        numel(tuple(normalized)) if isinstance(normalized, list) and all(type(n) is int for n in normalized) else None
    )
    size = size or (weight.elements if weight is not None else None)
    return x.elements // size if size else None


def layer_norm(native: bool, rms: bool) -> Callable[[OpArgs], Count]:
    """(native_)layer_norm(input, normalized_shape, weight, bias, eps); rms_norm, _fused_rms_norm(input,
    normalized_shape, weight, eps). The native forms also write their saved statistics."""

    def count(a: OpArgs) -> Count:
        x, weight = a.tensor(0), a.optional_tensor(2)
        bias = None if rms else a.optional_tensor(3)
        traffic = a.traffic()
        for arg in (x, weight, bias):
            traffic.tensor(arg)
        a.write(traffic, x.elements, x.dtype)
        if native:
            rows = _rows(a, x, 1, weight)
            _statistics(a, traffic, x, None if rows is None else -rows if rms else rows)
        per_element = (RMS_NORM_FLOPS if rms else NORM_FLOPS) + (weight is not None) + (bias is not None)
        return Count(float(per_element * x.elements), traffic)

    return count


def _gradients(
    a: OpArgs, x: Arg, weight: Arg | None, channels: int | None, mask: tuple[bool, bool, bool], per_element: int
) -> Count:
    """A normalization's backward: every tensor input read, the gradients ``mask`` asks for written."""
    traffic = a.traffic()
    a.read_all(traffic)
    flops = 0
    if mask[0]:
        a.write(traffic, x.elements, x.dtype)
        flops += (per_element + (weight is not None)) * x.elements
    for wanted, per in ((mask[1], WEIGHT_GRAD_FLOPS), (mask[2], BIAS_GRAD_FLOPS)):
        if wanted:
            if channels is None:
                traffic.unknown("parameter sizes not recorded")
            else:
                a.write(traffic, channels, weight.dtype if weight is not None else x.dtype)
            flops += per * x.elements
    return Count(float(flops), traffic)


def layer_norm_backward(a: OpArgs) -> Count:
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)."""
    x, weight, bias = a.tensor(1), a.optional_tensor(5), a.optional_tensor(6)
    mask = _mask(a, 7)
    mask = (mask[0], mask[1] and weight is not None, mask[2] and bias is not None)
    size = weight.elements if weight is not None else bias.elements if bias is not None else None
    return _gradients(a, x, weight, size, mask, NORM_BACKWARD_FLOPS)


def rms_norm_backward(a: OpArgs) -> Count:
    """_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)."""
    x, weight = a.tensor(1), a.optional_tensor(4)
    mask = _mask(a, 5)
    mask = (mask[0], mask[1] and weight is not None, False)
    return _gradients(a, x, weight, weight.elements if weight is not None else None, mask, RMS_NORM_BACKWARD_FLOPS)


def group_norm(native: bool) -> Callable[[OpArgs], Count]:
    """native_group_norm(input, weight, bias, N, C, HxW, group, eps) or group_norm(input, num_groups,
    weight, bias, eps, cudnn_enabled)."""
    weight_at = 1 if native else 2

    def count(a: OpArgs) -> Count:
        x, weight, bias = a.tensor(0), a.optional_tensor(weight_at), a.optional_tensor(weight_at + 1)
        traffic = a.traffic()
        for arg in (x, weight, bias):
            traffic.tensor(arg)
        a.write(traffic, x.elements, x.dtype)
        if native:
            batch, groups = (a.value(3), a.value(6)) if a.values_recorded else (None, None)
            known = type(batch) is int and type(groups) is int
            _statistics(a, traffic, x, batch * groups if known else None)  # type: ignore[operator]
        per_element = NORM_FLOPS + (weight is not None) + (bias is not None)
        return Count(float(per_element * x.elements), traffic)

    return count


def group_norm_backward(a: OpArgs) -> Count:
    """native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask)."""
    x, weight = a.tensor(1), a.optional_tensor(4)
    channels = x.shape[1] if len(x.shape) >= 2 else None
    return _gradients(a, x, weight, channels, _mask(a, 9), NORM_BACKWARD_FLOPS)


# Batch norm forwards: (position of ``training`` or its fixed value, whether the op writes the saved
# statistics and updates the running ones). The composite batch_norm leaves those to its child.
BATCH_NORMS: dict[str, tuple[int | bool, bool]] = {
    "aten::batch_norm": (5, False),
    "aten::_batch_norm_impl_index": (5, False),
    "aten::native_batch_norm": (5, True),
    "aten::_native_batch_norm_legit": (5, True),
    "aten::_native_batch_norm_legit_no_training": (False, True),
    "aten::cudnn_batch_norm": (5, True),
    "aten::miopen_batch_norm": (5, True),
    "aten::_batch_norm_with_update": (True, True),
    "aten::_batch_norm_no_update": (False, True),
}


def batch_norm(training_at: int | bool, native: bool) -> Callable[[OpArgs], Count]:
    def count(a: OpArgs) -> Count:
        x, weight, bias = a.tensor(0), a.optional_tensor(1), a.optional_tensor(2)
        # _native_batch_norm_legit without running statistics: (input, weight, bias, training, ...)
        stats = (a.optional_tensor(3), a.optional_tensor(4)) if len(a) > 6 else (None, None)
        where = 3 if len(a) == 6 and training_at == 5 else training_at
        training = where if isinstance(where, bool) else a.flag(where)
        channels = x.shape[1] if len(x.shape) >= 2 else None
        traffic = a.traffic()
        for arg in (x, weight, bias, *stats):
            traffic.tensor(arg)
        a.write(traffic, x.elements, x.dtype)
        if native and training:
            _statistics(a, traffic, x, channels)
            for running in stats:  # updated in place
                traffic.tensor(running)
        per_element = (NORM_FLOPS if training else BATCH_NORM_EVAL_FLOPS) + (weight is not None) + (bias is not None)
        return Count(float(per_element * x.elements), traffic)

    return count


# Batch norm backwards: (input, grad_output, weight, training (position or fixed), output_mask or None).
BATCH_NORM_BACKWARDS: dict[str, tuple[int, int, int, int | bool, int | None]] = {
    "aten::native_batch_norm_backward": (1, 0, 2, 7, 9),
    "aten::batch_norm_backward": (1, 0, 2, 7, 9),
    "aten::cudnn_batch_norm_backward": (0, 1, 2, True, None),
    "aten::miopen_batch_norm_backward": (0, 1, 2, True, None),
    "aten::_batch_norm_impl_index_backward": (1, 2, 3, 8, 10),
}


def batch_norm_backward(layout: tuple[int, int, int, int | bool, int | None]) -> Callable[[OpArgs], Count]:
    x_at, grad_at, weight_at, training_at, mask_at = layout

    def count(a: OpArgs) -> Count:
        x, weight = a.tensor(x_at), a.optional_tensor(weight_at)
        a.tensor(grad_at)
        training = training_at if isinstance(training_at, bool) else a.flag(training_at)
        channels = x.shape[1] if len(x.shape) >= 2 else None
        per_element = NORM_BACKWARD_FLOPS if training else BATCH_NORM_EVAL_BACKWARD_FLOPS
        return _gradients(a, x, weight, channels, _mask(a, mask_at), per_element)

    return count


RULES: Rules = {
    "aten::softmax": ("softmax", lambda a: softmax(a, private=False)),
    "aten::log_softmax": ("softmax", lambda a: softmax(a, private=False)),
    "aten::_softmax": ("softmax", lambda a: softmax(a, private=True)),
    "aten::_log_softmax": ("softmax", lambda a: softmax(a, private=True)),
    "aten::_softmax_backward_data": ("softmax", softmax_backward),
    "aten::_log_softmax_backward_data": ("softmax", softmax_backward),
    **{
        name: ("normalization", formula)
        for name, formula in {
            "aten::layer_norm": layer_norm(native=False, rms=False),
            "aten::native_layer_norm": layer_norm(native=True, rms=False),
            "aten::rms_norm": layer_norm(native=False, rms=True),
            "aten::_fused_rms_norm": layer_norm(native=True, rms=True),
            "aten::native_layer_norm_backward": layer_norm_backward,
            "aten::_fused_rms_norm_backward": rms_norm_backward,
            "aten::group_norm": group_norm(native=False),
            "aten::native_group_norm": group_norm(native=True),
            "aten::native_group_norm_backward": group_norm_backward,
            **{name: batch_norm(*spec) for name, spec in BATCH_NORMS.items()},
            **{name: batch_norm_backward(spec) for name, spec in BATCH_NORM_BACKWARDS.items()},
        }.items()
    },
}
