"""AMD's GEMM, convolution and attention kernel names (ROCm), read for their precision, unit and library.

- Tensile (rocBLAS) and TensileLite (hipBLASLt): ``Cijk_Alik_Bljk_BBS_BH_..._MT128x128x64_MI16x16x1_...``.
  After the index words come the types: the input type's code (S single, D double, H half, B bfloat16,
  C/Z complex, I8 int8, F8/B8 float8 E4M3/E5M2 and their mixes, X xfloat32), then for high-precision
  accumulation the output and compute codes ("BBS": BF16 in and out, FP32 compute); newer names put an
  underscore after the input code ("B_BS_BH"). ``MX`` after an FP32 type means the multiplies run as
  XF32. A matrix instruction ``MI16x16x1`` means MFMA (matrix cores); without one, vector units.
  hipBLASLt's names carry ``UserArgs``; rocBLAS's do not. ``ISA942`` is the gfx target.
- Composable Kernel (``ck::``, ``ck_tile``), often mangled: types as Itanium codes (``DF16b`` __bf16,
  ``DF16_`` _Float16, ``t`` unsigned short, CK's older bhalf_t, ``f`` float); ``xdl`` means MFMA.
- MIOpen's assembly convolutions: ``igemm_fwd_gtcx2_nhwc_bf16_...`` (``gtcx``: MFMA).
- aiter (``aiter::fmha_fwd_hd128_bf16_rtz``) and vLLM's ROCm attention (``paged_attention_ll4mi_QKV_mfma16``).
"""

from __future__ import annotations

import re

from tracekit.analysis.hardware.precision_names import (
    BF16,
    FP8,
    FP16,
    FP32,
    FP64,
    INT8,
    MATRIX_CORES,
    TF32,
    VECTOR_UNITS,
    Family,
    KernelName,
    KernelPrecision,
    answer,
    cpp_types,
    first_narrow,
    helper,
    token_type,
)

HELPERS = [
    (r"^cijk_\w*(?:postgsu|betaonly)", "hipBLASLt", "a split-K (GSU) reduce or beta-only pass of a Tensile GEMM"),
    (r"paged_attention\w*reduce_kernel", "vLLM", "combines partial attention results (a reduce)"),
    (r"^im\dd2col|^col2im\dd", "MIOpen", "an im2col-style layout change: it moves data for a GEMM to read"),
]
_HELPERS = [(re.compile(pattern), library, why) for pattern, library, why in HELPERS]


def helpers(name: KernelName) -> KernelPrecision | None:
    for pattern, library, why in _HELPERS:
        if pattern.search(name.lower):
            return helper(library, why)
    return None


TENSILE_TYPES = {"S": FP32, "D": FP64, "H": FP16, "B": BF16, "C": FP32, "Z": FP64, "X": TF32, "I8": INT8, "4xi8": INT8}
_TENSILE_CODE = re.compile(r"4xi8|F8B8N?|B8F8N?|F8N?|B8N?|I8|[SDHBCZIX]")
_TENSILE_SUFFIX = re.compile(r"BH?I?")  # UseBeta, HighPrecisionAccumulate, initial strides: no types


def _tensile_codes(token: str) -> list[str] | None:
    """The type codes a Tensile name word is made of ("BBS" -> ["B", "B", "S"]); None if it is not one."""
    codes = _TENSILE_CODE.findall(token)
    return codes if codes and "".join(codes) == token else None


def _tensile_precision(code: str) -> str | None:
    return FP8 if code[:2] in ("F8", "B8") else TENSILE_TYPES.get(code)


def tensile(name: KernelName) -> KernelPrecision | None:
    match = re.match(r"^(?:Custom\w*?_)?(Cijk_\w+)", name.text)
    if not match:
        return None
    tokens = match.group(1).split("_")
    library = "hipBLASLt" if "UserArgs" in tokens else "Tensile"
    unit = MATRIX_CORES if any(re.fullmatch(r"MI\d+x\d+x\d+(?:x\d+)?", token) for token in tokens) else VECTOR_UNITS
    # The first word after C's, A's and B's index words ("Ailk": lower-case index letters) and a
    # conjugation mark ("C") holds the input type. When A and B differ, that word is A's and B's codes
    # ("F8H") and the next one starts with the type the multiplies run in ("F8H_HHS_BH": FP16).
    at = 1
    while at < len(tokens) and re.fullmatch(r"[AB][i-z]+|C", tokens[at]):
        at += 1
    first = _tensile_codes(tokens[at]) if at < len(tokens) else None
    if first is None:
        return answer(None, unit, library, None, "Tensile name whose type code is not read")
    following = _tensile_codes(tokens[at + 1]) if at + 1 < len(tokens) else None
    mixed = len(first) == 2 and first[0] != first[1] and following and not _TENSILE_SUFFIX.fullmatch(tokens[at + 1])
    precision = _tensile_precision(following[0] if mixed and following else first[0])
    if precision == FP32 and "MX" in tokens:  # F32XdlMathOp: FP32 operands multiplied as XF32
        precision = TF32
    return answer(precision, unit, library)


# Itanium codes of CK's element types, and a run of three or more of them, as a mangled template
# argument list writes A, B, accumulator, ... types back to back ("ttftt", "DF16bDF16bfDF16b").
_CK_CODES = {"DF16b": BF16, "DF16_": FP16, "t": BF16, "f": FP32, "d": FP64, "a": INT8, "DB8_": FP8, "DU8_": FP8}
_CK_RUN = re.compile(r"(?<=[IE_])((?:DF16b|DF16_|DB8_|DU8_|[tfda]){3,})")
_CK_CODE = re.compile(r"DF16b|DF16_|DB8_|DU8_|[tfda]")


def composable_kernel(name: KernelName) -> KernelPrecision | None:
    if not re.match(r"^(?:_ZN2ck|_ZN7ck_tile|(?:\w+ )?ck(?:_tile)?::)", name.full):
        return None
    if not re.search(r"(?i)gemm|conv|fmha|attention|mha", name.full):
        return None  # CK's other kernels (norms, sorting, reductions)
    if name.full.startswith("_Z"):
        run = _CK_RUN.search(name.full)
        first = _CK_CODE.match(run.group(1)) if run else None
        precision = _CK_CODES[first.group(0)] if first else None
    else:
        # Demangled, CK's older bhalf_t prints as "unsigned short".
        precision = first_narrow(cpp_types(name.text.replace("unsigned short", "bhalf_t")))
    if re.search(r"xdl|mfma|fmha|wmma", name.lower):
        unit = MATRIX_CORES
    elif re.search(r"_dl_|gridwisegemmdl", name.lower):
        unit = VECTOR_UNITS
    else:
        unit = None
    why = None if unit else "a Composable Kernel kernel whose name says neither XDL (matrix cores) nor DL"
    return answer(precision, unit, "Composable Kernel", None, why)


_MIOPEN_IGEMM = re.compile(r"^igemm_(?:fwd|bwd|wrw)_gtc(x\d*)?_\w+?_(fp32|fp16|bf16|int8)_")


def miopen(name: KernelName) -> KernelPrecision | None:
    match = _MIOPEN_IGEMM.match(name.text)
    if not match:
        return None
    unit = MATRIX_CORES if match.group(1) else VECTOR_UNITS
    return answer(token_type(match.group(2)), unit, "MIOpen")


def aiter(name: KernelName) -> KernelPrecision | None:
    if not re.match(r"aiter::\w*(?:fmha|gemm|attn|mla|conv)", name.text):
        return None
    types = [token_type(token) for token in re.split(r"[_:]+", name.text) if token_type(token)]
    return answer(types[0] if types else None, MATRIX_CORES, "aiter")


def mfma_named(name: KernelName) -> KernelPrecision | None:
    """Kernels that name their MFMA instruction: vLLM's ``paged_attention_ll4mi_QKV_mfma16_kernel<...,
    __hip_bfloat16, ...>``."""
    if "mfma" not in name.base.lower():
        return None
    library = "vLLM" if "paged_attention" in name.base else ""
    return answer(first_narrow(cpp_types(name.text)), MATRIX_CORES, library)


FAMILIES: list[Family] = [helpers, tensile, composable_kernel, miopen, aiter, mfma_named]
