"""Per GPU operation of a trace: what it computed and moved, in which precision and on which unit, how long
it took, and what of that is not known (the rows every ``efficiency`` grouping sums).

FLOPs and bytes come from the operator the kernel ran for (``operators``), shared among that operator's
kernels by their GPU time (exact for the one-kernel GEMMs that dominate); precision and unit from the kernel's
name (``hardware.kernel_precision``); a copy within device memory moves its bytes twice (read and write), a
set once; copies to or from the host go over the host link, not device memory, and get no roofline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.efficiency.operators import (
    NESTED,
    NO_SHAPES,
    kernel_operators,
    operator_counts,
    outer_operators,
    with_element_bytes,
)
from tracekit.analysis.efficiency.roofline import DevicePeaks, kernel_occupancy, roofline_times
from tracekit.analysis.hardware.kernel_precision import kernel_precisions
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.model.range_specs import shown_op_name
from tracekit.model.trace import Trace

HOST_LINK = "a copy over the host link (PCIe/NVLink-C2C), not device memory"
NO_OPERATOR = "no CPU operator launched it"
DEVICE_COPY = ("DtoD", "Device -> Device", "Device to Device")


def gpu_work(trace: Trace, devices: DevicePeaks, name: str = "short") -> pd.DataFrame:
    """One row per GPU operation (gpu_ops order): device, kind, kernel (its ``name``: "short" or "demangled"),
    category, duration (ns), operator (name of the operator it ran for, None), op_row (-1), flops, bytes (NaN
    unknown), precision, unit (None unknown), occupancy (0-1, NaN), roofline (s, NaN), bound, peak (FLOP/s),
    bandwidth (bytes/s), why (what is not known, None)."""
    ops = trace.gpu_ops
    count = len(ops)
    names = ops["short_name" if name == "short" else "name"]
    categories = pd.Categorical.from_codes(op_categories(trace), categories=CATEGORIES)
    precision = kernel_precisions(ops["name"], pd.Series(categories).astype(str))
    kernel = (ops["kind"] == "kernel").to_numpy()
    precision.loc[~kernel, ["precision", "unit"]] = None
    owners = kernel_operators(trace)
    counts = operator_counts(trace)
    owner = owners["counted"].to_numpy()
    duration = ops["duration"].to_numpy()

    # the operator instances that own kernels: their time, precision (their longest matrix kernel's) and counts;
    # copies and sets an operator issued (cuBLAS's workspace memset) keep their own bytes and no FLOPs
    owned = (owner >= 0) & kernel
    instance_time = pd.Series(pd.Series(duration[owned]).groupby(owner[owned]).sum())
    matrix = owned & precision["precision"].notna().to_numpy()
    by_time = pd.DataFrame({"op": owner[matrix], "d": duration[matrix], "p": precision["precision"].to_numpy()[matrix]})
    op_precision = pd.Series(by_time.sort_values("d", kind="stable").groupby("op")["p"].last())
    mine = counts.reindex(instance_time.index)
    mine = with_element_bytes(mine, op_precision.reindex(instance_time.index))
    # an operator around others that own kernels: its count is theirs (said only where it had one)
    outer = outer_operators(trace.ranges, instance_time.index.to_numpy())
    counted_itself = (mine["flops"].notna() | mine["bytes"].notna()).to_numpy()
    mine.loc[outer & counted_itself, "why_unknown"] = NESTED
    mine.loc[outer, ["flops", "bytes"]] = np.nan

    share = np.zeros(count)
    position = instance_time.index.get_indexer(owner)
    total = instance_time.to_numpy(float)
    share[owned] = np.divide(
        duration[owned], total[position[owned]], out=np.zeros(int(owned.sum())), where=total[position[owned]] > 0
    )
    flops = np.full(count, np.nan)
    moved = np.full(count, np.nan)
    flops[owned] = mine["flops"].to_numpy(float)[position[owned]] * share[owned]
    moved[owned] = mine["bytes"].to_numpy(float)[position[owned]] * share[owned]
    why = np.full(count, None, dtype=object)
    why[owned] = mine["why_unknown"].to_numpy(object)[position[owned]]
    _copies(ops, kernel, flops, moved, why)
    has_inputs = not counts.empty
    why[kernel & ~owned] = NO_SHAPES if not has_inputs else NO_OPERATOR

    operator_row = np.where(owner >= 0, owner, owners["operator"].to_numpy())
    range_names = trace.ranges["name"]
    codes = range_names.cat.codes.to_numpy()
    shown = np.asarray([shown_op_name(str(text)) for text in range_names.cat.categories] + [None], dtype=object)
    operator = shown[np.where(operator_row >= 0, codes[np.maximum(operator_row, 0)], -1)] if len(codes) else None
    work = pd.DataFrame(
        {
            "device": ops["device"].to_numpy(),
            "kind": ops["kind"].astype(str).to_numpy(),
            "kernel": names.astype(str).to_numpy(),
            "category": np.asarray(categories.astype(str)),
            "duration": duration,
            "operator": operator if operator is not None else np.full(count, None, dtype=object),
            "op_row": operator_row,
            "flops": np.where(kernel, flops, 0.0),
            "bytes": moved,
            "precision": precision["precision"].to_numpy(object),
            "unit": precision["unit"].to_numpy(object),
        }
    )
    work["occupancy"] = kernel_occupancy(trace, np.arange(count)) if count else np.zeros(0)
    work.loc[~kernel, "occupancy"] = np.nan
    roofline, bound, peak, bandwidth = roofline_times(work, devices)
    unknown_gpu = np.asarray([devices.unknown.get(int(device)) for device in work["device"]], dtype=object)
    why = np.where(pd.notna(unknown_gpu), unknown_gpu, why)
    why = np.where(np.isnan(roofline) & pd.isna(why), "neither FLOPs nor bytes known", why)
    work["roofline"], work["bound"], work["peak"], work["bandwidth"], work["why"] = (
        roofline,
        bound,
        peak,
        bandwidth,
        why,
    )
    return work


def _copies(ops: pd.DataFrame, kernel: np.ndarray, flops: np.ndarray, moved: np.ndarray, why: np.ndarray) -> None:
    """Copies and sets: a set writes its bytes, a copy within device memory reads and writes them; a copy to
    or from the host has no device-memory roofline (filled in place)."""
    names = ops["name"]
    within = np.asarray([any(mark in str(text) for mark in DEVICE_COPY) for text in names.cat.categories] + [False])
    size = ops["bytes"].to_numpy(float)
    is_set = (ops["kind"] == "memset").to_numpy()
    device_copy = (ops["kind"] == "memcpy").to_numpy() & within[names.cat.codes.to_numpy()]
    moved[is_set] = size[is_set]
    moved[device_copy] = 2 * size[device_copy]
    host = ~kernel & ~is_set & ~device_copy
    why[host] = HOST_LINK
    flops[~kernel] = 0.0
