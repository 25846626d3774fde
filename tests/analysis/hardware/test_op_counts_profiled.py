"""count_op on what torch.profiler records of real calls (run on the CPU), for the ops flop_counter does not
count: elementwise, reductions, softmax, normalizations, embeddings, losses, optimizer steps, copies. Each
expected number is written out as arithmetic from the documented per-element counts (op_count_* modules)
and the minimum traffic: each input read once, each output written once, in its dtype."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from helpers.torch_ops import recorded_ops  # noqa: E402
from torch import nn  # noqa: E402

from tracekit.analysis.hardware.op_counts import OpCount, count_op  # noqa: E402

F32, BF16, I64, BOOL = 4, 2, 8, 1  # bytes per element


def counts(run, name: str, element_bytes: int | None = None) -> list[OpCount]:
    """count_op of every recorded call of ``name`` while ``run`` runs."""
    ops = [op for op in recorded_ops(run) if op.name == name]
    assert ops, f"{name} not recorded"
    return [count_op(op.name, op.dims, op.types, op.concrete, element_bytes) for op in ops]


def one(run, name: str, element_bytes: int | None = None) -> OpCount:
    return counts(run, name, element_bytes)[0]


def known(flops: float, moved: float, family: str) -> OpCount:
    return OpCount(float(flops), float(moved), None, family)


def test_elementwise_reads_each_input_at_its_size_and_writes_the_promoted_result():
    x, y = torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(8)
    # bf16 [4, 8] + float32 [8] -> float32 [4, 8]: 32 additions
    assert one(lambda: x + y, "aten::add") == known(32, 32 * BF16 + 8 * F32 + 32 * F32, "elementwise")
    # in place: self read and written in its own dtype; the Python number arrives as a 0-dim double tensor
    assert one(lambda: x.mul_(2.0), "aten::mul_") == known(32, 2 * 32 * BF16 + 1 * 8, "elementwise")
    a, mask = torch.randn(3, 4), torch.rand(3, 4) > 0.5
    assert one(lambda: torch.where(mask, a, 0.0), "aten::where") == known(12, 12 * BOOL + 2 * 12 * F32, "elementwise")
    assert one(lambda: a > 0, "aten::gt") == known(12, 12 * F32 + 12 * BOOL, "elementwise")  # bool result
    p, g = torch.randn(5, 6), torch.randn(5, 6)
    # addcmul: a product, its scaling, a sum: 3 per element; three inputs read, self written
    assert one(lambda: p.addcmul_(g, g, value=0.1), "aten::addcmul_") == known(3 * 30, 4 * 30 * F32, "elementwise")


def test_activation_and_its_backward():
    x = torch.randn(5, 6, requires_grad=True)
    run = lambda: F.gelu(x).sum().backward()
    assert one(run, "aten::gelu") == known(30, 2 * 30 * F32, "elementwise")
    assert one(run, "aten::gelu_backward") == known(30, 3 * 30 * F32, "elementwise")  # grad, x read; grad written


def test_reductions_write_the_shape_dim_and_keepdim_leave():
    x = torch.randn(4, 6, 5)  # 120 elements, 480 bytes
    assert one(lambda: x.sum(dim=(0, 2), keepdim=True), "aten::sum") == known(120, 480 + 6 * F32, "reduction")
    assert counts(lambda: x.mean(), "aten::mean")[0] == known(120, 480 + 1 * F32, "reduction")
    # max over a dim: values [4, 5] and their int64 indices
    assert one(lambda: x.max(dim=1), "aten::max") == known(120, 480 + 20 * F32 + 20 * I64, "reduction")
    # a 2-norm: a square and a sum per element
    assert one(lambda: torch.linalg.vector_norm(x, dim=-1), "aten::linalg_vector_norm") == known(
        2 * 120, 480 + 24 * F32, "reduction"
    )
    ints = x.int()
    assert counts(lambda: ints.sum(), "aten::sum")[0] == known(120, 120 * 4 + 1 * I64, "reduction")  # int64 sum


def test_softmax_forward_and_backward():
    x = torch.randn(6, 10, requires_grad=True)  # 60 elements
    run = lambda: torch.softmax(x, -1).sum().backward()
    assert one(run, "aten::_softmax") == known(5 * 60, 2 * 60 * F32, "softmax")
    assert one(run, "aten::_softmax_backward_data") == known(4 * 60, 3 * 60 * F32, "softmax")
    run = lambda: F.log_softmax(x, -1).sum().backward()
    assert one(run, "aten::_log_softmax") == known(5 * 60, 2 * 60 * F32, "softmax")
    assert one(run, "aten::_log_softmax_backward_data") == known(4 * 60, 3 * 60 * F32, "softmax")
    # bf16 in, float32 out: softmax(dtype=float32) reads 2 bytes and writes 4 per element
    xb = torch.randn(6, 10, dtype=torch.bfloat16)
    assert one(lambda: torch.softmax(xb, -1, dtype=torch.float32), "aten::softmax") == known(
        5 * 60, 60 * BF16 + 60 * F32, "softmax"
    )


def test_layer_norm_forward_and_backward():
    x, norm = torch.randn(4, 7, 16, requires_grad=True), nn.LayerNorm(16)  # 448 elements in 28 rows
    run = lambda: norm(x).sum().backward()
    # 5 per element, +1 weight, +1 bias; input, weight, bias read; output and the rows' mean and 1/std written
    assert one(run, "aten::native_layer_norm") == known(
        7 * 448, (448 + 16 + 16) * F32 + 448 * F32 + 2 * 28 * F32, "normalization"
    )
    assert one(run, "aten::layer_norm") == known(7 * 448, (448 + 16 + 16) * F32 + 448 * F32, "normalization")
    # input gradient 10 + 1 (weight), weight gradient 2, bias gradient 1 per element; grad, input, mean,
    # rstd, weight, bias read; the three gradients written
    assert one(run, "aten::native_layer_norm_backward") == known(
        (11 + 2 + 1) * 448, (448 + 448 + 28 + 28 + 16 + 16) * F32 + (448 + 16 + 16) * F32, "normalization"
    )


def test_rms_group_and_batch_norm():
    x, weight = torch.randn(4, 8), torch.randn(8)
    run = lambda: F.rms_norm(x, (8,), weight)
    # 3 per element + 1 for the weight; the fused op also writes one 1/rms per row
    assert one(run, "aten::_fused_rms_norm") == known(4 * 32, (32 + 8) * F32 + 32 * F32 + 4 * F32, "normalization")
    images = torch.randn(2, 8, 4, 4, requires_grad=True)  # 256 elements, 8 channels
    run = lambda: nn.GroupNorm(2, 8)(images).sum().backward()
    assert one(run, "aten::native_group_norm") == known(
        7 * 256,
        (256 + 16) * F32 + 256 * F32 + 2 * (2 * 2) * F32,
        "normalization",  # stats: N x groups
    )
    assert one(run, "aten::native_group_norm_backward") == known(
        (11 + 2 + 1) * 256, (256 + 256 + 4 + 4 + 8) * F32 + (256 + 8 + 8) * F32, "normalization"
    )
    batch_norm = nn.BatchNorm2d(8)
    run = lambda: batch_norm(images).sum().backward()
    # training: input, weight, bias, running mean and var read; output, saved mean and 1/std, running stats written
    assert one(run, "aten::native_batch_norm") == known(
        7 * 256, (256 + 4 * 8) * F32 + 256 * F32 + 2 * 8 * F32 + 2 * 8 * F32, "normalization"
    )
    assert one(run, "aten::native_batch_norm_backward") == known(
        (11 + 2 + 1) * 256, (256 + 256 + 5 * 8) * F32 + (256 + 8 + 8) * F32, "normalization"
    )
    batch_norm.eval()  # a difference and a product by the running 1/std, then the affine: 4 per element
    assert one(lambda: batch_norm(images), "aten::native_batch_norm") == known(
        4 * 256, (256 + 4 * 8) * F32 + 256 * F32, "normalization"
    )


def test_embedding_forward_and_dense_backward():
    table, indices = nn.Embedding(50, 16), torch.randint(0, 50, (4, 7))  # 28 lookups of 16 floats
    run = lambda: table(indices).sum().backward()
    assert one(run, "aten::embedding") == known(0, 28 * I64 + 2 * 28 * 16 * F32, "embedding")
    # one addition per gradient element; the whole [50, 16] gradient written
    assert one(run, "aten::embedding_dense_backward") == known(
        28 * 16, 28 * 16 * F32 + 28 * I64 + 50 * 16 * F32, "embedding"
    )


def test_cross_entropy_and_its_parts():
    logits, target = torch.randn(28, 50, requires_grad=True), torch.randint(0, 50, (28,))  # 1400 logits
    run = lambda: F.cross_entropy(logits, target).backward()
    # log_softmax (5 per logit) and nll (2 per target); logits and targets read, the mean loss written
    assert one(run, "aten::cross_entropy_loss") == known(5 * 1400 + 2 * 28, 1400 * F32 + 28 * I64 + 1 * F32, "loss")
    # nll gathers one log-probability per target; writes the loss and the total weight
    assert one(run, "aten::nll_loss_forward") == known(2 * 28, 28 * I64 + 28 * F32 + 2 * F32, "loss")
    # its backward: the 0-dim incoming gradient, targets, total weight read; a [28, 50] gradient written
    assert one(run, "aten::nll_loss_backward") == known(2 * 28, (1 + 1) * F32 + 28 * I64 + 1400 * F32, "loss")


def _trained(optimizer_class, steps: int = 1, **options):
    model = nn.Linear(16, 8)  # 128 + 8 = 136 parameters
    optimizer = optimizer_class(model.parameters(), **options)

    def step():
        for _ in range(steps):
            model(torch.randn(3, 16)).sum().backward()
            optimizer.step()

    return step


def test_foreach_steps_need_element_bytes_for_their_bytes():
    step = _trained(torch.optim.AdamW, foreach=True)
    # addcdiv: 3 per element over the 136 parameters; self and two lists read, self written
    assert one(step, "aten::_foreach_addcdiv_", element_bytes=F32) == known(3 * 136, 4 * 136 * F32, "optimizer")
    blind = one(step, "aten::_foreach_addcdiv_")
    assert (blind.flops, blind.bytes, blind.why_unknown) == (3 * 136, None, "TensorList dtypes not recorded")
    # the step counters: two 0-dim tensors, plus a 0-dim float one added to them
    assert one(step, "aten::_foreach_add_", element_bytes=F32) == known(2, (2 + 1 + 2) * F32, "optimizer")


def test_fused_steps():
    step = _trained(torch.optim.AdamW, fused=True)  # weight decay 0.01 by default
    # 13 + 2 (weight decay) per element; params, grads, both moments, two steps read; params, moments written
    assert one(step, "aten::_fused_adamw_", element_bytes=F32) == known(
        15 * 136, (4 * 136 + 2) * F32 + 3 * 136 * F32, "optimizer"
    )
    step = _trained(torch.optim.SGD, steps=2, lr=0.1, momentum=0.9, fused=True)
    first, second = counts(step, "aten::_fused_sgd_", element_bytes=F32)
    # first step: the buffer is the gradient (2 per element); params, grads read; params, buffers written
    assert first == known(2 * 136, 4 * 136 * F32, "optimizer")
    # then momentum (3 more); the buffers read too
    assert second == known(5 * 136, 5 * 136 * F32, "optimizer")


def test_a_single_tensor_adam_step_is_plain_elementwise_ops_all_counted():
    model = nn.Linear(16, 8)
    optimizer = torch.optim.Adam(model.parameters(), foreach=False)
    model(torch.randn(3, 16)).sum().backward()
    ops = recorded_ops(optimizer.step)
    arithmetic = [
        op for op in ops if op.name.rstrip("_") in ("aten::lerp", "aten::addcmul", "aten::addcdiv", "aten::sqrt")
    ]
    assert len(arithmetic) == 4 * 2  # per parameter: lerp_, addcmul_, sqrt, addcdiv_
    results = [count_op(op.name, op.dims, op.types, op.concrete) for op in ops if op.name.startswith("aten::")]
    assert all(result.flops is not None and result.bytes is not None for result in results)


def test_copies_read_and_write_each_side_in_its_dtype():
    x = torch.randn(3, 4)  # 12 floats
    assert one(lambda: x.to(torch.bfloat16), "aten::_to_copy") == known(0, 12 * F32 + 12 * BF16, "copy")
    assert one(lambda: x.to(torch.bfloat16), "aten::copy_") == known(0, 12 * F32 + 12 * BF16, "copy")
    assert one(lambda: x.to(torch.float32), "aten::to") == known(0, 0, "copy")  # its own dtype: self returned
    assert one(lambda: x.clone(), "aten::clone") == known(0, 2 * 12 * F32, "copy")
    assert one(lambda: x.t().contiguous(), "aten::contiguous") == known(0, 2 * 12 * F32, "copy")
    assert one(lambda: x.t().contiguous(), "aten::transpose") == known(0, 0, "other")
    a, b = torch.randn(2, 3), torch.randn(4, 3)
    assert one(lambda: torch.cat([a, b]), "aten::cat", element_bytes=F32) == known(0, 2 * 18 * F32, "copy")
    assert one(lambda: torch.cat([a, b]), "aten::cat").why_unknown == "TensorList dtypes not recorded"
