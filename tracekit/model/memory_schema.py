"""The column contract of memory snapshots (``model.memory.MemoryTrace``): the allocator's events, the blocks
and segments at the snapshot, and the annotations users recorded. Sizes are bytes; times torch's float
microseconds."""

from __future__ import annotations

from tracekit.model.schema import Column, Schema

MEMORY_ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
    "snapshot",
    "other",
)


MEMORY_EVENTS = Schema(
    "memory_events",
    (
        Column("device", "int16", "", "CUDA device"),
        Column("index", "int64", "", "position in its device's trace"),
        Column("action", "category", "", "allocator action", MEMORY_ACTIONS),
        Column("addr", "int64", "", "address"),
        Column("size", "int64", "bytes", "bytes (requested size for alloc/free)"),
        Column("stream", "int64", "", "stream"),
        Column("time_us", "float64", "us", "torch's timestamp (NaN without timestamps)"),
        Column("stack", "int64", "", "index into MemoryTrace.stacks (0: none recorded)"),
    ),
    "Allocator events of a CUDA memory snapshot, all devices.",
)

MEMORY_BLOCKS = Schema(
    "memory_blocks",
    (
        Column("device", "int64", "", "CUDA device"),
        Column("address", "int64", "", "address"),
        Column("size", "int64", "bytes", "block size (rounded up by the allocator)"),
        Column("requested_size", "int64", "bytes", "size asked for"),
        Column("state", "text", "", "active_allocated, active_pending_free, inactive, ..."),
        Column("stack", "int64", "", "index into MemoryTrace.stacks"),
    ),
    "Blocks of the allocator's segments at snapshot time.",
)

MEMORY_SEGMENTS = Schema(
    "memory_segments",
    (
        Column("device", "int64", "", "CUDA device"),
        Column("address", "int64", "", "address"),
        Column("total_size", "int64", "bytes", "reserved bytes"),
        Column("allocated_size", "int64", "bytes", "bytes in allocated blocks"),
        Column("active_size", "int64", "bytes", "bytes in active blocks"),
        Column("stream", "int64", "", "stream"),
    ),
    "Segments (memory reserved from CUDA) at snapshot time.",
)

MEMORY_ANNOTATIONS = Schema(
    "memory_annotations",
    (
        Column("device", "int64", "", "CUDA device"),
        Column("name", "text", "", 'annotated region, e.g. "Optimizer.step#AdamW.step"'),
        Column("stage", "text", "", "START or END"),
        Column("time_us", "float64", "us", "torch's timestamp"),
    ),
    "Annotations torch recorded beside the allocator events.",
)
