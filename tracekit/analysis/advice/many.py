"""``tracekit advise`` over the ranks of a job (or several runs): one verdict, each finding once, and the
finding only the ranks together show, the straggler.

Each input is advised on its own (``advise``: severities against its own span); a finding several inputs
have is then one row: the input it costs most (its What, time and evidence), on which inputs it was found
("8 of 8: 0-7"), the least it costs on one of them and its most severe level; most severe first, then most
recoverable time, with a "Finding #" its evidence rows refer to. Every input's own list is a table apart
("findings_per_input"). Per input, a "ranks" table gives the mean
step time, the communication no computation hid (``overlap``), what bounds its critical path and its
findings by severity. The straggler (``stragglers``: HolisticTraceAnalysis's definition): the rank
that starts the collective everyone waits in latest; recoverable: the time the median rank waits in
that collective for it per flagged step (its later start), summed; severity against the steps' span.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracekit.analysis.advice.advise_command import AdviseOptions
from tracekit.analysis.advice.communication_rules import cause_from
from tracekit.analysis.advice.finding import SEVERITIES, Finding, evidence, ms, ranked
from tracekit.analysis.collectives.collectives_command import CollectivesOptions
from tracekit.analysis.collectives.rank_record import rank_record
from tracekit.analysis.many.collectives import CollectivesMerger
from tracekit.analysis.many.inputs import Part
from tracekit.analysis.many.stragglers import START, WAIT, potential_stragglers, straggler_piece
from tracekit.analysis.primitives.op_selection import kernel_mask
from tracekit.analysis.primitives.step_window import step_rows
from tracekit.analysis.waits.overlap import overlap_of
from tracekit.errors import TracekitError
from tracekit.model.result import Table
from tracekit.model.trace import Trace

NUMBER = "Finding #"
FOUND_ON = "Found On"
STRAGGLER_FIX = (
    "find what the straggler does before the collective that the others do not: data loading, a larger batch or "
    "longer sequences, more embedding lookups, a slower GPU or host (`tracekit diff` it against a typical rank)"
)


def advise_part(trace: Trace, part: Part, options: AdviseOptions, limit: int) -> Part:
    """One input's findings, evidence and figures for the comparison."""
    from tracekit.analysis.advice.advise import advise_trace

    result = advise_trace(trace, options)
    kernel_mask(trace, "all")
    ops = trace.gpu_ops
    communication, hidden = overlap_of(ops, np.ones(len(ops), dtype=bool))
    steps = step_rows(trace)
    findings = result.table("findings")
    part.pieces = {
        "findings": findings,
        "evidence": result.table("evidence"),
        "figures": {
            "Step Time (ns)": float(steps["duration"].mean()) if len(steps) else np.nan,
            "Communication (ns)": communication,
            "Exposed Communication (ns)": communication - hidden,
            "Critical Path": str(result.table("critical-path")["Bound By"].iloc[0])
            if "critical-path" in result.names
            else "",
            **{severity.capitalize(): int((findings["Severity"] == severity).sum()) for severity in SEVERITIES},
        },
        "stragglers": straggler_piece(trace),
        "collectives": rank_record(trace),
    }
    part.notes += [note for note in result.notes if not note.startswith("severity:")]
    return part


class AdviseMerger:
    """The inputs' findings listed together, the straggler finding, and a row per input."""

    def __init__(self, options: AdviseOptions, limit: int):
        self.pieces: dict[int, dict[str, Any]] = {}

    def add(self, index: int, pieces: dict[str, Any]) -> None:
        self.pieces[index] = pieces

    def tables(self, labels: dict[int, Any], column: str) -> tuple[list[Table], list[str]]:
        order = sorted(self.pieces, key=lambda index: (labels[index], index))
        findings, proofs = [], []
        for index in order:
            mine, proof = self.pieces[index]["findings"], self.pieces[index]["evidence"]
            label = pd.Series([labels[index]] * len(mine), index=mine.index, dtype=object)  # ints stay ints
            findings.append(mine.assign(**{column: label, "key": [(index, rank) for rank in mine["Rank"]]}))
            proofs.append(proof.assign(key=[(index, rank) for rank in proof["Rank"]]))
        straggler, stragglers, said = _straggler(
            {labels[index]: self.pieces[index]["stragglers"] for index in order}, column
        )
        notes = [said]
        if straggler is not None:
            row, proof = ranked([straggler[0]], straggler[1])
            label = straggler[2]
            if row.empty:
                notes.append(
                    f"the straggler costs the others {ms(straggler[0].recoverable_ns)} over the steps compared, "
                    "too little to list as a finding"
                )
            findings.append(row.assign(**{column: pd.Series([label], dtype=object), "key": [("straggler", 1)]}))
            proofs.append(proof.assign(key=[("straggler", 1)] * len(proof)))
        every = pd.concat(findings, ignore_index=True)
        notes += _communication_across_ranks(every, {labels[index]: self.pieces[index] for index in order}, column)
        every["order"] = every["Severity"].map({severity: place for place, severity in enumerate(SEVERITIES)})
        every = every.sort_values(["order", "Recoverable (ns)"], ascending=[True, False], kind="stable")
        table = _merged(every, column, len(order))
        number = dict(zip(table["key"], table[NUMBER], strict=True))
        # the input after the heading (a card's first three: #, severity, finding), first of the lines below it
        columns = [
            NUMBER,
            "Severity",
            "Finding",
            column,
            FOUND_ON,
            *[
                name
                for name in table.columns
                if name not in (NUMBER, "Severity", "Finding", column, FOUND_ON, "Rank", "key", "order")
            ],
        ]
        table = table.loc[:, columns].reset_index(drop=True)
        proof = pd.concat(proofs, ignore_index=True)
        proof = proof.loc[proof["key"].isin(number).to_numpy()]  # the evidence of the input each finding names
        proof.insert(0, NUMBER, [number[key] for key in proof["key"]])
        proof = proof.drop(columns=["Rank", "key"]).sort_values(NUMBER, kind="stable", ignore_index=True)
        figures = pd.DataFrame([{column: labels[index], **self.pieces[index]["figures"]} for index in order])
        if not stragglers.empty:
            figures["Straggler"] = (
                figures[column].map(dict(zip(stragglers["Rank"], stragglers["Straggler"], strict=True))).fillna("")
            )
        per_input = every.drop(columns=["key", "order"]).reset_index(drop=True)
        tables = [
            Table(
                "findings", table, "What to fix first, every input: each finding once, on the input worst hit", cards=3
            ),
            Table("evidence", proof, "Evidence, by finding (Start from the input's first GPU op)"),
            Table("ranks", figures, f"Per {column.lower()}: step time, exposed communication, critical path, findings"),
            Table("findings_per_input", per_input, f"Every {column.lower()}'s own findings"),
        ]
        return tables, notes


def _communication_across_ranks(every: pd.DataFrame, pieces: dict[Any, dict[str, Any]], column: str) -> list[str]:
    """Exposed communication, judged with every rank's collectives side by side (``collectives``): its cause
    and fix on each rank where it was found (a rank alone cannot see it waited for a late peer), in place."""
    rows = np.flatnonzero((every["Finding"] == "exposed communication").to_numpy())
    if not len(rows) or len(pieces) < 2:
        return []
    merger = CollectivesMerger(CollectivesOptions(), 0)
    for index, piece in enumerate(pieces.values()):
        merger.add(index, {"record": piece["collectives"]})
    try:
        tables, _ = merger.tables(dict(enumerate(pieces)), column)
    except TracekitError:
        return []
    compared = {table.name: table.frame for table in tables}
    ranks, patterns = compared["ranks"], compared["patterns"]
    for row in rows:
        label = every[column].iloc[row]
        mine = ranks.loc[(ranks["Rank"].astype(str) == str(label)).to_numpy()]
        if mine.empty:
            continue
        cause = cause_from(mine, patterns)
        lead = f"cause: {cause.kind}. " if cause.kind else ""
        every.iloc[row, every.columns.get_loc("What")] = (
            f"{lead}{column.lower()} {label} spent {ms(int(every['Recoverable (ns)'].iloc[row]))} in NCCL collectives "
            f"that no computation overlapped (the ranks' collectives compared){cause.what}"
        )
        every.iloc[row, every.columns.get_loc("Fix")] = cause.fix
    return ["exposed communication: its cause from every rank's collectives compared (tracekit collectives)"]


def _merged(every: pd.DataFrame, column: str, inputs: int) -> pd.DataFrame:
    """One row per kind of finding (``every``: each input's findings, most severe and most time first): the
    row of the input it costs most, its most severe level, on which inputs it was found ("8 of 8: 0-7") and
    the least time it costs on one of them; numbered in order."""
    worst = every.drop_duplicates("Finding", keep="first")  # ``every`` is sorted: the first of a kind is its worst
    found = every.groupby("Finding", sort=False).agg(
        where=(column, lambda labels: _listed(list(labels), inputs)),
        least=("Recoverable (ns)", "min"),
        level=("order", "min"),
    )
    table = worst.assign(
        **{
            FOUND_ON: found["where"].reindex(worst["Finding"]).to_numpy(object),
            "Least (ns)": found["least"].reindex(worst["Finding"]).to_numpy(np.int64),
            "order": found["level"].reindex(worst["Finding"]).to_numpy(),
        }
    )
    table["Severity"] = [SEVERITIES[int(level)] for level in table["order"]]
    table = table.sort_values(["order", "Recoverable (ns)"], ascending=[True, False], kind="stable")
    table.insert(0, NUMBER, np.arange(1, len(table) + 1))
    return table


def _listed(labels: list[Any], inputs: int) -> str:
    """ "3 of 8: 0, 4, 7"; whole numbers in runs as "0-6"."""
    unique = sorted(set(labels), key=lambda label: (not isinstance(label, (int, np.integer)), str(label)))
    if all(isinstance(label, (int, np.integer)) for label in unique):
        runs, text = [], [int(label) for label in unique]
        for value in text:
            if runs and value == runs[-1][1] + 1:
                runs[-1][1] = value
            else:
                runs.append([value, value])
        shown = ", ".join(f"{low}-{high}" if high > low else f"{low}" for low, high in runs)
    else:
        shown = ", ".join(str(label) for label in unique)
    return f"{len(unique)} of {inputs}: {shown}"


def _straggler(pieces: dict[Any, Any], column: str) -> tuple[tuple[Finding, int, Any] | None, pd.DataFrame, str]:
    """The straggler finding (with the span its severity is measured against, and its input's label), the
    stragglers table and the sentence that names them."""
    table, said = potential_stragglers(pieces)
    if table.empty or not (table["Straggler"] == "yes").any():
        return None, table, said
    flagged = table.loc[table["Straggler"] == "yes"]
    worst = flagged.loc[flagged[WAIT].idxmax()]
    mean_step, steps = float(table.attrs["mean_step_ns"]), int(table.attrs["steps"])
    named = column.lower()
    finding = Finding(
        "straggler",
        f"{named} {worst['Rank']} joins {table.attrs['collective']} last: the median {named} waited "
        f"{ms(int(worst[WAIT]))} for it in the collective over {steps} step{'s' if steps != 1 else ''} "
        f"(stragglers by HolisticTraceAnalysis's definition: {', '.join(str(rank) for rank in flagged['Rank'])})",
        int(worst[WAIT]),
        "the median rank's wait for it: in each instance of the collective it joined last, its start less the "
        "median start (the k-th instance of a step on every rank is one collective); what balancing the ranks "
        "would give back at most. Of Span: of the ranks' steps together (first start to last end), not one rank's",
        STRAGGLER_FIX,
        evidence(
            [
                f"{named} {rank}: starts the collective at {value:.1f} % of the mean step ({ms(mean_step)}), "
                f"made the median {named} wait {ms(wait)}"
                for rank, value, wait in zip(table["Rank"], table[START], table[WAIT], strict=True)
            ],
            np.zeros(len(table), dtype=np.int64),
            table[WAIT].to_numpy(np.int64),
            [f"{named} {rank}" for rank in table["Rank"]],
        ),
    )
    return (finding, int(mean_step * steps), worst["Rank"]), table, said
