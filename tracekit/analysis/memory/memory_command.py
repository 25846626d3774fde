"""The ``memory`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.memory.tables``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model.command import Command, Picture
from tracekit.model.options import Options, choice, flag, whole


@dataclass(frozen=True)
class MemoryOptions(Options):
    """``memory``: the peak of a CUDA memory snapshot, what was live at it, who allocated it."""

    top: int = whole(20, "rows of the table")
    by: str = choice(
        "allocation",
        ("allocation", "frame", "role", "all"),
        "largest live allocations at the peak, their total per allocating frame, per role "
        "(parameters, optimizer state, gradients, activations, temporaries), or all three",
    )
    compare: bool = flag("two snapshots: peak delta and the frames that grew or shrank")
    device: int | None = whole(None, "CUDA device (default: highest peak)", minimum=0)
    timeline: bool = flag("also the timeline charts (Result.charts: the pictures the command line draws)", cli=False)


COMMAND = Command(
    "memory",
    "Peak memory of a CUDA memory snapshot (torch.cuda.memory._dump_snapshot pickle, or a run folder's "
    "memory.pickle): when it happened, what was live, which code allocated it.",
    MemoryOptions,
    "snapshots",
    run="tracekit.analysis.memory.tables:memory_result",
    picture=Picture(
        "plot",
        "write the active-memory timeline picture here (.png or .svg); with {by} role, live memory by role over time",
        ("roles", "timeline"),
        "nothing to draw",
        needs="timeline",
    ),
    doc="""The peak of a CUDA memory snapshot (table "summary"), then the largest allocations live at it
("allocations"), their total per allocating frame ("holders"), or what they are for ("roles"); two
snapshots: the peaks compared ("compare"). ``timeline``: also the timeline charts.""",
    examples=('tracekit.memory("memory.pickle", by="role")["roles"]',),
)
