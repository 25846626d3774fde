"""The ``critical-path`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one
input: ``analysis.critical_path.analysis``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import Options, flag, text, whole


@dataclass(frozen=True)
class CriticalPathOptions(Options):
    """``critical-path``: the chain of dependent work that sets each step's time, as HolisticTraceAnalysis."""

    step: str | None = text(
        "only this step: its label as `tracekit steps` prints it (ProfilerStep#5) or its number (5)", metavar="STEP"
    )
    step_range: str | None = shared.step_range()
    top: int = whole(15, "operators and kernels on the path listed")
    as_hta: bool = flag(
        "round every event inward to whole microseconds as HolisticTraceAnalysis 0.5 reads a "
        "trace (to compare with it; default: exact nanoseconds)"
    )


COMMAND = Command(
    "critical-path",
    "The critical path of each step of TRACE, as HolisticTraceAnalysis defines it: the chain of dependent "
    "CPU operators, launches, GPU ops and synchronizations that decides the step's time, split into CPU, "
    "GPU compute, communication, kernel-to-kernel and launch overhead; the operators and kernels with most "
    "time on it; and, for one step ({step}), the path in order.",
    CriticalPathOptions,
    "trace",
    run="tracekit.analysis.critical_path.analysis:critical_path",
    unit="ms",
    doc="""The critical path of each step, as HolisticTraceAnalysis 0.5 defines it: "steps" (its time by bound),
"ops" (most time on it), "path" (one step: in order). ``step``: ProfilerStep#5 or 5.""",
    examples=('tracekit.critical_path("rank0.json.gz", step="5")["path"]',),
)
