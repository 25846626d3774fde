"""`tracekit kernels` reproduces `nsys stats -r gpukernsum` row for row (the issue's bar): the API's
unrounded figures, printed as nsys prints them, are nsys's."""

import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.nsys_stats import as_nsys_prints, nsys_stats
from helpers.paths import shared_export_paths

import tracekit

KEY = ["Name", "GridXYZ", "BlockXYZ"]
EXACT = ["Total Time (ns)", "Instances", "Min (ns)", "Max (ns)", "Med (ns)", "Avg (ns)"]


def compare_with_nsys(cli, nsys, export):
    ours = as_nsys_prints(tracekit.kernels(export, by_launch_config=True)["kernels"])
    theirs = nsys_stats(nsys, "gpukernsum", export)
    assert list(ours.columns) == list(theirs.columns)
    assert len(ours) == len(theirs) > 0
    # Same order of totals (ties may list in either order), then the same row for every key.
    assert ours["Total Time (ns)"].tolist() == theirs["Total Time (ns)"].tolist()
    merged = ours.merge(theirs, on=KEY, suffixes=("", "_nsys"), validate="one_to_one")
    assert len(merged) == len(ours)
    for column in EXACT:
        assert (merged[column] == merged[f"{column}_nsys"]).all(), column
    assert ((merged["StdDev (ns)"] - merged["StdDev (ns)_nsys"]).abs() <= 0.1).all()
    assert ((merged["Time (%)"] - merged["Time (%)_nsys"]).abs() <= 0.1).all()
    return merged


@pytest.mark.nsys
@pytest.mark.parametrize("export", shared_export_paths(), ids=lambda path: path.name)
def test_matches_nsys_on_real_exports(cli, nsys, shared_traces, export):
    merged = compare_with_nsys(cli, nsys, export)
    # Time % agrees exactly too: both round half away from zero.
    assert (merged["Time (%)"] == merged["Time (%)_nsys"]).all()


@pytest.mark.nsys
@pytest.mark.parametrize("generation", ["2022.4", "2026.2"])
def test_matches_nsys_on_built_exports(cli, nsys, tmp_path, generation):
    b = ExportBuilder(generation)
    # Durations chosen to hit the rounding corners: averages ending in .25/.75, even counts for the median.
    for duration in (100, 101, 103, 106):
        b.kernel(0, duration, "gemm<float>", grid=(4, 1, 1))
    for duration in (10, 11):
        b.kernel(0, duration, "gemm<float>", grid=(8, 1, 1))
    b.kernel(0, 7, "single")
    compare_with_nsys(cli, nsys, b.write(tmp_path / "k.sqlite"))
