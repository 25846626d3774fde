"""The ``syncs`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.waits.syncs``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model.command import Command
from tracekit.model.options import Options, whole


@dataclass(frozen=True)
class SyncsOptions(Options):
    """``syncs``: blocking host calls, how long the CPU waited and the GPU idle that followed."""

    top: int = whole(15, "longest calls listed")


COMMAND = Command(
    "syncs",
    "Blocking host calls of TRACE (synchronize, synchronous memcpy): where they sat, how long the CPU "
    "waited, and the GPU idle that followed.",
    SyncsOptions,
    "trace",
    run="tracekit.analysis.waits.syncs:sync_summary",
    unit="ms",
    doc="""Blocking host calls (table "syncs": per API and range, calls, CPU wait, GPU idle after; "longest").""",
    examples=('tracekit.syncs("trace.sqlite")["syncs"]',),
)
