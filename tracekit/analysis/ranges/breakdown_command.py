"""The ``breakdown`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.ranges.breakdown``, many: ``analysis.many.tables``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import Options


@dataclass(frozen=True)
class BreakdownOptions(Options):
    """``breakdown``: kernel time by category per phase, copies beside it, each GPU's busy and idle time."""

    phases: tuple[str, ...] = shared.phases()
    domain: str | None = shared.domain()
    ops: str = shared.ops()
    same_thread: bool = shared.same_thread()
    drop_last_step: bool = shared.drop_last_step()


COMMAND = Command(
    "breakdown",
    "Kernel time by category (matmul, elementwise, softmax, ...) per phase, copies beside it, and each "
    "GPU's busy and idle time. Several traces: each one's tables and the sums over all of them.",
    BreakdownOptions,
    "traces",
    run="tracekit.analysis.ranges.breakdown:phase_breakdown",
    part="tracekit.analysis.many.tables:breakdown_part",
    merger="tracekit.analysis.many.tables:BreakdownMerger",
    title="breakdown",
    doc="""Kernel time by category per phase (table "breakdown"), each GPU's busy and idle time per phase
("gpus") and the memory copies and sets ("copies", when there are any).""",
    examples=('tracekit.breakdown("trace.sqlite", phases="forward,backward")["breakdown"]',),
)
