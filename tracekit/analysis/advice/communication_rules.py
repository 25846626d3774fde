"""Exposed communication, with its cause named and the fix that follows it.

The figure is ``overlap``'s: NCCL time no computation hid, on the GPU with most of it (with steps, its mean
per step and the steps that exposed most). The cause comes from ``collectives`` on the same trace (its GPUs
are the ranks when it holds several): that GPU's exposed time split into waiting for the last peer and
transfer, and the patterns found. Waiting is most of it and one rank made the others wait: a late rank,
fixed on that rank (not the link, not buckets). Otherwise the pattern with most time among unbucketed
gradient sync, all-to-all or point-to-point exchange and slow transfer names it. With none, the usual
overlap fixes; DDP's buckets are named only where all-reduce is the collective.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.advice.finding import Finding, evidence, ms
from tracekit.errors import TracekitError
from tracekit.model.trace import Trace

EVIDENCE_ROWS = 5
OVERLAP_FIX = (
    "overlap communication with computation: launch it early and asynchronously (async_op=True, wait late), "
    "FSDP backward/forward prefetch; compare ranks (tracekit collectives) for one that makes the others wait"
)
BUCKET_FIX = (
    "overlap the gradient all-reduce with the backward pass: DDP buckets (bucket_cap_mb), "
    "gradient_as_bucket_view, no_sync() during gradient accumulation, FSDP backward prefetch"
)


@dataclass(frozen=True)
class Cause:
    """Why the exposed communication was exposed: the cause in a phrase ("" none named), what was measured, the
    fix."""

    kind: str
    what: str
    fix: str


def exposed_communication(trace: Trace, origin: int) -> Finding | None:
    """The exposed-communication finding of ``trace`` (evidence times from ``origin``), or None."""
    from tracekit.analysis.primitives.step_window import step_rows
    from tracekit.analysis.waits.overlap import EXPOSED, WHOLE_TRACE, overlap_table
    from tracekit.analysis.waits.overlap_command import OverlapOptions

    steps = step_rows(trace)
    # one overlap table: per step when the trace has steps (its "(whole trace)" rows are the totals)
    both = overlap_table(trace, OverlapOptions(per_step=len(steps) > 0)).frame
    whole = (both["Step"] == WHOLE_TRACE).to_numpy() if "Step" in both else np.ones(len(both), dtype=bool)
    table = both.loc[whole].drop(columns=["Step"], errors="ignore").reset_index(drop=True)
    if table.empty or not (table[EXPOSED] > 0).any():
        return None  # no NCCL kernels, or all of their time hidden
    worst = table.loc[table[EXPOSED].idxmax()]
    exposed = int(worst[EXPOSED])
    what, rows = [], []
    per_step = both.loc[~whole & (both["GPU"] == worst["GPU"]).to_numpy()]
    if len(per_step):  # per step, on the worst GPU: which steps exposed most
        starts = dict(zip(steps["name"].astype(str), steps["start"].to_numpy()))
        what = [f", {ms(per_step[EXPOSED].mean())} per step over {len(per_step)} steps"]
        top = per_step.sort_values(EXPOSED, ascending=False, kind="stable").head(EVIDENCE_ROWS)
        rows = [
            (
                f"{step}: {ms(step_exposed)} exposed of {ms(comm)} of communication",
                int(starts.get(str(step), origin)) - origin,
                int(step_exposed),
                str(worst["GPU"]),
            )
            for step, step_exposed, comm in zip(top["Step"], top[EXPOSED], top["Communication (ns)"])
        ]
    rows += [
        (
            f"{gpu}: {ms(row['Communication (ns)'])} of communication, {row['Overlap (%)']:.1f} % hidden",
            0,
            int(row[EXPOSED]),
            str(gpu),
        )
        for gpu, row in zip(table["GPU"], table.to_dict("records"))
    ]
    cause = communication_cause(trace, str(worst["GPU"]), len(table) > 1)
    proof = evidence(
        [row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows], [row[3] for row in rows]
    )
    return Finding(
        "exposed communication",
        (f"cause: {cause.kind}. " if cause.kind else "")
        + f"{worst['GPU']} spent {ms(exposed)} in NCCL collectives that no computation overlapped "
        f"({float(worst['Overlap (%)']):.1f} % of its communication hidden{''.join(what)}){cause.what}",
        exposed,
        f"upper bound: the exposed communication on {worst['GPU']} (fully overlapped it would cost no time)",
        cause.fix,
        proof,
    )


def communication_cause(trace: Trace, gpu: str, several_gpus: bool) -> Cause:
    """The cause of ``gpu``'s exposed communication (``gpu``: "cuda:N"; ``several_gpus``: the trace's GPUs are
    its ranks), from the collectives across the trace's ranks."""
    from tracekit.analysis.many.collectives import collectives_table

    try:
        result = collectives_table(trace)
    except TracekitError:
        return Cause("", "", OVERLAP_FIX)
    ranks, patterns = result.table("ranks"), result.table("patterns")
    mine = ranks.loc[(ranks["Rank"].astype(str) == gpu).to_numpy()] if several_gpus else ranks
    return cause_from(mine, patterns)


def cause_from(mine: pd.DataFrame, patterns: pd.DataFrame) -> Cause:
    """The cause of one rank's exposed communication: ``mine``, its rows of ``collectives``' ranks table;
    ``patterns``, the patterns found across the ranks compared."""
    exposed_wait, exposed_transfer = int(mine["Exposed Wait (ns)"].sum()), int(mine["Exposed Transfer (ns)"].sum())
    split = (
        f"; of its exposed collective time {ms(exposed_wait)} was waiting for the last peer to arrive and "
        f"{ms(exposed_transfer)} transfer"
        if exposed_wait
        else ""
    )
    if int(mine["Unmatched"].sum()) == int(mine["Count"].sum()):
        split = "; its peers' traces are not here: tracekit collectives over every rank's trace tells waiting for a late peer from transfer"
    found = {str(kind): row for kind, row in zip(patterns["Pattern"], patterns.to_dict("records"))}
    if "late rank" in found and exposed_wait >= exposed_transfer:
        late = found["late rank"]
        return Cause(f"waiting for {late['Where']}", f"{split}; {late['Evidence']}", str(late["Fix"]))
    chosen = _most_time(patterns, ("unbucketed gradient sync", "all-to-all exchange", "point-to-point exchange"))
    if chosen is None:
        chosen = _most_time(patterns, ("slow transfer",))
    if chosen is not None:
        return Cause(str(chosen["Pattern"]), f"{split}; {chosen['Evidence']}", str(chosen["Fix"]))
    all_reduce = mine.loc[(mine["Operation"].astype(str) == "AllReduce").to_numpy(), "Time (ns)"].sum()
    return Cause("", split, BUCKET_FIX if all_reduce * 2 >= mine["Time (ns)"].sum() else OVERLAP_FIX)


def _most_time(patterns: pd.DataFrame, kinds: tuple[str, ...]) -> dict | None:
    chosen = patterns.loc[patterns["Pattern"].isin(kinds).to_numpy()]
    if chosen.empty:
        return None
    return chosen.sort_values("Time (ns)", ascending=False, kind="stable").iloc[0].to_dict()
