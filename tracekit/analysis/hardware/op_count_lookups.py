"""FLOPs and bytes of the lookups: embeddings (forward, dense backward, bags) and the losses (negative log
likelihood, cross-entropy, mean squared error), forward and backward.

An embedding does no arithmetic: it reads the indices and the rows they name, and writes them. Its dense
backward adds each gradient row into the weight's gradient (one FLOP per gradient element) and writes the
whole gradient (``num_weights`` rows). A bag sums (or averages, or takes the maximum of) its rows: one FLOP
per row element gathered, one more with per-sample weights.

nll_loss gathers one log-probability per target (2 FLOPs each: the class weight's product, the sum) and
writes one value per target (reduction "none") or one (mean, sum; plus the total weight). Its backward
writes a gradient as large as the input, zero but for the targets' entries. cross_entropy_loss (the
composite of log_softmax and nll_loss) counts both. mse_loss: a difference, a square, a sum per element
(2 without reduction); its backward 3 (a difference, 2/N, the incoming gradient).
"""

from __future__ import annotations

from collections.abc import Callable

from tracekit.analysis.hardware.op_count_args import Count, OpArgs, Rules, Traffic, Unknown, category
from tracekit.analysis.hardware.op_count_norms import SOFTMAX_FLOPS

NLL_FLOPS_PER_TARGET = 2
MSE_FLOPS, MSE_FLOPS_NO_REDUCTION, MSE_BACKWARD_FLOPS = 3, 2, 3
REDUCTION_NONE = 0


def embedding(a: OpArgs) -> Count:
    """embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)."""
    weight, indices = a.tensor(0), a.tensor(1)
    if len(weight.shape) != 2:
        raise Unknown("embedding weight is not a matrix")
    gathered = indices.elements * weight.shape[1]
    traffic = a.traffic()
    traffic.tensor(indices)
    traffic.tensor(weight, gathered)
    a.write(traffic, gathered, weight.dtype)
    return Count(0.0, traffic)


def embedding_backward(a: OpArgs) -> Count:
    """embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq) and the
    composite embedding_backward (sparse: the gradient is the rows themselves, written once)."""
    grad, indices = a.tensor(0), a.tensor(1)
    if not grad.shape:
        raise Unknown("embedding gradient has no rows")
    traffic = a.traffic()
    traffic.tensor(grad)
    traffic.tensor(indices)
    if len(a) == 6 and a.flag(5):
        traffic.tensor(grad)
        traffic.tensor(indices)
        return Count(0.0, traffic)
    rows = a.value(2) if a.values_recorded else None
    if type(rows) is not int or rows < 0:
        traffic.unknown("num_weights not recorded")
    else:
        a.write(traffic, rows * grad.shape[-1], grad.dtype)
    return Count(float(grad.elements), traffic)


def embedding_bag(private: bool) -> Callable[[OpArgs], Count]:
    """(_)embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
    include_last_offset[, padding_idx]); the private op also writes offset2bag and bag_size (int64) and,
    for the maximum mode, the maximum's indices."""

    def count(a: OpArgs) -> Count:
        weight, indices, offsets = a.tensor(0), a.tensor(1), a.tensor(2)
        if len(weight.shape) != 2:
            raise Unknown("embedding weight is not a matrix")
        width = weight.shape[1]
        gathered = indices.elements * width
        per_sample = a.optional_tensor(6)
        traffic = a.traffic()
        for arg in (indices, offsets, per_sample):
            traffic.tensor(arg)
        traffic.tensor(weight, gathered)
        if len(indices.shape) == 2:  # [bags, per bag]: no offsets
            bags = indices.shape[0]
        else:
            bags = offsets.elements - (1 if a.flag(7) else 0)
        a.write(traffic, max(bags, 0) * width, weight.dtype)
        if private:
            a.write(traffic, indices.elements + max(bags, 0), "long int")
            if a.value(4) == 2:
                a.write(traffic, max(bags, 0) * width, "long int")
        return Count(float(gathered * (1 + (per_sample is not None))), traffic)

    return count


def nll_loss(forward: bool) -> Callable[[OpArgs], Count]:
    """nll_loss(self, target, weight, reduction, ignore_index), its _nd form, and nll_loss(2d)_forward
    (``forward``: which also returns the total weight)."""

    def count(a: OpArgs) -> Count:
        self, target, weight = a.tensor(0), a.tensor(1), a.optional_tensor(2)
        traffic = a.traffic()
        traffic.tensor(target)
        traffic.tensor(self, target.elements)
        traffic.tensor(weight, target.elements)
        _loss_output(a, traffic, self.dtype, target.elements, 3, total_weight=forward)
        return Count(float(NLL_FLOPS_PER_TARGET * target.elements), traffic)

    return count


def _loss_output(
    a: OpArgs, traffic: Traffic, dtype: str | None, elements: int, reduction_at: int, total_weight: bool = False
) -> None:
    """A loss's result: one value per element without reduction, else one; nll_loss also returns the
    total weight (one value)."""
    reduction = a.value(reduction_at) if a.values_recorded else None
    if type(reduction) is not int:
        traffic.unknown("reduction not recorded")
    else:
        a.write(traffic, (elements if reduction == REDUCTION_NONE else 1) + total_weight, dtype)


def nll_loss_backward(a: OpArgs) -> Count:
    """nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)."""
    grad, self, target, weight = a.tensor(0), a.tensor(1), a.tensor(2), a.optional_tensor(3)
    traffic = a.traffic()
    for arg in (grad, target, a.optional_tensor(6)):
        traffic.tensor(arg)
    traffic.tensor(weight, target.elements)
    a.write(traffic, self.elements, self.dtype)
    return Count(float(NLL_FLOPS_PER_TARGET * target.elements), traffic)


def cross_entropy(a: OpArgs) -> Count:
    """cross_entropy_loss(self, target, weight, reduction, ignore_index, label_smoothing): log_softmax over
    the classes, then nll_loss (or, for class probabilities as targets, a product and a sum per element)."""
    self, target = a.tensor(0), a.tensor(1)
    probabilities = target.shape == self.shape and category(target.dtype) == 2
    per_target = target.elements if not probabilities else self.elements
    traffic = a.traffic()
    traffic.tensor(self)
    traffic.tensor(target)
    traffic.tensor(a.optional_tensor(2))
    _loss_output(a, traffic, self.dtype, self.elements // self.shape[1] if len(self.shape) > 1 else 1, 3)
    return Count(float(SOFTMAX_FLOPS * self.elements + NLL_FLOPS_PER_TARGET * per_target), traffic)


def mse_loss(a: OpArgs) -> Count:
    """mse_loss(self, target, reduction)."""
    self, target = a.tensor(0), a.tensor(1)
    traffic = a.traffic()
    traffic.tensor(self)
    traffic.tensor(target)
    _loss_output(a, traffic, self.dtype, self.elements, 2)
    if not a.values_recorded:
        return Count(None, traffic, "reduction not recorded")
    reduced = a.value(2) != REDUCTION_NONE
    return Count(float((MSE_FLOPS if reduced else MSE_FLOPS_NO_REDUCTION) * self.elements), traffic)


def mse_loss_backward(a: OpArgs) -> Count:
    """mse_loss_backward(grad_output, self, target, reduction)."""
    self = a.tensor(1)
    traffic = a.traffic()
    a.read_all(traffic, 0, 3)
    a.write(traffic, self.elements, self.dtype)
    return Count(float(MSE_BACKWARD_FLOPS * self.elements), traffic)


RULES: Rules = {
    **{
        name: ("embedding", formula)
        for name, formula in {
            "aten::embedding": embedding,
            "aten::embedding_dense_backward": embedding_backward,
            "aten::embedding_backward": embedding_backward,
            "aten::embedding_bag": embedding_bag(private=False),
            "aten::_embedding_bag": embedding_bag(private=True),
            "aten::_embedding_bag_forward_only": embedding_bag(private=True),
        }.items()
    },
    **{
        name: ("loss", formula)
        for name, formula in {
            "aten::nll_loss": nll_loss(forward=False),
            "aten::nll_loss_forward": nll_loss(forward=True),
            "aten::nll_loss_nd": nll_loss(forward=False),
            "aten::nll_loss2d_forward": nll_loss(forward=True),
            "aten::nll_loss_backward": nll_loss_backward,
            "aten::nll_loss2d_backward": nll_loss_backward,
            "aten::cross_entropy_loss": cross_entropy,
            "aten::mse_loss": mse_loss,
            "aten::mse_loss_backward": mse_loss_backward,
        }.items()
    },
}
