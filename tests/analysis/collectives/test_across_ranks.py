"""Collectives across ranks on built traces with exact numbers (two and eight ranks, torch.profiler and nsys
sources): the matching, wait, transfer, skew, exposed split, bandwidth, late ranks and patterns; and on the
real multi-rank data in ../shared: every collective on every rank matched, totals equal to the NCCL kernels."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pandas as pd
import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED_KINETO, SHARED_TRACES

import tracekit
from tracekit.analysis.collectives.collectives_command import CollectivesOptions
from tracekit.analysis.collectives.matching import match_ranks
from tracekit.analysis.many.collectives import collectives_table
from tracekit.sources import open_trace

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
SEND_RECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
MIB4 = 1_048_576  # float32 elements: 4 MiB


def rank_trace(
    tmp_path,
    rank: int,
    ranks: int,
    collectives: list[tuple],
    compute=(),
    group: str = "0",
    size: int | None = None,
    steps=(),
):
    """Rank ``rank`` of ``ranks``: each collective (start us, duration us, seq[, its group, its float32 elements]) an
    all-reduce of 4 MiB of float32 in ``group`` (of ``size`` ranks, default ``ranks``) whose kernel carries torch's record; each compute kernel
    (start us, duration us); each step a ProfilerStep#N range (start us, duration us)."""
    trace = KinetoBuilder(rank=rank, world_size=ranks)
    for number, (start, duration) in enumerate(steps, 1):
        trace.annotation(f"ProfilerStep#{number}", start, duration)
    correlation = 1
    for start, duration in compute:
        trace.launch("cudaLaunchKernel", start - 50, 5, correlation).kernel("gemm_kernel", start, duration, correlation)
        correlation += 1
    for start, duration, seq, *own in collectives:
        trace.launch("cudaLaunchKernel", start - 20, 5, correlation)
        elements = own[1] if len(own) > 1 else MIB4
        group_name = own[0] if own else group
        trace.collective_kernel(ALL_REDUCE, start, duration, correlation, elements, group_name, size or ranks, seq)
        correlation += 1
    return trace.write(tmp_path / f"rank{rank}.pt.trace.json")


def test_two_ranks_wait_transfer_and_exposed_by_hand(tmp_path):
    """Rank 0 arrives at 1,000 us and runs 500 us; rank 1 at 1,300 us and runs 200 us: both end at 1,500. Rank 0
    waits 300 us (a GEMM from 900 to 1,100 us hides 100 of them) and transfers 200; rank 1 waits 0. 4 MiB in
    200 us: 20.97 GB/s, bus x 2(n-1)/n = x 1."""
    rank_trace(tmp_path, 0, 2, [(1000, 500, 1)], compute=[(900, 200)])
    rank_trace(tmp_path, 1, 2, [(1300, 200, 1)])
    result = tracekit.collectives(tmp_path)
    ranks = result.table("ranks").set_index("Rank")
    assert ranks.loc[0, ["Time (ns)", "Wait (ns)", "Transfer (ns)"]].tolist() == [500_000, 300_000, 200_000]
    assert ranks.loc[0, ["Exposed Wait (ns)", "Exposed Transfer (ns)"]].tolist() == [200_000, 200_000]
    assert ranks.loc[1, ["Wait (ns)", "Transfer (ns)", "Arrived Last", "Made Others Wait (ns)"]].tolist() == [
        0,
        200_000,
        1,
        300_000,
    ]
    summary = result.table("collectives").iloc[0]
    assert "times summed over every rank" in result.tables[0].title  # 700 us of kernels, not of wall time
    assert (summary["Operation"], summary["Group"], summary["Ranks"], summary["Count"]) == ("AllReduce", "0", 2, 2)
    assert summary["Bytes"] == 2 * 4 * MIB4 and summary["Total Time (ns)"] == 700_000
    assert summary["Algorithm Bandwidth (GB/s)"] == pytest.approx(4 * MIB4 / 200_000)
    assert summary["Bus Bandwidth (GB/s)"] == pytest.approx(4 * MIB4 / 200_000)
    late = result.table("late").iloc[0]
    assert (late["Last Rank"], late["Late By (ns)"], late["Others' Wait (ns)"], late["Transfer (ns)"]) == (
        1,
        150_000,  # against the median arrival of two: 1,150 us
        300_000,
        200_000,
    )
    assert late["Cause"] == "host: launched late"  # its launch came 300 us after rank 0's


def test_eight_ranks_a_straggler_found_with_its_cost(tmp_path):
    """Eight ranks, three all-reduces each (seq 1-3), all ending at t + 1,105 us; rank r arrives at t + r us, rank 5
    1 ms later still (t + 1,005): at each, rank r waits 1,005 - r us for rank 5 and every rank transfers 100 us."""
    base = [10_000, 20_000, 30_000]
    for rank in range(8):
        late = 1_000 if rank == 5 else 0
        rank_trace(
            tmp_path,
            rank,
            8,
            [(t + rank + late, (t + 1_005 + 100) - (t + rank + late), seq + 1) for seq, t in enumerate(base)],
        )
    result = tracekit.collectives(tmp_path)
    ranks = result.table("ranks").set_index("Rank")
    assert ranks.loc[5, "Arrived Last"] == 3 and (ranks.drop(index=5)["Arrived Last"] == 0).all()
    expected_wait = 3 * sum(1_005 - rank for rank in range(8) if rank != 5) * 1_000
    assert ranks.loc[5, "Made Others Wait (ns)"] == expected_wait
    assert ranks["Wait (ns)"].sum() == expected_wait and (ranks["Transfer (ns)"] == 3 * 100_000).all()
    summary = result.table("collectives").iloc[0]
    assert summary["Unmatched"] == 0 and summary["Bus Bandwidth (GB/s)"] == pytest.approx(
        4 * MIB4 / 100_000 * 2 * 7 / 8
    )
    patterns = result.table("patterns").set_index("Pattern")
    assert patterns.loc["late rank", "Where"] == "rank 5" and patterns.loc["late rank", "Time (ns)"] == expected_wait


def test_per_step_per_rank_counts_the_steps_of_the_ranks_in_the_group(tmp_path):
    """Four ranks in two pairs (groups "1": ranks 0-1, "2": ranks 2-3), two steps each but rank 3's trace records none;
    40 all-reduces of 4 MiB per rank: group "1" runs 20 per step and rank (80 kernels over its ranks' 4 steps, not
    over every rank's 6), which is the unbucketed pattern's threshold; group "2"'s rate is unknown (rank 3 has no
    steps), so it is left empty and no verdict is made on it."""
    for rank in range(4):
        rank_trace(
            tmp_path,
            rank,
            4,
            [(1_000 + 100 * k, 50, k + 1) for k in range(40)],
            group="1" if rank < 2 else "2",
            size=2,
            steps=[(0, 3_000), (3_000, 3_000)] if rank < 3 else [],
        )
    result = tracekit.collectives(tmp_path)
    per_step = result.table("collectives").set_index("Group")["Per Step per Rank"]
    assert per_step["1"] == 20.0 and per_step["2"] != per_step["2"]
    patterns = result.table("patterns")
    unbucketed = patterns.loc[patterns["Pattern"] == "unbucketed gradient sync"]
    assert unbucketed["Where"].tolist() == ["group 1"]
    assert unbucketed["Evidence"].iloc[0].startswith("20.0 all-reduces per step and rank (median 4.00 MiB)")


def test_clocks_that_disagree_are_said(tmp_path):
    """Rank 1's clock runs 10 ms ahead: rank 0's all-reduces (100 us) end 9.9 ms before rank 1's begin, which one
    clock cannot show (no rank leaves an all-reduce before the last arrives): said, with the gap."""
    rank_trace(tmp_path, 0, 2, [(1_000, 100, 1), (3_000, 100, 2)])
    rank_trace(tmp_path, 1, 2, [(11_000, 80, 1), (13_000, 80, 2)])
    result = tracekit.collectives(tmp_path)
    said = [note for note in result.notes if "clocks" in note]
    assert said == [
        "2 of 4 matched collective kernels ended before the last rank's kernel of the same collective began (by "
        "up to 9.900 ms), which no collective allows: the inputs' clocks disagree (traces of different nodes), "
        "or the pairing went wrong; their waits, skews and the late table do not measure waiting"
    ]


def test_slow_transfer_judges_each_group_by_its_own_messages(tmp_path):
    """Two ranks, two groups of all-reduces, all slow against the H100's 450 GB/s: group "big" moves 16 MiB in 1 ms
    (16.8 GB/s, bandwidth-bound: slow), group "small" 256 KiB in 1 ms (latency-bound: no verdict). Three big
    calls and two small make the all-reduces' median message 16 MiB, but the small group's own is 256 KiB."""
    big, small = 4 * MIB4, MIB4 // 16
    calls = [(1_000 + 2_000 * k, 1_000, k + 1, "big", big) for k in range(3)]
    calls += [(10_000 + 2_000 * k, 1_000, k + 1, "small", small) for k in range(2)]
    for rank in range(2):
        rank_trace(tmp_path, rank, 2, calls)
    patterns = tracekit.collectives(tmp_path).table("patterns")
    slow = patterns.loc[patterns["Pattern"] == "slow transfer"]
    assert slow["Where"].tolist() == ["AllReduce in group big"]
    assert slow["Evidence"].iloc[0].endswith("median message 16.0 MiB")


def test_pairing_by_seq_survives_a_rank_missing_a_collective(tmp_path):
    """Rank 1's trace lacks seq 1 (its window began later): seq 2 and 3 still pair with rank 0's seq 2 and 3,
    and rank 0's seq 1 is said unmatched, the window named."""
    rank_trace(tmp_path, 0, 2, [(1000, 100, 1), (2000, 300, 2), (3000, 100, 3)])
    rank_trace(tmp_path, 1, 2, [(2200, 100, 2), (3000, 100, 3)])
    result = tracekit.collectives(tmp_path)
    ranks = result.table("ranks").set_index("Rank")
    assert ranks.loc[0, ["Wait (ns)", "Unmatched"]].tolist() == [200_000, 1]
    assert any("windows differ" in note for note in result.notes)


def test_order_pairing_and_a_broken_order():
    """No group or seq recorded: pairing by position on each rank; where the ranks ran different operations at
    one position, that position and every later one of the group are unmatched, the reason said."""
    calls = pd.DataFrame(
        {
            "rank": [0, 0, 0, 1, 1, 1],
            "group": [None] * 6,
            "ranks": [-1] * 6,
            "seq": [-1] * 6,
            "operation": ["AllReduce", "AllGather", "AllReduce", "AllReduce", "Broadcast", "AllReduce"],
            "start": [0, 100, 200, 10, 100, 200],
            "duration": [20, 10, 10, 10, 10, 10],
        }
    )
    matched, notes = match_ranks(calls)
    assert matched["instance"].tolist() == [0, -1, -1, 0, -1, -1]
    assert matched["wait"].tolist() == [10, -1, -1, 0, -1, -1]
    assert set(matched.loc[matched["instance"] < 0, "unmatched"]) == {
        "the ranks ran different operations at this position: the group's order broke"
    }
    assert any("by their order" in note for note in notes)


def test_a_group_only_some_given_ranks_recorded_is_not_blamed_on_missing_traces():
    """Both ranks' traces are given, but rank 1's calls carry no group (its record lost): rank 0's group "0" of two
    and rank 1's unnamed calls each ran on one rank. The peers' traces are there, so the reason says the group is
    missing from them, not their traces; with one rank of a group of two given, the trace is missing."""
    calls = pd.DataFrame(
        {
            "rank": [0, 0, 1, 1],
            "group": ["0", "0", None, None],
            "ranks": [2, 2, -1, -1],
            "seq": [1, 2, -1, -1],
            "operation": ["AllReduce"] * 4,
            "start": [0, 100, 10, 110],
            "duration": [20, 20, 10, 10],
        }
    )
    matched, _ = match_ranks(calls)
    assert set(matched["unmatched"]) == {
        "fewer of the given ranks ran its group than it has: a peer's trace is missing, or its record of the call "
        "names no group"
    }
    alone, _ = match_ranks(calls.loc[calls["rank"] == 0])
    assert set(alone["unmatched"]) == {"its peers' traces are not among the inputs"}


def test_one_nsys_export_of_two_processes_pairs_its_gpus(tmp_path):
    """One export holding both ranks (a process per GPU), nothing recorded but the kernels: GPU 0's two SendRecv
    kernels at 1,000 and 5,000 ns (each 3,000 ns), GPU 1's at 2,500 and 5,000 (1,500 and 3,000)."""
    export = ExportBuilder("2026.2")
    export.kernel(1_000, 4_000, SEND_RECV, device=0, pid=100, launch_at=900)
    export.kernel(5_000, 8_000, SEND_RECV, device=0, pid=100, launch_at=4_900)
    export.kernel(2_500, 4_000, SEND_RECV, device=1, pid=200, launch_at=2_400)
    export.kernel(5_000, 8_000, SEND_RECV, device=1, pid=200, launch_at=4_950)
    result = collectives_table(open_trace(export.write(tmp_path / "job.sqlite")), CollectivesOptions())
    ranks = result.table("ranks").set_index("Rank")
    assert ranks.loc["cuda:0", ["Wait (ns)", "Transfer (ns)", "Unmatched"]].tolist() == [1_500, 4_500, 0]
    assert ranks.loc["cuda:1", ["Wait (ns)", "Transfer (ns)", "Arrived Last"]].tolist() == [0, 4_500, 1]
    summary = result.table("collectives").iloc[0]
    assert summary["Operation"] == "SendRecv" and summary["Bytes"] is pd.NA
    assert any("no collective kernel has recorded message size" in note for note in result.notes)


def test_two_communicators_on_two_streams_with_no_group_recorded(tmp_path):
    """One export of two GPUs, each running an all-reduce communicator on one stream and a send/receive one on
    another at once, nothing recorded but the kernels; GPU 1 starts its send/receive first, so one order over both
    streams breaks. Each rank's streams, taken by their first use, pair apart: GPU 0 waits 500 ns at each
    all-reduce (GPU 1 arrives at +500), GPU 1 50 ns at each send/receive; nothing unmatched."""
    export = ExportBuilder("2026.2")
    for base in (10_000, 20_000, 30_000):
        export.kernel(base, base + 2_000, ALL_REDUCE, device=0, pid=100, stream=13, launch_at=base - 50)
        export.kernel(base + 100, base + 1_000, SEND_RECV, device=0, pid=100, stream=17, launch_at=base + 50)
        export.kernel(base + 50, base + 1_000, SEND_RECV, device=1, pid=200, stream=21, launch_at=base)
        export.kernel(base + 500, base + 2_000, ALL_REDUCE, device=1, pid=200, stream=19, launch_at=base + 450)
    result = collectives_table(open_trace(export.write(tmp_path / "job.sqlite")))
    ranks = result.table("ranks").set_index(["Rank", "Operation"])
    assert ranks["Unmatched"].sum() == 0
    assert ranks["Wait (ns)"].to_dict() == {
        ("cuda:0", "AllReduce"): 1_500,
        ("cuda:0", "SendRecv"): 0,
        ("cuda:1", "SendRecv"): 150,
        ("cuda:1", "AllReduce"): 0,
    }
    assert any("each rank's 2 collective streams apart" in note for note in result.notes)


def test_many_all_reduces_of_unknown_size_are_no_unbucketed_verdict(tmp_path):
    """An nsys export of two GPUs, one step each, 25 all-reduces per step and rank: as many as DDP's 25 MiB buckets
    make for a 650 MB gradient, so without their sizes nothing says they are unbucketed: no verdict."""
    export = ExportBuilder("2026.2")
    for device, pid in ((0, 100), (1, 200)):
        export.push_pop(0, 1_000_000, "ProfilerStep#1", pid=pid, tid=pid)
        for k in range(25):
            start = 10_000 + 20_000 * k
            export.kernel(start, start + 5_000, ALL_REDUCE, device=device, pid=pid, launch_at=start - 100)
    result = collectives_table(open_trace(export.write(tmp_path / "job.sqlite")))
    assert result.table("collectives")["Per Step per Rank"].tolist() == [25.0]
    assert "unbucketed gradient sync" not in set(result.table("patterns")["Pattern"])


@pytest.mark.shared
def test_dlrm_eight_ranks_every_collective_matched():
    """The 8-rank DLRM step: all 64 NCCL kernels matched (8 per rank, by order), per operation the time equals the
    sum of the NCCL kernels in the raw JSON, and each rank's wait + transfer is its time."""
    folder = SHARED_KINETO / "v100_dlrm_8ranks"
    if not folder.exists():
        pytest.skip(f"{folder} is absent (../shared not beside the project)")
    raw = defaultdict(int)
    for path in sorted(folder.glob("rank*.json")):
        for event in json.loads(path.read_text())["traceEvents"]:
            if event.get("cat") == "kernel" and event["name"].startswith("ncclKernel_"):
                raw[event["name"].split("_")[1]] += round(float(event["dur"]) * 1000)
    result = tracekit.collectives(folder, workers=2)
    summary = result.table("collectives").set_index("Operation")
    assert summary["Total Time (ns)"].to_dict() == dict(raw)
    assert summary["Count"].sum() == 64 and summary["Unmatched"].sum() == 0
    ranks = result.table("ranks")
    assert ((ranks["Wait (ns)"] + ranks["Transfer (ns)"]) == ranks["Time (ns)"]).all()
    assert set(ranks["Rank"]) == set(range(8))


@pytest.mark.shared
def test_two_gpu_video_export_matched_and_the_ddp_rank_alone_said():
    """The two-GPU video export: 62 SendRecv kernels, 31 per GPU, every one matched; the DDP rank 0 of 2 alone:
    every kernel unmatched because its peer's trace is not given, and no slow-transfer verdict made of it."""
    video = SHARED_TRACES / "h100_videogen_2gpu_b_nsys2026.2.sqlite"
    ddp = SHARED_KINETO / "a100_ddp_rank0of2_nccl.json.gz"
    if not video.exists() or not ddp.exists():
        pytest.skip("../shared is absent")
    result = tracekit.collectives(video)
    ranks = result.table("ranks").set_index("Rank")
    assert ranks["Count"].to_dict() == {"cuda:0": 31, "cuda:1": 31} and ranks["Unmatched"].sum() == 0
    alone = tracekit.collectives(ddp)
    assert alone.table("collectives")["Unmatched"].sum() == 21
    assert "slow transfer" not in set(alone.table("patterns")["Pattern"])
    assert any("peers' traces are not among the inputs" in note for note in alone.notes)
    raw = sum(
        round(float(event["dur"]) * 1000)
        for event in json.load(gzip.open(ddp, "rt"))["traceEvents"]
        if event.get("cat") == "kernel" and event["name"].startswith("ncclKernel_")
    )
    assert alone.table("collectives")["Total Time (ns)"].sum() == raw


def test_all_to_all_rank_pair_matrix_from_recorded_splits(tmp_path):
    """Four ranks, one all_to_all each (SendRecv kernels): ranks 0-2 send 1,024 float32 split [1, 1, 2, 4] rows
    (512, 512, 1,024 and 2,048 bytes to ranks 0-3); rank 3 sends 4,096 float32 split evenly (4,096 bytes each).
    The matrix is exactly that, and the pattern says rank 3 sent 2.29x the mean (16,384 / 7,168)."""
    for rank in range(4):
        trace = KinetoBuilder(rank=rank, world_size=4)
        elements, split = (4096, "[8, 8, 8, 8]") if rank == 3 else (1024, "[1, 1, 2, 4]")
        args = {
            "device": 0,
            "stream": 20,
            "correlation": 1,
            "Collective name": "all_to_all",
            "dtype": "Float",
            "In msg nelems": elements,
            "Out msg nelems": elements,
            "In split size": split,
            "Group size": 4,
            "Process Group Name": "0",
            "Process Group Ranks": "[0, 1, 2, 3]",
            "Seq": 1,
        }
        trace.launch("cudaLaunchKernel", 980, 5, 1)
        trace.event("X", "kernel", SEND_RECV, 0, 20, 1000, 100, args)
        trace.write(tmp_path / f"rank{rank}.pt.trace.json")
    result = tracekit.collectives(tmp_path)
    matrix = result.table("exchange")
    sent = {(int(s), int(r)): int(b) for s, r, b in zip(matrix["Sender"], matrix["Receiver"], matrix["Bytes"])}
    assert sent == {
        **{(s, r): b for s in range(3) for r, b in enumerate([512, 512, 1024, 2048])},
        **{(3, r): 4096 for r in range(4)},
    }
    patterns = result.table("patterns").set_index("Pattern")
    assert "the largest sender (3) sent 2.29x the mean rank's bytes" in patterns.loc["all-to-all exchange", "Evidence"]


def test_an_nccl_range_names_the_call_in_an_nsys_export(tmp_path):
    """emit_nvtx's "nccl:all_to_all, op_id = N" range around each SendRecv launch (the video export's case): the
    call is an all-to-all, so the pattern is the all-to-all exchange, not a point-to-point one."""
    export = ExportBuilder("2026.2")
    for device, pid, start in ((0, 100, 1_000), (1, 200, 1_500)):
        export.push_pop(start - 200, start - 50, "nccl:all_to_all, op_id = 7", pid=pid, tid=pid)
        export.kernel(start, 4_000, SEND_RECV, device=device, pid=pid, launch_at=start - 100)
    result = collectives_table(open_trace(export.write(tmp_path / "job.sqlite")))
    # GPU 1 arrived 500 ns late and GPU 0 waited for it: a late rank as well
    assert set(result.table("patterns")["Pattern"]) == {"late rank", "all-to-all exchange"}
