"""``MemoryTrace``: a CUDA memory snapshot (``torch.cuda.memory._dump_snapshot``) as tables.

Tables (one row per item, all devices), declared in ``schema``: ``events`` (MEMORY_EVENTS), ``blocks``
(MEMORY_BLOCKS), ``segments`` (MEMORY_SEGMENTS), ``annotations`` (MEMORY_ANNOTATIONS).
``stacks[i]`` is one captured stack: a list of {filename, line, name} frames, innermost first; 0 is
"no stack recorded".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from tracekit.model import memory_schema

ACTIVE_STATES = ("active_allocated", "active_pending_free", "active_awaiting_free")


@dataclass
class MemoryTrace:
    """A memory snapshot as tables; checked against the column contract when made."""

    source: str
    events: pd.DataFrame
    blocks: pd.DataFrame
    segments: pd.DataFrame
    annotations: pd.DataFrame
    stacks: list[list[dict]]
    has_time: bool
    settings: dict = field(default_factory=dict)

    def __post_init__(self):
        memory_schema.MEMORY_EVENTS.check(self.events, self.source)
        memory_schema.MEMORY_BLOCKS.check(self.blocks, self.source)
        memory_schema.MEMORY_SEGMENTS.check(self.segments, self.source)
        memory_schema.MEMORY_ANNOTATIONS.check(self.annotations, self.source)

    @property
    def devices(self) -> list[int]:
        seen = set(self.events["device"].unique()) | set(self.blocks["device"].unique())
        return sorted(int(device) for device in seen)
