"""Kernel categories: what kind of work each GPU operation is (matmul, attention, elementwise, ...).

The rules are data: an ordered list of (category, pattern, reason). A kernel gets the category of the
first pattern found (case-insensitive) in the text ``kernel_names.rule_text`` makes of its name: the
scoped base name, plus the first template argument that says something when the base name is generic
("elementwise_kernel", cutlass's "Kernel"); never the parameter list. memcpy and memset operations
are "memory". Each rule's reason says why it stands where it stands in the order.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.attention_patterns import attention_spans
from tracekit.model.derived import kept_per_trace, per_trace
from tracekit.model.kernel_names import rule_text
from tracekit.model.trace import Trace

# (category, pattern, why the rule is where it is). The first rule that matches decides.
CATEGORY_RULES: list[tuple[str, str, str]] = [
    ("elementwise", r"^triton_(?:poi|for)_",
     "Triton names say what they are by prefix (pointwise; foreach: pointwise over many tensors); what "
     "they fused comes after and misleads"),
    ("reduction", r"^triton_(?:red|per)_",
     "Triton reductions (persistent or not), even when the fused ops are a layer norm or a softmax"),
    ("matmul", r"^triton_tem_\w*mm",
     "Triton matmul templates"),
    ("communication", r"nccl|rccl|msccl|all_?reduce|all_?gather|reduce_?scatter|sendrecv|all_?to_?all|"
                      r"cross_device_reduce",
     "collective kernels are called ...AllReduce..., ...Copy...: communication, not reduction or copy"),
    ("optimizer", r"multi_tensor_apply_kernel(?!.*(?:norm|copy))|fused_?adam|_adam|adamw?_|fused_?sgd|"
                  r"lamb_kernel|adagrad|_foreach_",
     "optimizer steps are elementwise templates that may compute norms; their purpose is the step "
     "(a foreach norm or copy is a reduction or a copy)"),
    ("normalization", r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|bn_(?:fw|bw)|gamma_?beta|"
                      r"rowwise_?moments|compute(?:backward)?fusedparams|cucompute(?:part)?grad|"
                      r"computeinternalgradients",
     "named reductions users ask about (PyTorch's layer and group norm kernels: GammaBeta..., RowwiseMoments); "
     "before attention, since fused norm kernels of attention libraries "
     "(flashinfer) carry its name"),
    ("reduction", r"pool(?:ing)?_?(?:fw|bw|fwd|bwd)|_pooling|maxpool|avgpool|avg_pool|max_pool|adaptive_\w*pool|"
                  r"average_pool",
     "pooling reduces a window to a value; cuDNN names it xmma_pooling: before convolution and matmul"),
    ("attention", r"flash(?!infer)|fmha|attention|sdpa|xformers|mem_eff|paged_?attn|attn_(?:fwd|bwd)|"
                  r"mha_(?:fwd|bwd)|fused_?mha|(?:prefill|decode)with\w*kv_?cache|merge_?states",
     "fused attention computes GEMMs and a softmax inside; before matmul and softmax. flashinfer is a "
     "library, not a kernel: its attention kernels say Prefill/Decode...WithKVCache, its other kernels "
     "(activation, sampling, norm) fall to their own rules"),
    ("convolution", r"convolve|convolution|conv[123]d|_conv_|^conv|::conv|fprop|dgrad|wgrad|winograd|im2col|col2im|"
                    r"vol2col|col2vol|flip_filter|fft[123]d_[rc]2[rc]|depthwise|igemm_(?:fwd|bwd|wrw)|"
                    r"implicit_?gemm|bwd_weight|bwd_data|cudnn_(?:[a-z0-9]+_)?\d+x\d+|cask_cudnn|im2d2col",
     "convolutions run as implicit GEMMs (xmma fprop, cutlass ...fprop...), and cuDNN's FFT "
     "convolution has FFT kernels of its own: before matmul and fft"),
    ("fft", r"regular_fft|vector_fft|composite_\w*fft|cufft|^fft|::fft",
     "cuFFT's own transforms"),
    ("matmul", r"(?<!fb)gemm|gemv|nvjet|cublas|cutlass|xmma|matmul|splitkreduce|\bbmm|_mm_|^cijk_|wmma|mfma|"
               r"hipblaslt|dot_kernel",
     "GEMMs with fused epilogues mention bias, relu or a split-k reduce: before those"),
    ("softmax", r"softmax",
     "a named reduction users ask about: before reduction"),
    ("memory", r"copy|memcpy|memset|catarray|cat_|fill|gather(?!topk)|scatter|index_select|indexing|index_kernel|"
               r"nchw_?to_?nhwc|nhwc_?to_?nchw|transpose|permute|(?<!rotary_)embedding|index_?select|indexfunc|"
               r"index_put|store_kvcache|reshape_and_cache|to_dense",
     "copies, dtype casts, cat, fill, gather/scatter and layout changes move data rather than compute: "
     "before elementwise (they run as elementwise_kernel<copy...>)"),
    ("reduction", r"reduce|reduction|argmax|argmin|cumsum|scan|sort|topk|norm(?!al)|histogram|"
                  r"::device(?:compact|select|segmented|partition)\w*kernel|nllcriterion_updateoutput|routing|"
                  r"onesweep",
     "norms and sorts (built from scans) reduce; before elementwise. 'normal' is not a norm (thrust's "
     "normal_iterator, random normal kernels)"),
    ("elementwise", r"elementwise|functor|pointwise|upsample|interpolat|grid_?sampler|activation|relu|gelu|silu|"
                    r"dropout|sigmoid|tanh|rope|rotary|act_and_mul|quant(?:ize)?_|clamp|::transform_kernel|__transform::|seed_pseudo",
     "each output from a fixed few inputs; last, since everything above is also computed per element"),
]  # fmt: skip
CATEGORIES = [
    "communication",
    "optimizer",
    "attention",
    "convolution",
    "fft",
    "matmul",
    "softmax",
    "normalization",
    "memory",
    "reduction",
    "elementwise",
    "other",
]
_COMPILED = [(category, re.compile(pattern, re.IGNORECASE)) for category, pattern, _ in CATEGORY_RULES]


def categorize_name(name: str) -> str:
    """Category of one kernel name (first matching rule wins)."""
    text = rule_text(name)
    for category, pattern in _COMPILED:
        if pattern.search(text):
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


@kept_per_trace
def op_categories(trace: Trace) -> np.ndarray:
    """Category codes (indices into CATEGORIES) of a trace's GPU ops, computed once per trace (read-only):
    each by its name, except the kernels of attention computed as separate kernels (matmul -> softmax ->
    matmul on a stream: ``attention_patterns``), which count as attention, what they compute."""
    codes = name_categories(trace)
    members = attention_spans(trace, codes, CATEGORIES).members()
    if len(members):
        codes = codes.copy()
        codes[members] = CATEGORIES.index("attention")
    return codes


@per_trace
def name_categories(trace: Trace) -> np.ndarray:
    """Category codes of a trace's GPU ops by their names alone (no pattern across kernels), read-only."""
    return categorize_ops(trace.columns("gpu_ops", ["kind", "name"])).codes.astype(np.int64)
