"""The ``steps`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.ranges.steps``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command, Picture
from tracekit.model.options import Options


@dataclass(frozen=True)
class StepsOptions(Options):
    """``steps``: one row per training step."""

    step_range: str | None = shared.step_range()
    phases: tuple[str, ...] = shared.phases("range specs whose time per step gets a column")


COMMAND = Command(
    "steps",
    "One row per training step of TRACE: wall time, kernels, each GPU's busy and idle time, the time "
    "of each phase, outliers flagged.",
    StepsOptions,
    "trace",
    run="tracekit.analysis.ranges.steps:step_table",
    unit="ms",
    picture=Picture(
        "picture",
        "also draw the steps and each GPU's busy time on one time axis (PNG)",
        ("timeline",),
        "nothing to draw: no GPU work with its launching call in the trace",
    ),
    doc="""One row per training step (table "steps"): wall time, kernels, each GPU's busy and idle time, the
time of each phase, outliers flagged; the "timeline" chart of steps and GPU busy time.""",
    examples=('tracekit.steps("trace.sqlite", step_range="train_step")["steps"]',),
)
