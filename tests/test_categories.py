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
    # a100_video_sr_cudnn_conv and a100_small_lm_trainstep (cuDNN convolution, layout, pooling, sort)
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize64x32x64_stage5_warpsize2x2x1_"
    "g1_tensor16x8x8_alignc4_execute_kernel_cudnn_infer": "convolution",
    "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_64x64_32x5_nhwc_align4>(T1::Params)": "convolution",
    "void fft2d_r2c_32x32<float, (bool)0, (unsigned int)1, (bool)0>(float2 *, const T1 *, int, int, int, int, int, "
    "int, int, int, int, cudnn::reduced_divisor, bool, int2, int, int)": "convolution",
    "void flip_filter<float, float>(T2 *, const T1 *, int, int, int, int)": "convolution",
    "void deformable_im2col_gpu_kernel<float>(int, const T1 *, const T1 *, int, int, int, int, int, int, int, int, int, "
    "int, int, int, int, int, int, int, T1 *)": "convolution",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, (bool)0, (bool)1, (cudnnKernelDataType_t)2>("
    "cudnn::ops::nchw2nhwc_params_t<T3>, const T1 *, T2 *)": "memory",
    "void cudnn::ops::nhwcToNchwKernel<float, float, float, (bool)1, (bool)0, (cudnnKernelDataType_t)0>("
    "cudnn::ops::nhwc2nchw_params_t<T3>, const T1 *, T2 *)": "memory",
    "void at::native::<unnamed>::avg_pool3d_cuda_update_output<(int)2, float, float>(at::GenericPackedTensorAccessor"
    "<T2, (unsigned long)4, at::DefaultPtrTraits, long>, int, int, int, int, int, int, int, int, int, int)": "reduction",
    "void at::native::<unnamed>::upsample_bilinear2d_out_frame<float, float>(int, T2, T2, bool, "
    "at::GenericPackedTensorAccessor<T1, (unsigned long)4, at::DefaultPtrTraits, long>)": "elementwise",
    "void at_cuda_detail::cub::detail::radix_sort::DeviceRadixSortSingleTileKernel<at_cuda_detail::cub::detail::"
    "radix::policy_hub<long, at::cuda::cub::detail::OpaqueType<(int)8>, int>::Policy900, (bool)0, long>(const T3 *, "
    "T3 *, const T4 *, T4 *, T5, int, int, T6)": "reduction",
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
    assert [category for category, _ in CATEGORY_RULES][:5] == [
        "communication",
        "optimizer",
        "attention",
        "convolution",
        "matmul",
    ]
    assert CATEGORIES[-1] == "other"


def test_every_real_kernel_gets_a_category(shared_traces):
    for export in sorted(shared_traces.glob("*.sqlite")):
        names = read_nsys_export(export).gpu_ops["name"].cat.categories
        categories = {name: categorize_name(name) for name in names}
        # every kernel of these real traces is something we can name
        assert "other" not in set(categories.values()), [n for n, c in categories.items() if c == "other"]
