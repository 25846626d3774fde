"""FLOPs and bytes of optimizer steps: the foreach ops (``_foreach_add_``, ``_foreach_addcdiv_``,
``_foreach_lerp_``, ``_foreach_sqrt``, ``_foreach_norm`` ...) over TensorLists, and the fused steps
(``_fused_adam_``, ``_fused_adamw_``, ``_fused_sgd_``, ``_fused_adagrad_``). A single-tensor optimizer runs
plain add_/mul_/addcdiv_ calls, which the elementwise rules count.

A foreach op is its elementwise op over each tensor of the lists: the same FLOPs per element (see
op_count_pointwise), every list read once, the first list written (in place) or a new one as large (out
of place); ``_foreach_norm`` writes one value per tensor, ``_foreach_zero_`` only writes.

Fused steps, FLOPs per parameter element: Adam and AdamW 13 (the first moment 3: two products, a sum; the
second 4: a square, two products, a sum; the denominator 3: a square root, the bias correction's division,
epsilon's sum; the step 3: a division, the step size's product, a difference), plus 2 for a non-zero
weight decay, 1 for amsgrad (a maximum), 1 to unscale by grad_scale. SGD 2 (the learning rate's product,
a difference), plus 2 for weight decay, 3 for momentum (2 products, a sum; none on its first step, which
copies the gradient), 2 for Nesterov, 1 for grad_scale. Adagrad 7 (the square's sum 2, a square root and
epsilon 2, a division, a product, a difference 3), plus 2 for weight decay, 1 for grad_scale.
Bytes: the lists each step reads, once; the parameters and the states it updates, written once.

torch.profiler records a TensorList's shapes (torch >= 2.4) but not its dtypes: bytes need the caller's
``element_bytes`` (which then stands for every tensor of the lists: mixed-precision states are not seen).
"""

from __future__ import annotations

from collections.abc import Callable

from tracekit.analysis.hardware.op_count_args import Count, OpArgs, Rules, Unknown, numel
from tracekit.analysis.hardware.op_count_pointwise import ELEMENTWISE

ADAM_FLOPS, SGD_FLOPS, ADAGRAD_FLOPS = 13, 2, 7
WEIGHT_DECAY_FLOPS, AMSGRAD_FLOPS, UNSCALE_FLOPS = 2, 1, 1
MOMENTUM_FLOPS, NESTEROV_FLOPS = 3, 2


def foreach(base: str) -> Callable[[OpArgs], Count]:
    """_foreach_<base>(self: TensorList, other lists, scalars, tensors ...), in place or not (either way a
    list as large as self is written)."""
    per_element = 0 if base in ("zero", "copy") else ELEMENTWISE.get(base, (1, 1))[1]
    if base == "norm":
        per_element = 2

    def count(a: OpArgs) -> Count:
        shapes = a.tensors(0)
        lists = [index for index, arg in enumerate(a.args) if arg.kind == "tensors"]
        for index in lists[1:]:
            if len(a.tensors(index)) != len(shapes):
                raise Unknown("TensorLists of different lengths")
        elements = sum(numel(shape) for shape in shapes)
        traffic = a.traffic()
        self = a.get(0)
        if base == "zero":
            traffic.tensor(self)
            return Count(0.0, traffic)
        a.read_all(traffic, 1 if base == "copy" else 0)
        if base in ("norm", "max"):
            traffic.add(len(shapes), self.itemsize if self else None)
        else:
            traffic.tensor(self)
        return Count(float(per_element * elements), traffic)

    return count


def _number(a: OpArgs, index: int) -> float:
    value = a.value(index)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unknown("optimizer hyperparameters not recorded")
    return float(value)


def _elements(a: OpArgs) -> int:
    return sum(numel(shape) for shape in a.tensors(0))


def fused_adam(a: OpArgs) -> Count:
    """_fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
    weight_decay, eps, amsgrad, maximize, grad_scale, found_inf)."""
    elements = _elements(a)
    amsgrad = a.flag(11)
    per_element = (
        ADAM_FLOPS
        + WEIGHT_DECAY_FLOPS * (_number(a, 9) != 0)
        + AMSGRAD_FLOPS * amsgrad
        + UNSCALE_FLOPS * (a.optional_tensor(13) is not None)
    )
    traffic = a.traffic()
    a.read_all(traffic)
    for index in (0, 2, 3, 4) if amsgrad else (0, 2, 3):
        traffic.tensor(a.get(index))
    return Count(float(per_element * elements), traffic)


def fused_sgd(a: OpArgs) -> Count:
    """_fused_sgd_(params, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening, nesterov,
    maximize, is_first_step, grad_scale, found_inf)."""
    elements = _elements(a)
    momentum = _number(a, 4) != 0
    first = a.flag(9)
    per_element = (
        SGD_FLOPS
        + WEIGHT_DECAY_FLOPS * (_number(a, 3) != 0)
        + (MOMENTUM_FLOPS * (not first) + NESTEROV_FLOPS * a.flag(7)) * momentum
        + UNSCALE_FLOPS * (a.optional_tensor(10) is not None)
    )
    traffic = a.traffic()
    a.read_all(traffic, 0, 2)
    a.read_all(traffic, 5)  # a learning rate, grad_scale, found_inf given as tensors
    traffic.tensor(a.get(0))
    if momentum:
        if not first:
            traffic.tensor(a.get(2))
        traffic.tensor(a.get(2))
    return Count(float(per_element * elements), traffic)


def fused_adagrad(a: OpArgs) -> Count:
    """_fused_adagrad_(params, grads, state_sums, state_steps, lr, lr_decay, weight_decay, eps, maximize,
    grad_scale, found_inf)."""
    elements = _elements(a)
    per_element = (
        ADAGRAD_FLOPS + WEIGHT_DECAY_FLOPS * (_number(a, 6) != 0) + UNSCALE_FLOPS * (a.optional_tensor(9) is not None)
    )
    traffic = a.traffic()
    a.read_all(traffic)
    traffic.tensor(a.get(0))
    traffic.tensor(a.get(2))
    return Count(float(per_element * elements), traffic)


FOREACH_BASES = sorted(set(ELEMENTWISE) | {"zero", "copy", "norm", "max"})
RULES: Rules = {
    **{f"aten::_foreach_{base}": ("optimizer", foreach(base)) for base in FOREACH_BASES},
    **{f"aten::_foreach_{base}_": ("optimizer", foreach(base)) for base in FOREACH_BASES},
    **{f"aten::_fused_{name}": ("optimizer", fused_adam) for name in ("adam_", "adamw_", "adam", "adamw")},
    **{f"aten::_fused_{name}": ("optimizer", fused_sgd) for name in ("sgd_", "sgd")},
    **{f"aten::_fused_{name}": ("optimizer", fused_adagrad) for name in ("adagrad_", "adagrad")},
}
