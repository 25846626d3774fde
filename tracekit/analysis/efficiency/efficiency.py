"""``tracekit efficiency``: how close the GPU work ran to the hardware's limits, per operator, kernel, phase or
step: FLOPs, bytes, achieved TFLOP/s and TB/s, arithmetic intensity, the roofline's bound for the precision
and unit used, the share of the roofline reached, theoretical occupancy, and per row what was not known.

Sums are exact and additive (GPU time, FLOPs, bytes, roofline time over the rows where it is known), so a
group's "Roofline (%)" is its roofline time over the GPU time of its rows that have one: the share of that
time the hardware needed at its peak. The "peaks" table says which GPU each device was taken for, from which
source, or that it is unknown.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.efficiency.efficiency_command import EfficiencyOptions
from tracekit.analysis.efficiency.grouping import group_rows, with_walls
from tracekit.analysis.efficiency.groups import GroupSums, group_sums, summary_table
from tracekit.analysis.efficiency.roofline import DevicePeaks, trace_peaks
from tracekit.analysis.efficiency.work import gpu_work
from tracekit.analysis.primitives.attribution import interval_of_ops
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.operators import operator_inputs
from tracekit.analysis.primitives.phases import choose_phases
from tracekit.analysis.primitives.selection import select_ranges
from tracekit.analysis.primitives.step_window import launched_before_last_step
from tracekit.errors import NoGpuDataError, UsageError
from tracekit.model.options import named
from tracekit.model.result import Chart, Result, Table
from tracekit.model.trace import Trace

ROOFLINE_POINTS = 40
KEY = {"op": "Operator", "kernel": "Kernel", "phase": "Phase", "step": "Step"}


@dataclass
class Measured:
    """One trace's efficiency before it is a table: the options it was measured with (``by`` decided), its
    groups' sums (mergeable), the GPUs' peaks, the unknown share of kernel time, and the notes."""

    options: EfficiencyOptions
    sums: GroupSums
    devices: DevicePeaks
    unknown_share: float
    notes: list[str]


def measure(trace: Trace, options: EfficiencyOptions | None = None) -> Measured:
    """The sums per group of ``options.by`` (auto: per operator where shapes are recorded, else per kernel)."""
    options = options or EfficiencyOptions()
    kernel_mask(trace, "all")  # a trace without GPU work: say so, and how to capture it
    devices = trace_peaks(trace, options.peaks)
    notes: list[str] = []
    if options.by == "auto":
        shapes = len(operator_inputs(trace)) > 0
        options = dataclasses.replace(options, by="op" if shapes else "kernel")
        if not shapes:
            notes.append(
                f"no operator shapes recorded: one row per kernel ({named('by')} op names the operators; "
                "record shapes for their FLOPs: torch.profiler record_shapes=True, tracekit capture does)"
            )
    work = gpu_work(trace, options.name, options.peaks, operators=options.by == "op")
    grouping = group_rows(trace, work, options)
    group, notes = grouping.group, notes + grouping.notes
    if options.drop_last_step:
        window, note = launched_before_last_step(trace)
        if window is not None:
            group = np.where(window, group, -1)
        notes.append(note)
    if options.ranges:
        group = np.where(interval_of_ops(trace, select_ranges(trace, list(options.ranges))) >= 0, group, -1)
    if not (group >= 0).any():
        if options.by == "phase":
            chosen = ", ".join(spec for _, spec in choose_phases(trace, options.phases).chosen)
            raise UsageError(
                f"{trace.name}: no GPU operation was launched inside the phases "
                f"({chosen or 'none of forward, backward, optimizer found by name'}); name the trace's phase "
                f"ranges with {named('phases')}"
            )
        raise NoGpuDataError(f"{trace.name}: no GPU operation in the groups asked for")
    sums = group_sums(work, group, grouping.labels, grouping.instance)
    if grouping.wall is not None:
        sums = with_walls(sums, grouping, devices)
    kernel = (work["kind"] == "kernel").to_numpy()
    duration = work["duration"].to_numpy()
    unknown = duration[kernel & np.isnan(work["roofline"].to_numpy())].sum()
    return Measured(options, sums, devices, float(unknown / max(int(duration[kernel].sum()), 1)), notes)


def efficiency_table(trace: Trace, options: EfficiencyOptions | None = None) -> Result:
    """Per group (``options.by``): the roofline measures (``groups``); "peaks": each GPU's."""
    measured = measure(trace, options)
    options = measured.options
    table = summary_table(measured.sums, KEY[options.by])
    if options.top:
        table = table.head(options.top)
    notes = measured.notes + _notes(measured, table)
    return Result(
        [
            Table("efficiency", table, f"Efficiency by {options.by}: {trace.name}"),
            Table("peaks", peaks_table(trace, measured.devices), "The GPUs' limits"),
        ],
        notes + list(trace.warnings),
        _charts(roofline_chart(table, measured.devices, KEY[options.by], trace.name)),
    )


def _charts(chart: Chart) -> dict[str, Chart]:
    """The roofline picture where it has a point to draw (else the picture option says there is none)."""
    return {"roofline": chart} if chart.data["points"] else {}


def roofline_chart(table: pd.DataFrame, devices: DevicePeaks, key: str, name: str) -> Chart:
    """The groups with both FLOPs and bytes as points (the most time first, at most ``ROOFLINE_POINTS``) under
    the roofs of the first known GPU: its FP32 CUDA cores and each tensor-core precision the table used."""
    known = table.loc[(table["FLOP/Byte"] > 0) & (table["TFLOP/s"] > 0)].head(ROOFLINE_POINTS)
    points = [
        [str(row[key]), float(row["FLOP/Byte"]), float(row["TFLOP/s"]), float(row["GPU Time (ns)"]) / 1e6]
        for row in known.to_dict("records")
    ]
    gpu = next((peaks for peaks in devices.peaks.values() if peaks is not None), None)
    roofs = []
    if gpu is not None:
        used = [str(value) for value in table["Precision"].dropna().unique()]
        for precision, unit in [("FP32", "CUDA cores"), *((p, "tensor cores") for p in used if p != "FP32")]:
            rate = gpu.peak(precision, unit)
            if rate is not None:
                roofs.append([f"{gpu.key} {precision} {unit}", rate / 1e12, gpu.memory_bandwidth / 1e12])
    return Chart("roofline", f"Roofline: {name}", {"points": points, "roofs": roofs})


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


def _notes(measured: Measured, table: pd.DataFrame) -> list[str]:
    notes = [
        "Roofline (%): the time the FLOPs and bytes need at the GPU's dense peak for the precision and unit used "
        "(max(FLOPs/peak, bytes/bandwidth)) over the GPU time of the rows that have one; Precision and Unit: of "
        "the matrix kernels (other work is held against the CUDA cores' FP32 peak and the memory bandwidth)",
        "an operator's FLOPs and bytes are shared among its kernels by GPU time; Occupancy: theoretical "
        "(registers, shared memory, block size against the GPU's limits), time-weighted",
        f"{100 * measured.unknown_share:.1f}% of kernel time has no roofline",
    ]
    if (table["Roofline (%)"] > 100).any():
        notes.append(
            "a share over 100 %: the work ran faster than device memory allows, its data served from cache (L2)"
        )
    notes += [f"device {device}: {why}" for device, why in measured.devices.unknown.items()]
    return notes
