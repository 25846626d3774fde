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
  of the first-kernel delays; the most kernel time first. Where the trace records operators' shapes, also
  their FLOPs (GFLOP) and the rate over the kernel time of the instances counted (TFLOP/s).
- "sequences": per operator name and sequence of kernel names (HTA's table, with ``name`` "demangled":
  HTA's names; by default base names, templated variants together): instances and the mean Launch
  and Runtime Delays.
HTA looks for the covering operator on any thread; tracekit on the call's own thread.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.primitives.covering import covering_range
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.operators import instance_flops, operator_inputs
from tracekit.analysis.primitives.sequence_keys import group_sequences
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.analysis.waits.ops_command import OpsOptions
from tracekit.errors import NoGpuDataError
from tracekit.model.range_specs import shown_op_name
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace

# HTA's pattern, and ROCm's launches (hipLaunchKernel, hipExtModuleLaunchKernel), which HTA's misses
KERNEL_LAUNCH = re.compile(r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)|(^hip.*LaunchKernel)")
ATEN = "aten::"


def operator_kernels(trace: Trace, name: str = "short", drop_last_step: bool = False) -> pd.DataFrame:
    """Per kernel launch call that an operator covers: thread, operator (name, start, its row in
    ``ranges``), call start, kernel (its ``name``: "short" or "demangled"; start, duration), in call order."""
    calls, gpu_ops = trace.launches, trace.gpu_ops
    launches = op_launches(trace)
    names = calls["name"].cat.categories
    launching = np.asarray([KERNEL_LAUNCH.search(str(name)) is not None for name in names], dtype=bool)
    window = launched_before_last_step(trace)[0] if drop_last_step else None
    kernel_rows = np.flatnonzero(
        launches.found & (gpu_ops["kind"] == "kernel").to_numpy() & (window if window is not None else True)
    )
    call_rows = launches.row[kernel_rows]
    keep = launching[calls["name"].cat.codes.to_numpy()[call_rows]]
    kernel_rows, call_rows = kernel_rows[keep], call_rows[keep]
    order = np.argsort(call_rows, kind="stable")
    kernel_rows, call_rows = kernel_rows[order], call_rows[order]
    operator = _covering_operator(trace.ranges, calls, call_rows)
    found = operator >= 0
    ranges = trace.ranges
    kernel_names = gpu_ops["short_name" if name == "short" else "name"]
    range_names = ranges["name"].cat.categories
    shown_codes, shown = pd.factorize(np.asarray([shown_op_name(str(text)) for text in range_names], dtype=object))
    row_of = operator[found]
    # names stay categorical: a trace launches hundreds of thousands of kernels, of a few hundred names
    kernels = pd.Categorical.from_codes(
        kernel_names.cat.codes.to_numpy()[kernel_rows[found]], categories=kernel_names.cat.categories
    )
    return pd.DataFrame(
        {
            "tid": calls["tid"].to_numpy()[call_rows[found]],
            "operator": pd.Categorical.from_codes(
                shown_codes[ranges["name"].cat.codes.to_numpy()[row_of]], categories=pd.Index(shown, dtype=object)
            ),
            "op_start": ranges["start"].to_numpy()[row_of],
            "op_row": row_of,
            "call_start": calls["start"].to_numpy()[call_rows[found]],
            "kernel": kernels,
            "kernel_start": gpu_ops["start"].to_numpy()[kernel_rows[found]],
            "kernel_duration": gpu_ops["duration"].to_numpy()[kernel_rows[found]],
        }
    )


def _covering_operator(ranges: pd.DataFrame, calls: pd.DataFrame, call_rows: np.ndarray) -> np.ndarray:
    """Per call, the row in ``ranges`` of the innermost ``aten::`` range of its thread that covers it
    whole (-1: none)."""
    if ranges.empty or not len(call_rows):
        return np.full(len(call_rows), -1, dtype=np.int64)
    names = ranges["name"].cat.categories
    is_operator = np.asarray([shown_op_name(str(name)).startswith(ATEN) for name in names], bool)
    operator = is_operator[ranges["name"].cat.codes.to_numpy()] & (ranges["domain"].astype(str) != "gpu").to_numpy()
    pick = lambda column: calls[column].to_numpy()[call_rows]
    return covering_range(ranges, pick("pid"), pick("tid"), pick("start"), pick("end"), operator)


def _sequences(launched: pd.DataFrame, instances: np.ndarray) -> np.ndarray:
    """Per operator instance (``instances``: op rows), its kernel names in call order joined by " -> "."""
    kernels = launched["kernel"]
    groups, sequence_id, texts = group_sequences(
        launched["op_row"].to_numpy(), kernels.cat.codes.to_numpy(), [str(name) for name in kernels.cat.categories]
    )
    return pd.Series(texts[sequence_id], index=groups).reindex(instances).to_numpy()


def kernels_per_operator(trace: Trace, options: OpsOptions | None = None) -> Result:
    """Per operator: its kernels, their time and the delays to its first kernel (see the module docstring)."""
    options = options or OpsOptions()
    kernel_mask(trace, "all")  # a trace without GPU work (a CPU run): say so, and how to capture it
    launched = operator_kernels(trace, options.name, options.drop_last_step)
    if launched.empty:
        raise NoGpuDataError(
            f"{trace.name}: no kernel launch call inside an aten:: operator (torch.profiler's CPU "
            "operators, or emit_nvtx ranges in an nsys export)"
        )
    instances = launched.groupby("op_row", sort=False, observed=True).agg(
        operator=("operator", "first"),
        op_start=("op_start", "first"),
        call_start=("call_start", "first"),
        kernel_start=("kernel_start", "first"),
        kernels=("kernel", "size"),
        time=("kernel_duration", "sum"),
    )
    instances["sequence"] = _sequences(launched, instances.index.to_numpy())
    counted = instance_flops(trace, instances.index.to_numpy())  # NaN: no shapes, or counted in nested ones
    instances["flops"] = np.nan_to_num(counted)
    instances["flop_time"] = np.where(np.isnan(counted), 0, instances["time"].to_numpy())
    instances["launch_delay"] = instances["call_start"] - instances["op_start"]
    instances["runtime_delay"] = instances["kernel_start"] - instances["call_start"]
    per_op = (
        instances.groupby("operator", sort=False, observed=True)
        .agg(
            Instances=("kernels", "size"),
            Kernels=("kernels", "sum"),
            time=("time", "sum"),
            launch=("launch_delay", "mean"),
            runtime=("runtime_delay", "mean"),
            flops=("flops", "sum"),
            flop_time=("flop_time", "sum"),
        )
        .reset_index()
    )
    per_op = per_op.sort_values(["time", "operator"], ascending=[False, True], kind="stable").head(options.top)
    table = pd.DataFrame(
        {
            "Operator": per_op["operator"].to_numpy(),
            "Instances": per_op["Instances"].to_numpy(),
            "Kernels": per_op["Kernels"].to_numpy(),
            "Kernel Time (ns)": per_op["time"].to_numpy(np.int64),
            "Op To Kernel (ns)": (per_op["launch"] + per_op["runtime"]).to_numpy(),
            "Launch Delay (ns)": per_op["launch"].to_numpy(),
            "Runtime Delay (ns)": per_op["runtime"].to_numpy(),
        }
    )
    if len(operator_inputs(trace)):  # shapes recorded: the operators' FLOPs and rate (tracekit efficiency: more)
        flop_time = per_op["flop_time"].to_numpy(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            table["GFLOP"] = np.where(flop_time > 0, per_op["flops"].to_numpy() / 1e9, np.nan)
            table["TFLOP/s"] = np.where(flop_time > 0, per_op["flops"].to_numpy() / flop_time / 1e3, np.nan)
    sequences = (
        instances.groupby(["operator", "sequence"], sort=False, observed=True)
        .agg(
            Count=("kernels", "size"),
            launch=("launch_delay", "mean"),
            runtime=("runtime_delay", "mean"),
        )
        .reset_index()
        .sort_values(["Count", "operator", "sequence"], ascending=[False, True, True], kind="stable")
    )
    sequence_table = pd.DataFrame(
        {
            "Operator": sequences["operator"].to_numpy(),
            "Count": sequences["Count"].to_numpy(),
            "Launch Delay (ns)": sequences["launch"].to_numpy(),
            "Runtime Delay (ns)": sequences["runtime"].to_numpy(),
            "Kernels": sequences["sequence"].to_numpy(),
        }
    ).head(options.top)
    notes = [launched_before_last_step(trace)[1]] if options.drop_last_step else []
    notes += [
        "per operator instance: Launch Delay from its start to its first kernel launch call, Runtime Delay from that "
        "call to its kernel's start (HolisticTraceAnalysis's get_aten_op_kernels_and_delay), means per operator"
    ]
    return Result(
        [
            Table("ops", table, f"Operators and their kernels: {trace.name}"),
            Table("sequences", sequence_table, "Kernel sequences per operator"),
        ],
        notes + list(trace.warnings),
    )
