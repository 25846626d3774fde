"""count_op against torch.utils.flop_counter: the products, convolutions and attention run for real (on the
CPU, or on meta tensors for the CUDA-only attention kernels) under torch.profiler and under
FlopCounterMode; the profiler's recorded arguments, fed to count_op, give flop_counter's FLOPs exactly,
forward and backward, at several shapes and dtypes."""

from __future__ import annotations

from collections import defaultdict

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from helpers.torch_ops import flop_counts, meta, recorded_ops  # noqa: E402
from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count  # noqa: E402

from tracekit.analysis.hardware.op_counts import count_op  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
aten = torch.ops.aten


def counted(op) -> float | None:
    return count_op(op.name, op.dims, op.types, op.concrete).flops


def compare(run) -> tuple[list, dict[str, int]]:
    """flop_counter's FLOPs per op name, and count_op's sum over the recorded calls of that name: equal."""
    expected = flop_counts(run)
    ops = recorded_ops(run)
    ours: dict[str, float] = defaultdict(float)
    for op in ops:
        if op.name in expected:
            ours[op.name] += counted(op)  # type: ignore[operator]
    assert expected and dict(ours) == {name: float(n) for name, n in expected.items()}
    return ops, expected


def leaf(*shape, dtype=torch.float32, grad=True):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_products_forward_and_backward_equal_flop_counter(dtype):
    a, b, bias = leaf(7, 5, dtype=dtype), leaf(5, 3, dtype=dtype), leaf(3, dtype=dtype)
    x, y, z = leaf(4, 7, 5, dtype=dtype), leaf(4, 5, 3, dtype=dtype), leaf(4, 7, 3, dtype=dtype)
    w = leaf(6, 5, dtype=dtype)
    cases = {
        "mm": lambda: torch.mm(a, b),
        "addmm": lambda: torch.addmm(bias, a, b, beta=0.5),
        "bmm": lambda: torch.bmm(x, y),
        "baddbmm": lambda: torch.baddbmm(z, x, y),
        "matmul broadcast": lambda: torch.matmul(x, b),
        "matmul batch broadcast": lambda: torch.matmul(leaf(2, 1, 7, 5, dtype=dtype), leaf(3, 5, 4, dtype=dtype)),
        "linear": lambda: F.linear(x, w, leaf(6, dtype=dtype)),
        "linear no bias": lambda: F.linear(x, w),
    }
    for name, forward in cases.items():
        ops, expected = compare(forward)
        top = ops[0] if ops[0].name in ("aten::matmul", "aten::linear") else None
        if top is not None:  # the composite counts what its children do
            assert counted(top) == sum(expected.values()), name
        compare(lambda forward=forward: forward().sum().backward())


def test_a_product_moves_its_operands_and_result_once():
    a, b = torch.randn(7, 5, dtype=torch.bfloat16), torch.randn(5, 3, dtype=torch.bfloat16)
    (mm,) = [op for op in recorded_ops(lambda: torch.mm(a, b)) if op.name == "aten::mm"]
    result = count_op(mm.name, mm.dims, mm.types, mm.concrete)
    assert result.flops == 2 * 7 * 5 * 3
    assert result.bytes == (7 * 5 + 5 * 3 + 7 * 3) * 2  # bf16: 2 bytes each
    assert result.family == "matmul" and result.why_unknown is None


CONVOLUTIONS = {
    "conv1d stride 2": (lambda t: leaf(2, 4, 11, dtype=t), lambda t: leaf(6, 4, 3, dtype=t), dict(stride=2, padding=1)),
    "conv2d dilated": (lambda t: leaf(2, 3, 12, 10, dtype=t), lambda t: leaf(8, 3, 3, 3, dtype=t), dict(dilation=2)),
    "conv2d stride, padding": (
        lambda t: leaf(1, 3, 9, 9, dtype=t),
        lambda t: leaf(5, 3, 3, 2, dtype=t),
        dict(stride=(2, 1), padding=(1, 0)),
    ),
    "conv3d": (lambda t: leaf(1, 2, 5, 6, 7, dtype=t), lambda t: leaf(3, 2, 2, 3, 2, dtype=t), dict(padding=1)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CONVOLUTIONS, ids=str)
def test_convolutions_forward_and_backward_equal_flop_counter(case, dtype):
    make_input, make_weight, options = CONVOLUTIONS[case]
    x, weight, bias = make_input(dtype), make_weight(dtype), leaf(make_weight(dtype).shape[0], dtype=dtype)
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[x.dim()]
    ops, expected = compare(lambda: conv(x, weight, bias, **options))
    forward = expected["aten::convolution"]
    # every level the profiler records (conv2d, convolution, _convolution, mkldnn_convolution ...) counts it
    levels = [op for op in ops if "conv" in op.name]
    assert len(levels) >= 3 and all(counted(op) == forward for op in levels)
    _, expected = compare(lambda: conv(x, weight, bias, **options).sum().backward())
    assert expected["aten::convolution_backward"] == 2 * forward  # the input's and the weight's gradients


def test_transposed_convolution_equals_flop_counter():
    x, weight = leaf(2, 3, 5, 6), leaf(3, 4, 3, 3)
    run = lambda: F.conv_transpose2d(x, weight, leaf(4), stride=2, padding=1, output_padding=1)
    ops, expected = compare(run)
    assert all(counted(op) == expected["aten::convolution"] for op in ops if "conv" in op.name)
    compare(lambda: run().sum().backward())


def test_a_grouped_convolutions_backward_costs_twice_its_forward():
    """flop_counter counts the weight gradient of a grouped convolution ``groups`` times (its formula takes
    the input's channels whole); here each gradient costs the forward's FLOPs."""
    x, weight = leaf(2, 4, 9, 9), leaf(6, 2, 3, 3)  # groups 2: 2 input channels per group
    forward = 2 * 2 * 7 * 7 * 3 * 3 * 6 * 2  # 2·N·output positions·kernel·C_out·C_in per group
    ops, expected = compare(lambda: F.conv2d(x, weight, groups=2))
    assert expected["aten::convolution"] == forward
    backward = [
        op
        for op in recorded_ops(lambda: F.conv2d(x, weight, groups=2).sum().backward())
        if op.name == "aten::convolution_backward"
    ]
    assert counted(backward[0]) == 2 * forward
    assert flop_counts(lambda: F.conv2d(x, weight, groups=2).sum().backward())["aten::convolution_backward"] == (
        forward + 2 * forward  # input gradient once, weight gradient twice (groups = 2)
    )


def _attention_calls(ops, backward: bool):
    kernels = [op for op in ops if "_attention" in op.name and op.name.endswith("_backward") == backward]
    return [op for op in kernels if op.name != "aten::scaled_dot_product_attention"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("heads", [(4, 4), (4, 2)], ids=["mha", "gqa"])
def test_cpu_attention_equals_flop_counters_formula(heads, causal, dtype):
    """On the CPU, sdpa runs _scaled_dot_product_flash_attention_for_cpu, which flop_counter does not register:
    its formulas (sdpa_flop_count, sdpa_backward_flop_count) on the same shapes are the reference; a
    causal mask halves them."""
    q = leaf(2, heads[0], 8, 16, dtype=dtype)
    k, v = leaf(2, heads[1], 12, 16, dtype=dtype), leaf(2, heads[1], 12, 16, dtype=dtype)
    run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    half = 0.5 if causal else 1.0
    ops = recorded_ops(lambda: run().sum().backward())
    forward = sdpa_flop_count(q.shape, k.shape, v.shape) * half
    backward = sdpa_backward_flop_count(q.shape, q.shape, k.shape, v.shape) * half
    composite = [op for op in ops if op.name == "aten::scaled_dot_product_attention"]
    assert [counted(op) for op in composite + _attention_calls(ops, False)] == [forward, forward]
    assert [counted(op) for op in _attention_calls(ops, True)] == [backward]
    assert backward == 2.5 * forward


B, H, S, D = 2, 4, 8, 16
LSE = meta(B, H, S, dtype=torch.float32)
SEED = meta(2, dtype=torch.int64), meta(0, dtype=torch.int64)
BHSD = [meta(B, H, S, D) for _ in range(5)]  # [batch, heads, seq, dim]: the _scaled_dot_product_* ops
BSHD = [meta(B, S, H, D) for _ in range(5)]  # [batch, seq, heads, dim]: the kernels' entry points
KERNELS = {
    "sdpa flash": lambda c: aten._scaled_dot_product_flash_attention(*BHSD[:3], 0.0, c),
    "sdpa efficient": lambda c: aten._scaled_dot_product_efficient_attention(*BHSD[:3], None, True, 0.0, c),
    "sdpa cudnn": lambda c: aten._scaled_dot_product_cudnn_attention(*BHSD[:3], None, True, 0.0, c),
    "flash forward": lambda c: aten._flash_attention_forward(*BSHD[:3], None, None, S, S, 0.0, c, False),
    "efficient forward": lambda c: aten._efficient_attention_forward(
        *BSHD[:3], None, None, None, None, None, 0.0, int(c), True
    ),
    "sdpa flash backward": lambda c: aten._scaled_dot_product_flash_attention_backward(
        *BHSD, LSE, None, None, S, S, 0.0, c, *SEED
    ),
    "sdpa efficient backward": lambda c: aten._scaled_dot_product_efficient_attention_backward(
        *BHSD[:4], None, BHSD[4], meta(B, H, 32, dtype=torch.float32), *SEED, 0.0, [True, True, True, False], c
    ),
    "sdpa cudnn backward": lambda c: aten._scaled_dot_product_cudnn_attention_backward(
        *BHSD, LSE, *SEED, None, None, None, S, S, 0.0, c
    ),
    "flash backward": lambda c: aten._flash_attention_backward(
        *BSHD, meta(B, H, S, dtype=torch.float32), None, None, S, S, 0.0, c, *SEED
    ),
    "efficient backward": lambda c: aten._efficient_attention_backward(
        *BSHD[:4], None, BSHD[4], None, None, S, S, meta(B, H, 32, dtype=torch.float32), 0.0, *SEED, int(c), False
    ),
}


# The kernels' own entry points take [batch, seq, heads, dim]: torch 2.13's flop_counter passes those shapes
# to sdpa_flop_count, which reads [batch, heads, seq, dim], and so counts seq/heads times too few
# (pytorch/pytorch#178064, fixed for flash by #184348, for efficient proposed in #196132). The reference for
# them is flop_counter's own formula on the shapes transposed, as those fixes do.
SEQUENCE_FIRST = {
    f"aten::_{kind}_attention_{way}" for kind in ("flash", "efficient") for way in ("forward", "backward")
}


def _reference(name: str, expected: dict[str, int]) -> float:
    if name not in SEQUENCE_FIRST:
        return float(expected[name])
    bhsd = (B, H, S, D)
    if name.endswith("backward"):
        return float(sdpa_backward_flop_count(bhsd, bhsd, bhsd, bhsd))
    return float(sdpa_flop_count(bhsd, bhsd, bhsd))


@pytest.mark.parametrize("kernel", KERNELS, ids=str)
def test_cuda_attention_kernels_equal_flop_counter(kernel):
    """The CUDA attention ops run on meta tensors (their meta kernels): flop_counter counts them, and the
    profiler records their arguments as it does on a GPU; causal counts half of flop_counter's."""
    for causal in (False, True):
        run = lambda causal=causal: KERNELS[kernel](causal)
        expected = flop_counts(run)
        ops = [op for op in recorded_ops(run) if op.name.startswith("aten::_") and op.name in expected]
        assert ops, kernel
        for op in ops:
            assert counted(op) == _reference(op.name, expected) * (0.5 if causal else 1.0), (kernel, causal, op.name)


def test_cuda_attention_bytes():
    run = lambda: KERNELS["flash forward"](True)
    (op,) = [op for op in recorded_ops(run) if op.name == "aten::_flash_attention_forward"]
    result = count_op(op.name, op.dims, op.types, op.concrete)
    elements = B * S * H * D
    assert result.bytes == 3 * elements * 2 + elements * 2 + B * H * S * 4  # q, k, v read; out, lse written
