"""A memory snapshot replayed: per device, the timeline of allocated and reserved bytes, the peak,
and every allocation's lifetime.

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

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from tracekit.errors import UsageError
from tracekit.model.memory import ACTIVE_STATES, MemoryTrace

MIB = 2**20


@dataclass
class DeviceMemory:
    """One device's replayed memory.

    allocations: addr, size, requested_size (bytes; -1 unknown), start, end (event index: -1 before
        the trace, len(events) still active at the end), stack (where allocated), free_stack (where freed;
        0: not freed in the trace, or no stack recorded), before_trace (bool)
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

    @cached_property
    def live_at_peak(self) -> pd.DataFrame:
        """The allocations live at the peak, largest first (computed once: every table asks for it)."""
        allocations = self.allocations
        live = (allocations["start"] <= self.peak_index) & (allocations["end"] > self.peak_index)
        return allocations.loc[live.to_numpy()].sort_values("size", ascending=False, kind="stable")


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
    events = trace.events.loc[(trace.events["device"] == device).to_numpy()]
    blocks = trace.blocks.loc[(trace.blocks["device"] == device).to_numpy()]
    segments = trace.segments.loc[(trace.segments["device"] == device).to_numpy()]
    action = events["action"].to_numpy(dtype=object)
    size = events["size"].to_numpy(np.int64)
    addr = events["addr"].to_numpy(np.int64)
    count = len(events)
    is_alloc, is_free = action == "alloc", action == "free_completed"
    active_blocks = blocks.loc[blocks["state"].isin(ACTIVE_STATES).to_numpy()]
    notes: list[str] = []

    delta = np.where(is_alloc, size, 0) - np.where(is_free, size, 0)
    allocations, paired_free = _allocations(
        addr, size, is_alloc, is_free, events["stack"].to_numpy(), active_blocks, count
    )
    # Blocks are rounded up (to 512 B, or 2 MiB for large ones) while the trace records the size asked
    # for, so a block held by a traced allocation counts at its traced size: one unit throughout.
    rounding = _rounding_of_traced(allocations, active_blocks, count)
    start_amount = int(active_blocks["size"].sum()) - rounding - int(delta.sum())
    if rounding >= MIB / 20:  # what shows as 0.0 MiB carries no information
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
    # The stack of each event with one past the last: "freed where" for an allocation never freed is 0.
    stack_at = np.append(stacks, 0)

    alloc_rows = np.flatnonzero(is_alloc)
    ends = end_of[alloc_rows]
    traced = pd.DataFrame(
        {
            "addr": addr[alloc_rows],
            "size": size[alloc_rows],
            "start": alloc_rows,
            "end": ends,
            "stack": stacks[alloc_rows],
            "free_stack": stack_at[ends],
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
            "free_stack": stacks[orphan_frees],
            "before_trace": True,
        }
    )
    # Active blocks at snapshot time that no traced allocation still holds were there all along.
    open_addresses = set(traced.loc[traced["end"] == count, "addr"].tolist())
    untraced = active_blocks.loc[~active_blocks["address"].isin(open_addresses).to_numpy()]
    alive_throughout = pd.DataFrame(
        {
            "addr": untraced["address"].to_numpy(),
            "size": untraced["size"].to_numpy(),
            "start": -1,
            "end": count,
            "stack": untraced["stack"].to_numpy(),
            "free_stack": 0,
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
            "free_stack": "int64",
            "requested_size": "int64",
        }
    ), paired_free


def _rounding_of_traced(allocations: pd.DataFrame, active_blocks: pd.DataFrame, count: int) -> int:
    """Bytes by which the blocks of traced allocations still active at the end exceed their traced sizes."""
    open_traced = allocations.loc[((allocations["end"] == count) & ~allocations["before_trace"]).to_numpy()]
    block_size = active_blocks.drop_duplicates("address").set_index("address")["size"]
    held = block_size.reindex(open_traced["addr"].to_numpy()).to_numpy()
    found = ~np.isnan(held)
    return int((held[found] - open_traced["size"].to_numpy()[found]).sum())


SMALL, LARGE = 512, 2 * MIB  # the caching allocator's rounding steps (bytes)


def allocator_size(sizes: np.ndarray) -> np.ndarray:
    """Sizes as the caching allocator rounds them: 512 B steps below 1 MiB, 2 MiB steps above."""
    sizes = np.asarray(sizes, dtype=np.int64)
    step = np.where(sizes < MIB, SMALL, LARGE)
    return -(-sizes // step) * step


def asked_sizes(allocations: pd.DataFrame) -> np.ndarray:
    """Bytes each allocation asked for: its requested size where the snapshot records one, else the
    block's size (which the allocator rounds up: a 2.25 MiB tensor may hold a 3 MiB block)."""
    requested = allocations["requested_size"].to_numpy(np.int64)
    return np.where(requested >= 0, requested, allocations["size"].to_numpy(np.int64))
