"""``tracekit ops``: per CPU operator, the kernels it launched, their time, and how long after the operator
started its first kernel ran, as HolisticTraceAnalysis 0.5's ``get_aten_op_kernels_and_delay`` measures it.

Each kernel launch call (cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, ...: names matching
``cuda.*LaunchKernel``, ``cuLaunchKernel`` or ``runFunction``, HTA's pattern, and ROCm's
``hip*LaunchKernel``) belongs to the innermost
operator of its thread that covers it whole (start at or before the call's start, end at or after its
end): torch.profiler's ``aten::`` operators, or the ``aten::`` ranges of emit_nvtx in nsys exports. Per
operator instance, in call order: its kernels; Launch Delay (ns), from the operator's start to its first
launch call's start; Runtime Delay (ns), from that call's start to its kernel's start; Op To Kernel (ns),
their sum. Tables:
- "ops": per operator name: instances that launched kernels, kernels, their summed time, and the means
  of the first-kernel delays; the most kernel time first.
- "sequences": per operator name and sequence of kernel names (HTA's table, with ``name`` "demangled":
  HTA's names; by default base names, templated variants together): instances and the mean Launch
  and Runtime Delays.
HTA looks for the covering operator on any thread; tracekit on the call's own thread.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.kernels.types import launched_before_last_step
from tracekit.analysis.options import OpsOptions
from tracekit.analysis.ranges.attribution import op_launches
from tracekit.errors import NoGpuDataError
from tracekit.model.range_specs import op_name
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace

# HTA's pattern, and ROCm's launches (hipLaunchKernel, hipExtModuleLaunchKernel), which HTA's misses
KERNEL_LAUNCH = re.compile(r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)|(^hip.*LaunchKernel)")
ATEN = "aten::"


def op_kernels(trace: Trace, name: str = "short", drop_last_step: bool = False) -> pd.DataFrame:
    """Per kernel launch call that an operator covers: thread, operator (name, start, its row in
    ``ranges``), call start, kernel (its ``name``: "short" or "demangled"; start, duration), in call order."""
    calls, ops = trace.launches, trace.gpu_ops
    launches = op_launches(trace)
    names = calls["name"].cat.categories
    launching = np.asarray([KERNEL_LAUNCH.search(str(name)) is not None for name in names], dtype=bool)
    window = launched_before_last_step(trace)[0] if drop_last_step else None
    kernel_rows = np.flatnonzero(launches.found & (ops["kind"] == "kernel").to_numpy()
                                 & (window if window is not None else True))  # fmt: skip
    call_rows = launches.row[kernel_rows]
    keep = launching[calls["name"].cat.codes.to_numpy()[call_rows]]
    kernel_rows, call_rows = kernel_rows[keep], call_rows[keep]
    order = np.argsort(call_rows, kind="stable")
    kernel_rows, call_rows = kernel_rows[order], call_rows[order]
    operator = _covering_operator(trace.ranges, calls, call_rows)
    found = operator >= 0
    ranges = trace.ranges
    kernel_names = ops["short_name" if name == "short" else "name"]
    range_names = ranges["name"].cat.categories
    shown_codes, shown = pd.factorize(np.asarray([op_name(str(text).removeprefix("cpu_op:")) for text in range_names],
                                                 dtype=object))  # fmt: skip
    row_of = operator[found]
    # names stay categorical: a trace launches hundreds of thousands of kernels, of a few hundred names
    kernels = pd.Categorical.from_codes(kernel_names.cat.codes.to_numpy()[kernel_rows[found]],
                                        categories=kernel_names.cat.categories)  # fmt: skip
    return pd.DataFrame({
        "tid": calls["tid"].to_numpy()[call_rows[found]],
        "operator": pd.Categorical.from_codes(shown_codes[ranges["name"].cat.codes.to_numpy()[row_of]],
                                              categories=pd.Index(shown, dtype=object)),
        "op_start": ranges["start"].to_numpy()[row_of],
        "op_row": row_of,
        "call_start": calls["start"].to_numpy()[call_rows[found]],
        "kernel": kernels,
        "kernel_start": ops["start"].to_numpy()[kernel_rows[found]],
        "kernel_duration": ops["duration"].to_numpy()[kernel_rows[found]],
    })  # fmt: skip


def _covering_operator(ranges: pd.DataFrame, calls: pd.DataFrame, call_rows: np.ndarray) -> np.ndarray:
    """Per call, the row in ``ranges`` of the innermost ``aten::`` range of its thread that covers it
    whole (-1: none). From the last range of the thread that started at or before the call, up its
    parents (the nesting the reader computed) until an operator covers the call: a few vector passes."""
    found = np.full(len(call_rows), -1, dtype=np.int64)
    if ranges.empty or not len(call_rows):
        return found
    names = ranges["name"].cat.categories
    is_operator = np.asarray([op_name(str(name).removeprefix("cpu_op:")).startswith(ATEN) for name in names], bool)
    operator = is_operator[ranges["name"].cat.codes.to_numpy()] & (ranges["domain"].astype(str) != "gpu").to_numpy()
    start, end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
    ids = ranges["range_id"].to_numpy()
    by_id = np.argsort(ids, kind="stable")
    wanted = ranges["parent"].to_numpy()
    at = np.minimum(np.searchsorted(ids[by_id], wanted), len(ids) - 1)
    parent = np.where((wanted >= 0) & (ids[by_id][at] == wanted), by_id[at], -1)
    thread = ranges["pid"].to_numpy() * 2**32 + ranges["tid"].to_numpy()
    order = np.lexsort((start, thread))  # by thread, then start
    call_thread = calls["pid"].to_numpy()[call_rows] * 2**32 + calls["tid"].to_numpy()[call_rows]
    call_start, call_end = calls["start"].to_numpy()[call_rows], calls["end"].to_numpy()[call_rows]
    # the last range of the call's thread that started at or before it: one searchsorted on (thread, start)
    sorted_thread, sorted_start = thread[order], start[order]
    low = np.searchsorted(sorted_thread, call_thread, side="left")
    high = np.searchsorted(sorted_thread, call_thread, side="right")
    at = np.empty(len(call_rows), dtype=np.int64)
    for index in np.unique(call_thread).tolist():  # threads are few: one searchsorted each
        mine = np.flatnonzero(call_thread == index)
        lo, hi = int(low[mine[0]]), int(high[mine[0]])
        at[mine] = lo + np.searchsorted(sorted_start[lo:hi], call_start[mine], side="right") - 1
        at[mine] = np.where(at[mine] >= lo, at[mine], -1)
    current = np.where(at >= 0, order[np.maximum(at, 0)], -1)
    while True:
        looking = current >= 0
        rows = current[looking]
        covers = operator[rows] & (start[rows] <= call_start[looking]) & (end[rows] >= call_end[looking])
        found[np.flatnonzero(looking)[covers]] = rows[covers]
        climbing = np.flatnonzero(looking)[~covers]
        if not len(climbing):
            return found
        current[np.flatnonzero(looking)[covers]] = -1
        current[climbing] = parent[current[climbing]]


def _sequences(launched: pd.DataFrame, instances: np.ndarray) -> np.ndarray:
    """Per operator instance (``instances``: op rows), its kernel names in call order joined by " -> ".
    Instances are told apart by two 64-bit polynomial hashes of their name codes and their length (no
    Python per instance: a trace holds hundreds of thousands), and each distinct sequence is written once."""
    codes = launched["kernel"].cat.codes.to_numpy()
    names = launched["kernel"].cat.categories
    op_row = launched["op_row"].to_numpy()
    order = np.argsort(op_row, kind="stable")  # each instance's kernels together, in call order
    rows, values = op_row[order], codes[order].astype(np.uint64) + np.uint64(1)
    first = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
    position = np.arange(len(rows)) - np.repeat(first, np.diff(np.append(first, len(rows))))
    hashes = []
    with np.errstate(over="ignore"):
        for base in (np.uint64(1_000_003), np.uint64(0x9E3779B97F4A7C15)):
            powers = np.empty(int(position.max()) + 1, dtype=np.uint64)  # base^k modulo 2^64
            powers[0] = np.uint64(1)
            powers[1:] = np.cumprod(np.full(len(powers) - 1, base, dtype=np.uint64))
            hashes.append(np.add.reduceat(values * powers[position], first))
    lengths = np.diff(np.append(first, len(rows)))
    keys = pd.MultiIndex.from_arrays([lengths, hashes[0], hashes[1]])
    sequence_id, distinct = pd.factorize(keys)
    texts = np.empty(len(distinct), dtype=object)
    example = np.zeros(len(distinct), dtype=np.int64)
    example[sequence_id[::-1]] = np.arange(len(first))[::-1]  # the first instance of each sequence
    for index, instance in enumerate(example.tolist()):
        low = first[instance]
        texts[index] = " -> ".join(str(names[code]) for code in codes[order][low : low + lengths[instance]])
    by_row = pd.Series(texts[sequence_id], index=rows[first])
    return by_row.reindex(instances).to_numpy()


def ops_table(trace: Trace, options: OpsOptions | None = None) -> Result:
    """Per operator: its kernels, their time and the delays to its first kernel (see the module docstring)."""
    options = options or OpsOptions()
    launched = op_kernels(trace, options.name, options.drop_last_step)
    if launched.empty:
        raise NoGpuDataError(f"{trace.name}: no kernel launch call inside an aten:: operator (torch.profiler's CPU "
                             "operators, or emit_nvtx ranges in an nsys export)")  # fmt: skip
    instances = launched.groupby("op_row", sort=False, observed=True).agg(
        operator=("operator", "first"), op_start=("op_start", "first"), call_start=("call_start", "first"),
        kernel_start=("kernel_start", "first"), kernels=("kernel", "size"), time=("kernel_duration", "sum"),
    )  # fmt: skip
    instances["sequence"] = _sequences(launched, instances.index.to_numpy())
    instances["launch_delay"] = instances["call_start"] - instances["op_start"]
    instances["runtime_delay"] = instances["kernel_start"] - instances["call_start"]
    per_op = instances.groupby("operator", sort=False, observed=True).agg(
        Instances=("kernels", "size"), Kernels=("kernels", "sum"), time=("time", "sum"),
        launch=("launch_delay", "mean"), runtime=("runtime_delay", "mean"),
    ).reset_index()  # fmt: skip
    per_op = per_op.sort_values(["time", "operator"], ascending=[False, True], kind="stable").head(options.top)
    table = pd.DataFrame({
        "Operator": per_op["operator"].to_numpy(), "Instances": per_op["Instances"].to_numpy(),
        "Kernels": per_op["Kernels"].to_numpy(), "Kernel Time (ns)": per_op["time"].to_numpy(np.int64),
        "Op To Kernel (ns)": (per_op["launch"] + per_op["runtime"]).to_numpy(),
        "Launch Delay (ns)": per_op["launch"].to_numpy(), "Runtime Delay (ns)": per_op["runtime"].to_numpy(),
    })  # fmt: skip
    sequences = instances.groupby(["operator", "sequence"], sort=False, observed=True).agg(
        Count=("kernels", "size"), launch=("launch_delay", "mean"), runtime=("runtime_delay", "mean"),
    ).reset_index().sort_values(["Count", "operator", "sequence"], ascending=[False, True, True], kind="stable")  # fmt: skip
    sequence_table = pd.DataFrame({
        "Operator": sequences["operator"].to_numpy(), "Count": sequences["Count"].to_numpy(),
        "Launch Delay (ns)": sequences["launch"].to_numpy(), "Runtime Delay (ns)": sequences["runtime"].to_numpy(),
        "Kernels": sequences["sequence"].to_numpy(),
    }).head(options.top)  # fmt: skip
    notes = [launched_before_last_step(trace)[1]] if options.drop_last_step else []
    notes += [
        "per operator instance: Launch Delay from its start to its first kernel launch call, Runtime Delay from that "
        "call to its kernel's start (HolisticTraceAnalysis's get_aten_op_kernels_and_delay), means per operator"
    ]
    return Result(
        [Table("ops", table, f"Operators and their kernels: {trace.name}"),
         Table("sequences", sequence_table, "Kernel sequences per operator")],
        notes + list(trace.warnings),
    )  # fmt: skip
