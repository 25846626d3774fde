"""The report's "Why" section: the per-step table, idle time by cause, the longest launch delays,
blocking syncs, communication overlap and the kernel sequences worth fusing of one trace, each from the
Result of its command."""

from __future__ import annotations

from tracekit.analysis.kernels.sequences_command import SequencesOptions
from tracekit.analysis.ranges.steps_command import StepsOptions
from tracekit.analysis.waits.idle_command import IdleOptions
from tracekit.analysis.waits.launches_command import LaunchesOptions
from tracekit.analysis.waits.overlap_command import OverlapOptions
from tracekit.analysis.waits.syncs_command import SyncsOptions
from tracekit.commands import run_command
from tracekit.commands.command_line import command_line
from tracekit.errors import TracekitError
from tracekit.model.trace import Trace
from tracekit.render.markup import md_code, md_prose
from tracekit.report.document import Document

TOP = 5
WHY_HEADING = "Why the GPU waits"
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


def why_section(section: Document, source: str, trace: Trace, step_range: str | None = None) -> None:
    """Append "### Why the GPU waits" to ``section``; a part whose input is missing says so. ``source``:
    the input's path, for the command lines under the tables; ``step_range``: the range that is a step."""
    section.text(f"### {WHY_HEADING}")
    try:
        options = StepsOptions(step_range=step_range)
        steps = run_command("steps", trace, options)
        section.text(
            f"Per step ({f'{md_code(step_range)} ranges' if step_range else '`ProfilerStep#N` or `step` ranges'}):"
        )
        section.table(steps.frame, command_line("steps", [source], options, "ms"))
        if "timeline" in steps.charts:
            section.picture(steps.charts["timeline"], "steps", "steps and each GPU's busy time; gaps are idle")
    except TracekitError as error:
        section.text(md_prose(f"No per-step table: {error}"))
    idle = run_command("idle", trace, IdleOptions(top=TOP))
    section.text("Idle time of each GPU by cause (each gap between busy intervals gets one cause):")
    section.table(idle.table("idle"), command_line("idle", [source], IdleOptions(), "ms"))
    try:
        options = LaunchesOptions(name="short")
        launches = run_command("launches", trace, options).frame
        longest = launches.sort_values("QAvg (ns)", ascending=False, na_position="last").head(TOP)
        section.text("Longest queue delays (launch call's end to kernel start; nsys kernexecsum):")
        section.table(longest.loc[:, LAUNCH_COLUMNS], command_line("launches", [source], options, "ms"))
    except TracekitError as error:
        section.text(md_prose(f"No launch delays: {error}"))
    syncs = run_command("syncs", trace, SyncsOptions(top=TOP))
    if not syncs.frame.empty:
        section.text("Blocking host calls and the GPU idle after them:")
        section.table(syncs.frame.head(TOP), command_line("syncs", [source], SyncsOptions(), "ms"))
    overlap = run_command("overlap", trace, OverlapOptions())
    if (overlap.frame["Communication (ns)"] > 0).any():
        section.text("Communication hidden under computation, per GPU:")
        section.table(overlap.frame, command_line("overlap", [source], OverlapOptions(), "ms"))
    try:
        sequences = run_command("sequences", trace, SequencesOptions(top=TOP)).frame
    except TracekitError:
        return  # no kernels: the sections above said so
    if not sequences.empty:
        section.text("Kernel sequences seen most often, the candidates for fusing (Gaps: time between their kernels):")
        columns = ["Sequence", "Count", "Kernel Time (ns)", "Gaps (ns)", "From", "From Share (%)"]
        section.table(sequences.loc[:, columns], command_line("sequences", [source], SequencesOptions(), "ms"))
