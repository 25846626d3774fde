"""What made the host late, from the ranges its thread was in, so a finding's fix follows its cause.

A host stall's gaps are named by the innermost range of the launching thread (``idle_rules``); a blocking
sync by the API and the range that called it. Each name is read against a short list of causes, and the
cause holding most of the time (over the gaps or calls given, weighted by their time) leads the fix. A name
no rule knows is Python between ops (the usual remedy: fewer launches per step).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

# (cause, pattern over range names, fix); first match wins
HOST_CAUSES = (
    (
        "data loading",
        re.compile(r"dataloader|__next__|collate|_getitem|dataset|fetch|prefetch|load_batch|next_data", re.I),
        "feed the GPU from background workers: DataLoader(num_workers=N, pin_memory=True, persistent_workers=True, "
        "prefetch_factor=2) and .to(device, non_blocking=True)",
    ),
    (
        "host syncs",
        re.compile(r"aten::item|_local_scalar_dense|aten::nonzero|masked_select|aten::unique|\.cpu|tolist", re.I),
        "keep values on the GPU: no .item(), .cpu(), .tolist() or data-dependent shapes (nonzero, masked_select) "
        "inside the step; log every N steps",
    ),
    (
        "the optimizer step",
        re.compile(r"optimizer|zero_grad|\.step\b|step#", re.I),
        "a per-parameter optimizer loop in Python: foreach=True or fused=True (torch.optim.AdamW(..., fused=True))",
    ),
    (
        "logging and checkpoints",
        re.compile(r"log|print|save|checkpoint|wandb|tensorboard|summary|metric", re.I),
        "log and save less often, and off the critical path (an async checkpoint, metrics gathered every N steps)",
    ),
)
PYTHON_FIX = (
    "Python and framework overhead between launches: fewer, larger kernels (torch.compile; CUDA graphs with "
    "torch.compile(mode='reduce-overhead') or torch.cuda.graphs); find the time with torch.profiler(with_stack=True)"
)
SYNC_CAUSES = (
    (
        ".item() and friends",
        re.compile(r"aten::item|_local_scalar_dense|aten::is_nonzero|tolist", re.I),
        "read values on the host less often: no .item()/.tolist()/if tensor inside the step; keep them on the GPU, "
        "log every N steps",
    ),
    (
        "data-dependent shapes",
        re.compile(r"aten::nonzero|masked_select|aten::unique|index_put|boolean", re.I),
        "avoid ops whose output size depends on the data (nonzero, masked_select, boolean indexing) in the step: "
        "torch.where with a fixed shape",
    ),
    (
        "device-to-host copies",
        re.compile(r"aten::copy_|aten::to\b|aten::_to_copy|\.cpu|memcpy", re.I),
        "copy to the host asynchronously: .to('cpu', non_blocking=True) into pinned memory, then one "
        "synchronize where the value is needed",
    ),
    (
        "cuDNN autotuning",
        re.compile(r"cudnn|convolution|conv\dd", re.I),
        "cuDNN's benchmark search (torch.backends.cudnn.benchmark=True) times each new shape once: a warm-up cost; "
        "keep shapes fixed so it runs once, and profile after it",
    ),
    (
        "the allocator",
        re.compile(r"cudaFree|empty_cache|caching_allocator|cudaMalloc", re.I),
        "the caching allocator freed memory to the driver (cudaFree synchronizes): avoid torch.cuda.empty_cache() "
        "in the step; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    ),
)
SYNC_FIX = (
    "keep the step free of host syncs: .item(), .cpu(), .tolist(), printing a CUDA tensor and "
    "torch.cuda.synchronize() wait for the GPU to drain; keep values on the GPU, log every N steps, copy "
    "with non_blocking=True into pinned memory"
)


def leading_cause(
    names: Sequence[str], weights: Sequence[float] | np.ndarray, causes: tuple, default_fix: str
) -> tuple[str | None, float, str]:
    """(the cause holding most of the weight, its share 0-1, its fix); (None, 0, ``default_fix``) when no name
    matches a cause."""
    totals: dict[int, float] = {}
    for name, weight in zip(names, weights):
        for index, (_, pattern, _) in enumerate(causes):
            if pattern.search(name):
                totals[index] = totals.get(index, 0.0) + float(weight)
                break
    whole = float(np.sum(weights))
    if not totals or whole <= 0:
        return None, 0.0, default_fix
    best = max(totals, key=lambda index: totals[index])
    cause, _, fix = causes[best]
    return cause, totals[best] / whole, fix
