"""Run nsys's own `nsys stats` reports, for comparison with tracekit's numbers."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pandas as pd

NSYS_ROUNDS = ("Avg (ns)", "Med (ns)", "StdDev (ns)", "Time (%)")


def as_nsys_prints(frame: pd.DataFrame) -> pd.DataFrame:
    """tracekit's unrounded figures as nsys prints them: averages, medians, standard deviations and shares
    to one decimal, halves away from zero (what tracekit's table output shows)."""
    from tracekit.render.tables import half_away

    rounded = frame.copy()
    for column in frame.columns:
        if str(column).endswith(NSYS_ROUNDS):
            rounded[column] = half_away(frame[column].to_numpy(dtype=float), 1)
    return rounded


def nsys_stats(nsys: str, report: str, export) -> pd.DataFrame:
    """`nsys stats -r REPORT -f csv EXPORT` as a DataFrame (text columns kept as written)."""
    result = subprocess.run(
        [nsys, "stats", "-q", "-r", report, "-f", "csv", str(export)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return pd.read_csv(io.StringIO(result.stdout), keep_default_na=False, dtype={"GridXYZ": str, "BlockXYZ": str})


def profile_under_nsys(nsys: str, program: list[str], output) -> Path:
    """Profile ``program`` with nsys (NVTX only, the flags that avoid the 2022.4 hang) into
    ``output``.nsys-rep, importing the raw stream when nsys cannot find its importer (Debian's)."""
    from tracekit import nsys_tool

    output = Path(output)
    subprocess.run(
        [
            nsys,
            "profile",
            "--trace=nvtx",
            "--sample=none",
            "--cpuctxsw=none",
            "--force-overwrite=true",
            "--output",
            str(output),
            *program,
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    report = output.with_name(output.name + ".nsys-rep")
    if not report.exists():
        nsys_tool.import_qdstrm(output.with_name(output.name + ".qdstrm"), report, nsys)
    return report


def nsys_analyze(nsys: str, export, rules: list[str], options: dict[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """`nsys analyze -r RULE[:options] -f csv EXPORT` for each rule (``options``: a rule's ":name=value"
    text), as one DataFrame per rule (empty when the rule found nothing)."""
    found = {}
    for rule in rules:
        result = subprocess.run(
            [
                nsys,
                "analyze",
                "-q",
                "-r",
                f"{rule}{(options or {}).get(rule, '')}",
                "-f",
                "csv",
                "-o",
                "-",
                str(export),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        lines = [line for line in result.stdout.splitlines() if line and not line.startswith("Processing [")]
        found[rule] = pd.read_csv(io.StringIO("\n".join(lines))) if lines else pd.DataFrame()
    return found
