"""The report's "Why" section: the per-step table, idle time by cause, the longest launch delays,
blocking syncs and communication overlap of one trace, each from the Result of its command."""

from __future__ import annotations

from tracekit.analysis.idle import idle_by_cause
from tracekit.analysis.launch_delays import launch_delays
from tracekit.analysis.overlap import overlap_table
from tracekit.analysis.steps import step_table
from tracekit.analysis.syncs import sync_summary
from tracekit.errors import TracekitError
from tracekit.model.trace import Trace
from tracekit.report.document import Document

TOP = 5
LAUNCH_COLUMNS = [
    "DevId",
    "Count",
    "QCount",
    "AAvg (ns)",
    "QAvg (ns)",
    "QMax (ns)",
    "KAvg (ns)",
    "API Name",
    "Kernel Name",
]


def why_section(section: Document, source: str, trace: Trace) -> None:
    """Append "### Why the GPU waits" to ``section``; a part whose input is missing says so."""
    section.text("### Why the GPU waits")
    try:
        steps = step_table(trace)
        section.text("Per step (`ProfilerStep#N` or `step` ranges):")
        section.table(steps.frame, f"tracekit steps {source}")
        if "timeline" in steps.charts:
            section.picture(steps.charts["timeline"], "steps", "steps and each GPU's busy time; gaps are idle")
    except TracekitError as error:
        section.text(f"No per-step table: {error}")
    idle = idle_by_cause(trace, top=TOP)
    section.text("Idle time of each GPU by cause (each gap between busy intervals gets one cause):")
    section.table(idle.table("idle"), f"tracekit idle {source}")
    try:
        launches = launch_delays(trace, name="short").frame
        longest = launches.sort_values("QAvg (ns)", ascending=False, na_position="last").head(TOP)
        section.text("Longest queue delays (launch call's end to kernel start; nsys kernexecsum):")
        section.table(longest.loc[:, LAUNCH_COLUMNS], f"tracekit launches {source} --name short")
    except TracekitError as error:
        section.text(f"No launch delays: {error}")
    syncs = sync_summary(trace, top=TOP)
    if not syncs.frame.empty:
        section.text("Blocking host calls and the GPU idle after them:")
        section.table(syncs.frame.head(TOP), f"tracekit syncs {source}")
    overlap = overlap_table(trace)
    if (overlap.frame["Communication (ns)"] > 0).any():
        section.text("Communication hidden under computation, per GPU:")
        section.table(overlap.frame, f"tracekit overlap {source}")
