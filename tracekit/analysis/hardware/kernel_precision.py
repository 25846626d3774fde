"""A GEMM's, convolution's or attention kernel's precision and the unit it ran on, from its name alone.

An efficiency figure needs the peak the kernel could have reached, and the peak depends on what it
multiplied in and where: on an A100, an FP32 GEMM on CUDA cores (``ampere_sgemm_128x64_nn``) has a
peak 16x below a BF16 one on tensor cores (``ampere_bf16_s16816gemm_bf16_...``). Libraries write both
into their kernels' names, each in its own way (``precision_nvidia``, ``precision_generated`` and
``precision_amd`` read them, in ``precision_names``' vocabulary); no shapes are needed. Names that do
not say are answered with precision or unit None and a reason (``why_unknown``), never a guess: a
Triton template's name carries no dtype, cuDNN's attention writes ``f16`` for BF16 too, a split-K
reduce does no GEMM arithmetic of its own.

Which kernels are matrix kernels is the categories' decision (``primitives.categories``: matmul,
convolution, attention). That package sits above this one, so callers pass a kernel's category in:
a kernel of another category is "not a matrix kernel", whatever its name. Without a category every
name is read as a candidate, and names of no known family say so.

The name also tells what architecture a kernel was compiled for (``sm80_``, ``cutlass_75_``,
``volta_``); ``built_for_older`` says when that is an older generation than the GPU it ran on, as
when a Turing kernel runs on an H100: the newer GPU's instructions (wgmma, FP8) go unused.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from tracekit.analysis.hardware import precision_amd, precision_generated, precision_nvidia
from tracekit.analysis.hardware.precision_names import KernelName, KernelPrecision
from tracekit.model.kernel_names import distinct_names, split_name

__all__ = ["HELPER_REASONS", "KernelPrecision", "built_for_older", "kernel_precision", "kernel_precisions"]

MATRIX_CATEGORIES = frozenset({"matmul", "convolution", "attention"})
NOT_MATRIX = KernelPrecision(None, None, "", None, "not a matrix kernel")
NO_FAMILY = KernelPrecision(None, None, "", None, "a name of no GEMM, convolution or attention library known here")
NO_NAME = KernelPrecision(None, None, "", None, "no name")
FAMILIES = [*precision_nvidia.FAMILIES, *precision_generated.FAMILIES, *precision_amd.FAMILIES]
# The reasons given for kernels that serve a matrix kernel without its arithmetic (split-K reduces,
# im2col, offset precomputation): unknown by nature, unlike a name that does not say.
HELPER_REASONS = frozenset(why for _, _, why in [*precision_nvidia.HELPERS, *precision_amd.HELPERS])
COLUMNS = ["precision", "unit", "library", "built_for", "why_unknown"]


def kernel_precision(name: str, category: str | None = None) -> KernelPrecision:
    """What ``name`` says about its arithmetic. ``category`` (``primitives.categories``' name for the
    kernel) decides whether it is a matrix kernel at all; None reads every name as one."""
    if category is not None and category not in MATRIX_CATEGORIES:
        return NOT_MATRIX
    return _from_name(name)


@functools.lru_cache(maxsize=1 << 16)
def _from_name(name: str) -> KernelPrecision:
    if name.count("<") == name.count(">") and name.count("(") == name.count(")"):
        base, arguments = split_name(name)
        text = f"{base}<{', '.join(arguments)}>" if arguments else base
    else:  # cut short (a profiler's or a table's limit): read as it is
        base = text = name
    kernel = KernelName(full=name, text=text, base=base, lower=text.lower())
    for family in FAMILIES:
        found = family(kernel)
        if found is not None:
            return found
    return NO_FAMILY


def kernel_precisions(names: pd.Series, categories: pd.Series | None = None) -> pd.DataFrame:
    """Per row of ``names``: precision, unit, library, built_for (Int64, SM version) and why_unknown.

    Each distinct name is read once (a categorical's categories, else the factorized values); rows
    are filled by position, so a million kernels cost what their few hundred names cost. Rows whose
    ``categories`` value (aligned with ``names``) is present and not matmul, convolution or attention
    are "not a matrix kernel"; missing names are "no name". String columns are categoricals."""
    codes, uniques = distinct_names(names)
    answers = [_from_name(str(name)) for name in uniques] + [NO_NAME, NOT_MATRIX]
    rows = np.where(codes < 0, len(answers) - 2, codes)
    if categories is not None:
        other = (categories.notna() & ~categories.isin(MATRIX_CATEGORIES)).to_numpy()
        rows = np.where(other, len(answers) - 1, rows)
    columns: dict[str, object] = {}  # in COLUMNS' order
    for column in ("precision", "unit", "library", "why_unknown"):
        per_answer = pd.Categorical([getattr(found, column) for found in answers])
        columns[column] = pd.Categorical.from_codes(per_answer.codes[rows], categories=per_answer.categories)
    built_for = np.array([found.built_for or 0 for found in answers], dtype=np.int64)
    unknown = np.array([found.built_for is None for found in answers])
    columns["built_for"] = pd.arrays.IntegerArray(built_for[rows], unknown[rows])
    return pd.DataFrame({column: columns[column] for column in COLUMNS}, index=names.index)


def built_for_older(built_for: int | None, compute_capability: tuple[int, int] | None) -> bool:
    """Whether a kernel compiled for SM ``built_for`` ran on a GPU of a newer generation (compute
    capability ``(major, minor)``): a cutlass_75 kernel on an sm90 GPU is; an sm80 kernel on an sm86
    or sm89 GPU is not (libraries ship one build per generation). False when either is unknown."""
    if built_for is None or pd.isna(built_for) or compute_capability is None:
        return False
    return int(built_for) // 10 < compute_capability[0]
