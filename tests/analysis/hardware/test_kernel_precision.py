"""A matrix kernel's precision, unit, library and target architecture, from its name alone.

The names are real: tests/data/kernel_names.csv (each with the public trace it came from), the nsys
exports and torch.profiler traces in ../shared, and kernel names quoted in public GitHub text (where
each is said below). The expected answers were labelled by hand from the libraries' naming schemes.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.shared_kernel_names import shared_kernel_names

from tracekit.analysis.hardware import kernel_precision as module
from tracekit.analysis.hardware.kernel_precision import (
    HELPER_REASONS,
    MATRIX_CATEGORIES,
    built_for_older,
    kernel_precision,
    kernel_precisions,
)

LABELLED = Path(__file__).resolve().parents[2] / "data" / "kernel_names.csv"
CC, TC, MC, VU = "CUDA cores", "tensor cores", "matrix cores", "vector units"
CK = "Composable Kernel"


def labelled_rows() -> list[dict[str, str]]:
    with open(LABELLED, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# (the start of a name in kernel_names.csv, which says where it was found; (precision, unit, library, built_for))
FROM_CSV = [
    # cuBLAS by architecture: accumulator letter, MMA shape (tensor cores) or none (CUDA cores), operand type
    ("ampere_sgemm_128x128_nn", ("FP32", CC, "cuBLAS", 80)),
    ("volta_sgemm_128x32_nn", ("FP32", CC, "cuBLAS", 70)),
    ("ampere_gcgemm_64x64_nt", ("FP32", CC, "cuBLAS", 80)),
    ("volta_cgemm_32x32_tn", ("FP32", CC, "cuBLAS", 70)),
    ("ampere_fp16_s16816gemm_fp16_128x256", ("FP16", TC, "cuBLAS", 80)),
    ("void magma_sgemmEx_kernel", ("FP32", CC, "cuBLAS", None)),
    ("void sgemm_largek_lds64", ("FP32", CC, "cuBLAS", None)),
    # XMMA: storage types, then the MMA's input and accumulator types; ffma/simt run on CUDA cores
    ("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize96x128x32", ("FP16", TC, "cuBLAS", 80)),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma", ("FP32", CC, "cuBLAS", 80)),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32", ("BF16", TC, "cuBLAS", 90)),
    ("sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x32x32", ("BF16", TC, "cuDNN", 80)),
    ("sm80_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4", ("TF32", TC, "", 80)),
    ("sm75_xmma_fprop_implicit_gemm_interleaved_i8i8_i8i32_f32", ("INT8", TC, "", 75)),
    ("sm70_xmma_fprop_conv1x1_i8f32_f32_f32", ("FP32", CC, "", 70)),
    # cuBLASLt's nvjet: A/B, compute and D types (t = BF16)
    ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN", ("BF16", TC, "cuBLASLt", None)),
    ("nvjet_sm103_tst_128x8_64x12_2x1_v_bz_NNT", ("BF16", TC, "cuBLASLt", 103)),
    # cuBLAS's CUDA-core kernels multiply in their template's widest (compute) type
    ("void gemv2T_kernel_val<int, int, __nv_bfloat16", ("FP32", CC, "cuBLAS", None)),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16", ("FP32", CC, "cuBLAS", None)),
    ("void gemmSN_TN_kernel<", ("FP32", CC, "cuBLAS", None)),
    ("void dot_kernel<float", ("FP32", CC, "cuBLAS", None)),
    # helpers of a GEMM: no precision of their own, a reason instead
    ("void cublasLt::splitKreduce_kernel<32, 16, int, __nv_bfloat16", (None, None, "cuBLASLt", None)),
    ("void epilogue::impl::globalKernel", (None, None, "cuBLASLt", None)),
    # CUTLASS 2: arch number, tensorop/wmma/simt, [C type] accumulator+shape, operand type
    ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128", ("BF16", TC, "CUTLASS 2", 75)),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64", ("BF16", TC, "CUTLASS 2", 80)),
    ("void cutlass::Kernel2<cutlass_75_wmma_tensorop_bf16_s161616gemm", ("BF16", TC, "CUTLASS 2", 75)),
    ("void cutlass::Kernel<cutlass_70_wmma_tensorop_f16_s161616gemm", ("FP16", TC, "CUTLASS 2", 70)),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>", ("TF32", TC, "CUTLASS 2", 80)),
    ("void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass", ("FP32", CC, "CUTLASS 2", 80)),
    # cuDNN: by architecture, CUTLASS inside cuDNN, CUDA-core engines, Winograd and FFT on CUDA cores
    ("ampere_h16816cudnn_128x128", ("FP16", TC, "cuDNN", 80)),
    ("ampere_fp32_icudnn_int8x4_128x64", ("INT8", CC, "cuDNN", 80)),
    ("turing_fp16_i8816cudnn_int8_128x128_ldg16_relu_interior", ("INT8", TC, "cuDNN", 75)),
    ("volta_scudnn_winograd_128x128", ("FP32", CC, "cuDNN", 70)),
    ("cudnn_infer_volta_scudnn_128x128_relu_medium_nn_v1", ("FP32", CC, "cuDNN", 70)),
    ("void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32", ("TF32", TC, "cuDNN", None)),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16", ("BF16", TC, "cuDNN", None)),
    ("_ZN19cutlass_cudnn_train6KernelI", ("TF32", TC, "cuDNN", None)),
    ("void implicit_convolve_sgemm<float, float, 1024", ("FP32", CC, "cuDNN", None)),
    ("void wgrad_alg0_engine", ("FP32", CC, "cuDNN", None)),
    ("void cudnn::detail::dgrad2d_alg1_1", ("FP32", CC, "cuDNN", None)),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4", ("FP32", CC, "cuDNN", None)),
    ("void fft2d_r2c_32x32<float, false, 0u", ("FP32", CC, "cuDNN", None)),
    ("void pointwise_mult_and_sum_complex", ("FP32", CC, "cuDNN", None)),
    ("cask_cudnn::computeOffsetsKernel(", (None, None, "cuDNN", None)),
    ("void cudnn::cnn::im2col4d_kernel", (None, None, "cuDNN", None)),
    ("void flip_filter<float, float>(float*", (None, None, "cuDNN", None)),
    ("void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::reduction", (None, None, "cuDNN", None)),
    # TensorRT and TensorRT-LLM
    ("trt_turing_cutlass_image_network_first_layer_hmma_fprop_f16f16f32", ("FP16", TC, "TensorRT", 75)),
    ("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausal", ("FP8", TC, "TensorRT-LLM", 100)),
    ("fmhaSm100fKernel_QkvBfloat16OBfloat16H128PagedKvCausalP64VarSeq", ("BF16", TC, "TensorRT-LLM", 100)),
    ("bmm_Bfloat16_MxE2m1MxE4m3", ("FP8", TC, "TensorRT-LLM", 100)),  # FP4 x FP8 runs at the FP8 rate
    # attention
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128", ("BF16", TC, "flash-attention", None)),
    ("void pytorch_flash::flash_fwd_kernel", ("BF16", TC, "PyTorch", None)),
    ("fmha_cutlassF_bf16_aligned_32x128_gmem_sm80", ("BF16", TC, "PyTorch", 80)),
    # Triton: a template's name carries no dtype; triton_kernels' matmul_ogs does
    ("triton_tem_fused_mm_0", (None, None, "Triton", None)),
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1", ("BF16", TC, "Triton", None)),
    # AMD: hipBLASLt (UserArgs) and rocBLAS's Tensile; MFMA (MI...) or not
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x16x128", ("BF16", MC, "hipBLASLt", None)),
    ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64", ("BF16", MC, "Tensile", None)),
    ("Cijk_Ailk_Bljk_S_B_Bias", ("FP32", MC, "hipBLASLt", None)),
    ("Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT1x4x256", ("BF16", VU, "hipBLASLt", None)),
    ("Cijk_SB_BiasS_HAS_ScaleAlphaVec_PostGSU16_VW4", (None, None, "hipBLASLt", None)),
    ("_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefill", ("BF16", MC, CK, None)),
    ("_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_28GridwiseGemm_xdl_"
     "cshuffle_v3INS_13tensor_layout4gemm8RowMajorENS6_11ColumnMajorES7_ttftt", ("BF16", MC, CK, None)),
    ("void ck::kernel_moe_gemm", ("BF16", None, CK, None)),
    ("igemm_fwd_gtcx2_nhwc_bf16", ("BF16", MC, "MIOpen", None)),
    ("Im2d2Col_v2", (None, None, "MIOpen", None)),
    ("aiter::fmha_fwd_hd128_bf16_rtz", ("BF16", MC, "aiter", None)),
    ("void paged_attention_ll4mi_QKV_mfma16_kernel", ("BF16", MC, "vLLM", None)),
    ("void paged_attention_ll4mi_reduce_kernel", (None, None, "vLLM", None)),
    # names of no library: said so, not guessed
    ("attn_fwd", (None, None, "", None)),
    ("matmul_kernel(float", (None, None, "", None)),
]  # fmt: skip

# (a name as public GitHub text quotes it, where, expected): families the CSV lacks. Some were cut short
# by the text quoting them ("..."), which the reader must take as they are.
FROM_PUBLIC_TEXT = [
    ("nvjet_qqtst_128x256_128x6_2x1_2cta_v_bz_TNT", "nsys stats of cuBLASLt FP8 GEMMs", ("FP8", TC, "cuBLASLt", None)),
    ("nvjet_sm103_oohsh_128x128_256x7_2x2_2cta_v_bz_Avec16UE4M3_Bvec16UE4M3_TNT", "an NVFP4 _scaled_mm on a GB300",
     ("FP4", TC, "cuBLASLt", 103)),
    ("nvjet_hsh_256x128_64x4_2x1_v_bz_TNN", "an FP16 LLM's profile", ("FP16", TC, "cuBLASLt", None)),
    ("nvjet_tss_256x128_64x4_1x2_h_bz_coopA_TNT", "a router GEMM (BF16 in, FP32 out)", ("BF16", TC, "cuBLASLt", None)),
    ("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_cgasize1x2x1_stage4_gmmastage2_warpgroupsize1x1x1",
     "a cuBLASLt FP8 example's comment", ("FP8", TC, "", 90)),
    ("cutlass3x_sm90_tensorop_s64x128x16gemm_f16_f16_f32_f16_f16_128x128x64_2x1x1_0_ttt_align8_warpspecialized_pingpong"
     "_epi_tma", "CUTLASS's generated library", ("FP16", TC, "CUTLASS 3", 90)),
    ("cutlass3x_sm90_tensorop_s64x128x32gemm_e4m3_e4m3_f32_bf16_bf16_64x128x128_2x1x1_0_tnt_align16_warpspecialized_epi"
     "_nosmem", "a CUTLASS extension's manifest", ("FP8", TC, "CUTLASS 3", 90)),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int,int,int>, cutlass::gemm::"
     "collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<9, cute::tuple<cute::C<1>,cute::C<1>,"
     "cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedPingpong>, cute::tuple<cute::C<128>,cute::C<64>,cute::C<64> >,"
     " cutlass::bfloat16_t, cute::TiledMMA<cute::MMA_Atom<cute::SM90::GMMA::MMA_64x64x16_F32BF16BF16_SS> >, "
     "cute::SM90_TMA_LOAD, cute::ComposedLayout<cute::Swizzle<3,4,3> > > > >", "a CUTLASS symbol parser's test",
     ("BF16", TC, "CUTLASS 3", 90)),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<"
     "2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, cute::C<176>, cute::C<128> >, 128, "
     "cutlass::bfloat16_t, float, cutlass::arch::Sm90, false", "an SGLang profile (cut short)",
     ("BF16", TC, "flash-attention", 90)),
    ("flash::prepare_varlen_num_blocks_kernel(int, int, int, const int *, const int *, const int *, const int *, "
     "const int *, const int *, int, int, int, int, int, cutlass::FastDivmod, cutlass::FastDivmod, int *, int *, bool)",
     "an SGLang profile", (None, None, "flash-attention", None)),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0",
     "FSDP comparisons (a BF16 model)", (None, TC, "cuDNN", 90)),
    ("void xmma_cudnn::gemm::kernel<xmma_cudnn::implicit_gemm::fprop_indexed::Kernel_traits<xmma_cudnn::Volta_hmma_fp32_"
     "traits, xmma_cudnn::Cta_tile<xmma_cudnn::Volta<int=0>, int=64, int=128, int=32", "an nvprof listing (cut short)",
     ("FP16", TC, "cuDNN", 70)),
    ("volta_h884gemm_64x64_nt", "a kernel list", ("FP16", TC, "cuBLAS", 70)),
    ("turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn", "a torch.profiler table", ("FP16", TC, "cuBLAS", 75)),
    ("ampere_h16816gemm_128x64_ldg8_stages_64x3_tn", "a GEMM benchmark table", ("FP16", TC, "cuBLAS", 80)),
    ("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_nn", "an nsys run", ("BF16", TC, "cuBLAS", 80)),
    ("ampere_s16816gemm_bf16_64x64_ldg8_stages_64x5_tn", "a kernel table", ("BF16", TC, "cuBLAS", 80)),
    ("trt_ampere_h16816gemm_128x64_ldg8_nn_v1", "a TensorRT engine's profile", ("FP16", TC, "TensorRT", 80)),
    ("ampere_dgemm_64x64_nn", "a kernel time table", ("FP64", CC, "cuBLAS", 80)),
    ("maxwell_scudnn_128x64_relu_interior_nn_v1", "a TensorFlow profile", ("FP32", CC, "cuDNN", 50)),
    ("fmha_cutlassF_f16_aligned_32x128_rf_sm70(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, "
     "cutlass::arch::Sm70, true, 32, 128, 128, true, true>::Params)", "a call stack", ("FP16", TC, "PyTorch", 70)),
    ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "a backend list", ("BF16", TC, "xformers", 80)),
    ("Custom_Cijk_Ailk_Bljk_F8H_HHS_BH_Bias_AS_SAB_SAV_MT128x16x128_MI16x16x1_WaveSpecialization",
     "hipBLASLt's custom kernels (FP8 x FP16 A and B multiplied as FP16)", ("FP16", MC, "Tensile", None)),
    ("Cijk_Ailk_Bljk_HHS_BH_UserArgs_MT32x32x64_MI16x16x1_SN_LDSB0_AFC0_AG0_AGGSUA0_AGNTAB0_AFEM1_AFEM1_ASEM1_BL1_BS1",
     "hipBLASLt's assembly for gfx950", ("FP16", MC, "hipBLASLt", None)),
]  # fmt: skip


def csv_name(prefix: str) -> str:
    matches = [row["name"] for row in labelled_rows() if row["name"].startswith(prefix)]
    assert matches, prefix
    return matches[0]


def read(name: str) -> tuple:
    found = kernel_precision(name)
    return found.precision, found.unit, found.library, found.built_for


@pytest.mark.parametrize(("prefix", "expected"), FROM_CSV, ids=[prefix[:60] for prefix, _ in FROM_CSV])
def test_hand_labelled_names_from_public_traces(prefix, expected):
    name = csv_name(prefix)
    found = kernel_precision(name)
    assert read(name) == expected
    # Whatever is not known is explained, and only then.
    assert (found.why_unknown is None) == (found.precision is not None and found.unit is not None)


@pytest.mark.parametrize(
    ("name", "where", "expected"), FROM_PUBLIC_TEXT, ids=[name[:60] for name, _, _ in FROM_PUBLIC_TEXT]
)
def test_hand_labelled_names_from_public_text(name, where, expected):
    assert read(name) == expected, where


def test_what_cannot_be_told_says_why():
    """cuDNN writes f16 for BF16 attention too; a Triton template names no dtype; a split-K reduce does
    no matrix arithmetic; a matmul of no known library is not guessed."""
    reasons = {
        name: kernel_precision(name).why_unknown
        for name in (
            "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0",
            csv_name("triton_tem_fused_mm_0"),
            csv_name("void splitKreduce_kernel<(int)32"),
            csv_name("matmul_kernel(float"),
        )
    }
    assert list(reasons.values()) == [
        "cuDNN attention: its 'f16' names FP16 and BF16 alike",
        "Triton template (TorchInductor): the name does not say its dtypes",
        "a split-K reduce: it sums a GEMM's partial products, no matrix arithmetic of its own",
        "a name of no GEMM, convolution or attention library known here",
    ]


def test_the_category_decides_what_is_a_matrix_kernel():
    sgemm = csv_name("ampere_sgemm_128x128_nn")
    assert kernel_precision(sgemm, "matmul").precision == "FP32"
    assert kernel_precision(sgemm, "elementwise") == module.NOT_MATRIX
    assert module.NOT_MATRIX.why_unknown == "not a matrix kernel"


def matrix_results(names: dict[str, str]) -> pd.DataFrame:
    """Per matrix-category name (name -> category): its answer, and whether it is unknown and why."""
    rows = [
        (name, kernel_precision(name, category)) for name, category in names.items() if category in MATRIX_CATEGORIES
    ]
    table = pd.DataFrame(
        [(name, found.precision, found.unit, found.why_unknown) for name, found in rows],
        columns=["name", "precision", "unit", "why_unknown"],
    )
    table["unknown"] = table["precision"].isna() | table["unit"].isna()
    table["helper"] = table["why_unknown"].isin(HELPER_REASONS)
    return table


def assert_covered(table: pd.DataFrame, unknown_bound: float, undecided_bound: float) -> None:
    """Every name has a precision and a unit or says why not; the unknown share (helpers included) and
    the share left undecided (unknown and not a helper) stay under their measured bounds."""
    assert table.loc[table["unknown"], "why_unknown"].notna().all()
    assert table.loc[~table["unknown"], "why_unknown"].isna().all()
    undecided = table[table["unknown"] & ~table["helper"]]
    assert table["unknown"].mean() <= unknown_bound, table.loc[table["unknown"], ["name", "why_unknown"]]
    assert len(undecided) <= undecided_bound * len(table), undecided[["name", "why_unknown"]]


def test_every_matrix_name_in_the_labelled_list():
    """The CSV's 687 matmul, convolution and attention names (measured: 47 unknown, 6.8 %: 36 helpers
    with no matrix arithmetic, 11 undecided, 1.6 %: 8 names of no known library, a Triton template,
    two Composable Kernel MoE GEMMs whose unit the name does not say)."""
    rows = labelled_rows()
    table = matrix_results({row["name"]: row["category"] for row in rows})
    assert len(table) >= 650
    assert_covered(table, unknown_bound=0.08, undecided_bound=0.02)


@pytest.mark.shared
def test_every_matrix_name_in_the_shared_traces(shared_traces):
    """The 164 matmul, convolution and attention names of ../shared's traces (measured: 23 unknown,
    14 %, all but one helpers: cuDNN's offset kernels, split-K reduces, im2col, flip_filter; the one
    undecided is a hand-written matmul_kernel(float *, ...)). Without a category, none of the other 214
    kernels is given a precision."""
    names = shared_kernel_names()
    table = matrix_results(names)
    assert len(table) >= 150
    assert_covered(table, unknown_bound=0.15, undecided_bound=0.01)
    others = [name for name, category in names.items() if category not in MATRIX_CATEGORIES]
    assert len(others) >= 200
    assert [name for name in others if kernel_precision(name).precision is not None] == []


def test_built_for_an_older_architecture():
    built_for = kernel_precision(csv_name("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm")).built_for
    assert built_for == 75
    assert built_for_older(built_for, (9, 0))
    assert not built_for_older(built_for, (7, 5))
    assert not built_for_older(built_for, (7, 0))  # an older GPU cannot run it; not "older"
    # Libraries ship one build per generation: an sm80 kernel on an sm86 or sm89 GPU is the right one.
    assert not built_for_older(80, (8, 6)) and not built_for_older(80, (8, 9)) and built_for_older(80, (9, 0))
    assert not built_for_older(None, (9, 0)) and not built_for_older(80, None)
    assert not built_for_older(pd.NA, (9, 0))  # type: ignore[arg-type]  (a missing value of the Int64 column)


def values(column: pd.Series) -> list:
    return [None if pd.isna(value) else value for value in column]


def test_a_column_per_row_read_once_per_distinct_name(monkeypatch):
    names = [csv_name("ampere_sgemm_128x128_nn"), csv_name("void cutlass::Kernel2<cutlass_75_tensorop_bf16"), "nccl"]
    rows = pd.Series(np.array(names, dtype=object)[np.arange(30_000) % 3], index=np.arange(30_000) * 2)
    read_names: list[str] = []
    original = module._from_name.__wrapped__

    def counting(name: str):
        read_names.append(name)
        return original(name)

    monkeypatch.setattr(module, "_from_name", counting)
    for series in (rows, rows.astype("category")):
        read_names.clear()
        table = kernel_precisions(series)
        assert sorted(read_names) == sorted(names)
        assert list(table.columns) == ["precision", "unit", "library", "built_for", "why_unknown"]
        assert table.index.equals(series.index) and str(table["built_for"].dtype) == "Int64"
        assert values(table["precision"].iloc[:3]) == ["FP32", "BF16", None]
        assert table["built_for"].iloc[:3].tolist() == [80, 75, pd.NA]
        assert table["why_unknown"].iloc[2] == "a name of no GEMM, convolution or attention library known here"


def test_categories_and_missing_names_in_the_column():
    sgemm = csv_name("ampere_sgemm_128x128_nn")
    names = pd.Series([sgemm, sgemm, None, sgemm], dtype=object)
    categories = pd.Series(["matmul", "memory", "matmul", None])
    table = kernel_precisions(names, categories)
    assert values(table["precision"]) == ["FP32", None, None, "FP32"]  # no category: read by its name
    assert values(table["why_unknown"]) == [None, "not a matrix kernel", "no name", None]
    assert table["built_for"].tolist() == [80, pd.NA, pd.NA, 80]
    empty = kernel_precisions(pd.Series([], dtype=object))
    assert empty.empty and list(empty.columns) == ["precision", "unit", "library", "built_for", "why_unknown"]
