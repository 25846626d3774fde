"""NVIDIA's GEMM, convolution and attention kernel names, read for their precision, unit and library.

Each family is a function of a ``KernelName`` that answers a ``KernelPrecision``, or None when the name
is not of its family; ``FAMILIES`` lists them in the order they are tried. What the names say:

- cuBLAS and cuDNN by architecture (``ampere_sgemm_128x64_nn``, ``volta_h884gemm``,
  ``ampere_fp16_s16816gemm_fp16``, ``turing_fp16_i8816cudnn_int8``, ``volta_scudnn_winograd``) and
  CUTLASS 2 (``cutlass_80_tensorop_bf16_s16816gemm_relu_bf16``): [output type] accumulator letter
  (s FP32, h FP16, d FP64, c/gc complex FP32, z complex FP64, i INT32), the MMA instruction's shape
  when tensor cores run it (884, 1688, 16816, 16832: none on CUDA cores), an intermediate type
  (``s1684tf32gemm``), then the operand type; an operand type left out is the accumulator's.
- XMMA (cuBLAS, cuDNN, TensorRT): ``sm80_xmma_gemm_bf16bf16_bf16f32_f32``: storage types (A, C), the
  types the MMA multiplies and accumulates in, the epilogue's; ``ffma``/``simt`` mark CUDA cores.
- nvjet (cuBLASLt, CUDA 12.6+): ``nvjet_tst`` = A/B, compute, D types; ``nvjet_qqtst`` = A, B, C,
  compute, D; h FP16, s FP32, t BF16, q FP8 (E4M3), o FP4 (E2M1); ``_tf32`` marks TF32.
- CUTLASS 3's library names (``cutlass3x_sm90_tensorop_s64x128x16gemm_f16_f16_f32_...``).
- cuBLAS's and cuDNN's CUDA-core templates (``gemv2T_kernel_val<...>``, ``implicit_convolve_sgemm<float,
  ...>``, Winograd and FFT convolution) and the helpers that serve a GEMM without its arithmetic.

Kernels whose configuration is in their template arguments, and generated ones, are
``precision_generated``'s.
"""

from __future__ import annotations

import re

from tracekit.analysis.hardware.precision_names import (
    ARCHITECTURES,
    BF16,
    CUDA_CORES,
    FP4,
    FP6,
    FP8,
    FP16,
    FP32,
    FP64,
    INT4,
    INT8,
    TENSOR_CORES,
    TF32,
    Family,
    KernelName,
    KernelPrecision,
    answer,
    concatenated_types,
    cpp_types,
    helper,
    token_type,
    widest,
)

# (pattern over the text, library, why it has no precision of its own): kernels that serve a GEMM,
# convolution or attention without doing its matrix arithmetic.
HELPERS = [
    (r"splitkreduce", "", "a split-K reduce: it sums a GEMM's partial products, no matrix arithmetic of its own"),
    (r"reducesplitk|reduce_wgrad", "", "a split-K reduce of a convolution's partial results: no matrix arithmetic"),
    (r"reduce_1block_kernel", "cuBLAS", "a cuBLAS reduce step (of a split dot product or GEMV): no matrix arithmetic"),
    (r"epilogue::impl::globalkernel", "cuBLASLt", "a GEMM's epilogue (bias, activation) run as a kernel of its own"),
    (r"compute\w*offsets\w*kernel", "cuDNN", "precomputes an implicit-GEMM convolution's offsets: index arithmetic"),
    (r"im2col|col2im|vol2col|col2vol", "", "an im2col-style layout change: it moves data for a GEMM to read"),
    (r"flip_filter", "cuDNN", "flips a filter for an FFT convolution: it moves data"),
    (r"flash_fwd_splitkv_combine|flash_bwd_dot_do_o|flash_bwd_convert_d|flash_bwd_clear|flashattnfwdcombine|"
     r"flash::prepare", "flash-attention",
     "a flash-attention step that combines, converts or clears partial results: no matrix arithmetic"),
]  # fmt: skip
_HELPERS = [(re.compile(pattern), library, why) for pattern, library, why in HELPERS]


def helpers(name: KernelName) -> KernelPrecision | None:
    for pattern, library, why in _HELPERS:
        if pattern.search(name.lower):
            return helper(library or _library_in(name.lower), why)
    return None


def _library_in(lower: str) -> str:
    """The library a helper's name mentions (cuBLASLt before cuBLAS: "cublasLt::splitKreduce_kernel")."""
    for marker, library in (
        ("cublaslt", "cuBLASLt"),
        ("cublas", "cuBLAS"),
        ("cudnn", "cuDNN"),
        ("cutlass", "CUTLASS 2"),
    ):
        if marker in lower:
            return library
    return "cuBLAS" if "splitkreduce" in lower else ""


# nvjet's type letters (cuBLASLt; the FP4 kernels carry UE4M3 block scales, "Avec16UE4M3").
NVJET_LETTERS = {"h": FP16, "s": FP32, "t": BF16, "q": FP8, "o": FP4}
_NVJET = re.compile(r"^nvjet_(?:sm(\d+)[a-z]?_)?([a-z]+)_(?:(tf32)_)?")


def nvjet(name: KernelName) -> KernelPrecision | None:
    match = _NVJET.match(name.text)
    if not match:
        return None
    built_for = int(match.group(1)) if match.group(1) else None
    letters, tf32 = match.group(2), match.group(3)
    operand_letters = {3: letters[:1], 5: letters[:2]}.get(len(letters))
    if operand_letters is None or any(letter not in NVJET_LETTERS for letter in operand_letters):
        return answer(None, TENSOR_CORES, "cuBLASLt", built_for, f"nvjet type letters {letters!r} are not known")
    precision = widest(NVJET_LETTERS[letter] for letter in operand_letters)
    if precision == FP32:
        if not tf32:
            return answer(None, None, "cuBLASLt", built_for, "nvjet with FP32 operands: the name does not say TF32")
        precision = TF32
    return answer(precision, TENSOR_CORES, "cuBLASLt", built_for)


_XMMA = re.compile(r"(?:^|_)sm(\d{2,3})[a-z]?_xmma_((?:sparse_)?(?:gemm|fprop|dgrad|wgrad|conv)\w*)")
_XMMA_TRAITS = re.compile(r"xmma_cudnn\w*::([A-Z][a-z]+)_([a-z]+)_(\w+?)_traits")


def xmma(name: KernelName) -> KernelPrecision | None:
    library = "cuBLAS" if "cublas" in name.lower else "cuDNN" if "cudnn" in name.lower else ""
    traits = _XMMA_TRAITS.search(name.text)
    if traits:
        return _xmma_traits(traits.group(1).lower(), traits.group(2), traits.group(3).lower())
    match = _XMMA.search(name.text)
    if not match:
        return None
    built_for = int(match.group(1))
    tokens = match.group(2).split("_")
    groups = [types for types in map(concatenated_types, tokens) if types]
    if not groups or groups[min(1, len(groups) - 1)][0] is None:
        return answer(None, None, library, built_for, "XMMA kernel whose name's types are not read")
    precision = groups[min(1, len(groups) - 1)][0]  # the MMA's input type (the first group stores A and C)
    if precision == FP32 or "simt" in tokens or "ffma" in tokens:
        unit = CUDA_CORES
    elif precision == FP64:
        unit = TENSOR_CORES if "dmma" in name.lower else CUDA_CORES if "dfma" in name.lower else None
    else:
        unit = TENSOR_CORES
    return answer(
        precision, unit, library, built_for, None if unit else "FP64 XMMA: the name says neither DMMA nor DFMA"
    )


def _xmma_traits(architecture: str, instruction: str, types: str) -> KernelPrecision:
    """cuDNN's ``xmma_cudnn::Volta_hmma_fp32_traits``: architecture, instruction, accumulator type."""
    built_for = ARCHITECTURES.get(architecture)
    if instruction in ("hmma", "hgmma"):  # half-precision MMA: FP16 operands unless the traits say otherwise
        precision = TF32 if "tf32" in types else BF16 if "bf16" in types else FP16
        return answer(precision, TENSOR_CORES, "cuDNN", built_for)
    if instruction in ("imma", "igmma"):
        return answer(INT8, TENSOR_CORES, "cuDNN", built_for)
    if instruction == "dmma":
        return answer(FP64, TENSOR_CORES, "cuDNN", built_for)
    if instruction in ("ffma", "fma"):
        return answer(FP32, CUDA_CORES, "cuDNN", built_for)
    return answer(None, None, "cuDNN", built_for, f"xmma_cudnn instruction {instruction!r} is not known")


# The accumulator-shape-operation word of cuBLAS, cuDNN and CUTLASS 2 names: "s16816gemm", "h884gemm",
# "s1684tf32gemm", "i8816cudnn", "sgemm", "gcgemm", "scudnn", "s1688fprop".
_MMA_WORD = re.compile(
    r"^(?P<acc>gc|[shdiczb])(?P<shape>\d{3,6})?(?P<inter>tf32|bf16|f16|fp16)?(?:and|xor)?"
    r"(?P<op>gemm|gemv|cudnn|fprop|dgrad|wgrad|deconv|conv\w*)$"
)
_TILE = re.compile(r"^\d+x\d+")
ACCUMULATORS = {"s": FP32, "h": FP16, "d": FP64, "c": FP32, "gc": FP32, "z": FP64, "i": INT8}


def _mma_word(tokens: list[str], within: int | None = None) -> tuple[re.Match[str], str | None] | None:
    """The accumulator word among ``tokens`` (among the first ``within`` of them) and the operand type
    written after it, up to the tile size."""
    for index, token in enumerate(tokens[:within]):
        word = _MMA_WORD.match(token)
        if word:
            operand = None
            for later in tokens[index + 1 :]:
                if _TILE.match(later):
                    break
                operand = operand or token_type(later)
            return word, operand
    return None


def _mma_precision(word: re.Match[str], operand: str | None) -> tuple[str | None, str | None]:
    """(precision, why unknown) of an accumulator word and its operand type."""
    shape, inter, acc = word.group("shape"), word.group("inter"), word.group("acc")
    if inter:
        return token_type(inter), None
    if operand:
        # FP32 operands on tensor cores are multiplied as TF32 (there is no FP32 MMA).
        return (TF32 if operand == FP32 and shape else operand), None
    if acc == "s" and shape:
        if shape in ("1684", "1688"):  # an FP32-accumulating MMA on operands of the accumulator's type: TF32
            return TF32, None
        if shape == "884":  # Volta's HMMA takes FP16 only
            return FP16, None
        return None, f"'{word.group(0)}' does not say FP16 or BF16 operands"
    if acc == "i" and shape in ("8832", "16864"):
        return INT4, None
    return ACCUMULATORS.get(acc), None if acc in ACCUMULATORS else f"accumulator {acc!r} is not known"


_ARCH_NAMED = re.compile(r"^(?:cudnn_(?:infer_|train_)?|trt_)?(?:(" + "|".join(ARCHITECTURES) + r")_)?(\w+)$")


def architecture_named(name: KernelName) -> KernelPrecision | None:
    """cuBLAS's and cuDNN's kernels named for their architecture ("ampere_sgemm_128x64_nn"), and cuDNN's
    older ones without one ("scudnn_128x64_relu_interior_nn_v1")."""
    match = _ARCH_NAMED.match(name.text)
    if not match:
        return None
    tokens = match.group(2).split("_")
    # The word comes first or after an output type ("ampere_fp16_s16816gemm_fp16"); nameless of an
    # architecture, only cuDNN's own ("scudnn") is taken: "sgemm" alone is ``simt_gemm_words``'.
    found = _mma_word(tokens, within=2)
    if found is None or (match.group(1) is None and found[0].group("op") != "cudnn"):
        return None
    word, operand = found
    precision, why = _mma_precision(word, operand)
    library = "TensorRT" if name.text.startswith("trt_") else "cuDNN" if word.group("op") == "cudnn" else "cuBLAS"
    unit = TENSOR_CORES if word.group("shape") else CUDA_CORES
    return answer(precision, unit, library, ARCHITECTURES.get(match.group(1) or ""), why)


_CUTLASS2 = re.compile(r"(?<![A-Za-z0-9])cutlass_(?:(\d{2,3})_)?(tensorop|wmma_tensorop|sptensorop|simt|wmma)_(\w+)")


def cutlass2_named(name: KernelName) -> KernelPrecision | None:
    match = _CUTLASS2.search(name.text)
    if not match:
        return None
    library = "cuDNN" if "cudnn" in name.lower else "CUTLASS 2"
    built_for = int(match.group(1)) if match.group(1) else None
    found = _mma_word(match.group(3).split("_"))
    if found is None:
        return answer(None, None, library, built_for, "CUTLASS kernel whose operation word is not read")
    precision, why = _mma_precision(*found)
    unit = CUDA_CORES if match.group(2) == "simt" else TENSOR_CORES
    return answer(precision, unit, library, built_for, why)


_CUTLASS3 = re.compile(r"cutlass3x_sm(\d{2,3})[a-z]?_([a-z]+)_(\w+)")
# Block-scaled operands: "ue4m3xf4" is FP4 data with UE4M3 scales, "ue8m0xe4m3" FP8 with UE8M0 scales.
_SCALED = {"f4": FP4, "e2m1": FP4, "f6": FP6, "e3m2": FP6, "e2m3": FP6, "f8": FP8, "e4m3": FP8, "e5m2": FP8}


def cutlass3_named(name: KernelName) -> KernelPrecision | None:
    """CUTLASS 3's library names (cuBLAS ships some): ``cutlass3x_sm90_tensorop_s64x128x16gemm_f16_f16_
    f32_f16_f16_...``, ``cutlass3x_sm100_bstensorop_..._block_scaled_ue4m3xf4_ue4m3xf4_...``."""
    match = _CUTLASS3.search(name.text)
    if not match:
        return None
    built_for = int(match.group(1))
    unit = CUDA_CORES if match.group(2) == "simt" else TENSOR_CORES
    tokens = match.group(3).split("_")
    at = next(
        (index for index, token in enumerate(tokens) if token.endswith(("gemm", "conv", "fprop", "dgrad", "wgrad"))),
        None,
    )
    if at is None:
        return answer(None, unit, "CUTLASS 3", built_for, "CUTLASS 3 name without its operand types")
    inter = re.search(r"(tf32|bf16|f16)(?:gemm|conv)", tokens[at])
    operands: list[str] = []
    for token in tokens[at + 1 :]:
        if re.match(r"^\d+x\d+x\d+$", token) or len(operands) == 2:
            break
        scaled = re.fullmatch(r"ue\d+m\d+x(\w+)", token)
        operand = _SCALED.get(scaled.group(1)) if scaled else token_type(token)
        if operand:
            operands.append(operand)
    precision = token_type(inter.group(1)) if inter else widest(operands)
    return answer(precision, unit, "CUTLASS 3", built_for)


_CUBLAS_SIMT = re.compile(r"(?:^|::)(?:gemv\w*|gemmSN\w*|gemmk1\w*|gemm_?small\w*|dot_kernel)$")


def cublas_templates(name: KernelName) -> KernelPrecision | None:
    """cuBLAS's CUDA-core kernels for small or thin products: ``gemv2T_kernel_val<int, int, float, ...>``,
    ``gemmSN_TN_kernel<float, ...>``, ``internal::gemvx::kernel<...>``, ``dot_kernel<float, ...>``. They
    multiply in their compute type, the widest type of their template."""
    if not (_CUBLAS_SIMT.search(name.base) or "gemvx" in name.base) or "cublas" not in name.lower:
        return None
    return answer(widest(cpp_types(name.text)), CUDA_CORES, "cuBLAS")


_CUDNN_SIMT = re.compile(
    r"convolve_\w*gemm|wgrad_alg\d|dgrad\w*(?:engine|alg)|dgrad2d|winograd|fft[123]d_[rc]2[rc]|"
    r"pointwise_mult_and_sum_complex|conv2d_grouped_direct",
    re.IGNORECASE,
)


def cudnn_templates(name: KernelName) -> KernelPrecision | None:
    """cuDNN's CUDA-core convolutions: implicit/explicit GEMM (``implicit_convolve_sgemm<float, ...>``),
    the weight- and data-gradient engines, Winograd's transforms, FFT convolution's transforms and
    products (``fft2d_r2c_32x32<float, ...>``): FP32 (or their template's type) on CUDA cores."""
    if not _CUDNN_SIMT.search(name.base):
        return None
    precision = widest(cpp_types(name.text))
    if precision is None and "sgemm" in name.base:
        precision = FP32
    return answer(precision, CUDA_CORES, "cuDNN")


_SIMT_GEMM_WORD = re.compile(r"(?:^|[_:])(gc|[sdhcz])gemm(?:ex)?(?:_|$)")


def simt_gemm_words(name: KernelName) -> KernelPrecision | None:
    """Older cuBLAS names without an architecture: ``sgemm_largek_lds64``, ``magma_sgemmEx_kernel``."""
    match = _SIMT_GEMM_WORD.search(name.base.lower())
    if not match:
        return None
    library = "cuBLAS" if re.match(r"^(?:[sdhcz]gemm_|magma_)", name.base) else ""
    return answer(ACCUMULATORS[match.group(1)], CUDA_CORES, library)


FAMILIES: list[Family] = [
    helpers,
    nvjet,
    xmma,
    cutlass3_named,
    cutlass2_named,
    architecture_named,
    cublas_templates,
    cudnn_templates,
    simt_gemm_words,
]
