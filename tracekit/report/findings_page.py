"""The findings of ``advise`` as report.html shows them: each with its bound (what its recoverable time
assumes) and its evidence (the first ``EVIDENCE_SHOWN`` rows of the evidence table: what, how long, when,
where) in the row itself, where report.md keeps the short table and points at the command for the rest."""

from __future__ import annotations

import numpy as np
import pandas as pd

EVIDENCE_SHOWN = 3  # evidence rows a finding shows in the page; the rest are counted


def short_time(ns: float) -> str:
    """A time at most four significant digits in the unit that reads it: "646 us", "1.235 ms"."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns"


def findings_with_evidence(findings: pd.DataFrame, evidence: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``findings``' ``columns`` with its Bound, and an Evidence column (each finding's evidence rows by its
    Rank, as sentences) before the Fix."""
    shown = [column for column in columns if column != "Fix"]
    frame = findings.loc[:, [*shown, "Bound"]].copy()
    said = _evidence_text(evidence)
    frame["Evidence"] = [said.get(int(rank), "") for rank in frame["Rank"].to_numpy(np.int64)]
    if "Fix" in columns:
        frame["Fix"] = findings["Fix"].to_numpy()
    return frame


def _evidence_text(evidence: pd.DataFrame) -> dict[int, str]:
    """Each finding's evidence (by Rank) as one text: "what (how long at when, where); ...; and N more"."""
    if evidence.empty:
        return {}
    lines = evidence["Evidence"].astype(str)
    times = [
        ", ".join(part for part in parts if part)
        for parts in zip(
            (f"{short_time(d)}" if pd.notna(d) else "" for d in evidence["Duration (ns)"]),
            (f"at {short_time(s)}" if pd.notna(s) else "" for s in evidence["Start (ns)"]),
            (str(w) if pd.notna(w) and str(w) else "" for w in evidence["Where"]),
        )
    ]
    text = [f"{line} ({when})" if when else line for line, when in zip(lines, times)]
    said = {}
    ranks = evidence["Rank"].to_numpy(np.int64)
    for rank in np.unique(ranks).tolist():  # a few findings: one text each
        rows = [line for line, own in zip(text, ranks == rank) if own]
        more = len(rows) - EVIDENCE_SHOWN
        said[rank] = "; ".join(rows[:EVIDENCE_SHOWN]) + (f"; and {more} more (tracekit advise)" if more > 0 else "")
    return said
