"""One finding: what is wrong, the time fixing it could give back, the evidence, and the usual fix.

Severity is the recoverable time's share of the trace's span (its first GPU op's start to its last
op's end): critical from ``CRITICAL_SHARE`` %, warning from ``WARNING_SHARE`` %, info from
``INFO_SHARE`` %; a finding under that, or under ``MIN_RECOVERABLE_NS`` (0.1 ms), is not listed (a
healthy run's 1 % of dispatch gaps is left alone, and so is a 5 µs copy in a 5 µs trace). Recoverable time is an upper bound unless the finding's bound says how it was estimated.
Memory findings (``memory_rules``) recover bytes, not time, and come with a severity of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

CRITICAL_SHARE, WARNING_SHARE, INFO_SHARE = 20.0, 5.0, 2.0
MIN_RECOVERABLE_NS = 100_000  # nor is a finding of less than 0.1 ms listed, whatever its share of a tiny trace
SEVERITIES = ("critical", "warning", "info")
EVIDENCE_COLUMNS = ["Evidence", "Start (ns)", "Duration (ns)", "Where"]


@dataclass
class Finding:
    """``kind``: the rule ("blocking sync", ...); ``what``: one line with the figures; ``recoverable_ns``:
    the time a fix could give back; ``bound``: how that figure is bounded; ``fix``: the usual change;
    ``evidence``: rows of EVIDENCE_COLUMNS (Start from the trace's first GPU op), the calls, gaps,
    kernels or ranges behind the figures, to find in a timeline."""

    kind: str
    what: str
    recoverable_ns: int
    bound: str
    fix: str
    evidence: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=EVIDENCE_COLUMNS))
    recoverable_bytes: int = 0  # memory findings: what a fix could free (their time figure is 0)
    level: str | None = None  # a severity of its own (memory findings), else from the share of the span
    first: bool = False  # listed before every other (an out-of-memory error: the run failed)


def severity(share_percent: float) -> str | None:
    """The severity of a finding recovering this share of the span; None: too small to list."""
    if share_percent >= CRITICAL_SHARE:
        return "critical"
    if share_percent >= WARNING_SHARE:
        return "warning"
    return "info" if share_percent >= INFO_SHARE else None


def evidence(
    what: list[str], start: np.ndarray | list[int], duration: np.ndarray | list[int], where: list[str] | np.ndarray
) -> pd.DataFrame:
    """Evidence rows: a description, a start (ns from the first GPU op), a duration (ns), and where."""
    return pd.DataFrame(
        {
            "Evidence": pd.Series(list(what), dtype=object),
            "Start (ns)": np.asarray(start, dtype=np.int64),
            "Duration (ns)": np.asarray(duration, dtype=np.int64),
            "Where": pd.Series(list(where), dtype=object),
        }
    )


def worst(keys: np.ndarray, values: np.ndarray) -> tuple[int, int]:
    """(key, total) of the key whose values add up to most: the GPU with most of some time, say."""
    unique, group = np.unique(np.asarray(keys, dtype=np.int64), return_inverse=True)
    totals = np.bincount(group.reshape(-1), weights=np.asarray(values, dtype=np.float64), minlength=len(unique))
    best = int(np.argmax(totals))
    return int(unique[best]), int(np.asarray(values, dtype=np.int64)[group.reshape(-1) == best].sum())


def ms(ns: float) -> str:
    """A time for a sentence: "12.345 ms"."""
    return f"{ns / 1e6:,.3f} ms"


def ranked(findings: list[Finding], span_ns: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The findings worth listing, most severe first and, within a severity, most recoverable time (then
    memory) first (the findings table), and their evidence (each row keyed by its finding's rank)."""
    rows, evidence_rows = [], []
    listed = []
    for finding in findings:
        share = finding.recoverable_ns * 100 / span_ns if span_ns > 0 else 0.0
        level = finding.level or (severity(share) if finding.recoverable_ns >= MIN_RECOVERABLE_NS else None)
        if level is not None:
            listed.append((finding, share, level))
    listed.sort(
        key=lambda item: (
            not item[0].first,
            SEVERITIES.index(item[2]),
            -item[0].recoverable_ns,
            -item[0].recoverable_bytes,
        )
    )
    for rank, (finding, share, level) in enumerate(listed, start=1):
        rows.append(
            {
                "Rank": rank,
                "Severity": level,
                "Finding": finding.kind,
                "What": finding.what,
                "Recoverable (ns)": int(finding.recoverable_ns),
                "Of Span (%)": share,
                # bytes only for the findings that free memory (blank for the others)
                "Recoverable (MiB)": finding.recoverable_bytes / 2**20 if finding.recoverable_bytes else np.nan,
                "Bound": finding.bound,
                "Fix": finding.fix,
            }
        )
        if len(finding.evidence):
            evidence_rows.append(finding.evidence.assign(Rank=rank)[["Rank", *EVIDENCE_COLUMNS]])
    table = pd.DataFrame(
        rows,
        columns=[
            "Rank",
            "Severity",
            "Finding",
            "What",
            "Recoverable (ns)",
            "Of Span (%)",
            "Recoverable (MiB)",
            "Bound",
            "Fix",
        ],
    )
    proof = (
        pd.concat(evidence_rows, ignore_index=True)
        if evidence_rows
        else pd.DataFrame(columns=["Rank", *EVIDENCE_COLUMNS])
    )
    return table, proof
