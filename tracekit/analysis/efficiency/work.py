"""Per GPU operation of a trace: what it computed and moved, in which precision and on which unit, how long
it took, and what of that is not known (the rows every ``efficiency`` grouping sums).

FLOPs and bytes come from the operator the kernel ran for (``operators``), shared among that operator's
kernels by their GPU time (exact for the one-kernel GEMMs that dominate); precision and unit from the kernel's
name (``hardware.kernel_precision``, once per distinct name); a copy within device memory moves its bytes
twice (read and write), a set once; copies to or from the host go over the host link, not device memory, and
get no roofline. Names stay categorical: a million kernels have a few hundred names.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.efficiency.roofline import roofline_times, trace_peaks
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.analysis.primitives.kernel_hardware import kernel_hardware
from tracekit.analysis.primitives.operators import (
    NESTED,
    NO_SHAPES,
    covering_operators,
    named_operators,
    nested_flops,
    operator_counts,
    operator_inputs,
    outer_operators,
    with_element_bytes,
)
from tracekit.model.derived import per_trace
from tracekit.model.trace import Trace

HOST_LINK = "a copy over the host link (PCIe/NVLink-C2C), not device memory"
NO_OPERATOR = "no CPU operator launched it"
NO_ROOFLINE = "neither FLOPs nor bytes known"
DEVICE_COPY = ("DtoD", "Device -> Device", "Device to Device")
NO_OPERATOR_NAME = "(no operator)"
COLLECTIVE = "a collective (communication): its bandwidth is not a roofline's"
NOT_DESCRIBED = "the trace does not describe GPU {} (no name or limits recorded)"


@per_trace
def gpu_work(trace: Trace, name: str = "short", peaks: str | None = None, operators: bool = False) -> pd.DataFrame:
    """One row per GPU operation (gpu_ops order), computed once per trace and choice: device, kind, kernel (its
    ``name``: "short" or "demangled"), duration (ns), op_row (the operator with recorded inputs it ran for, -1),
    flops, bytes (NaN unknown), precision, unit (categorical), occupancy (0-1, NaN), roofline (s, NaN), bound,
    why (what is not known; categorical). ``operators``: also ``operator``, the name of the innermost operator
    of any kind that launched it ("(no operator)"). ``peaks``: a user's peaks file (``hardware.gpu_peaks``)."""
    devices = trace_peaks(trace, peaks)
    ops = trace.gpu_ops
    count = len(ops)
    kernel = (ops["kind"] == "kernel").to_numpy()
    duration = ops["duration"].to_numpy()
    hardware = kernel_hardware(trace)
    precision, unit = pd.Categorical(hardware["precision"]), pd.Categorical(hardware["unit"])
    owner = covering_operators(trace, operator_inputs(trace)) if len(operator_inputs(trace)) else np.full(count, -1)
    owner = np.where(kernel, owner, -1)
    reasons = Reasons()
    flops, moved, why = _counts(trace, owner, duration, precision, reasons)
    why[kernel & (owner < 0)] = reasons.code(NO_OPERATOR if len(operator_inputs(trace)) else NO_SHAPES)
    collective = kernel & (op_categories(trace) == CATEGORIES.index("communication"))
    why[collective] = reasons.code(COLLECTIVE)
    flops[collective] = moved[collective] = np.nan
    host = _copies(ops, kernel, flops, moved, why, reasons)
    work = pd.DataFrame(
        {
            "device": ops["device"].to_numpy(),
            "start": ops["start"].to_numpy(),
            "kind": ops["kind"],
            "kernel": ops["short_name" if name == "short" else "name"],
            "duration": duration,
            "op_row": owner,
            "flops": np.where(kernel, flops, np.nan),  # copies and sets compute nothing: no FLOPs to count
            "bytes": moved,
            "precision": precision,
            "unit": unit,
        }
    )
    if operators:
        work["operator"], work["operator_row"] = _operator_names(trace)
    work["occupancy"] = hardware["occupancy"].to_numpy()
    roofline, bound, missing = roofline_times(work, devices)
    for text in pd.unique(missing[pd.notna(missing)]):
        why[(missing == text) & (why < 0)] = reasons.code(str(text))
    device = work["device"].to_numpy()
    for index in np.unique(device).tolist():
        reason = devices.unknown.get(index) or (None if index in devices.peaks else NOT_DESCRIBED.format(index))
        if reason is not None:
            why[device == index] = reasons.code(reason)
    why[np.isnan(roofline) & (why < 0)] = reasons.code(NO_ROOFLINE)
    work["roofline"], work["bound"] = roofline, bound
    # a copy to or from the host: its bytes and rate shown, over the host link (no device-memory roofline)
    work.loc[host, "bytes"] = ops["bytes"].to_numpy(float)[host]
    work["why"] = pd.Categorical.from_codes(why, categories=pd.Index(reasons.texts, dtype=object))
    return work


class Reasons:
    """What is not known, as codes into a short list of texts (a million rows share a few reasons)."""

    def __init__(self):
        self.texts: list[str] = []

    def code(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text)

    def codes(self, texts: np.ndarray) -> np.ndarray:
        """Codes of an object array of texts (None: -1), once per distinct text."""
        found, distinct = pd.factorize(texts, use_na_sentinel=True)
        mapping = np.asarray([self.code(str(text)) for text in distinct] + [-1], dtype=np.int64)
        return mapping[found]


def _counts(
    trace: Trace, owner: np.ndarray, duration: np.ndarray, precision: pd.Categorical, reasons: Reasons
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per GPU op: FLOPs and bytes (NaN unknown) of its share of the operator it ran for, and why unknown
    (codes of ``reasons``, -1 where known)."""
    count = len(owner)
    flops, moved = np.full(count, np.nan), np.full(count, np.nan)
    why = np.full(count, -1, dtype=np.int64)
    owned = owner >= 0
    if not owned.any():
        return flops, moved, why
    inputs, counts = operator_inputs(trace), operator_counts(trace)
    instances, position = np.unique(owner[owned], return_inverse=True)
    time = np.bincount(position, weights=duration[owned]).astype(float)
    # each operator's precision: its longest matrix kernel's (what an nsys operator's bytes are counted in)
    matrix = precision.codes[owned] >= 0
    longest = pd.DataFrame({"at": position[matrix], "d": duration[owned][matrix], "p": precision.codes[owned][matrix]})
    chosen = longest.sort_values("d", kind="stable").groupby("at")["p"].last()
    op_precision = np.full(len(instances), None, dtype=object)
    op_precision[chosen.index.to_numpy()] = np.asarray(precision.categories, dtype=object)[chosen.to_numpy()]
    mine = with_element_bytes(
        counts.iloc[instances].reset_index(drop=True),
        inputs.iloc[instances].reset_index(drop=True),
        pd.Series(op_precision),
    )
    # an operator around others that own kernels: its count less theirs (its own kernels' share, exact for
    # FLOPs, which add up); its bytes are not a difference of theirs (intermediates): unknown, said
    outer = outer_operators(inputs, instances)
    own = mine["flops"].to_numpy(float) - nested_flops(inputs, instances, mine["flops"].to_numpy(float))
    had = (mine["flops"].notna() | mine["bytes"].notna()).to_numpy()
    said = mine["why_unknown"].to_numpy(object).copy()
    said[outer & had] = NESTED
    share = np.divide(duration[owned], time[position], out=np.zeros(len(position)), where=time[position] > 0)
    op_flops = np.where(outer, np.where(own >= 0, own, np.nan), mine["flops"].to_numpy(float))
    op_bytes = np.where(outer, np.nan, mine["bytes"].to_numpy(float))
    flops[owned] = op_flops[position] * share
    moved[owned] = op_bytes[position] * share
    why[owned] = reasons.codes(said)[position]
    return flops, moved, why


def _operator_names(trace: Trace) -> tuple[pd.Categorical, np.ndarray]:
    """Per GPU op, the innermost operator of any kind that launched it ("(no operator)" where none did) and its
    row among ``named_operators`` (-1)."""
    operators = named_operators(trace)
    row = covering_operators(trace, operators)
    names = operators["name"]
    categories = pd.Index([*names.cat.categories.astype(object), NO_OPERATOR_NAME], dtype=object).unique()
    codes = np.append(names.cat.codes.to_numpy(), -1)[row] if len(operators) else np.full(len(row), -1)
    none = categories.get_loc(NO_OPERATOR_NAME)
    return pd.Categorical.from_codes(np.where(codes >= 0, codes, none), categories=categories), row


def _copies(
    ops: pd.DataFrame, kernel: np.ndarray, flops: np.ndarray, moved: np.ndarray, why: np.ndarray, reasons: Reasons
) -> np.ndarray:
    """Copies and sets: a set writes its bytes, a copy within device memory reads and writes them (filled in
    place); returns the copies to or from the host, which have no device-memory roofline."""
    names = ops["name"]
    within = np.asarray([any(mark in str(text) for mark in DEVICE_COPY) for text in names.cat.categories] + [False])
    size = ops["bytes"].to_numpy(float)
    is_set = (ops["kind"] == "memset").to_numpy()
    device_copy = (ops["kind"] == "memcpy").to_numpy() & within[names.cat.codes.to_numpy()]
    moved[is_set] = size[is_set]
    moved[device_copy] = 2 * size[device_copy]
    host = ~kernel & ~is_set & ~device_copy
    why[host] = reasons.code(HOST_LINK)
    return host
