"""The ``bandwidth`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.kernels.bandwidth``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command, Picture
from tracekit.model.options import Options, flag


@dataclass(frozen=True)
class BandwidthOptions(Options):
    """``bandwidth``: memory copies' and sets' bandwidth per direction, as HolisticTraceAnalysis measures it."""

    series: bool = flag("also the summed bandwidth after each start and end, per direction (a table: for programs)")
    drop_last_step: bool = shared.drop_last_step()
    as_hta: bool = shared.as_hta()


COMMAND = Command(
    "bandwidth",
    "The bandwidth TRACE's memory copies and sets achieved per direction (HtoD, DtoH, DtoD, peer, "
    "memset): bytes, time, busy time and achieved GB/s, and the summed bandwidth over time with "
    "HolisticTraceAnalysis's statistics.",
    BandwidthOptions,
    "trace",
    run="tracekit.analysis.kernels.bandwidth:bandwidth_table",
    picture=Picture(
        "picture",
        "also draw each direction's bandwidth over time (PNG)",
        ("bandwidth",),
        "nothing to draw",
    ),
    doc="""Memory copies' and sets' bandwidth per direction ("bandwidth": bytes, time, achieved GB/s,
HolisticTraceAnalysis's statistics of the summed bandwidth; "series" with ``series``).""",
    examples=('tracekit.bandwidth("trace.json.gz")["bandwidth"]',),
)
