"""Memory snapshot analyses: the timeline of allocated and reserved bytes, the peak and what was
live at it, and which code holds that memory.

Definitions (as PyTorch's memory_viz "Active Memory Timeline"):
- An allocation is active from its ``alloc`` event to its ``free_completed`` event.
- The trace may start after allocations were made (recording started late, or the ring buffer
  dropped early events). What was allocated when the trace began is the active blocks at snapshot
  time minus the trace's net change (allocs - frees), in one unit: the trace records requested
  sizes while blocks are rounded up, so a block a traced allocation holds counts at its traced size
  (the rounding is reported apart). Those allocations are "allocated before the trace began": freed
  ones show up as a ``free_completed`` without an ``alloc``, the rest are active blocks of the
  snapshot that no traced alloc accounts for.
- Allocated bytes after event i = that starting amount + traced allocs - traced frees up to i. The
  peak counts the starting amount; the peak of the allocations made during the trace alone is
  reported beside it. Reserved bytes follow segment_alloc/segment_free (map/unmap for expandable
  segments) from the snapshot's segments the same way.
Event replays are numpy cumulative sums, pairs come from one sort by (address, event index).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from tracekit.errors import UsageError
from tracekit.sources.snapshot import ACTIVE_STATES, MemoryTrace

MIB = 2**20
BEFORE_TRACE = "(allocated before the trace began)"
NO_STACK = "(no stack recorded)"
# Frames of the allocator and the unwinder say nothing about who allocated.
SKIP_FUNCTIONS = (
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "CUDACachingAllocator",
    "NativeCachingAllocator",
    "empty_generic",
    "empty_cuda",
    "empty_strided",
    "_start",
    "__libc_start_main",
    "Py_RunMain",
    "Py_BytesMain",
    "_PyEval",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
    "PyMethod_",
    "PyCMethod_",
    "PyType_",
    "PyRun_",
    "_PyRun",
    "_Py",
    "__clone",
    "pthread_",
    "std::error_code",
)
SKIP_FILES = (
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "ceval.c",
    "cpython/abstract.h",
)
LIBRARY_PATHS = ("/site-packages/", "/dist-packages/", "<frozen", "/lib/python3.")
AUTOGRAD_NODE = re.compile(r"torch::autograd::(?:generated::)?(\w+)::(?:apply|accumulateGrad)")
ATEN_OP = re.compile(r"at::_ops::(\w+)::call")


@dataclass
class DeviceMemory:
    """One device's replayed memory.

    allocations: addr, size, requested_size (bytes; -1 unknown), start, end (event index: -1 before
        the trace, len(events) still active at the end), stack, before_trace (bool)
    timeline: index (-1 = before the first event), x (ms from the first event, or the index without
        timestamps), allocated, allocated_in_trace, reserved (bytes)
    """

    device: int
    allocations: pd.DataFrame
    timeline: pd.DataFrame
    peak_index: int
    has_time: bool
    notes: list[str] = field(default_factory=list)

    @property
    def peak_allocated(self) -> int:
        return int(self.timeline["allocated"].max())

    @property
    def live_at_peak(self) -> pd.DataFrame:
        allocations = self.allocations
        live = (allocations["start"] <= self.peak_index) & (allocations["end"] > self.peak_index)
        return allocations[live.to_numpy()].sort_values("size", ascending=False, kind="stable")


def replay(trace: MemoryTrace, device: int | None = None) -> DeviceMemory:
    """Replay one device's events (default: the device with the highest peak)."""
    devices = trace.devices
    if device is None:
        if not devices:
            return _replay(trace, 0)
        replays = [_replay(trace, candidate) for candidate in devices]
        return max(replays, key=lambda memory: memory.peak_allocated)
    if devices and device not in devices:
        raise UsageError(f"{trace.source} has no device {device}; it has {', '.join(map(str, devices))}")
    return _replay(trace, device)


def _replay(trace: MemoryTrace, device: int) -> DeviceMemory:
    events = trace.events[(trace.events["device"] == device).to_numpy()]
    blocks = trace.blocks[(trace.blocks["device"] == device).to_numpy()]
    segments = trace.segments[(trace.segments["device"] == device).to_numpy()]
    action = events["action"].to_numpy(dtype=object)
    size = events["size"].to_numpy(np.int64)
    addr = events["addr"].to_numpy(np.int64)
    count = len(events)
    is_alloc, is_free = action == "alloc", action == "free_completed"
    active_blocks = blocks[blocks["state"].isin(ACTIVE_STATES).to_numpy()]
    notes: list[str] = []

    delta = np.where(is_alloc, size, 0) - np.where(is_free, size, 0)
    allocations, paired_free = _allocations(
        addr, size, is_alloc, is_free, events["stack"].to_numpy(), active_blocks, count
    )
    # Blocks are rounded up (to 512 B, or 2 MiB for large ones) while the trace records the size asked
    # for, so a block held by a traced allocation counts at its traced size: one unit throughout.
    rounding = _rounding_of_traced(allocations, active_blocks, count)
    start_amount = int(active_blocks["size"].sum()) - rounding - int(delta.sum())
    if rounding:
        notes.append(
            f"{rounding / MIB:,.1f} MiB of the snapshot's active blocks is allocator rounding of allocations "
            "made during the trace (blocks are rounded up; the trace records requested sizes)"
        )
    if start_amount < 0:
        notes.append(
            f"the snapshot's active blocks are {-start_amount:,} bytes short of what the trace leaves "
            "allocated; the timeline starts at 0"
        )
        start_amount = 0
    in_trace_delta = np.where(is_alloc, size, 0) - np.where(paired_free, size, 0)
    segment_sign = np.select(
        [np.isin(action, ["segment_alloc", "segment_map"]), np.isin(action, ["segment_free", "segment_unmap"])],
        [1, -1],
        0,
    )
    reserved_delta = segment_sign * size
    reserved_start = max(int(segments["total_size"].sum()) - int(reserved_delta.sum()), 0)

    timeline = pd.DataFrame(
        {
            "index": np.arange(-1, count),
            "allocated": start_amount + np.concatenate(([0], np.cumsum(delta))),
            "allocated_in_trace": np.concatenate(([0], np.cumsum(in_trace_delta))),
            "reserved": reserved_start + np.concatenate(([0], np.cumsum(reserved_delta))),
        }
    )
    times = events["time_us"].to_numpy()
    has_time = trace.has_time and count > 0 and not np.isnan(times).all()
    if has_time:
        times = pd.Series(times).ffill().bfill().to_numpy()
        x = (times - times[0]) / 1e3
        timeline["x"] = np.concatenate(([x[0] if count else 0.0], x))
    else:
        timeline["x"] = timeline["index"].astype(float)
    peak_index = int(timeline["index"].iloc[int(np.argmax(timeline["allocated"].to_numpy()))])
    return DeviceMemory(device, allocations, timeline, peak_index, has_time, notes)


def _allocations(addr, size, is_alloc, is_free, stacks, active_blocks: pd.DataFrame, count: int):
    """Allocation intervals from alloc/free_completed pairs at the same address, plus the allocations
    made before the trace began. Returns the table and, per event, whether it frees a traced alloc."""
    rows = np.flatnonzero(is_alloc | is_free)
    order = rows[np.lexsort((rows, addr[rows]))]
    first, second = order[:-1], order[1:]
    pairs = (addr[first] == addr[second]) & is_alloc[first] & is_free[second]
    paired_free = np.zeros(count, dtype=bool)
    paired_free[second[pairs]] = True
    end_of = np.full(count, count, dtype=np.int64)  # by alloc row: its free's row, or count (never freed)
    end_of[first[pairs]] = second[pairs]

    alloc_rows = np.flatnonzero(is_alloc)
    ends = end_of[alloc_rows]
    traced = pd.DataFrame(
        {
            "addr": addr[alloc_rows],
            "size": size[alloc_rows],
            "start": alloc_rows,
            "end": ends,
            "stack": stacks[alloc_rows],
            "before_trace": False,
        }
    )
    orphan_frees = np.flatnonzero(is_free & ~paired_free)
    freed_before = pd.DataFrame(
        {
            "addr": addr[orphan_frees],
            "size": size[orphan_frees],
            "start": -1,
            "end": orphan_frees,
            "stack": 0,
            "before_trace": True,
        }
    )
    # Active blocks at snapshot time that no traced allocation still holds were there all along.
    open_addresses = set(traced.loc[traced["end"] == count, "addr"].tolist())
    untraced = active_blocks[~active_blocks["address"].isin(open_addresses).to_numpy()]
    alive_throughout = pd.DataFrame(
        {
            "addr": untraced["address"].to_numpy(),
            "size": untraced["size"].to_numpy(),
            "start": -1,
            "end": count,
            "stack": untraced["stack"].to_numpy(),
            "before_trace": True,
        }
    )
    allocations = pd.concat([traced, freed_before, alive_throughout], ignore_index=True)
    requested = dict(zip(active_blocks["address"].tolist(), active_blocks["requested_size"].tolist()))
    still_active = (allocations["end"] == count).to_numpy()
    requested_sizes = np.full(len(allocations), -1, dtype=np.int64)
    requested_sizes[still_active] = [requested.get(a, -1) for a in allocations.loc[still_active, "addr"].tolist()]
    allocations["requested_size"] = requested_sizes
    return allocations.astype(
        {
            "addr": "int64",
            "size": "int64",
            "start": "int64",
            "end": "int64",
            "stack": "int64",
            "requested_size": "int64",
        }
    ), paired_free


def _rounding_of_traced(allocations: pd.DataFrame, active_blocks: pd.DataFrame, count: int) -> int:
    """Bytes by which the blocks of traced allocations still active at the end exceed their traced sizes."""
    open_traced = allocations[((allocations["end"] == count) & ~allocations["before_trace"]).to_numpy()]
    block_size = active_blocks.drop_duplicates("address").set_index("address")["size"]
    held = block_size.reindex(open_traced["addr"].to_numpy()).to_numpy()
    found = ~np.isnan(held)
    return int((held[found] - open_traced["size"].to_numpy()[found]).sum())


@lru_cache(maxsize=None)
def _is_library(filename: str) -> bool:
    return any(marker in filename for marker in LIBRARY_PATHS)


def _short(filename: str) -> str:
    parts = filename.replace("\\", "/").split("/")
    return "/".join(parts[-2:])


def _kept(frame: dict) -> bool:
    name, filename = frame.get("name", ""), frame.get("filename", "")
    return not any(skip in name for skip in SKIP_FUNCTIONS) and not any(skip in filename for skip in SKIP_FILES)


def user_frame(stack: list[dict]) -> str:
    """Who allocated: the first Python frame outside libraries ("model.py:39 forward"); else the first
    Python frame; else the autograd node (backward runs in C++: "BmmBackward0") or the ATen op."""
    if not stack:
        return NO_STACK
    python = [frame for frame in stack if str(frame.get("filename", "")).endswith(".py")]
    for frame in python:
        if not _is_library(frame["filename"]):
            return f"{_short(frame['filename'])}:{frame.get('line', 0)} {frame.get('name', '')}"
    if python:
        frame = python[0]
        return f"{_short(frame['filename'])}:{frame.get('line', 0)} {frame.get('name', '')}"
    for frame in stack:
        node = AUTOGRAD_NODE.search(frame.get("name", ""))
        if node:
            return node.group(1)
    for frame in stack:
        op = ATEN_OP.search(frame.get("name", ""))
        if op:
            return f"aten::{op.group(1)}"
    kept = [frame for frame in stack if _kept(frame)]
    return (kept or stack)[0].get("name", NO_STACK)[:120]


def short_stack(stack: list[dict], depth: int = 4) -> str:
    """A few frames that say where an allocation came from, innermost first, joined by " < ".

    Python frames when there are any; otherwise the ATen ops and autograd nodes of the C++ stack
    ("aten::mm < MmBackward0 < autograd engine"), not its template machinery.
    """
    if not stack:
        return ""
    python = [
        f"{_short(frame['filename'])}:{frame.get('line', 0)} {frame.get('name', '')}"
        for frame in stack
        if str(frame.get("filename", "")).endswith(".py")
    ]
    if python:
        return " < ".join(python[:depth])
    names: list[str] = []
    for frame in stack:
        name = frame.get("name", "")
        node, op = AUTOGRAD_NODE.search(name), ATEN_OP.search(name)
        label = (
            node.group(1)
            if node
            else f"aten::{op.group(1)}"
            if op
            else "autograd engine"
            if "autograd::Engine" in name
            else None
        )
        if label and (not names or names[-1] != label):
            names.append(label)
        if label == "autograd engine" or len(names) == depth:
            break
    return " < ".join(names)


def _frames(trace: MemoryTrace, stacks: pd.Series, before: pd.Series) -> tuple[list[str], list[str]]:
    labels, chains = {}, {}
    frames, chains_out = [], []
    for stack, early in zip(stacks.tolist(), before.tolist()):
        if early and stack == 0:
            frames.append(BEFORE_TRACE)
            chains_out.append("")
            continue
        if stack not in labels:
            labels[stack] = user_frame(trace.stacks[stack])
            chains[stack] = short_stack(trace.stacks[stack])
        frames.append(labels[stack])
        chains_out.append(chains[stack])
    return frames, chains_out


def peak_summary(trace: MemoryTrace, memory: DeviceMemory) -> pd.DataFrame:
    """Key facts as (Quantity, Value) rows: peak allocated (MiB, with what was allocated before the
    trace), when, the peak of traced allocations alone, reserved memory, event counts."""
    timeline = memory.timeline
    at_peak = timeline[timeline["index"] == memory.peak_index].iloc[0]
    unit = "ms" if memory.has_time else "event"
    live = memory.live_at_peak
    rows = [
        ("device", f"cuda:{memory.device}"),
        ("peak allocated (MiB)", f"{memory.peak_allocated / MIB:,.1f}"),
        ("peak at", f"{at_peak['x']:,.3f} {unit}" if memory.has_time else f"event {memory.peak_index:,}"),
        ("allocated before the trace began (MiB)", f"{timeline['allocated'].iloc[0] / MIB:,.1f}"),
        ("peak of allocations made during the trace (MiB)", f"{timeline['allocated_in_trace'].max() / MIB:,.1f}"),
        ("reserved at peak (MiB)", f"{at_peak['reserved'] / MIB:,.1f}"),
        ("max reserved (MiB)", f"{timeline['reserved'].max() / MIB:,.1f}"),
        ("allocations live at peak", f"{len(live):,}"),
        ("trace events", f"{len(timeline) - 1:,}"),
    ]
    rows += [("note", note) for note in memory.notes]
    return pd.DataFrame(rows, columns=["Quantity", "Value"])


def largest_at_peak(trace: MemoryTrace, memory: DeviceMemory, top: int | None = 20) -> pd.DataFrame:
    """The largest allocations live at the peak. Columns: Size (MiB), Requested (MiB, when known),
    Allocated At, Freed At (ms, or event index without timestamps; blank = before / after the trace),
    Frame (who allocated), Stack (innermost first)."""
    live = memory.live_at_peak
    live = live.head(top) if top else live
    frames, stacks = _frames(trace, live["stack"], live["before_trace"])
    x = memory.timeline.set_index("index")["x"]
    events = len(memory.timeline) - 1
    unit = "ms" if memory.has_time else "event"
    return pd.DataFrame(
        {
            "Size (MiB)": live["size"].to_numpy() / MIB,
            "Requested (MiB)": np.where(
                live["requested_size"].to_numpy() >= 0, live["requested_size"].to_numpy() / MIB, np.nan
            ),
            f"Allocated At ({unit})": [x[start] if start >= 0 else None for start in live["start"].tolist()],
            f"Freed At ({unit})": [x[end] if end < events else None for end in live["end"].tolist()],
            "Frame": frames,
            "Stack": stacks,
        }
    )


def holders_at_peak(trace: MemoryTrace, memory: DeviceMemory) -> pd.DataFrame:
    """What holds the memory at the peak, grouped by the allocating frame: Frame, Allocations,
    Total (MiB), Share (%) of the peak, largest first."""
    live = memory.live_at_peak
    frames, _ = _frames(trace, live["stack"], live["before_trace"])
    grouped = pd.DataFrame({"Frame": frames, "size": live["size"].to_numpy()}).groupby("Frame", sort=False)["size"]
    table = pd.DataFrame({"Allocations": grouped.size(), "bytes": grouped.sum()}).sort_values("bytes", ascending=False)
    peak = max(memory.peak_allocated, 1)
    return pd.DataFrame(
        {
            "Frame": table.index.astype(object),
            "Allocations": table["Allocations"].to_numpy(np.int64),
            "Total (MiB)": table["bytes"].to_numpy() / MIB,
            "Share (%)": np.round(table["bytes"].to_numpy() * 100.0 / peak, 1),
        }
    )


def phases(trace: MemoryTrace, memory: DeviceMemory) -> pd.DataFrame:
    """Phases from the snapshot's annotations (e.g. Optimizer.step#AdamW.step): Phase, Start, End (ms)."""
    notes = trace.annotations
    notes = notes[(notes["device"] == memory.device).to_numpy()] if not notes.empty else notes
    if notes.empty or not memory.has_time:
        return pd.DataFrame(columns=["Phase", "Start (ms)", "End (ms)"])
    t0 = trace.events.loc[trace.events["device"] == memory.device, "time_us"].min()
    rows = []
    for name, group in notes.sort_values("time_us").groupby("name", sort=False):
        starts = group.loc[group["stage"] == "START", "time_us"].tolist()
        ends = group.loc[group["stage"] == "END", "time_us"].tolist()
        rows += [(name, (start - t0) / 1e3, (end - t0) / 1e3) for start, end in zip(starts, ends)]
    return pd.DataFrame(rows, columns=["Phase", "Start (ms)", "End (ms)"])


def compare(trace_a: MemoryTrace, trace_b: MemoryTrace, device: int | None = None) -> pd.DataFrame:
    """Peak of B against A and the allocation groups (by frame) that grew or shrank at the peak.

    Columns: Holder, A (MiB), B (MiB), Delta (MiB), Ratio; the first row is the whole peak.
    """
    memory_a, memory_b = replay(trace_a, device), replay(trace_b, device)
    a = holders_at_peak(trace_a, memory_a).set_index("Frame")["Total (MiB)"]
    b = holders_at_peak(trace_b, memory_b).set_index("Frame")["Total (MiB)"]
    groups = pd.concat([a.rename("A (MiB)"), b.rename("B (MiB)")], axis=1).fillna(0.0)
    groups["Delta (MiB)"] = groups["B (MiB)"] - groups["A (MiB)"]
    groups = groups.reindex(groups["Delta (MiB)"].abs().sort_values(ascending=False, kind="stable").index)
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


def memory_tables(
    trace: MemoryTrace, top: int | None = 20, by: str = "allocation", device: int | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, DeviceMemory]:
    """``tracekit memory``: the peak summary, and the largest allocations live at the peak (``by``
    "allocation") or what holds the memory at the peak grouped by frame (``by`` "frame")."""
    if by not in ("allocation", "frame"):
        raise UsageError(f"unknown --by {by!r}; choose allocation or frame")
    memory = replay(trace, device)
    table = largest_at_peak(trace, memory, top) if by == "allocation" else holders_at_peak(trace, memory).head(top)
    return peak_summary(trace, memory), table, memory
