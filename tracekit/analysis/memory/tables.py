"""Memory tables: the peak and what was live at it, who holds it, phases, two snapshots compared,
and the timeline picture's data; ``memory_summary`` is ``tracekit memory``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.memory.frames import frames_of, user_frame
from tracekit.analysis.memory.memory_command import MemoryOptions
from tracekit.analysis.memory.replay import MIB, DeviceMemory, replay
from tracekit.model.memory import MemoryTrace
from tracekit.model.options import OptionError, named
from tracekit.model.result import Chart, Result, Table


def peak_summary(trace: MemoryTrace, memory: DeviceMemory) -> pd.DataFrame:
    """Key facts as (Quantity, Value) rows, the unit in the quantity's name: the device, peak allocated
    (MiB, counting what was allocated before the trace), when (ms from the first event, or the event
    index without timestamps), the peak of traced allocations alone, reserved memory, counts. Values
    are numbers as computed (the renderer rounds them for people)."""
    timeline = memory.timeline
    at_peak = timeline.loc[timeline["index"] == memory.peak_index].iloc[0]
    live = memory.live_at_peak
    before_at_peak = live.loc[live["before_trace"].to_numpy(), "size"].sum()
    rows = [
        ("device", f"cuda:{memory.device}"),
        ("peak allocated (MiB)", memory.peak_allocated / MIB),
        ("peak at (ms)", float(at_peak["x"])) if memory.has_time else ("peak at (event)", memory.peak_index),
        # what the holders table's "(allocated before the trace began)" row is: of it, what was still live at
        # the peak (the rest was freed on the way)
        ("allocated when the trace began (MiB)", int(timeline["allocated"].iloc[0]) / MIB),
        ("of it still live at the peak (MiB)", int(before_at_peak) / MIB),
        ("peak of allocations made during the trace (MiB)", int(timeline["allocated_in_trace"].max()) / MIB),
        ("reserved at peak (MiB)", int(at_peak["reserved"]) / MIB),
        ("max reserved (MiB)", int(timeline["reserved"].max()) / MIB),
        ("allocations live at peak", len(memory.live_at_peak)),
        ("trace events", len(timeline) - 1),
    ]
    return pd.DataFrame(
        {"Quantity": [row[0] for row in rows], "Value": pd.Series([row[1] for row in rows], dtype=object)}
    )


def largest_at_peak(trace: MemoryTrace, memory: DeviceMemory, top: int | None = 20) -> pd.DataFrame:
    """The largest allocations live at the peak. Columns: Size (MiB), Requested (MiB, when known),
    Allocated At, Freed At (ms, or event index without timestamps; blank = before / after the trace),
    Frame (who allocated), Stack (innermost first)."""
    live = memory.live_at_peak
    live = live.head(top) if top else live
    frames, stacks = frames_of(trace, live["stack"], live["before_trace"])
    x = memory.timeline.set_index("index")["x"]
    events = len(memory.timeline) - 1
    unit = "ms" if memory.has_time else "event"
    # event indexes are whole numbers: a nullable integer column, so that a blank does not make them floats
    at = (
        (lambda values: np.array(values, dtype=float))
        if memory.has_time
        else (lambda values: pd.array([None if value is None else int(value) for value in values], dtype="Int64"))
    )
    return pd.DataFrame(
        {
            "Size (MiB)": live["size"].to_numpy() / MIB,
            "Requested (MiB)": np.where(
                live["requested_size"].to_numpy() >= 0, live["requested_size"].to_numpy() / MIB, np.nan
            ),
            f"Allocated At ({unit})": at([x[start] if start >= 0 else None for start in live["start"].tolist()]),
            f"Freed At ({unit})": at([x[end] if end < events else None for end in live["end"].tolist()]),
            "Frame": frames,
            "Stack": stacks,
        }
    )


def holders_at_peak(trace: MemoryTrace, memory: DeviceMemory) -> pd.DataFrame:
    """What holds the memory at the peak, grouped by the allocating frame: Frame, Allocations,
    Total (MiB), Share (%) of the peak, largest first."""
    live = memory.live_at_peak
    frames, _ = frames_of(trace, live["stack"], live["before_trace"])
    grouped = pd.DataFrame({"Frame": frames, "size": live["size"].to_numpy()}).groupby("Frame", sort=False)["size"]
    table = pd.DataFrame({"Allocations": grouped.size(), "bytes": grouped.sum()}).sort_values("bytes", ascending=False)
    peak = max(memory.peak_allocated, 1)
    return pd.DataFrame(
        {
            "Frame": table.index.astype(object),
            "Allocations": table["Allocations"].to_numpy(np.int64),
            "Total (MiB)": table["bytes"].to_numpy() / MIB,
            "Share (%)": table["bytes"].to_numpy() * 100.0 / peak,
        }
    )


def phases(trace: MemoryTrace, memory: DeviceMemory) -> pd.DataFrame:
    """Phases from the snapshot's annotations (e.g. Optimizer.step#AdamW.step): Phase, Start, End (ms)."""
    notes = trace.annotations
    notes = notes.loc[(notes["device"] == memory.device).to_numpy()] if not notes.empty else notes
    if notes.empty or not memory.has_time:
        return pd.DataFrame(columns=["Phase", "Start (ms)", "End (ms)"])
    t0 = trace.events.loc[trace.events["device"] == memory.device, "time_us"].min()
    rows = []
    for name, group in notes.sort_values("time_us").groupby("name", sort=False):
        starts = group.loc[group["stage"] == "START", "time_us"].tolist()
        ends = group.loc[group["stage"] == "END", "time_us"].tolist()
        rows += [(name, (start - t0) / 1e3, (end - t0) / 1e3) for start, end in zip(starts, ends)]
    return pd.DataFrame(rows, columns=["Phase", "Start (ms)", "End (ms)"])


UNCHANGED_MIB = 512 / MIB


def compare(
    trace_a: MemoryTrace, trace_b: MemoryTrace, device: int | None = None, top: int | None = None
) -> pd.DataFrame:
    """Peak of B against A and the allocation groups (by frame) that grew or shrank at the peak.

    Columns: Holder, A (MiB), B (MiB), Delta (MiB), Ratio (sizes to 1 KiB); the first row is the whole
    peak, then the ``top`` holders that changed most (all with None); holders whose total did not
    change are left out.
    """
    memory_a, memory_b = replay(trace_a, device), replay(trace_b, device)
    a = holders_at_peak(trace_a, memory_a).set_index("Frame")["Total (MiB)"]
    b = holders_at_peak(trace_b, memory_b).set_index("Frame")["Total (MiB)"]
    groups = pd.concat([a.rename("A (MiB)"), b.rename("B (MiB)")], axis=1).fillna(0.0)
    groups["Delta (MiB)"] = groups["B (MiB)"] - groups["A (MiB)"]
    # Holders that did not change (within the allocator's 512-byte rounding) say nothing about A against B
    groups = groups.loc[groups["Delta (MiB)"].abs() >= UNCHANGED_MIB]
    groups = groups.reindex(groups["Delta (MiB)"].abs().sort_values(ascending=False, kind="stable").index)
    groups = groups.head(top) if top is not None else groups
    peak = pd.DataFrame(
        {"A (MiB)": [memory_a.peak_allocated / MIB], "B (MiB)": [memory_b.peak_allocated / MIB]},
        index=["(peak allocated)"],
    )
    peak["Delta (MiB)"] = peak["B (MiB)"] - peak["A (MiB)"]
    table = pd.concat([peak, groups])
    with np.errstate(divide="ignore", invalid="ignore"):
        table["Ratio"] = np.where(table["A (MiB)"] > 0, table["B (MiB)"] / table["A (MiB)"], np.nan)
    table.index.name = "Holder"
    return table.reset_index()


def device_notes(trace: MemoryTrace, shown: int, chosen: bool) -> list[str]:
    """What a one-device summary should say about the others: which device it picked among several, and
    the out-of-memory events the snapshot recorded (the reason many snapshots are taken)."""
    notes = []
    if chosen and len(trace.devices) > 1:
        others = ", ".join(f"cuda:{device}" for device in trace.devices if device != shown)
        notes.append(
            f"the snapshot traces {len(trace.devices)} devices: cuda:{shown} has the highest peak and is "
            f"shown; {named('device')} N shows another ({others})"
        )
    events = trace.events
    ooms = events.loc[(events["action"] == "oom").to_numpy()]
    if len(ooms):
        where = ", ".join(
            f"cuda:{int(device)} at event {int(index):,}, asking for {size / MIB:,.1f} MiB"
            for device, index, size in zip(*(ooms[key].tolist() for key in ("device", "index", "size")))
        )
        notes.append(
            f"the snapshot records {len(ooms)} out-of-memory {'error' if len(ooms) == 1 else 'errors'} "
            f"({where}); the failed allocation is in no table: it never got memory"
        )
    return notes


def memory_summary(
    trace: MemoryTrace,
    top: int | None = 20,
    by: str = "allocation",
    device: int | None = None,
    bands: int = 12,
    timeline: bool = True,
) -> Result:
    """``tracekit memory``: the peak summary, then the largest allocations live at the peak (``by``
    "allocation"), or what holds the memory at the peak grouped by frame ("frame"), by role ("role"), or
    every table ("all");
    with ``timeline``, the timeline chart with the ``bands`` largest allocations drawn apart."""
    if by not in ("allocation", "frame", "role", "all"):
        raise OptionError(f"{named('by')} {by!r} is not one of allocation, frame, role, all")
    memory = replay(trace, device)
    tables = [Table("summary", peak_summary(trace, memory), f"Memory snapshot: {trace.source}")]
    notes = list(memory.notes) + device_notes(trace, memory.device, chosen=device is None)
    if by in ("role", "all"):
        from tracekit.analysis.memory.roles import memory_by_role

        roles, role_notes = memory_by_role(trace, memory)
        tables.append(Table("roles", roles, "What the memory live at the peak is for"))
        notes += role_notes
    if by in ("frame", "all"):
        holders = holders_at_peak(trace, memory)
        shown = holders.head(top) if top is not None else holders  # top=None: every frame, as head(None) gives
        tables.append(Table("holders", shown, "What holds the memory at the peak"))
    if by in ("allocation", "all"):
        tables.append(Table("allocations", largest_at_peak(trace, memory, top), "Largest allocations live at the peak"))
    charts = {"timeline": timeline_chart(trace, memory, min(top or bands, bands))} if timeline else {}
    if timeline and by in ("role", "all"):
        from tracekit.analysis.memory.roles import role_timeline

        charts["roles"] = role_timeline(trace, memory)
    return Result(tables, notes=notes, charts=charts)


def memory_result(snapshots: list[MemoryTrace], options: MemoryOptions | None = None) -> Result:
    """``memory``: one snapshot's summary (``memory_summary``), or two compared (``compare_snapshots``)."""
    options = options or MemoryOptions()
    if len(snapshots) == 2:
        return compare_snapshots(snapshots[0], snapshots[1], options.device, options.top)
    return memory_summary(snapshots[0], options.top, options.by, options.device, timeline=options.timeline)


def compare_snapshots(a: MemoryTrace, b: MemoryTrace, device: int | None = None, top: int | None = None) -> Result:
    """``memory`` of two snapshots: the peaks and the ``top`` holders that changed most."""
    table = compare(a, b, device, top)
    notes = []
    if top is not None:
        changed = len(compare(a, b, device)) - 1
        if changed > top:
            notes.append(f"the {top} of {changed} holders that changed most (a larger {named('top')} shows more)")
    return Result.of("compare", table, f"Memory at the peak: A={a.source}  B={b.source}", notes)


MAX_POINTS = 3000  # more points than a picture's width in pixels add time, not detail


def timeline_chart(trace: MemoryTrace, memory: DeviceMemory, top: int = 10, title: str | None = None) -> Chart:
    """The active-memory timeline to draw, stacked: the ``top`` largest allocations live at the peak as
    bands of their own (each present from its alloc to its free), what was allocated before the trace
    and everything else as two bands below; reserved memory, the peak, annotated phases. x in ms
    (event index without timestamps), thinned to at most ``MAX_POINTS`` points that keep every spike."""
    timeline = memory.timeline
    allocated = timeline["allocated"].to_numpy(np.int64)
    peak_row = int(np.flatnonzero(timeline["index"].to_numpy() == memory.peak_index)[0])
    grid = np.unique(np.append(_bucket_extremes(allocated, MAX_POINTS // 2), peak_row))
    index = timeline["index"].to_numpy()[grid]
    scale, unit = (2**30, "GiB") if allocated.max(initial=0) >= 4 * 2**30 else (MIB, "MiB")
    largest = memory.live_at_peak.head(top)
    bands, labels = [], []
    for allocation in largest.itertuples():
        alive = (index >= allocation.start) & (index < allocation.end)
        bands.append(np.where(alive, allocation.size, 0) / scale)
        who = (
            "(before the trace)"
            if allocation.before_trace and allocation.stack == 0
            else user_frame(trace.stacks[int(allocation.stack)])
        )
        labels.append(f"{allocation.size / MIB:,.0f} MiB  {who[:60]}")
    before = _before_trace_bytes(memory, index, exclude=largest.index) / scale
    rest = allocated[grid] / scale - before - (np.sum(bands, axis=0) if bands else 0)
    return Chart(
        "memory_timeline",
        title or f"Active memory timeline, cuda:{memory.device}",
        {
            "x": timeline["x"].to_numpy()[grid],
            "before": before,
            "rest": np.maximum(rest, 0),
            "bands": bands,
            "labels": labels,
            "reserved": timeline["reserved"].to_numpy()[grid] / scale,
            "peak_x": float(timeline["x"].iloc[peak_row]),
            "peak": memory.peak_allocated / scale,
            "unit": unit,
            "x_label": "time (ms)" if memory.has_time else "allocator event",
            "phases": list(phases(trace, memory).itertuples(index=False, name=None)),
            "live_count": len(memory.live_at_peak),
        },
    )


def _bucket_extremes(values: np.ndarray, buckets: int) -> np.ndarray:
    """Indices of the smallest and the largest value in each of ``buckets`` equal runs, in order:
    thinned this way, a dense stretch still draws its whole min-max envelope and every spike survives."""
    if len(values) <= 2 * buckets:
        return np.arange(len(values))
    width = -(-len(values) // buckets)
    high = np.full(width * buckets, np.iinfo(np.int64).min, dtype=np.int64)
    low = np.full(width * buckets, np.iinfo(np.int64).max, dtype=np.int64)
    high[: len(values)] = values
    low[: len(values)] = values
    offsets = np.arange(buckets) * width
    picks = np.concatenate(
        (
            high.reshape(buckets, width).argmax(axis=1) + offsets,
            low.reshape(buckets, width).argmin(axis=1) + offsets,
            [0, len(values) - 1],
        )
    )
    return np.unique(picks[picks < len(values)])


def _before_trace_bytes(memory: DeviceMemory, index: np.ndarray, exclude) -> np.ndarray:
    """Bytes of allocations made before the trace began still active at each event index (those
    drawn as their own band excluded): all of them minus those freed by then."""
    allocations = memory.allocations.drop(index=exclude)
    early = allocations.loc[allocations["before_trace"].to_numpy()]
    ends = np.sort(early["end"].to_numpy())
    freed = np.concatenate(([0], np.cumsum(early["size"].to_numpy()[np.argsort(early["end"].to_numpy())])))
    return early["size"].sum() - freed[np.searchsorted(ends, index, side="right")]
