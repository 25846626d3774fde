"""Kernels generated per configuration, whose names or template arguments carry their types.

- CUTLASS 3 and flash attention: C++ element types and ``Sm90``-style architectures in template
  arguments (``cutlass::bfloat16_t``, ``MMA_64x64x16_F32BF16BF16_SS``, ``cutlass::arch::Sm90``); PyTorch's
  and xformers' memory-efficient attention (``fmha_cutlassF_bf16_aligned_64x128_rf_sm80``).
- TensorRT (``trt_turing_cutlass_..._hmma_fprop_f16f16f32_...``) and TensorRT-LLM's generated kernels
  (``fmhaSm100aKernel_QkvE4m3OBfloat16...``, ``bmm_Bfloat16_E4m3E4m3_Fp32_...``).
- cuDNN's runtime-compiled attention (``cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16``).
- Triton: TorchInductor's templates (``triton_tem_fused_mm_0``: no dtype in the name) and
  triton_kernels' ``_matmul_ogs_..._bf16xbf16xmxfp4_...``.
"""

from __future__ import annotations

import re

from tracekit.analysis.hardware.precision_names import (
    ARCHITECTURES,
    BF16,
    CUDA_CORES,
    FP4,
    FP8,
    FP16,
    FP32,
    INT8,
    TENSOR_CORES,
    TOKENS,
    WIDTH,
    Family,
    KernelName,
    KernelPrecision,
    answer,
    concatenated_types,
    cpp_types,
    first_narrow,
    sm_version,
    token_type,
    widest,
)

# TensorRT-LLM's generated kernels: fmhaSm100aKernel_QkvE4m3OBfloat16H64..., bmm_Bfloat16_E4m3E4m3_Fp32_...
TRTLLM_TYPES = {"e4m3": FP8, "e5m2": FP8, "e2m1": FP4, "bfloat16": BF16, "fp16": FP16, "fp32": FP32, "int8": INT8}
_TRTLLM_TYPE = r"(?:Mx)?(?:E4m3|E5m2|E2m1|Bfloat16|Fp16|Fp32|Int8)"
_TRTLLM_FMHA = re.compile(rf"fmhaSm(\d+)[a-z]?Kernel_Q(?:kv)?({_TRTLLM_TYPE})(?:Kv({_TRTLLM_TYPE}))?")
_TRTLLM_BMM = re.compile(rf"(?i)^bmm_{_TRTLLM_TYPE}_((?:{_TRTLLM_TYPE})+)_(?:Fp32|Fp16|Int32)_")


def _trtllm_type(word: str | None) -> str | None:
    return TRTLLM_TYPES.get(word.lower().removeprefix("mx")) if word else None


def tensorrt_llm(name: KernelName) -> KernelPrecision | None:
    fmha = _TRTLLM_FMHA.search(name.text)
    if fmha:
        precision = widest([_trtllm_type(fmha.group(2)), _trtllm_type(fmha.group(3))])
        return answer(precision, TENSOR_CORES, "TensorRT-LLM", int(fmha.group(1)))
    bmm = _TRTLLM_BMM.match(name.text)
    if bmm:
        operands = re.findall(rf"(?i){_TRTLLM_TYPE}", bmm.group(1))
        return answer(widest(map(_trtllm_type, operands)), TENSOR_CORES, "TensorRT-LLM", sm_version(name.text))
    return None


def tensorrt(name: KernelName) -> KernelPrecision | None:
    """TensorRT's own kernels: ``trt_turing_cutlass_image_network_first_layer_hmma_fprop_f16f16f32_...``."""
    match = re.match(r"^trt_(?:(" + "|".join(ARCHITECTURES) + r")_)?(\w+)", name.text)
    if not match:
        return None
    built_for = ARCHITECTURES.get(match.group(1) or "")
    tokens = match.group(2).split("_")
    groups = [types for types in map(concatenated_types, tokens) if types and types[0]]
    mma = next((token for token in tokens if token in ("hmma", "imma", "dmma", "hgmma", "igmma")), None)
    precision = groups[0][0] if groups else None
    unit = TENSOR_CORES if mma else CUDA_CORES if "simt" in tokens or "ffma" in tokens else None
    return answer(precision, unit, "TensorRT", built_for)


def cudnn_sdpa(name: KernelName) -> KernelPrecision | None:
    """cuDNN's generated attention: ``cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_...``."""
    if not name.text.startswith("cudnn_generated_"):
        return None
    tokens = name.lower.split("_")
    types = [token_type(token) for token in tokens if token_type(token)]
    if types == [FP16]:  # cuDNN writes f16 for BF16 inputs too (seen with BF16 models)
        return answer(
            None, TENSOR_CORES, "cuDNN", sm_version(name.text), "cuDNN attention: its 'f16' names FP16 and BF16 alike"
        )
    return answer(types[0] if types else None, TENSOR_CORES, "cuDNN", sm_version(name.text))


_FMHA_CUTLASS = re.compile(r"fmha_cutlass[FB]_(bf16|f16|f32)_")
_FLASH = re.compile(r"(?:^|::)flash_(?:fwd|bwd)\w*kernel\b|FlashAttn(?:Fwd|Bwd)|FlashAttention(?:Forward|Backward)")
_FLASHINFER = re.compile(r"flashinfer::\w*(?:Prefill|Decode)\w*Kernel")


def attention_templates(name: KernelName) -> KernelPrecision | None:
    """flash-attention (``flash::flash_fwd_kernel<Flash_fwd_kernel_traits<..., cutlass::bfloat16_t>>``,
    FA3's ``FlashAttnFwdSm90``), PyTorch's copy (``pytorch_flash::``) and memory-efficient attention
    (``fmha_cutlassF_bf16_aligned_64x128_rf_sm80``, xformers' kernel)."""
    fmha = _FMHA_CUTLASS.search(name.text)
    if fmha:
        library = "PyTorch" if "PyTorch" in name.full else "xformers"
        precision = token_type(fmha.group(1))
        if precision == FP32:
            why = "FP32 memory-efficient attention: the name does not say tensor cores (3xTF32) or CUDA cores"
            return answer(FP32, None, library, sm_version(name.text), why)
        return answer(precision, TENSOR_CORES, library, sm_version(name.text))
    if _FLASHINFER.search(name.text):  # prefill runs tensor cores; decode mostly CUDA cores
        unit = TENSOR_CORES if "prefill" in name.lower else None
        return answer(first_narrow(cpp_types(name.text)), unit, "FlashInfer", sm_version(name.text))
    if not _FLASH.search(name.text):
        return None
    library = "PyTorch" if "pytorch_flash" in name.lower else "flash-attention"
    return answer(first_narrow(cpp_types(name.text)), TENSOR_CORES, library, sm_version(name.text))


# A CUTLASS 3 MMA atom names its accumulator and operand types: "MMA_64x64x16_F32BF16BF16_SS".
_MMA_ATOM = re.compile(r"\d+x\d+x\d+_((?:F64|F32|TF32|BF16|F16|E4M3|E5M2|E2M1|S32|S8|U8|S4|U4){3})")
_ATOM_TYPES = re.compile(r"F64|F32|TF32|BF16|F16|E4M3|E5M2|E2M1|S32|S8|U8|S4|U4")
# CUTLASS's kernel entry points, demangled or mangled, and its kernel templates.
_CUTLASS_ENTRY = re.compile(
    r"cutlass\w*::(?:device_kernel|Kernel2?)\b|_ZN\d+cutlass\w*?\d+(?:device_kernel|Kernel2?)I|GemmUniversal|"
    r"cutlass::(?:gemm|conv)::kernel::"
)


def cutlass_templates(name: KernelName) -> KernelPrecision | None:
    """CUTLASS kernels whose configuration is in their template arguments: CUTLASS 3's
    ``cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<...>>`` and cuDNN's mangled CUTLASS."""
    if not _CUTLASS_ENTRY.search(name.text):
        return None
    if "cudnn" in name.lower:
        library = "cuDNN"
    elif "device_kernel" in name.text or "cute::" in name.text:
        library = "CUTLASS 3"
    else:
        library = "CUTLASS 2"
    atom = _MMA_ATOM.search(name.text)
    if atom:
        precision = widest(token_type(part) for part in _ATOM_TYPES.findall(atom.group(1))[1:])
    else:
        after = name.text.find("CollectiveMma<")
        types = cpp_types(name.text[after:] if after >= 0 else name.text)
        precision = types[0] if after >= 0 and types else first_narrow(types)
    if precision is None:
        return None  # a CUTLASS utility kernel, not a GEMM with its types in the name
    simt = re.search(r"OpClassSimt|UniversalFMA|Simt", name.text)
    return answer(precision, CUDA_CORES if simt else TENSOR_CORES, library, sm_version(name.text))


_TYPE_WORD = "|".join(sorted(TOKENS, key=len, reverse=True))
_OGS_TYPES = re.compile(rf"_({_TYPE_WORD})x({_TYPE_WORD})x({_TYPE_WORD})(?:_|$)")


def triton(name: KernelName) -> KernelPrecision | None:
    if name.text.startswith("triton_tem_"):
        return answer(None, None, "Triton", None, "Triton template (TorchInductor): the name does not say its dtypes")
    if "_matmul_ogs_" in name.text:  # triton_kernels: ..._bf16xbf16xmxfp4_... = output x activations x weights
        types = _OGS_TYPES.search(name.text)
        if types:
            precision = widest(token_type(part) for part in types.groups()[1:])
            unit = TENSOR_CORES if precision and WIDTH[precision] <= WIDTH[BF16] else None
            return answer(precision, unit, "Triton")
        return answer(None, None, "Triton", None, "triton_kernels matmul whose dtypes are not read")
    return None


FAMILIES: list[Family] = [tensorrt_llm, tensorrt, cudnn_sdpa, attention_templates, cutlass_templates, triton]
