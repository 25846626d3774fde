"""Launch delays: how long each kernel's launch call took and how long the kernel then waited, as nsys's
``kernexecsum`` (2023.1+: ``cuda_kern_exec_sum``) defines them.

Each kernel is joined to the CUDA call that launched it (same process, same correlation id). Per
kernel, in ns:
- API time: the launch call's duration (end - start): the CPU's cost of launching.
- Queue time: kernel start - launch call end, only when >= 0 (a kernel can start before its launch call
  returns; it then has no queue time and is left out of the Q statistics; QCount says how many have one).
  Queue time means the GPU was still busy with earlier work: not bad in itself; none at all may mean an
  idle, starved GPU.
- Kernel time: end - start on the GPU.
- Total time: from the call's start to the later of the call's end and the kernel's end.
Grouped as nsys groups them: launching process and thread, device, API name (without its ``_vNNNNN``
version suffix), kernel name; per group Count, QCount and Avg/Med/Min/Max/StdDev of each time, rounded
unrounded (the renderer prints them as nsys rounds, ``stats``), largest mean total first. Kernels without a launching call in the trace
(nsys's inner join drops them) are left out and counted in a note.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis import stats
from tracekit.analysis.primitives.joins import every_op_launch
from tracekit.analysis.primitives.op_selection import NAME_COLUMNS, kernel_mask
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.analysis.waits.launches_command import LaunchesOptions
from tracekit.errors import NoGpuDataError
from tracekit.model.options import OptionError, named
from tracekit.model.result import Result
from tracekit.model.trace import Trace

PREFIXES = {"T": "total", "A": "API", "Q": "queue", "K": "kernel"}
STATISTICS = (("Avg", stats.AVG), ("Med", stats.MED), ("Min", stats.MIN), ("Max", stats.MAX), ("StdDev", stats.STDDEV))
KEYS = ["PID", "TID", "DevId"]


def api_name(name: str) -> str:
    """nsys's API name: "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (a ``_v`` 6 characters from the end)."""
    return name[:-6] if len(name) >= 6 and name[-6:-4] == "_v" else name


def launch_delays(trace: Trace, options: LaunchesOptions | None = None) -> Result:
    """``launches``: kernexecsum's table of ``trace`` (``name`` "short" groups by base name);
    ``drop_last_step``: only kernels launched before the last ProfilerStep began (HTA's window)."""
    options = options or LaunchesOptions()
    name, top, drop_last_step = options.name, options.top, options.drop_last_step
    if name not in NAME_COLUMNS:
        raise OptionError(f"{named('name')} {name!r} is not one of demangled, short")
    ops = trace.gpu_ops
    kernels = kernel_mask(trace, "kernels")
    kernels = np.ones(len(ops), dtype=bool) if kernels is None else kernels
    window_notes = []
    if drop_last_step:
        window, note = launched_before_last_step(trace)
        kernels = kernels if window is None else kernels & window
        window_notes.append(note)
    op_index, rows = every_op_launch(trace, kernels)
    if not len(op_index):
        raise NoGpuDataError(
            f"{trace.name}: none of its kernels has its launching CUDA call in the trace (capture with "
            "`nsys profile -t cuda` so the runtime calls are recorded)"
        )
    calls = trace.launches
    call_start, call_end = calls["start"].to_numpy()[rows], calls["end"].to_numpy()[rows]
    start, end = ops["start"].to_numpy()[op_index], ops["end"].to_numpy()[op_index]
    durations = {
        "T": np.maximum(call_end, end) - call_start,
        "A": call_end - call_start,
        "Q": start - call_end,
        "K": end - start,
    }
    api_names = calls["name"]
    api_labels = np.asarray([api_name(str(text)) for text in api_names.cat.categories], dtype=object)
    api_codes, api_uniques = pd.factorize(api_labels[api_names.cat.codes.to_numpy()[rows]])
    kernel_names = ops[NAME_COLUMNS[name]]
    keys = [calls["pid"].to_numpy()[rows], calls["tid"].to_numpy()[rows], ops["device"].to_numpy()[op_index]]
    factorized = [pd.factorize(values) for values in keys]
    parts = [codes for codes, _ in factorized] + [api_codes, kernel_names.cat.codes.to_numpy()[op_index]]
    uniques = [np.asarray(values) for _, values in factorized] + [
        np.asarray(api_uniques, dtype=object),
        np.asarray(kernel_names.cat.categories, dtype=object),
    ]
    combined, radices = stats.combine_codes(parts)
    table = _statistics(combined, durations)
    keys = stats.split_codes(table.index.to_numpy(), radices)
    frame = pd.DataFrame({column: uniques[index][keys[index]] for index, column in enumerate(KEYS)})
    frame = pd.concat([frame, table.reset_index(drop=True)], axis=1)
    frame["API Name"] = uniques[3][keys[3]]
    frame["Kernel Name"] = uniques[4][keys[4]]
    frame = frame.sort_values("TAvg (ns)", ascending=False, kind="stable", ignore_index=True)
    notes = [*window_notes, *trace.warnings]
    matched = np.bincount(op_index, minlength=len(ops))
    left_out = int((kernels & (matched == 0)).sum())
    if left_out:
        notes.append(f"{left_out:,} kernels without their launching call in the trace are left out (as nsys does)")
    twice = int((matched > 1).sum())
    if twice:
        notes.append(
            f"{twice:,} kernels match several launching calls (same process and correlation id: an export that "
            "records a call twice): each pair counts, as nsys's join counts it"
        )
    title = f"Kernel launch and execution times (as nsys kernexecsum): {trace.name}"
    return Result.of("launches", frame.head(top) if top else frame, title, notes)


def _statistics(combined: np.ndarray, durations: dict[str, np.ndarray]) -> pd.DataFrame:
    """Count, QCount and each duration's statistics per group code (the index)."""
    columns: dict[str, pd.Series] = {}
    index = None
    for prefix, values in durations.items():
        codes = np.where(values >= 0, combined, -1) if prefix == "Q" else combined
        table = stats.grouped_stats(codes, np.maximum(values, 0))
        if index is None:
            index = table.index
            columns["Count"] = table[stats.INSTANCES]
        else:
            table = table.reindex(index)
        if prefix == "Q":
            columns["QCount"] = table[stats.INSTANCES].fillna(0).astype(np.int64)
        for label, column in STATISTICS:
            values_of = table[column]
            if label == "StdDev":  # nsys's stdev of no values (no queue time) is 0.0, its avg/med/min/max NULL
                values_of = values_of.fillna(0.0)
            columns[f"{prefix}{label} (ns)"] = values_of
    assert index is not None
    ordered = ["Count", "QCount"] + [f"{prefix}{label} (ns)" for prefix in PREFIXES for label, _ in STATISTICS]
    return pd.DataFrame({name: columns[name] for name in ordered}, index=index)
