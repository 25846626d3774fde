"""Kernel categories: what kind of work each GPU operation is (matmul, attention, elementwise, ...).

The rules are data: an ordered list of (category, pattern). A kernel gets the category of the first
pattern found (case-insensitive) in its demangled name; memcpy and memset operations are "memory".
The order resolves names that several patterns match:

1. communication first: NCCL kernels are called ...AllReduce..., ...Copy...; they are communication,
   not reductions or copies.
2. optimizer before elementwise and reduction: ``multi_tensor_apply_kernel<...FusedAdam...>`` is an
   elementwise kernel template and may compute norms; its purpose is the optimizer step.
3. attention before matmul and softmax: flash / fmha / cuDNN SDPA kernels carry ``cutlass`` and
   ``gemm`` in their template arguments and compute a softmax inside.
4. convolution before matmul: cuDNN, CUTLASS and TensorRT run convolutions as implicit GEMMs named
   ``*xmma_fprop_implicit_gemm*`` or ``cutlass_*fprop*``; what the user asked for is a convolution.
   cuDNN's helpers of a convolution (``im2col``, the FFT convolution's ``fft2d_r2c``/``fft2d_c2r``
   and ``flip_filter``) belong to it too.
5. matmul before the rest: GEMM kernels with fused epilogues mention bias, relu, or split-k reduce.
6. softmax and normalization before reduction: they are reductions, but named ones users ask about.
7. memory before elementwise: copies, dtype casts, cat, fill, gather/scatter are launched as
   ``elementwise_kernel<direct_copy_kernel_cuda...>``; they move data rather than compute. Layout
   transforms (cuDNN's ``nchwToNhwc``/``nhwcToNchw``) only reorder a tensor: memory too.
8. reduction before elementwise: pooling reduces a window to one value, and sort kernels (CUB's
   radix sort) are built from the same scans as ``cumsum``; they are reductions.
9. elementwise last: each output from a fixed few inputs, upsampling/interpolation included.
   Anything else is "other".
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.model.trace import Trace

CATEGORY_RULES: list[tuple[str, str]] = [
    ("communication", r"nccl|all_?reduce|all_?gather|reduce_?scatter|sendrecv"),
    ("optimizer", r"multi_tensor_apply|fused_?adam|_adam|adamw?_|fused_?sgd|lamb_kernel|_foreach_"),
    ("attention", r"flash|fmha|attention|sdpa|xformers|mem_eff"),
    (
        "convolution",
        r"convolve|convolution|conv[123]d|fprop|dgrad|wgrad|winograd|im2col|col2im|vol2col|"
        r"flip_filter|fft2d_[rc]2[rc]|depthwise",
    ),
    ("matmul", r"gemm|gemv|nvjet|cublas|cutlass|xmma|matmul|splitkreduce|triton_tem_\w*mm|\bbmm|_mm_"),
    ("softmax", r"softmax"),
    ("normalization", r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm"),
    (
        "memory",
        r"copy|memcpy|memset|catarray|fill|gather|scatter|index_select|indexing|nchw_?to_?nhwc|"
        r"nhwc_?to_?nchw|transpose",
    ),
    (
        "reduction",
        r"reduce|reduction|triton_red_|triton_per_|argmax|argmin|cumsum|scan_kernel|pool|radix_?sort|"
        r"segmented_?sort|sort_kernel",
    ),
    ("elementwise", r"elementwise|triton_poi_|functor|pointwise|upsample|interpolat|grid_?sampler"),
]
CATEGORIES = [category for category, _ in CATEGORY_RULES] + ["other"]
_COMPILED = [(category, re.compile(pattern, re.IGNORECASE)) for category, pattern in CATEGORY_RULES]


def categorize_name(name: str) -> str:
    """Category of one kernel name (first matching rule wins)."""
    for category, pattern in _COMPILED:
        if pattern.search(name):
            return category
    return "other"


def categorize_ops(ops: pd.DataFrame) -> pd.Categorical:
    """Category of every GPU operation. Rules run once per distinct name, not once per row."""
    names = ops["name"]
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype("category")
    by_name = np.array([CATEGORIES.index(categorize_name(str(name))) for name in names.cat.categories], dtype=np.int8)
    codes = names.cat.codes.to_numpy()
    category_codes = np.where(
        codes >= 0, by_name[np.maximum(codes, 0)] if len(by_name) else 0, CATEGORIES.index("other")
    ).astype(np.int8)
    # memcpy / memset operations are memory whatever their name.
    category_codes[(ops["kind"] != "kernel").to_numpy()] = CATEGORIES.index("memory")
    return pd.Categorical.from_codes(category_codes, categories=CATEGORIES)


def op_categories(trace: Trace) -> np.ndarray:
    """Category codes (indices into CATEGORIES) of a trace's GPU ops, computed once per trace."""
    return trace.derived("op_categories", lambda: categorize_ops(trace.gpu_ops).codes.astype(np.int64))
