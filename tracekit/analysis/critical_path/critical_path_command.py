"""The ``critical-path`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one
input: ``analysis.critical_path.analysis``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import Options, choice, flag, text, whole

# tracekit's (the default, ``definition``) and HolisticTraceAnalysis 0.5's
DEFINITIONS = ("tracekit", "hta")


@dataclass(frozen=True)
class CriticalPathOptions(Options):
    """``critical-path``: the chain of dependent work that sets each step's time (``definition``: tracekit's or
    HolisticTraceAnalysis's)."""

    step: str | None = text(
        "only this step: its label as `tracekit steps` prints it (ProfilerStep#5) or its number (5)", metavar="STEP"
    )
    step_range: str | None = shared.step_range()
    top: int = whole(15, "operators and kernels on the path listed")
    definition: str = choice(
        "tracekit",
        DEFINITIONS,
        "tracekit: a gap on a stream longer than a queue takes (50 µs) is a wait, not overhead (the path "
        "follows the work that ran meanwhile), and the path stops at its step's end; hta: "
        "HolisticTraceAnalysis 0.5's definition exactly",
    )
    as_hta: bool = flag(
        "round every event inward to whole microseconds as HolisticTraceAnalysis 0.5 reads a "
        "trace (to compare with it, with {definition} hta; default: exact nanoseconds)"
    )


COMMAND = Command(
    "critical-path",
    "The critical path of each step of TRACE: the chain of dependent CPU operators, launches, GPU ops and "
    "synchronizations that decides the step's time (HolisticTraceAnalysis's definition with a stream's long "
    "waits and the time past the step's end left out; {definition} hta: HTA's exactly), split into CPU, "
    "GPU compute, communication, kernel-to-kernel and launch overhead; the operators and kernels with most "
    "time on it; and, for one step ({step}), the path in order.",
    CriticalPathOptions,
    "trace",
    run="tracekit.analysis.critical_path.analysis:critical_path",
    unit="ms",
    doc="""The critical path of each step: "steps" (its time by bound), "ops" (most time on it), "path" (one step:
in order). ``step``: ProfilerStep#5 or 5. ``definition``: "tracekit" (HolisticTraceAnalysis 0.5's, with a
stream's waits not counted as overhead and the path cut at its step's end) or "hta" (HTA's exactly).""",
    examples=('tracekit.critical_path("rank0.json.gz", step="5")["path"]',),
)
