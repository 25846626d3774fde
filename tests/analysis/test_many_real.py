"""Many real exports at once: the multi-input tables equal the single-file results combined by hand
(from each file's own durations), on the process pool and on a Dask LocalCluster."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest
from helpers.api_tables import records, said
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.primitives.categories import CATEGORIES, op_categories
from tracekit.analysis.ranges.breakdown import breakdown_times
from tracekit.analysis.stats import percent_of_total
from tracekit.sources import open_trace

TRACES = SHARED / "traces"
# Four "ranks": three different real exports, one of them twice (same kernels, different files).
RANK_SOURCES = [
    "h100_videogen_2gpu_a_nsys2026.2.sqlite",
    "h100_videogen_2gpu_b_nsys2026.2.sqlite",
    "a100_small_lm_trainstep_nsys2026.3.sqlite",
    "h100_videogen_2gpu_a_nsys2026.2.sqlite",
]
needs_shared = pytest.mark.skipif(not TRACES.is_dir(), reason=f"real exports not available: {TRACES}")
pytestmark = [needs_shared, pytest.mark.shared]


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    """A folder of rank0.sqlite .. rank3.sqlite, copies of real exports (ranks from the file names)."""
    folder = tmp_path_factory.mktemp("job")
    for rank, name in enumerate(RANK_SOURCES):
        shutil.copyfile(TRACES / name, folder / f"rank{rank}.sqlite")
    return folder


def by_hand(folder: Path, column: str = "name") -> pd.DataFrame:
    """Per kernel name, the statistics of every file's kernel durations put together."""
    frames = []
    for path in sorted(folder.glob("rank*.sqlite")):
        ops = open_trace(path).gpu_ops
        kernels = ops.loc[ops["kind"] == "kernel"]
        frames.append(pd.DataFrame({"name": kernels[column].astype(str), "ns": kernels["duration"].to_numpy()}))
    durations = pd.concat(frames, ignore_index=True)
    return cast(
        pd.DataFrame, durations.groupby("name")["ns"].agg(["count", "sum", "min", "max", "mean", "median", "std"])
    )


def rows_by_name(result, table: str) -> dict[Any, dict]:
    return {row["Name"]: row for row in records(result, table)}


@pytest.mark.parametrize(
    "where", [{"workers": 2}, {"workers": 1}, {"use_dask": True, "workers": 2}], ids=["pool-2", "pool-1", "dask"]
)
def test_kernels_over_ranks_equal_the_files_combined(job, where):
    if where.get("use_dask"):
        pytest.importorskip("dask.distributed", reason="Dask is not installed (pip install -e '.[dask]')")
    result = tracekit.kernels(job, **where)
    merged = rows_by_name(result, "kernels")
    expected = by_hand(job)
    assert set(merged) == set(expected.index)
    for name, row in expected.iterrows():
        ours = merged[name]
        assert ours["Instances"] == row["count"] and ours["Total Time (ns)"] == row["sum"], name
        assert ours["Min (ns)"] == row["min"] and ours["Max (ns)"] == row["max"], name
        assert ours["Avg (ns)"] == pytest.approx(row["mean"], abs=0.051), name
        assert ours["Med (ns)"] == pytest.approx(row["median"], abs=0.051) and ours["Med Exact"] is True, name
        std = 0.0 if row["count"] == 1 else row["std"]
        assert ours["StdDev (ns)"] == pytest.approx(std, rel=1e-9, abs=0.051), name
    grand = expected["sum"].sum()
    for name, row in expected.iterrows():  # of the grand total over every rank, as nsys rounds shares
        assert merged[name]["Time (%)"] == percent_of_total([row["sum"], grand - row["sum"]])[0], name
    per_rank = records(result, "kernels_by_rank")
    assert sorted({row["Rank"] for row in per_rank}) == [0, 1, 2, 3]
    for rank in range(4):  # each rank's rows are that file's own table, unchanged
        alone = records(tracekit.kernels(job / f"rank{rank}.sqlite"))
        mine = [{k: v for k, v in row.items() if k != "Rank"} for row in per_rank if row["Rank"] == rank]
        assert mine == alone
    assert "4 ranks read" in said(result)


def test_median_past_the_exact_limit_comes_from_the_sketch(job):
    result = tracekit.kernels(job, exact_median_limit=10)
    merged = rows_by_name(result, "kernels")
    expected = by_hand(job)
    for name, row in expected.iterrows():
        ours = merged[name]
        assert ours["Med Exact"] is bool(row["count"] <= 10), name
        assert ours["Med (ns)"] == pytest.approx(row["median"], rel=0.0051, abs=0.051), name
        assert ours["Total Time (ns)"] == row["sum"]  # only the median is approximate
    assert "approximate" in said(result)


def test_categories_and_types_over_ranks(job):
    merged = {row["Category"]: row for row in records(tracekit.kernels(job, by="category"), "categories")}
    singles = [
        {row["Category"]: row for row in records(tracekit.kernels(job / f"rank{rank}.sqlite", by="category"))}
        for rank in range(4)
    ]
    for category, row in merged.items():  # a category a rank's table leaves out (no kernels there) is 0
        assert row["Total Time (ns)"] == sum(single.get(category, {}).get("Total Time (ns)", 0) for single in singles)
        assert row["Instances"] == sum(single.get(category, {}).get("Instances", 0) for single in singles)
    # distinct kernels per category: a name on several ranks counts once (in each category it ran as: a GEMM
    # of an unfused attention is attention there, matmul elsewhere)
    pairs = set()
    for path in sorted(job.glob("rank*.sqlite")):
        trace = open_trace(path)
        kernel = (trace.gpu_ops["kind"] == "kernel").to_numpy()
        names = trace.gpu_ops["name"].astype(str).to_numpy()[kernel]
        pairs |= set(zip(names, op_categories(trace)[kernel].tolist()))
    assert sum(row["Kernels"] for row in merged.values()) == len(pairs)
    assert len(pairs) >= len(by_hand(job).index)
    types = records(tracekit.kernels(job, by="type"), "types")
    single_types = [records(tracekit.kernels(job / f"rank{rank}.sqlite", by="type")) for rank in range(4)]
    for row in types:
        assert row["Time (ns)"] == sum(
            r["Time (ns)"] for single in single_types for r in single if r["Type"] == row["Type"]
        )


def test_ranges_over_ranks(job):
    merged = {(row["Range"], row["Style"]): row for row in records(tracekit.ranges(job), "ranges")}
    singles = [records(tracekit.ranges(job / f"rank{rank}.sqlite")) for rank in range(4)]
    expected: dict[tuple, dict] = {}
    for single in singles:
        for row in single:
            into = expected.setdefault(
                (row["Range"], row["Style"]), {"n": 0, "t": 0, "min": None, "max": 0, "ops": 0, "gpu": 0, "depth": 99}
            )
            into["n"] += row["Instances"]
            into["t"] += row["Total Time (ns)"]
            into["min"] = row["Min (ns)"] if into["min"] is None else min(into["min"], row["Min (ns)"])
            into["max"] = max(into["max"], row["Max (ns)"])
            into["ops"] += row["GPU Ops"]
            into["gpu"] += row["GPU Time (ns)"]
            into["depth"] = min(into["depth"], row["Depth"])
    assert set(merged) == set(expected)
    for key, want in expected.items():
        row = merged[key]
        assert (row["Instances"], row["Total Time (ns)"], row["Min (ns)"], row["Max (ns)"]) == (
            want["n"],
            want["t"],
            want["min"],
            want["max"],
        ), key
        assert (row["GPU Ops"], row["GPU Time (ns)"], row["Depth"]) == (want["ops"], want["gpu"], want["depth"]), key


def assert_same_rows(rows: list[dict], expected: list[dict]) -> None:
    """The same rows; floats (means, standard deviations, shares: unrounded) equal to the last few bits, as
    a merge in another order sums in another order."""
    assert len(rows) == len(expected)
    for row, wanted in zip(rows, expected):
        assert row == {
            key: pytest.approx(value, rel=1e-12) if isinstance(value, float) else value for key, value in wanted.items()
        }


def test_breakdown_over_ranks(job):
    result = tracekit.breakdown(job, phases="*")
    times = [breakdown_times(open_trace(job / f"rank{rank}.sqlite"), ["*"]) for rank in range(4)]
    whole = {row["Phase"]: row for row in records(result, "breakdown")}["(whole trace)"]
    summed = sum(frame.iloc[-1][[f"{c} (ns)" for c in CATEGORIES]].to_numpy(np.int64) for frame in times)
    assert whole["Kernel Time (ns)"] == sum(int(frame.iloc[-1]["Kernel Time (ns)"]) for frame in times)
    shares = percent_of_total(summed)
    for category, share in zip(CATEGORIES, shares):  # a share that would print as 0.0 gets no column
        assert whole.get(f"{category} (%)") == (pytest.approx(share) if share >= 0.05 else None)
    gpus = {row["GPU"]: row for row in records(result, "gpus") if row["Phase"] == "(whole trace)"}
    singles = [records(tracekit.breakdown(job / f"rank{rank}.sqlite"), "gpus") for rank in range(4)]
    devices = [
        row
        for single in singles
        for row in single
        if row["Phase"] == "(whole trace)" and row["GPU"].startswith("cuda:")
    ]
    assert gpus["sum of GPUs"]["GPUs"] == len(devices)
    assert gpus["sum of GPUs"]["Idle (ns)"] == sum(row["Idle (ns)"] for row in devices)
    assert gpus["sum of GPUs"]["Busy (ns)"] == sum(row["Busy (ns)"] for row in devices)


def test_one_corrupt_file_among_many(cli, job, tmp_path):
    folder = tmp_path / "job"
    shutil.copytree(job, folder)
    (folder / "rank7.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)  # a truncated database
    result = cli("kernels", folder, "--format", "json")
    assert result.exit_code == 0
    assert_same_rows(json.loads(result.stdout)["kernels"], records(tracekit.kernels(job), "kernels"))
    failed = [line for line in result.stderr.splitlines() if "rank7.sqlite" in line]
    assert len(failed) == 1 and failed[0].count("rank7.sqlite") == 1 and "Traceback" not in result.output
    assert "4 ranks read, 1 could not be" in result.stderr
    strict = cli("kernels", folder, "--strict")
    assert strict.exit_code == 1 and "rank7.sqlite" in strict.output and "Traceback" not in strict.output


def test_ranks_of_real_exports(job):
    rows = {row["Rank"]: row for row in records(tracekit.ranks(job), "ranks")}
    assert sorted(rows) == [0, 1, 2, 3]
    for rank, name in enumerate(RANK_SOURCES):
        ops = open_trace(TRACES / name).gpu_ops
        kernels = ops.loc[ops["kind"] == "kernel", "duration"]
        communication = ops.loc[ops["name"].astype(str).str.match(r"^nccl.*Kernel"), "duration"]
        assert rows[rank]["Communication (ns)"] == int(communication.sum())
        assert rows[rank]["Computation (ns)"] + rows[rank]["Communication (ns)"] <= int(kernels.sum())
    # rank 0 and rank 3 are the same export: identical rows
    assert {k: v for k, v in rows[0].items() if k not in ("Rank", "Step vs Median (%)")} == {
        k: v for k, v in rows[3].items() if k not in ("Rank", "Step vs Median (%)")
    }


def test_an_existing_dask_scheduler(job):
    distributed = pytest.importorskip("dask.distributed", reason="Dask is not installed (pip install -e '.[dask]')")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        result = tracekit.kernels(job, scheduler=cluster.scheduler_address)
    assert_same_rows(records(result, "kernels"), records(tracekit.kernels(job), "kernels"))
