"""Which dtype each tensor of a training step has under autocast: parameters, every sub-layer's
output (first layer shown; all layers are alike), logits, loss, gradients.

The usual surprises it shows: under bf16 autocast the weights and their gradients stay float32, the
matmul outputs are bf16, and RMSNorm (computed in float32 here) returns its input's dtype.
"""

from __future__ import annotations

import pandas as pd
import torch

from tracekit.errors import UsageError
from tracekit.model.result import Result
from tracekit.run_config import RunConfig
from workloads.bench import DTYPES, make_batch, resolve_device
from workloads.models import build_model


def dtype_table(
    model_name: str = "tiny", dtype: str = "bf16", context: int = 32, batch: int = 2, device: str = "auto"
) -> Result:
    """Rows of (Tensor, Dtype) in the order a step creates them."""
    if DTYPES.get(dtype) is None:
        raise UsageError(f"--dtype {dtype}: choose a low-precision autocast dtype (bf16 or fp16)")
    target = resolve_device(device)
    model = build_model(model_name, context, "naive", target)
    rows = [("parameters", _distinct(parameter.dtype for parameter in model.parameters()))]
    watched = {"embedding": model.embedding, "final_norm": model.final_norm, "lm_head": model.lm_head}
    watched.update({f"layers.0.{name}": module for name, module in model.layers[0].named_modules() if name})
    handles = [module.register_forward_hook(_recorder(rows, f"{name} output")) for name, module in watched.items()]
    inputs, targets = make_batch(RunConfig(model_name, context, batch), target)
    try:
        with torch.autocast(target.type, dtype=DTYPES[dtype]):
            logits = model(inputs)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        rows.append(("logits", str(logits.dtype)))
        rows.append(("loss", str(loss.dtype)))
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    gradients = []
    for parameter in model.parameters():
        assert parameter.grad is not None, "every parameter takes part in the loss, so backward() gave it a gradient"
        gradients.append(parameter.grad.dtype)
    rows.append(("gradients", _distinct(gradients)))
    return Result.of(
        "dtypes", pd.DataFrame(rows, columns=["Tensor", "Dtype"]), f"Dtypes under {dtype} autocast: {model_name}"
    )


def _recorder(rows: list, label: str):
    calls = []

    def hook(module, inputs, output):
        calls.append(1)  # a module called twice per step (RoPE: queries, then keys) gets numbered rows
        name = label if len(calls) == 1 else f"{label} (call {len(calls)})"
        rows.append((name, str(output.dtype) if isinstance(output, torch.Tensor) else type(output).__name__))

    return hook


def _distinct(dtypes) -> str:
    return ", ".join(sorted({str(dtype) for dtype in dtypes}))
