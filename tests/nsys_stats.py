"""Run nsys's own `nsys stats` reports, for comparison with tracekit's numbers."""

from __future__ import annotations

import io
import subprocess

import pandas as pd


def nsys_stats(nsys: str, report: str, export) -> pd.DataFrame:
    """`nsys stats -r REPORT -f csv EXPORT` as a DataFrame (text columns kept as written)."""
    result = subprocess.run([nsys, "stats", "-q", "-r", report, "-f", "csv", str(export)],
                            capture_output=True, text=True, timeout=600, check=True)
    return pd.read_csv(io.StringIO(result.stdout), keep_default_na=False, dtype={"GridXYZ": str, "BlockXYZ": str})
