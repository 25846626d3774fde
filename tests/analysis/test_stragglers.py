"""Stragglers (HolisticTraceAnalysis's definition) on built ranks with exact numbers, and against HTA's
get_potential_stragglers on the real 8-rank DLRM job."""

from __future__ import annotations

import logging

import pytest
from helpers.hta_loaded import hta_analysis
from helpers.kineto_builder import KinetoBuilder
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.many.stragglers import START, WAIT, potential_stragglers, straggler_piece
from tracekit.sources import open_trace

DLRM = SHARED / "kineto" / "v100_dlrm_8ranks"
pytestmark = pytest.mark.filterwarnings("ignore:::hta")


def rank(path, number: int, allreduce_start: int):
    """Two profiler steps of 1000 µs (the second left out, as the last); in step 1 an AllReduce of the
    rank launched at 100 µs starts at ``allreduce_start`` and ends with everyone at 900 µs."""
    b = KinetoBuilder(rank=number, world_size=4)
    b.annotation("ProfilerStep#1", 0, 1000).annotation("ProfilerStep#2", 1000, 1000)
    b.launch("cudaLaunchKernel", 100, 5, correlation=1)
    b.kernel(
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)",
        allreduce_start,
        900 - allreduce_start,
        correlation=1,
        stream=20,
    )
    b.launch("cudaLaunchKernel", 1100, 5, correlation=2).kernel("gemm", 1200, 100, correlation=2)
    return b.write(path / f"rank{number}.json")


def test_the_ranks_that_start_the_collective_latest_are_the_stragglers(tmp_path):
    starts = {0: 200, 1: 300, 2: 700, 3: 600}
    pieces = {number: straggler_piece(open_trace(rank(tmp_path, number, start))) for number, start in starts.items()}
    assert pieces[0] is not None and pieces[0]["steps"] == [1]
    table, said = potential_stragglers(pieces)
    # mean step time: the earliest start (0) to the latest end in step 1 (the step's own, 1000 µs), over one step
    assert table[START].tolist() == pytest.approx([start / 10 for start in starts.values()])
    assert table.loc[table["Straggler"] == "yes", "Rank"].tolist() == [2, 3]
    assert table["Flagged Steps"].tolist() == [0, 0, 1, 1]
    # rank 2 joined last, 250 µs after the median rank (its start 700 against the median of 450)
    assert table[WAIT].tolist() == [0, 0, 250 * 1000, 0]
    assert "stragglers (HolisticTraceAnalysis's definition): 2, 3" in said
    result = tracekit.ranks([rank(tmp_path, number, start) for number, start in starts.items()])
    assert result["ranks"]["Straggler"].tolist() == ["", "", "yes", "yes"]


def test_unnumbered_steps_count_from_one(tmp_path):
    """Steps named "step" (no #N) count from 1, so HTA's rule (steps above 0) keeps the first one."""
    paths = []
    for number, start in {0: 200, 1: 300, 2: 700, 3: 600}.items():
        text = (
            rank(tmp_path, number, start)
            .read_text()
            .replace("ProfilerStep#1", "step")
            .replace("ProfilerStep#2", "step")
        )
        paths.append(tmp_path / f"plain{number}.json")
        paths[-1].write_text(text)
    pieces = {number: straggler_piece(open_trace(path)) for number, path in enumerate(paths)}
    assert pieces[0] is not None and pieces[0]["steps"] == [1, 2]  # one name: no last step left out (as HTA)
    table, _ = potential_stragglers(pieces)
    assert table.loc[table["Straggler"] == "yes", "Rank"].tolist() == [2, 3]


def test_too_few_ranks_unrelated_clocks_or_no_collective_name_no_stragglers(tmp_path):
    one = {0: straggler_piece(open_trace(rank(tmp_path, 0, 200)))}
    assert potential_stragglers(one)[0].empty
    two = {number: straggler_piece(open_trace(rank(tmp_path, number, start))) for number, start in ((0, 200), (1, 700))}
    table, said = potential_stragglers(two)  # HTA would flag both of its two candidates
    assert table.empty and "too few ranks" in said
    apart = {number: straggler_piece(open_trace(rank(tmp_path, number, 200))) for number in range(3)}
    for piece, shift in zip(apart.values(), (0, 10**9, 2 * 10**9), strict=True):
        assert piece is not None
        piece["first"] += shift
        piece["last"] += shift
    table, said = potential_stragglers(apart)
    assert table.empty and "do not overlap" in said
    b = KinetoBuilder().annotation("ProfilerStep#1", 0, 100).launch("cudaLaunchKernel", 1, 2, correlation=1)
    b.kernel("gemm", 10, 50, correlation=1)
    quiet = {number: straggler_piece(open_trace(b.write(tmp_path / f"q{number}.json"))) for number in (0, 1, 2)}
    table, said = potential_stragglers(quiet)
    assert table.empty and "no NCCL kernel" in said


@pytest.mark.skipif(not DLRM.is_dir(), reason=f"real traces not available: {DLRM}")
def test_the_stragglers_of_the_dlrm_job_equal_htas(tmp_path):
    pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (pip install -e '.[parity]')")
    import hta.analyzers.straggler as straggler  # pyright: ignore[reportMissingImports]  (optional: parity extra)
    import pandas as pd
    from hta.analyzers.straggler_analysis import StragglerAnalysis  # pyright: ignore[reportMissingImports]

    logging.getLogger("hta").setLevel(logging.ERROR)
    for path in sorted(DLRM.glob("rank*.pt.trace.json")):
        (tmp_path / path.name).symlink_to(path)
    analysis = hta_analysis(tmp_path)
    theirs = analysis.get_potential_stragglers()
    trace = analysis.t
    steps = StragglerAnalysis.get_profiler_steps(trace)
    ranks = list(trace.get_all_traces())
    every = pd.concat([trace.get_trace(r) for r in ranks], keys=ranks, names=["rank", "idx"]).reset_index()
    metric, column = straggler._compute_normalized_start_time_of_significant_comm_kernels(
        every.loc[every["iteration"].isin(steps)], trace.symbol_table
    )
    pieces = {number: straggler_piece(open_trace(DLRM / f"rank{number}.pt.trace.json")) for number in ranks}
    table, _ = potential_stragglers(pieces)
    assert table.loc[table["Straggler"] == "yes", "Rank"].tolist() == sorted(theirs) == [2, 7]
    expected = metric.set_index("rank")[column].sort_index()
    assert table.set_index("Rank")[START].to_numpy() == pytest.approx(100 * expected.to_numpy(), abs=1e-9)
