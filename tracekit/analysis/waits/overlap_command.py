"""The ``overlap`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.waits.overlap``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import Options, flag


@dataclass(frozen=True)
class OverlapOptions(Options):
    """``overlap``: per GPU, communication time, the part computation hid, and the exposed rest."""

    per_step: bool = flag("also one row per step and GPU")
    step_range: str | None = shared.step_range("with {per_step}: " + shared.STEP_RANGE_HELP)
    drop_last_step: bool = shared.drop_last_step()


COMMAND = Command(
    "overlap",
    "Per GPU: communication (NCCL) time, the part computation hid, and the exposed rest.",
    OverlapOptions,
    "trace",
    run="tracekit.analysis.waits.overlap:overlap_table",
    unit="ms",
    doc="""Per GPU (table "overlap"): communication (NCCL) time, the part computation hid, the exposed rest.""",
    examples=('tracekit.overlap("rank0.sqlite", per_step=True)["overlap"]',),
)
