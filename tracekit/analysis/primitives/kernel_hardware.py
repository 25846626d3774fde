"""What each kernel of a trace ran on: its precision and unit (from its name, ``hardware.kernel_precision``,
decided once per distinct name) and its theoretical occupancy (``hardware.occupancy``, from its registers,
shared memory and block size against its GPU's recorded limits). Copies and sets have none."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.hardware.kernel_precision import kernel_precisions
from tracekit.analysis.hardware.occupancy import device_limits, theoretical_occupancy
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.model.derived import per_trace
from tracekit.model.trace import Trace


@per_trace
def kernel_hardware(trace: Trace) -> pd.DataFrame:
    """Per GPU op (``gpu_ops`` order): precision and unit (categoricals, missing where unknown or not a
    kernel) and occupancy (0-1, NaN where unknown or not a kernel)."""
    ops = trace.gpu_ops  # (first: a trace may describe its GPUs after its events)
    kernel = (ops["kind"] == "kernel").to_numpy()
    precision, unit = _precisions(trace, kernel)
    occupancy = np.where(kernel, _occupancy(trace, ops), np.nan)
    return pd.DataFrame({"precision": precision, "unit": unit, "occupancy": occupancy})


def _precisions(trace: Trace, kernel: np.ndarray) -> tuple[pd.Categorical, pd.Categorical]:
    """Each op's precision and unit: ``kernel_precisions`` reads each distinct name once and fills the rows
    itself, told each row's category (``op_categories``, once per trace); copies and sets have none."""
    names = trace.gpu_ops["name"]
    categories = pd.Series(pd.Categorical.from_codes(op_categories(trace), categories=CATEGORIES), index=names.index)
    decided = kernel_precisions(names, categories)
    columns = []
    for column in ("precision", "unit"):  # by codes: no text per row
        values = decided[column].cat
        columns.append(pd.Categorical.from_codes(np.where(kernel, values.codes, -1), categories=values.categories))
    return columns[0], columns[1]


def _occupancy(trace: Trace, ops: pd.DataFrame) -> np.ndarray:
    """Theoretical occupancy of every GPU op, per device's limits (NaN where unknown)."""
    result = np.full(len(ops), np.nan)
    gpus = {int(gpu["id"]): gpu for gpu in trace.meta.gpus.to_dict("records")}
    device = ops["device"].to_numpy()
    for index in np.unique(device).tolist():
        limits, _ = device_limits(gpus.get(index, {}))
        if limits is None:
            continue
        mine = device == index
        block = np.prod([ops[f"block_{dim}"].to_numpy(np.int64)[mine] for dim in "xyz"], axis=0)
        registers = ops["registers_per_thread"].to_numpy()[mine]
        result[mine] = theoretical_occupancy(limits, registers, ops["shared_memory"].to_numpy()[mine], block)
    return result
