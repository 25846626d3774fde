"""`tracekit ranges` reproduces nsys's nvtxsum; with --same-thread, its projection nvtxgpuproj."""

import functools
import sys

import numpy as np
import pandas as pd
import pytest
from helpers.nsys_stats import as_nsys_prints, nsys_stats, profile_under_nsys
from helpers.paths import SHARED_TRACES, shared_export_paths

import tracekit
from tracekit.analysis.primitives.attribution import range_gpu_stats
from tracekit.sources.nsys.export import read_nsys_export

STATS = ["Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)"]
REAL_WITH_RANGES = [path for path in shared_export_paths() if "tiny_cuda" not in path.name]

TORCH_LOOP = """
import nvtx, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randn(32, 64)
for step in range(5):
    with nvtx.annotate("step"):
        with nvtx.annotate("forward"):
            loss = model(data).square().mean()
        with nvtx.annotate("backward"):
            loss.backward()
        with nvtx.annotate("optimizer"):
            optimizer.step()
            optimizer.zero_grad()
"""


def compare_nvtxsum(cli, nsys, export):
    ours = as_nsys_prints(tracekit.ranges(export, raw_names=True)["ranges"])
    theirs = nsys_stats(nsys, "nvtxsum", export)
    assert len(ours) == len(theirs) > 0
    merged = ours.merge(theirs, on=["Range", "Style"], suffixes=("", "_nsys"), validate="one_to_one")
    assert len(merged) == len(ours)
    for column in STATS:
        assert (merged[column] == merged[f"{column}_nsys"]).all(), column
    assert ((merged["StdDev (ns)"] - merged["StdDev (ns)_nsys"]).abs() <= 0.1).all()
    assert (merged["Time (%)"] == merged["Time (%)_nsys"]).all()
    return ours


@pytest.mark.nsys
@pytest.mark.parametrize("export", REAL_WITH_RANGES, ids=lambda path: path.name)
def test_nvtxsum_on_real_exports(cli, nsys, shared_traces, export):
    compare_nvtxsum(cli, nsys, export)


@pytest.mark.nsys
def test_nvtxsum_on_a_cpu_torch_loop_captured_here(cli, nsys, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("nvtx")
    program = tmp_path / "loop.py"
    program.write_text(TORCH_LOOP)
    report = profile_under_nsys(nsys, [sys.executable, str(program)], tmp_path / "loop")
    ours = compare_nvtxsum(cli, nsys, _export(nsys, report)).set_index("Range")
    assert ours.loc[["step", "forward", "backward", "optimizer"], "Instances"].tolist() == [5, 5, 5, 5]
    assert ours.loc["forward", "Depth"] == 1


def _export(nsys, report):
    from tracekit.nsys_tool import export_sqlite

    return export_sqlite(report, nsys)


@pytest.fixture(scope="module")
def projection(nsys):
    """nsys's nvtxgpuproj of a real export with GPU work and NVTX, by file name: run once per file, when a
    test first asks (about 40 s each), so that the test of each file runs nsys for that file alone (under
    pytest-xdist the two tests may run on two workers, each with this fixture of its own)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("real exports not available")
    return functools.cache(lambda name: nsys_stats(nsys, "nvtxgpuproj", SHARED_TRACES / name))


@pytest.mark.nsys
@pytest.mark.slow
@pytest.mark.parametrize("name", ["h100_videogen_2gpu_a_nsys2026.2.sqlite", "h100_videogen_2gpu_b_nsys2026.2.sqlite"])
def test_same_thread_projection_equals_nvtxgpuproj(projection, name):
    trace = read_nsys_export(SHARED_TRACES / name)
    ranges = trace.ranges
    gpu = range_gpu_stats(trace, ranges, same_thread=True)
    ours = pd.concat([ranges, gpu], axis=1)
    ours = ours[ours["gpu_launches"] > 0].set_index("range_id")
    theirs = projection(name).set_index("RangeId")
    assert sorted(ours.index) == sorted(theirs.index) and len(ours) > 1000
    theirs = theirs.loc[ours.index]
    same = {
        "Projected Start (ns)": "gpu_start",
        "Projected Duration (ns)": "gpu_span",
        "Orig Start (ns)": "start",
        "Orig Duration (ns)": "duration",
        "NumGPUOps": "gpu_launches",
        "PID": "pid",
        "TID": "tid",
    }
    for nsys_column, column in same.items():
        assert (theirs[nsys_column].astype(np.int64).to_numpy() == ours[column].to_numpy()).all(), nsys_column
    assert (theirs["Name"].to_numpy() == ours["name"].astype(str).to_numpy()).all()
    assert (
        theirs["Style"].to_numpy() == ours["style"].map({"pushpop": "PushPop", "startend": "StartEnd"}).to_numpy()
    ).all()

    # Structure: nsys finds parents through an SQLite R*Tree, whose coordinates are 32-bit floats
    # (16 us apart at t = 155 s). Where it disagrees with us, ours must be a true encloser on the
    # same thread that is at least as tight as nsys's choice (or nsys found none).
    nsys_parent = theirs["ParentId"].replace("None", "-1").astype(np.int64)
    differs = ours.index[nsys_parent.to_numpy() != ours["parent"].to_numpy()]
    assert len(differs) < 0.1 * len(ours)
    by_id = ranges.set_index("range_id")
    for range_id in differs:
        child, ours_id, theirs_id = by_id.loc[range_id], ours.loc[range_id, "parent"], nsys_parent[range_id]
        parent = by_id.loc[ours_id]
        assert parent["start"] <= child["start"] and parent["end"] >= child["end"] and parent["tid"] == child["tid"]
        if theirs_id >= 0:
            other = by_id.loc[theirs_id]
            tight = lambda p, child=child: (child["start"] - p["start"]) + (p["end"] - child["end"])
            assert tight(parent) <= tight(other)
        # every disagreement sits within the R*Tree's float32 resolution
        assert min(child["start"] - parent["start"], parent["end"] - child["end"]) < 2**15
