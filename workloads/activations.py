"""Activation memory of a training step: what autograd keeps for backward, by formula
(``tracekit.activation_formula``, which needs no torch) and measured.

Measured: the same step run on the CPU under ``torch.autograd.graph.saved_tensors_hooks``, each saved
tensor's storage counted once, parameters and buffers left out. The two agree within 0.02 % (to 4
bytes for small at context 256, batch 1); a few small tensors (the loss's bookkeeping) are not in it.
"""

from __future__ import annotations

import pandas as pd
import torch

from tracekit.activation_formula import activation_terms
from tracekit.model.result import Result
from tracekit.run_config import RunConfig, model_config
from workloads.attention_probe import saved_storage_bytes
from workloads.bench import make_batch
from workloads.models import build_model


def measured_saved_bytes(model: str, context: int, batch: int, dtype: str = "fp32") -> int:
    """Bytes autograd saves in one forward pass and loss of the model on the CPU (see the docstring)."""
    from workloads.bench import DTYPES

    network = build_model(model, context, "naive", "cpu")
    inputs, targets = make_batch(RunConfig(model, context, batch), torch.device("cpu"))
    cast = DTYPES[dtype]

    def step() -> torch.Tensor:
        autocast = torch.autocast("cpu", dtype=cast) if cast is not None else torch.autocast("cpu", enabled=False)
        with autocast:
            logits = network(inputs)
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))

    return saved_storage_bytes(step, leave_out=[*network.parameters(), *network.buffers()])


def activations_table(model: str, context: int, batch: int = 1, dtype: str = "fp32") -> Result:
    """The formula term by term, its total, what autograd saved (measured on the CPU), the difference,
    and the residual stream tensor (B L d) for scale. Formula rows need fp32 (autocast adds cast copies
    the formula does not model yet): other dtypes get the measured figure and a note."""
    terms = activation_terms(model, context, batch) if dtype == "fp32" else []
    rows = [{"Part": name, "How": how, "MiB": size / 2**20} for name, size, how in terms]
    formula = sum(size for _, size, _ in terms)
    measured = measured_saved_bytes(model, context, batch, dtype)
    spec = model_config(model, context)
    if terms:
        rows.append({"Part": "formula total", "How": "sum of the rows above", "MiB": formula / 2**20})
    rows.append({"Part": "measured (autograd saved)", "How": "saved_tensors_hooks, CPU", "MiB": measured / 2**20})
    if terms:
        rows.append({"Part": "difference", "How": "measured - formula", "MiB": (measured - formula) / 2**20})
    rows.append(
        {"Part": "residual stream tensor", "How": "B L d, one", "MiB": batch * context * spec.d_model * 4 / 2**20}
    )
    notes = []
    if not terms:
        notes.append(
            f"the formula covers fp32; under {dtype} autocast only the measured figure is given, and it includes the "
            f"{dtype} copies of every weight autocast saves for backward (parameter-sized, not activations)"
        )
    title = f"Activation memory saved for backward: {model}, context {context}, batch {batch}, {dtype}"
    return Result.of("activations", pd.DataFrame(rows), title, notes)
