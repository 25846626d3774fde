"""What one attention point costs besides time: its useful FLOPs, the bytes autograd saves for backward,
the peak memory of a forward and backward (CUDA), and which SDPA backend ran.

FLOPs convention (stated in the table's title): 2 per multiply-add of the two matmuls (q k^T and
weights v), counted over the query-key pairs a causal mask keeps, L (L + 1) / 2 per sequence, not
the L^2 square a naive implementation computes; backward is 2.5 times forward (five matmuls to
forward's two: dV, dP, dS->dQ, dS->dK and the recomputed or saved scores), the convention of the
FlashAttention papers. So TFLOP/s compares implementations on the work the result needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

BACKWARD_FACTOR = 2.5
# ATen ops SDPA dispatches to, by backend (the first one seen names it); none of them: the math path.
SDPA_BACKENDS = (
    ("_scaled_dot_product_flash_attention", "flash"),
    ("_scaled_dot_product_efficient_attention", "memory-efficient"),
    ("_scaled_dot_product_cudnn_attention", "cuDNN"),
    ("_scaled_dot_product_fused_attention_overrideable", "fused (device)"),
)


def attention_flops(batch: int, length: int, head_dim: int, causal: bool) -> tuple[int, int]:
    """Useful forward and backward FLOPs of one attention call (see the module docstring)."""
    pairs = length * (length + 1) // 2 if causal else length * length
    forward = 2 * 2 * batch * pairs * head_dim
    return forward, int(forward * BACKWARD_FACTOR)


class _OpNames(TorchDispatchMode):
    """Collects the ATen ops run below autograd."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def sdpa_backend(function: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> str:
    """The SDPA backend one call of ``function`` runs (flash, memory-efficient, cuDNN or math)."""
    with _OpNames() as ops, torch.no_grad():
        function(q, k, v, causal)
    for op, backend in SDPA_BACKENDS:
        if any(op in name for name in ops.names):
            return backend
    return "math"


def saved_bytes(function: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> int:
    """Bytes autograd keeps alive for backward beyond the inputs (q, k and v left out)."""
    return saved_storage_bytes(lambda: function(q, k, v, causal), leave_out=(q, k, v))


def saved_storage_bytes(forward: Callable[[], object], leave_out: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages autograd saves for backward while ``forward()`` runs, each counted
    once (views share their storage), the storages of ``leave_out`` (inputs, parameters) not counted.

    The pack hook keeps each saved tensor in a list of its own and gives autograd only its position
    (the graph is never run backward). Returning the tensor itself would leak it: a node that saves its
    own output (softmax, exp) would then hold that tensor, which holds the node, a cycle through C++ that
    Python's collector cannot see (on a GPU each probe leaked the point's L x L tensors)."""
    excluded = {tensor.untyped_storage().data_ptr() for tensor in leave_out}
    kept: list[torch.Tensor] = []  # alive until the count is done: no storage is reused meanwhile

    def keep(tensor: torch.Tensor) -> int:
        kept.append(tensor)
        return len(kept) - 1

    def never_unpacked(position: int) -> torch.Tensor:
        raise RuntimeError("saved_storage_bytes: this graph is only counted, never run backward")

    with torch.autograd.graph.saved_tensors_hooks(keep, never_unpacked):
        output = forward()
    storages = {tensor.untyped_storage().data_ptr(): tensor.untyped_storage().nbytes() for tensor in kept}
    del output
    kept.clear()
    return sum(size for pointer, size in storages.items() if pointer not in excluded)


def peak_bytes(function: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> int | None:
    """Peak CUDA memory of one forward and backward above what was allocated before it; None off CUDA."""
    if q.device.type != "cuda":
        return None
    torch.cuda.synchronize(q.device)
    before = torch.cuda.memory_allocated(q.device)
    torch.cuda.reset_peak_memory_stats(q.device)
    function(q, k, v, causal).sum().backward()
    torch.cuda.synchronize(q.device)
    return torch.cuda.max_memory_allocated(q.device) - before
