"""Kernel categories on real kernel names (../shared/traces) and on names of common libraries."""

import pytest

from tracekit.analysis.categories import CATEGORIES, CATEGORY_RULES, categorize_name
from tracekit.sources.nsys import read_nsys_export

KNOWN = {
    # real names from ../shared/traces
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, (bool)0, (bool)0, "
    "cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, cutlass::bfloat16_t>>, (bool)0>"
    "(flash::Flash_fwd_params)": "attention",
    "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN": "matmul",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)": "communication",
    "void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>(int, T2, const T1 *, const T1 *, "
    "const T1 *, T2 *, T2 *, T1 *)": "normalization",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_"
    "split_k_kernel__5x_cublas": "matmul",
    "void <unnamed>::softmax_warp_forward<float, float, float, (int)6, (bool)0, (bool)0>(T2 *, const T1 *, int, int, "
    "int, const bool *, int, bool)": "softmax",
    "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::MeanOps<float, float, "
    "float, float>, unsigned int, float, (int)4, (int)4>>(T3)": "reduction",
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, std::array<char *, "
    "(unsigned long)3>>(int, T2, T3)": "elementwise",
    "void at::native::vectorized_elementwise_kernel<(int)8, at::native::bfloat16_copy_kernel_cuda("
    "at::TensorIteratorBase &)::[lambda(float) (instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)": "memory",
    "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::OpaqueType<(unsigned int)4>, "
    "unsigned int, (int)1, (int)128, (int)1, (int)16, (int)4>(char *, at::native::<unnamed>::CatArrInputTensorMetadata"
    "<T1, T2, (int)128, (int)1>, at::native::<unnamed>::TensorSizeStride<T2, (unsigned int)4>, int, T2)": "memory",
    "matmul_kernel(float *, float *, float *, int, int, int)": "matmul",
    # other libraries users meet
    "void multi_tensor_apply_kernel<TensorListMetadata<4>, FusedAdamMathFunctor<float, 4>, float*>(long, int*, "
    "TensorListMetadata<4>, FusedAdamMathFunctor<float, 4>, float*)": "optimizer",
    "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, "
    "true, 64, 64, 64, true, true>::Params)": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0": "attention",
    "ampere_sgemm_128x64_tn": "matmul",
    "triton_tem_fused_addmm_0": "matmul",
    "triton_red_fused__softmax_0": "softmax",
    "triton_per_fused_add_mean_mul_pow_rsqrt_1": "reduction",
    "triton_poi_fused_mul_silu_2": "elementwise",
    "void cunn_SoftMaxForward<4, float, float, float, cunn::SoftMaxForwardEpilogue>(float *, const float *, int)": "softmax",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096>)": "communication",
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>()": "matmul",
    "my_custom_kernel": "other",
    "void hadamard_transform_kernel(float*)": "other",
}


@pytest.mark.parametrize("name,category", KNOWN.items(), ids=[name[:40] for name in KNOWN])
def test_known_names(name, category):
    assert categorize_name(name) == category


def test_rules_are_ordered_data():
    assert [category for category, _ in CATEGORY_RULES][:4] == ["communication", "optimizer", "attention", "matmul"]
    assert CATEGORIES[-1] == "other"


def test_every_real_kernel_gets_a_category(shared_traces):
    for export in sorted(shared_traces.glob("*.sqlite")):
        names = read_nsys_export(export).kernels["name"].cat.categories
        categories = {name: categorize_name(name) for name in names}
        # every kernel of these real traces is something we can name
        assert "other" not in set(categories.values()), [n for n, c in categories.items() if c == "other"]
