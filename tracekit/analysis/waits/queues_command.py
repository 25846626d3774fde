"""The ``queues`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.waits.queues``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command, Picture
from tracekit.model.options import Options, flag, whole


@dataclass(frozen=True)
class QueuesOptions(Options):
    """``queues``: each stream's launch queue, as HolisticTraceAnalysis measures it."""

    max_queue: int = whole(
        1024, "a queue this long or longer counts as full (the CUDA driver's launch queue holds 1,024 entries)"
    )
    series: bool = flag("also the queue length after each change, per stream (a table: for programs)")
    drop_last_step: bool = shared.drop_last_step()
    as_hta: bool = shared.as_hta()


COMMAND = Command(
    "queues",
    "How deep each stream's launch queue of TRACE ran (ops launched, not yet started), as "
    "HolisticTraceAnalysis measures it: its statistics per stream, its mean over time, and the time it "
    "was full ({max_queue}).",
    QueuesOptions,
    "trace",
    run="tracekit.analysis.waits.queues:queue_table",
    picture=Picture(
        "picture",
        "also draw each stream's queue length over time (PNG)",
        ("queues",),
        "nothing to draw",
    ),
    doc="""Each stream's launch queue, as HolisticTraceAnalysis measures it ("queues": statistics per stream, time
at ``max_queue``; "series" with ``series``).""",
    examples=('tracekit.queues("trace.json.gz")["queues"]',),
)
