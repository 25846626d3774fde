"""The words a kernel's precision is told in: the answer's vocabulary and the type spellings of names.

``KernelPrecision`` is what ``kernel_precision`` answers for a name. Its precision is the type the
kernel multiplies in, the one a GPU's peak is quoted for: the operands' type on tensor and matrix
cores ("BF16" for BF16 inputs with FP32 accumulation, "TF32" for FP32 inputs the tensor cores round to
TF32), the arithmetic's type on CUDA cores ("FP32" for a GEMV that reads BF16 and multiplies in float).
Libraries spell types three ways, each read here once: short tokens between underscores (``bf16``,
``f32``, ``e4m3``, ``int8x4``), concatenated tokens (``bf16bf16``, ``tf32f32``), and C++ types in
template arguments (``cutlass::bfloat16_t``, ``__nv_bfloat16``, ``float``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

FP64 = "FP64"
FP32 = "FP32"
TF32 = "TF32"
BF16 = "BF16"
FP16 = "FP16"
FP8 = "FP8"
FP6 = "FP6"
FP4 = "FP4"
INT8 = "INT8"
INT4 = "INT4"
# Where the multiplies ran. NVIDIA: CUDA cores (FFMA, DFMA, HFMA2, DP4A) or tensor cores (HMMA, IMMA,
# DMMA, GMMA, UMMA); AMD: vector units (v_fma) or matrix cores (MFMA).
CUDA_CORES = "CUDA cores"
TENSOR_CORES = "tensor cores"
VECTOR_UNITS = "vector units"
MATRIX_CORES = "matrix cores"

# A wider type runs at a lower peak; of two operand types, the wider is the one the multiply runs in
# (a BF16 x MXFP4 kernel converts the FP4 weights to BF16; FP4 x FP8 runs at Blackwell's FP8 rate).
WIDTH = {FP4: 1, INT4: 1, FP6: 2, FP8: 3, INT8: 3, FP16: 4, BF16: 4, TF32: 5, FP32: 6, FP64: 7}

# Architecture names in kernel names, as the SM version their kernels were compiled for.
ARCHITECTURES = {
    "kepler": 35,
    "maxwell": 50,
    "pascal": 60,
    "volta": 70,
    "turing": 75,
    "ampere": 80,
    "ada": 89,
    "hopper": 90,
    "blackwell": 100,
}


@dataclass(frozen=True)
class KernelPrecision:
    """What a kernel's name says about its arithmetic.

    precision   "FP64", "FP32", "TF32", "BF16", "FP16", "FP8", "FP6", "FP4", "INT8" or "INT4"; None when
                the name does not say
    unit        "CUDA cores", "tensor cores" (NVIDIA), "vector units", "matrix cores" (AMD); None: unknown
    library     "cuBLAS", "cuBLASLt", "CUTLASS 2", "CUTLASS 3", "cuDNN", "TensorRT", "TensorRT-LLM",
                "Triton", "flash-attention", "PyTorch", "xformers", "hipBLASLt", "Tensile",
                "Composable Kernel", "MIOpen", "aiter", "vLLM"; "" when the name does not say
    built_for   the SM version the kernel was compiled for when the name says it (sm80 -> 80,
                ampere_ -> 80, cutlass_75 -> 75); None otherwise, and for AMD (gfx targets are not SMs)
    why_unknown why precision or unit is None (None when both are known)
    """

    precision: str | None
    unit: str | None
    library: str
    built_for: int | None = None
    why_unknown: str | None = None


def answer(
    precision: str | None, unit: str | None, library: str, built_for: int | None = None, why: str | None = None
) -> KernelPrecision:
    """A KernelPrecision whose why_unknown is set exactly when something is unknown (a generic reason
    when the caller gave none, so no unknown ever goes unexplained)."""
    if precision is not None and unit is not None:
        return KernelPrecision(precision, unit, library, built_for, None)
    if why is None:
        missing = " and ".join(part for part, value in (("precision", precision), ("unit", unit)) if value is None)
        why = f"{library or 'this'} kernel: its name does not say its {missing}"
    return KernelPrecision(precision, unit, library, built_for, why)


def helper(library: str, why: str) -> KernelPrecision:
    """A kernel that serves a GEMM or convolution (a split-K reduce, index precomputation, im2col)
    without doing its matrix arithmetic: it has no GEMM precision of its own."""
    return KernelPrecision(None, None, library, None, why)


def widest(precisions: Iterable[str | None]) -> str | None:
    """The widest known precision of several (the one mixed operands multiply in); None if none known."""
    known = [precision for precision in precisions if precision is not None]
    return max(known, key=WIDTH.__getitem__) if known else None


# Short tokens (lower case) as libraries write types between underscores, per precision.
SPELLINGS = [
    (FP64, ("f64", "fp64", "double")),
    (FP32, ("f32", "fp32", "float", "float32")),
    (TF32, ("tf32", "xf32")),
    (BF16, ("bf16", "bfloat16")),
    (FP16, ("f16", "fp16", "half", "float16")),
    (FP8, ("fp8", "f8", "bf8", "e4m3", "e5m2", "mxfp8", "mxe4m3")),
    (FP6, ("fp6", "e3m2", "e2m3", "mxfp6")),
    (FP4, ("fp4", "e2m1", "mxfp4", "nvfp4", "mxe2m1")),
    (INT8, ("int8", "int8x4", "i8", "s8", "u8")),
    (INT4, ("int4", "i4", "s4", "u4")),
]
TOKENS = {spelling: precision for precision, spellings in SPELLINGS for spelling in spellings}
# Types written back to back ("bf16bf16", "tf32f32", "e4m3bf16", "i8i32"); 32-bit integers are only
# ever accumulators, kept so a group still splits.
_CONCATENATED_PART = (
    r"tf32|bf16|fp16|f16|fp32|f32|fp64|f64|e4m3|e5m2|e2m1|e3m2|e2m3|int8|i8|s8|u8|i32|s32|int4|i4|s4|u4"
)
_CONCATENATED = re.compile(rf"(?:{_CONCATENATED_PART})+")
_CONCATENATED_PARTS = re.compile(_CONCATENATED_PART)


def token_type(token: str) -> str | None:
    """The precision a short type token names ("bf16" -> "BF16"); None if it names none."""
    return TOKENS.get(token.lower())


def concatenated_types(token: str) -> list[str | None] | None:
    """The types of a token of back-to-back type names ("tf32f32" -> ["TF32", "FP32"], a 32-bit
    integer accumulator -> None); None if the token is not such a run."""
    if not _CONCATENATED.fullmatch(token):
        return None
    return [TOKENS.get(part) for part in _CONCATENATED_PARTS.findall(token)]


# C++ spellings of element types in template arguments, demangled. Scale-factor types (float_ue8m0_t,
# float_ue4m3_t) name no operand and match nothing here.
_CPP_TYPES = [
    (TF32, r"tfloat32_t"),
    (BF16, r"bfloat16|BFloat16|bhalf_t|__bf16"),
    (FP16, r"(?<![a-z])half_t\b|\b__half2?\b|\bhalf\b|\bHalf\b|_Float16"),
    (FP8, r"float_e4m3|float_e5m2|fp8_e4m3|fp8_e5m2|Float8_e[45]m[23]|\bb?f8_t\b|_BitInt\(8\)"),
    (FP6, r"float_e3m2|float_e2m3"),
    (FP4, r"float_e2m1|fp4_e2m1"),
    (FP64, r"\bdouble[1-4]?\b"),
    (FP32, r"\bfloat[1-4]?\b"),
    (INT8, r"\bint8_t\b|\bsigned char\b"),
    (INT4, r"\bu?int4b_t\b"),
]
_CPP_TYPE = re.compile("|".join(f"(?P<{precision}>{pattern})" for precision, pattern in _CPP_TYPES))


def cpp_types(text: str) -> list[str]:
    """The precisions of the C++ element types in ``text``, in the order they appear."""
    return [match.lastgroup for match in _CPP_TYPE.finditer(text) if match.lastgroup]


# "sm80" or "SM90" as a word of its own, "Sm90" also inside a camel-case name ("MainloopSm90TmaGmma").
_SM = re.compile(r"(?:(?<![A-Za-z])(?:sm|Sm|SM)_?|(?<=[a-z])Sm)(\d{2,3})[af]?(?!\d)")


def sm_version(text: str) -> int | None:
    """The SM version a name was built for, from "sm80", "sm_90a", "Sm100", "cutlass::arch::Sm90"."""
    match = _SM.search(text)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class KernelName:
    """A kernel name in the forms the families read: ``full`` as recorded, ``text`` without its parameter
    list (which repeats the template's types, or names only ``T1::Params``), ``base`` its scoped base
    name, ``lower`` the text in lower case."""

    full: str
    text: str
    base: str
    lower: str


def first_narrow(precisions: list[str]) -> str | None:
    """The first 16-bit or narrower type of a template's types (the operands of an attention or
    tensor-core kernel, written before its float accumulator and scales), else the first type."""
    narrow = [precision for precision in precisions if WIDTH[precision] <= WIDTH[BF16]]
    return narrow[0] if narrow else (precisions[0] if precisions else None)


# A family of names: its answer for a name of the family, None for any other name.
Family = Callable[[KernelName], "KernelPrecision | None"]
