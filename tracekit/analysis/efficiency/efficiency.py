"""``tracekit efficiency``: how close the GPU work ran to the hardware's limits, per operator, kernel, phase or
step: FLOPs, bytes, achieved TFLOP/s and TB/s, arithmetic intensity, the roofline's bound for the precision
and unit used, the share of the roofline reached, theoretical occupancy, and per row what was not known.

Sums are exact and additive (GPU time, FLOPs, bytes, roofline time over the rows where it is known), so a
group's "Roofline (%)" is its roofline time over the GPU time of its rows that have one: the share of that
time the hardware needed at its peak. The "peaks" table says which GPU each device was taken for, from which
source, or that it is unknown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.efficiency.efficiency_command import EfficiencyOptions
from tracekit.analysis.efficiency.roofline import DevicePeaks, device_peaks
from tracekit.analysis.efficiency.work import gpu_work
from tracekit.analysis.hardware.gpu_peaks import load_peaks_file
from tracekit.analysis.primitives.attribution import interval_of_ops
from tracekit.analysis.primitives.joins import op_launches
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.phases import choose_phases
from tracekit.analysis.primitives.selection import select_ranges
from tracekit.analysis.primitives.step_window import launched_before_last_step, step_labels, step_of, step_rows
from tracekit.errors import NoGpuDataError, UsageError
from tracekit.model.options import named
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace

KNOWN_SHARE = 0.5  # of a group's GPU time with a roofline, for its share and bound to be shown
KEY = {"op": "Operator", "kernel": "Kernel", "phase": "Phase", "step": "Step"}
NONE = {"op": "(no operator)", "kernel": "", "phase": "(outside the phases)", "step": "(outside the steps)"}


def efficiency_table(trace: Trace, options: EfficiencyOptions | None = None) -> Result:
    """Per group (``options.by``): the roofline measures (see the module docstring); "peaks": each GPU's."""
    options = options or EfficiencyOptions()
    kernel_mask(trace, "all")  # a trace without GPU work: say so, and how to capture it
    user = load_peaks_file(options.peaks) if options.peaks else None
    devices = device_peaks(trace, user)
    work = gpu_work(trace, devices, options.name)
    keep = np.ones(len(work), dtype=bool)
    notes: list[str] = []
    if options.drop_last_step:
        window, note = launched_before_last_step(trace)
        keep &= window if window is not None else True
        notes.append(note)
    if options.ranges:
        keep &= interval_of_ops(trace, select_ranges(trace, list(options.ranges))) >= 0
    key, key_notes = _keys(trace, work, options)
    notes += key_notes
    chosen = keep & pd.notna(key)
    # what Count counts: operator instances by operator, GPU operations otherwise
    instance = work["op_row"].to_numpy() if options.by == "op" else np.arange(len(work))
    picked = work.loc[chosen].assign(key=np.asarray(key, dtype=object)[chosen], instance=instance[chosen])
    if picked.empty:
        if options.by == "phase":
            said = ", ".join(spec for _, spec in choose_phases(trace, options.phases).chosen) or (
                "none of forward, backward, optimizer found by name"
            )
            raise UsageError(
                f"{trace.name}: no GPU operation was launched inside the phases ({said}); name the trace's "
                f"phase ranges with {named('phases')}"
            )
        raise NoGpuDataError(f"{trace.name}: no GPU operation in the groups asked for")
    table = summarize(picked, KEY[options.by])
    if options.top:
        table = table.head(options.top)
    notes += _notes(work, devices)
    return Result(
        [
            Table("efficiency", table, f"Efficiency by {options.by}: {trace.name}"),
            Table("peaks", peaks_table(trace, devices), "The GPUs' limits"),
        ],
        notes + list(trace.warnings),
    )


def _keys(trace: Trace, work: pd.DataFrame, options: EfficiencyOptions) -> tuple[np.ndarray, list[str]]:
    """Each row's group (None: in none), and what a reader should be told about the grouping."""
    if options.by == "kernel":
        return work["kernel"].to_numpy(object), []
    if options.by == "op":
        return work["operator"].fillna(NONE["op"]).to_numpy(object), []
    launches = op_launches(trace)
    if options.by == "step":
        steps = step_rows(trace, options.step_range)
        if steps.empty:
            raise NoGpuDataError(f"{trace.name}: no step ranges (ProfilerStep#N, or give the step's range name)")
        found = step_of(steps, launches.pid, launches.start)
        found = np.where(launches.found, found, -1)
        labels = np.append(step_labels(steps).astype(object), np.array([None], dtype=object))
        return labels[found], []
    phases = choose_phases(trace, options.phases)
    key = np.full(len(work), None, dtype=object)
    for label, spec in phases.chosen:
        try:
            inside = interval_of_ops(trace, select_ranges(trace, [spec])) >= 0
        except UsageError:  # a phase the trace lacks: the others still group
            continue
        key[inside & pd.isna(key)] = label
    return key, [phases.note] if phases.note else []


def summarize(work: pd.DataFrame, key_name: str) -> pd.DataFrame:
    """Per ``key``: the sums and the measures built on them, most GPU time first."""
    known = ~np.isnan(work["roofline"].to_numpy())
    frame = work.assign(
        known_time=np.where(known, work["duration"], 0),
        roofline=np.nan_to_num(work["roofline"].to_numpy()),
        flops=np.nan_to_num(work["flops"].to_numpy()),
        flop_time=np.where(~np.isnan(work["flops"].to_numpy()), work["duration"], 0),
        byte_time=np.where(~np.isnan(work["bytes"].to_numpy()), work["duration"], 0),
        moved=np.nan_to_num(work["bytes"].to_numpy()),
        occupancy_time=np.nan_to_num(work["occupancy"].to_numpy() * work["duration"].to_numpy()),
        occupied=np.where(~np.isnan(work["occupancy"].to_numpy()), work["duration"], 0),
        is_kernel=(work["kind"] == "kernel").to_numpy(),
    )
    groups = frame.groupby("key", sort=False)
    summed = ["duration", "known_time", "roofline", "flops", "flop_time", "moved", "byte_time", "occupancy_time"]
    sums = pd.DataFrame(groups[[*summed, "occupied"]].sum())
    sums["count"] = groups["instance"].nunique()
    sums["kernels"] = groups["is_kernel"].sum()
    # a roofline share and bound only where they speak for most of the group's time (not for a GEMM whose
    # cuBLAS workspace memsets alone are known)
    covered = (sums["known_time"] >= KNOWN_SHARE * sums["duration"]) & (sums["known_time"] > 0)
    table = pd.DataFrame(
        index=range(len(sums)),
        data={
            key_name: sums.index.to_numpy(object),
            "Count": sums["count"].to_numpy(np.int64),
            "Kernels": sums["kernels"].to_numpy(np.int64),
            "GPU Time (ns)": sums["duration"].to_numpy(np.int64),
            "GFLOP": np.where(sums["flop_time"] > 0, sums["flops"] / 1e9, np.nan),
            "GB": np.where(sums["byte_time"] > 0, sums["moved"] / 1e9, np.nan),
            "TFLOP/s": np.where(
                sums["flop_time"] > 0, sums["flops"] / np.maximum(sums["flop_time"], 1) * 1e9 / 1e12, np.nan
            ),
            "TB/s": np.where(
                sums["byte_time"] > 0, sums["moved"] / np.maximum(sums["byte_time"], 1) * 1e9 / 1e12, np.nan
            ),
            "FLOP/Byte": np.where(
                (sums["flop_time"] > 0) & (sums["moved"] > 0), sums["flops"] / np.maximum(sums["moved"], 1), np.nan
            ),
            "Precision": _texts(_by_time(frame, "precision").reindex(sums.index)),
            "Unit": _texts(_by_time(frame, "unit").reindex(sums.index)),
            "Bound": _texts(_by_time(frame, "bound").reindex(sums.index).where(covered.to_numpy())),
            "Roofline (%)": np.where(covered, 100 * sums["roofline"] * 1e9 / np.maximum(sums["known_time"], 1), np.nan),
            "Occupancy (%)": np.where(
                sums["occupied"] > 0, 100 * sums["occupancy_time"] / np.maximum(sums["occupied"], 1), np.nan
            ),
            "Not Known": _texts(_not_known(frame, sums["duration"]).reindex(sums.index)),
        },
    )
    return table.sort_values(["GPU Time (ns)", key_name], ascending=[False, True], kind="stable").reset_index(drop=True)


def _texts(values: pd.Series) -> pd.Series:
    """Text per group, None (not NaN) where there is none: objects, not pandas' text dtype (which reads None as
    NaN). Positional (the table's rows are built in the groups' order)."""
    return pd.Series([value if isinstance(value, str) else None for value in values], dtype=object).set_axis(
        range(len(values))
    )


def _by_time(frame: pd.DataFrame, column: str) -> pd.Series:
    """Per key, the value of ``column`` that holds most of its GPU time (None where none is known)."""
    known = frame.loc[frame[column].notna() & (frame[column] != ""), ["key", column, "duration"]]
    if known.empty:
        return pd.Series(dtype=object)
    time = known.groupby(["key", column], sort=False)["duration"].sum().reset_index()
    return time.sort_values("duration", kind="stable").groupby("key")[column].last()


def _not_known(frame: pd.DataFrame, total: pd.Series) -> pd.Series:
    """Per key: the reason with most GPU time among its rows without a full roofline, with its share."""
    missing = frame.loc[frame["why"].notna(), ["key", "why", "duration"]]
    if missing.empty:
        return pd.Series(dtype=object)
    time = missing.groupby(["key", "why"], sort=False)["duration"].sum().reset_index()
    top = time.sort_values("duration", kind="stable").groupby("key").last()
    share = 100 * top["duration"] / total.reindex(top.index).clip(lower=1)
    return pd.Series([f"{why} ({value:.0f}% of time)" for why, value in zip(top["why"], share)], index=top.index)


def peaks_table(trace: Trace, devices: DevicePeaks) -> pd.DataFrame:
    """Per GPU of the trace: what it was taken for and its limits, or why unknown."""
    rows = []
    for gpu in trace.meta.gpus.to_dict("records"):
        found = devices.peaks.get(int(gpu["id"]))
        rows.append(
            {
                "Device": int(gpu["id"]),
                "Name": gpu.get("name"),
                "Taken For": found.key if found else None,
                "Memory (TB/s)": found.memory_bandwidth / 1e12 if found else np.nan,
                "Peaks (TFLOP/s)": "; ".join(f"{p} {u} {rate / 1e12:g}" for (p, u), rate in found.flops.items())
                if found
                else None,
                "How": found.matched_by if found else devices.unknown.get(int(gpu["id"])),
                "Source": found.source if found else None,
            }
        )
    return pd.DataFrame(
        rows, columns=["Device", "Name", "Taken For", "Memory (TB/s)", "Peaks (TFLOP/s)", "How", "Source"]
    )


def _notes(work: pd.DataFrame, devices: DevicePeaks) -> list[str]:
    notes = [
        "Roofline (%): the time the FLOPs and bytes need at the GPU's dense peak for the precision and unit used "
        "(max(FLOPs/peak, bytes/bandwidth)) over the GPU time of the rows that have one",
        "an operator's FLOPs and bytes are shared among its kernels by GPU time; Occupancy: theoretical "
        "(registers, shared memory, block size against the GPU's limits), time-weighted",
    ]
    kernels = work["kind"] == "kernel"
    if kernels.any():
        unknown = work.loc[kernels, "duration"].where(work.loc[kernels, "roofline"].isna(), 0).sum()
        share = 100 * unknown / max(int(work.loc[kernels, "duration"].sum()), 1)
        notes.append(f"{share:.1f}% of kernel time has no roofline (see Not Known)")
    notes += [f"device {device}: {why}" for device, why in devices.unknown.items()]
    return notes
