"""``tracekit advise``: what to fix first. Every rule's findings, ranked by the time a fix could give
back (``finding``), with their evidence; then nsys's expert rules as nsys reports them (``nsys_rules``).
"""

from __future__ import annotations

from tracekit.analysis.advice import nsys_rules
from tracekit.analysis.advice.advise_command import AdviseOptions
from tracekit.analysis.advice.copy_rules import copy_findings
from tracekit.analysis.advice.finding import CRITICAL_SHARE, INFO_SHARE, WARNING_SHARE, ranked
from tracekit.analysis.advice.fusion_rules import elementwise_chains, unfused_attention
from tracekit.analysis.advice.idle_rules import idle_findings
from tracekit.analysis.advice.kernel_rules import kernel_findings, unfused_optimizer
from tracekit.analysis.advice.memory_rules import memory_findings
from tracekit.analysis.advice.steady_rules import cold_start, judged_trace, one_time_table
from tracekit.analysis.critical_path.analysis import steps_table, top_path_events, typical_path
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.errors import TracekitError
from tracekit.model.memory import MemoryTrace
from tracekit.model.result import Result, Table
from tracekit.model.trace import Trace


def advise_trace(
    trace: Trace,
    options: AdviseOptions | None = None,
    snapshot: MemoryTrace | None = None,
    memory_note: str | None = None,
) -> Result:
    """The findings of ``trace`` (and of its memory ``snapshot``), most severe and most recoverable time
    first, their evidence, and the six nsys rules' tables (``gap_ms``, ``threshold``, ``chunks``,
    ``rows``: nsys's options of the same names). ``memory_note``: why a snapshot that goes with the
    trace could not be read."""
    options = options or AdviseOptions()
    kernel_mask(trace, "all")  # a clear error for a trace without GPU work
    ops = trace.columns("gpu_ops", ("start", "end"))
    origin, whole_span = int(ops["start"].min()), int(ops["end"].max() - ops["start"].min())
    judged = judged_trace(trace, options, origin)
    window = judged.trace.columns("gpu_ops", ("start", "end"))
    span = int(window["end"].max() - window["start"].min())
    optimizer, claimed = unfused_optimizer(judged.trace, origin)  # its gaps are its own: no idle finding counts them
    findings = [
        *idle_findings(judged.trace, origin, claimed, judged.state.one_time),
        *copy_findings(judged.trace, origin),
        *kernel_findings(judged.trace, origin),
    ]
    findings += [optimizer] if optimizer is not None else []
    attention = unfused_attention(judged.trace, origin)
    findings += [attention] if attention is not None else []
    chains = elementwise_chains(judged.trace, origin)
    findings += [chains] if chains is not None else []
    cold = cold_start(judged, origin, whole_span)
    findings += [cold] if cold is not None else []
    if snapshot is not None:
        findings += memory_findings(snapshot)
    table, proof = ranked(findings, span)
    rules = {
        "gpu-starv": nsys_rules.gpu_starvation(trace, options.gap_ms, options.rows),
        "gpu-low-util": nsys_rules.gpu_low_utilization(trace, options.threshold, options.chunks, options.rows),
        "cuda-sync-api": nsys_rules.sync_api_calls(trace, options.rows),
        "cuda-sync-memcpy": nsys_rules.sync_memcpy(trace, options.rows),
        "cuda-sync-memset": nsys_rules.sync_memset(trace, options.rows),
        "cuda-async-memcpy": nsys_rules.async_memcpy_pageable(trace, options.rows),
    }
    critical, critical_note = _critical_path(judged.trace)  # a typical step of what is judged
    titles = {"gap_ms": options.gap_ms, "threshold": options.threshold, "chunks": options.chunks}
    one_time, recurring = one_time_table(judged.state, origin)
    notes = [
        judged.note,
        *([recurring] if recurring else []),
        f"severity: the recoverable time's share of the judged span ({span / 1e6:,.3f} ms, first GPU op to last): "
        f"critical from {CRITICAL_SHARE:g} %, warning from {WARNING_SHARE:g} %, info from {INFO_SHARE:g} %; "
        "smaller findings are not listed",
        *(
            [f"no findings: nothing in this trace costs more than {INFO_SHARE:g} % of its span by these rules"]
            if table.empty
            else []
        ),
        critical_note,
        *(f"nsys rule {rule}: nothing found" for rule, rows in rules.items() if rows.empty),
        *([f"memory findings from {snapshot.source}"] if snapshot is not None else []),
        *([memory_note] if memory_note else []),
        *trace.warnings,
    ]
    return Result(
        [
            Table("findings", table, f"What to fix first: {trace.name}", cards=3),
            Table("evidence", proof, "Evidence, by finding (Start from the first GPU op)"),
            *(
                [
                    Table(
                        "one-time",
                        one_time,
                        "One-time costs, apart (Start from the first GPU op; In Window: began in the judged one)",
                    )
                ]
                if len(one_time)
                else []
            ),
            *critical,
            *(
                Table(rule, rows, f"nsys rule {rule}: {nsys_rules.TITLES[rule].format(**titles)}")
                for rule, rows in rules.items()
                if len(rows)
            ),
        ],
        notes,
    )


def advise_snapshot(snapshot: MemoryTrace) -> Result:
    """The memory findings of ``snapshot`` alone (``advise SNAPSHOT``), most severe first, their evidence,
    and how its memory was read (the notes of the memory roles)."""
    from tracekit.analysis.memory.replay import replay
    from tracekit.analysis.memory.roles import memory_by_role

    findings = memory_findings(snapshot)
    table, proof = ranked(findings, 0)
    notes = [f"memory findings from {snapshot.source}: a snapshot alone has no time findings (give its trace too)"]
    if len(snapshot.events):
        notes += memory_by_role(snapshot, replay(snapshot))[1]
    if table.empty:
        notes.append("no findings: nothing in this snapshot crosses a memory rule's threshold")
    return Result(
        [
            Table("findings", table, f"What to fix first: {snapshot.source}", cards=3),
            Table("evidence", proof, "Evidence, by finding"),
        ],
        notes,
    )


def _critical_path(trace: Trace) -> tuple[list[Table], str]:
    """The critical path of a typical step by tracekit's definition (table "critical-path", its top ops
    "critical-path-ops") and a sentence on what bounds it and what it leaves out; no table, and why, when
    there is none."""
    try:
        path, events, said = typical_path(trace)
    except TracekitError as error:
        return [], f"no critical path: {error}"
    return [
        Table("critical-path", steps_table([path]), "Critical path (tracekit's definition)"),
        Table("critical-path-ops", top_path_events([path], events, 5), "Most time on that critical path"),
    ], said
