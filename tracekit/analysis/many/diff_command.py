"""The ``diff`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.many.diff``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import Options, choice, number, whole


@dataclass(frozen=True)
class DiffOptions(Options):
    """``diff``: where GPU time moved from A to B."""

    phases: tuple[str, ...] = shared.phases("range specs compared besides the whole trace")
    by: str | None = choice(
        None,
        (None, "category", "kernel", "step"),
        "only one table: per phase and category, the kernels that changed most, or step by step",
    )
    top: int = whole(15, "kernels listed")
    ops: str = shared.ops()
    domain: str | None = shared.domain()
    same_thread: bool = shared.same_thread()
    step_range: str | None = shared.step_range("the steps of the verdict and of {by} step: " + shared.STEP_RANGE_HELP)
    fail_slower: float | None = number(
        None,
        "exit 1 (a one-line reason) when B is slower than A by more than PCT % beyond the noise band of the "
        "steps' spread: a CI gate",
        minimum=0.0,
        metavar="PCT",
    )


COMMAND = Command(
    "diff",
    "Whether B is faster, slower or the same as A (mean step time, with a noise band from the steps' spread), "
    "and where GPU time moved from A to B (runs or traces): per phase and category, the kernels that "
    "changed most, and the memory peak when both runs have a snapshot.",
    DiffOptions,
    "pair",
    run="tracekit.analysis.many.diff:trace_diff",
    unit="ms",
    doc="""The verdict ("verdict": faster, slower or the same within the noise of the steps' spread; ``fail_slower``:
raise a RegressionError past that much slower), and where GPU time moved from A to B: per phase and category
(table "categories"), the kernels that
changed most ("kernels"), the memory peaks when both are run folders with a snapshot ("memory"); or
(``by="step"``) step by step ("steps").""",
    examples=('tracekit.diff("fp32.sqlite", "bf16.sqlite", by="kernel")["kernels"]',),
)
