"""`tracekit launches` reproduces `nsys stats -r kernexecsum` (launch and queue delays) row for row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.nsys_stats import as_nsys_prints, nsys_stats
from helpers.paths import shared_export_paths

import tracekit

KEY = ["PID", "TID", "DevId", "API Name", "Kernel Name"]


def numbers(column: pd.Series) -> np.ndarray:
    """A column as floats; no queue time (our NaN, nsys's "None" for SQL NULL) as -1."""
    text = column.astype(object).where(column.notna(), "-1").astype(str)
    return np.asarray(pd.to_numeric(text.replace({"": "-1", "None": "-1"})), dtype=float)


def compare_with_nsys(cli, nsys, export):
    ours = as_nsys_prints(tracekit.launches(export)["launches"])
    theirs = nsys_stats(nsys, "kernexecsum", export)
    assert list(ours.columns) == list(theirs.columns)
    assert len(ours) == len(theirs) > 0
    merged = ours.merge(theirs, on=KEY, suffixes=("", "_nsys"), validate="one_to_one")
    assert len(merged) == len(ours)
    for column in ours.columns:
        if column in KEY:
            continue
        mine, nsys_values = numbers(merged[column]), numbers(merged[f"{column}_nsys"])
        if column.endswith("StdDev (ns)"):  # nsys's stdev extension: sums of squares, a rounding apart
            assert (np.abs(mine - nsys_values) <= 0.1).all(), column
        else:
            assert (mine == nsys_values).all(), column
    return merged


@pytest.mark.nsys
@pytest.mark.parametrize("export", shared_export_paths(), ids=lambda path: path.name)
def test_matches_nsys_on_real_exports(cli, nsys, shared_traces, export):
    compare_with_nsys(cli, nsys, export)


@pytest.mark.nsys
@pytest.mark.parametrize("generation", ["2022.4", "2026.2"])
def test_matches_nsys_on_built_exports(cli, nsys, tmp_path, generation):
    compare_with_nsys(cli, nsys, built(generation).write(tmp_path / "k.sqlite"))


def built(generation: str = "2026.2") -> ExportBuilder:
    """Launches with known times: gemm queued 40 and 60 ns, one kernel that starts before its call ends."""
    b = ExportBuilder(generation)
    b.kernel(100, 200, "gemm", launch_at=0, launch_end=60)  # API 60, queue 40, kernel 100, total 200
    b.kernel(300, 350, "gemm", launch_at=200, launch_end=240)  # API 40, queue 60, kernel 50, total 150
    b.kernel(400, 410, "tiny", launch_at=390, launch_end=405)  # starts before its call ends: no queue time
    b.kernel(500, 600, "orphan")  # no launching call: left out, as nsys's join leaves it
    return b


def test_known_delays(tmp_path):
    result = tracekit.launches(built().write(tmp_path / "k.sqlite"))
    rows = {row["Kernel Name"]: row for row in result["launches"].to_dict("records")}
    gemm, tiny = rows["gemm"], rows["tiny"]
    assert (gemm["Count"], gemm["QCount"], gemm["QAvg (ns)"], gemm["QMin (ns)"], gemm["QMax (ns)"]) == (
        2,
        2,
        50,
        40,
        60,
    )
    assert (gemm["AAvg (ns)"], gemm["KAvg (ns)"], gemm["TAvg (ns)"], gemm["TMax (ns)"]) == (50, 75, 175, 200)
    assert gemm["API Name"] == "cudaLaunchKernel"  # the _v7000 suffix dropped, as nsys does
    assert (tiny["Count"], tiny["QCount"], tiny["QStdDev (ns)"]) == (1, 0, 0.0) and pd.isna(tiny["QAvg (ns)"])
    assert tiny["TAvg (ns)"] == 20  # max(call end 405, kernel end 410) - call start 390
    assert "orphan" not in rows and any("1 kernels without their launching call" in note for note in result.notes)
