"""The ``compare`` command, declared once: its options and ``COMMAND``; the analysis lives apart (many:
``analysis.many.compare``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command, Picture
from tracekit.model.options import Options, text


@dataclass(frozen=True)
class CompareOptions(Options):
    """``compare``: many runs side by side, per run and phase, ordered by a configuration field."""

    phases: tuple[str, ...] = shared.phases()
    order_by: str | None = text(
        "order runs by this run.json config field (ctx, dtype, compile, model, batch, ...)", metavar="FIELD"
    )
    domain: str | None = shared.domain()
    ops: str = shared.ops()
    same_thread: bool = shared.same_thread()
    step_range: str | None = shared.step_range(
        shared.STEP_RANGE_HELP + "; each run's time per step beside its time per instance"
    )


COMMAND = Command(
    "compare",
    "Many runs side by side: per run and phase, kernel time (total and per instance) and its split by "
    "category, ordered by a configuration field; optionally as grouped bars.\n\n"
    "INPUTS: run folders or traces (files, globs, or a folder of runs such as traces/).",
    CompareOptions,
    "many",
    part="tracekit.analysis.many.compare:compare_part",
    merger="tracekit.analysis.many.compare:CompareMerger",
    title="runs compared",
    unit="ms",
    picture=Picture(
        "picture",
        "also draw the grouped bars to this PNG",
        ("compare",),
        "nothing to draw: no run has kernel time",
    ),
    doc="""Many runs side by side (table "compare"): per run and phase, kernel time (total, per instance and,
for runs with steps, per step) and its split by category, ordered by a run.json configuration field;
the "compare" chart. Phases default to forward, backward and optimizer, found by their range names.""",
    examples=('tracekit.compare("traces/", order_by="ctx")["compare"]',),
    argument="runs",
)
