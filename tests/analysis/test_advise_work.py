"""advise counts the work whole: FP32 on the CUDA cores across every GEMM and convolution family (cuDNN's
dgrad, wgrad, Winograd and FFT kernels too, which a name pattern for "sgemm" missed)."""

from __future__ import annotations

import pytest
from helpers.nsys_builder import ExportBuilder

import tracekit

MS = 1_000_000
FP32_KERNELS = [
    "ampere_sgemm_128x64_nn",
    "sm80_xmma_dgrad_implicit_gemm_indexed_f32f32_f32f32_f32_nhwckrsc_nchw_tilesize64x64x8_stage3_warpsize1x4x1_g1_ffma",
    "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int)",
    "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(int)",
    "void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*)",
]


def test_fp32_convolution_families_count_whole(tmp_path):
    """Five FP32 kernels of 10 ms each (a GEMM, dgrad, wgrad, Winograd, FFT) back to back on an A100: 50 ms of
    FP32 work, all five counted (the sgemm pattern saw 10 ms)."""
    b = ExportBuilder("2026.2")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108, 85_000_000_000, 8, 0)
    for index, name in enumerate(FP32_KERNELS):
        b.kernel(index * 10 * MS, (index + 1) * 10 * MS, name, launch_at=index * 10 * MS - 1000)
    table = tracekit.advise(b.write(tmp_path / "conv.sqlite"))["findings"].set_index("Finding")
    assert table.loc["fp32 matmul", "What"].startswith(
        "5 GEMM/convolution kernels ran in FP32 on the CUDA cores for 50.000 ms"
    )


def attention_trace(tmp_path, copy: bool = False):
    """Ten attentions on one stream of an A100, each a bmm (2 ms), a scale (0.5 ms), a softmax (1 ms) and a bmm
    (2 ms), then a layer norm (1 ms) between attentions. ``copy``: the softmax's output made contiguous by a
    copy kernel (0.5 ms) before the second bmm, taken from the scale's time (TimeSformer's attention)."""
    b = ExportBuilder("2026.2")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108, 85_000_000_000, 8, 0)
    t = 0
    scale = MS // 4 if copy else MS // 2
    copies = [("elementwise_kernel<direct_copy_kernel_cuda>", MS // 4)] if copy else []
    for _ in range(10):
        for name, length in (
            ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", 2 * MS),
            ("vectorized_elementwise_kernel<MulFunctor<float>>", scale),
            ("cunn_SoftMaxForward<4, float, float>", MS),
            *copies,
            ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn", 2 * MS),
            ("vectorized_layer_norm_kernel<float>", MS),
        ):
            b.kernel(t, t + length, name, launch_at=t - 1000)
            t += length
    return b.write(tmp_path / "attn.sqlite")


@pytest.mark.parametrize("copy", [False, True], ids=["scale", "scale and a contiguous copy"])
def test_unfused_attention_is_found_and_ranked_by_time(tmp_path, copy):
    """Ten attentions on one stream, each a bmm (2 ms), a scale (0.5 ms), a softmax (1 ms) and a bmm (2 ms), then a
    layer norm between attentions: 55 ms of attention as separate kernels, 15 ms of it between the matmuls. A copy
    kernel between (``.contiguous()``, a memory kernel) is part of it: it hid TimeSformer's attention."""
    table = tracekit.advise(attention_trace(tmp_path, copy))["findings"].set_index("Finding")
    row = table.loc["unfused attention"]
    assert row["What"].startswith("10 attentions ran as matmul -> softmax -> matmul kernels for 55.000 ms (85 %")
    assert row["Recoverable (ns)"] == 15 * MS and "scaled_dot_product_attention" in row["Fix"]


def test_unfused_attention_counts_as_attention_in_the_categories(tmp_path):
    """The same ten attentions: kernels by category count their 55 ms as attention (what they compute), not
    matmul, elementwise and softmax; the layer norms stay normalization."""
    table = tracekit.kernels(attention_trace(tmp_path), by="category")["categories"].set_index("Category")
    assert table.loc["attention", "Total Time (ns)"] == 55 * MS
    assert table.loc["normalization", "Total Time (ns)"] == 10 * MS
    assert set(table.index) == {"attention", "normalization"}


def test_unfused_attention_with_shapes_is_capped_by_the_roofline(tmp_path):
    """One attention on an H100 with its shapes recorded: bmm (8 x 1024x64 @ 64x1024, 100 us), softmax (200 us),
    bmm (8 x 1024x1024 @ 1024x64, 100 us). Each bmm is 2 x 8 x 1024 x 1024 x 64 = 1,073,741,824 FLOPs: at the
    BF16 tensor cores' 989.4 TFLOP/s both need 2.170 us, so a fused kernel gives back at most 400 - 2.170 =
    397.830 us; the estimate stays the softmax's 200 us."""
    from helpers.h100 import BF16, GEMM, H100_LIMITS, PEAK
    from helpers.kineto_builder import KinetoBuilder

    trace = KinetoBuilder().device_limits(**H100_LIMITS)
    trace.operator("aten::bmm", 10, 20, [[8, 1024, 64], [8, 64, 1024]], [BF16, BF16])
    trace.launch("cudaLaunchKernel", 12, 5, 1).kernel(GEMM, 100, 100, 1)
    trace.operator("aten::_softmax", 40, 10, [[8, 1024, 1024], [], []], [BF16, "Scalar", "Scalar"], ["", "-1", "0"])
    trace.launch("cudaLaunchKernel", 42, 5, 2).kernel("cunn_SoftMaxForward<4, float, float>", 200, 200, 2)
    trace.operator("aten::bmm", 60, 20, [[8, 1024, 1024], [8, 1024, 64]], [BF16, BF16])
    trace.launch("cudaLaunchKernel", 62, 5, 3).kernel(GEMM, 400, 100, 3)
    row = tracekit.advise(trace.write(tmp_path / "attn.json"))["findings"].set_index("Finding").loc["unfused attention"]
    need = 2 * 1_073_741_824 / PEAK * 1e9  # ns
    assert row["Recoverable (ns)"] == 200_000
    assert f"at most {(400_000 - need) / 1e6:,.3f} ms by the roofline for the 1 attentions" in row["Bound"]
    assert f"need {need / 1e6:,.3f} ms" in row["Bound"]


def test_elementwise_chains_are_a_fusion_finding(tmp_path):
    """On one A100 stream, 10 times: a GEMM (2 ms), then mul (0.2 ms), add (0.3 ms), gelu (0.5 ms): a chain of
    3 elementwise passes, 1 ms of which a fused kernel needs at least the gelu's 0.5 ms: 5 ms to give back.
    Not chains: an Inductor-fused kernel between two elementwise ones (already fused), and three 5 us kernels
    (launch costs, the launch-bound finding's)."""
    b = ExportBuilder("2026.2")
    b.gpu(0, "NVIDIA A100-SXM4-80GB", 108, 85_000_000_000, 8, 0)
    gemm = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
    t = 0
    blocks = [
        [(gemm, 2 * MS), ("vectorized_elementwise_kernel<MulFunctor<float>>", MS // 5)]
        + [("vectorized_elementwise_kernel<CUDAFunctor_add<float>>", 3 * MS // 10)]
        + [("vectorized_elementwise_kernel<GeluCUDAKernelImpl>", MS // 2)]
    ] * 10
    blocks.append(
        [(gemm, 2 * MS), ("vectorized_elementwise_kernel<MulFunctor<float>>", MS // 5)]
        + [("triton_poi_fused_add_mul_0", MS // 5), ("vectorized_elementwise_kernel<CUDAFunctor_add<float>>", MS // 5)]
    )
    blocks.append([(gemm, 2 * MS)] + [("vectorized_elementwise_kernel<MulFunctor<float>>", 5_000)] * 3)
    for block in blocks:
        for name, length in block:
            b.kernel(t, t + length, name, launch_at=t - 1000)
            t += length
    row = tracekit.advise(b.write(tmp_path / "chains.sqlite"))["findings"].set_index("Finding")
    chains = row.loc["unfused elementwise chains"]
    assert chains["What"].startswith(
        "10 chains of 3+ elementwise kernels back to back on a stream (30 kernels, 10.000 ms)"
    )
    assert chains["Recoverable (ns)"] == 5 * MS and "torch.compile" in chains["Fix"]
