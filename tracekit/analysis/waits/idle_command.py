"""The ``idle`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.waits.idle``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import Options, flag, number, whole


@dataclass(frozen=True)
class IdleOptions(Options):
    """``idle``: every gap of each GPU with its cause."""

    top: int = whole(15, "longest gaps listed")
    per_stream: bool = flag("each stream's gaps (as HolisticTraceAnalysis counts them)")
    overhead_max_us: float = number(
        30.0,
        "a gap before a queued op shorter than this is launch overhead (us); longer ones waited on something",
        unit="us",
        metavar="US",
    )
    drop_last_step: bool = shared.drop_last_step()


COMMAND = Command(
    "idle",
    "Why each GPU of TRACE sat idle: every gap between its busy intervals gets one cause (sync, host "
    "not launching, launch overhead, other stream or device, dependency not in trace, other).",
    IdleOptions,
    "trace",
    run="tracekit.analysis.waits.idle:idle_by_cause",
    unit="ms",
    doc="""Why each GPU sat idle: every gap between its busy intervals gets one cause (table "idle": gaps, idle
ns and share per GPU and cause; "gaps": the ``top`` longest).""",
    examples=('tracekit.idle("trace.sqlite", per_stream=True)["idle"]',),
)
