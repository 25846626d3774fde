"""advise's exposed communication names its cause, and its fix follows the cause: a late rank (fix that rank, not
the link or the buckets), unbucketed per-parameter all-reduces, a point-to-point exchange; built traces with
exact numbers, and the two-GPU video export labelled by hand."""

from __future__ import annotations

import pytest
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED_TRACES

import tracekit

SEND_RECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
ALL_REDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"


def communication(path) -> dict:
    findings = tracekit.advise(path).table("findings")
    rows = findings.loc[findings["Finding"] == "exposed communication"]
    assert len(rows) == 1, findings["Finding"].tolist()
    return rows.iloc[0].to_dict()


def test_a_late_rank_is_the_cause_and_the_fix_is_on_it(tmp_path):
    """Two GPUs of one export, ten all-reduces each: GPU 1 arrives 900 us after GPU 0 every time (its launches come
    late), both end together; 100 us of transfer. GPU 0 waits 9 ms of its 10 ms: the cause is GPU 1, and the
    fix says so, not DDP buckets."""
    export = ExportBuilder("2026.2")
    for index in range(10):
        t = 1_000_000 + index * 2_000_000
        export.kernel(t, t + 1_000_000, ALL_REDUCE, device=0, pid=100, launch_at=t - 10_000)
        export.kernel(t + 900_000, t + 1_000_000, ALL_REDUCE, device=1, pid=200, launch_at=t + 890_000)
        export.kernel(t + 1_000_000, t + 1_900_000, "gemm_kernel", device=0, pid=100, launch_at=t - 5_000)
        export.kernel(t + 1_000_000, t + 1_900_000, "gemm_kernel", device=1, pid=200, launch_at=t + 895_000)
    finding = communication(export.write(tmp_path / "job.sqlite"))
    assert finding["What"].startswith("cause: waiting for rank cuda:1.")
    assert "9.000 ms was waiting for the last peer to arrive and 1.000 ms transfer" in finding["What"]
    assert "make rank cuda:1 arrive sooner" in finding["Fix"] and "bucket" not in finding["Fix"]
    assert "the late table of tracekit collectives says why" in finding["Fix"]  # advise has no late table


def test_per_parameter_all_reduces_are_unbucketed_sync(tmp_path):
    """One rank of two, three steps of 40 all-reduces of 64 KiB each (a per-parameter gradient sync): the cause is
    unbucketed sync, with the count per step and the buckets DDP would make (2.5 MiB per step: one)."""
    trace = KinetoBuilder(rank=0, world_size=2)
    correlation = 1
    for step in range(3):
        begin = 10_000 + step * 10_000
        trace.annotation(f"ProfilerStep#{step + 1}", begin, 9_000, cat="user_annotation")
        for index in range(40):
            start = begin + 100 + index * 200
            trace.launch("cudaLaunchKernel", start - 50, 5, correlation)
            trace.collective_kernel(ALL_REDUCE, start, 150, correlation, 16_384)
            correlation += 1
    finding = communication(trace.write(tmp_path / "rank0.json"))
    assert finding["What"].startswith("cause: unbucketed gradient sync.")
    assert "40.0 all-reduces per step and rank (median 0.06 MiB)" in finding["What"]
    assert "DDP's 25 MiB buckets would make 1 per step" in finding["What"]
    assert "bucket_cap_mb" in finding["Fix"]


def test_point_to_point_exchange_is_not_given_the_bucket_fix(tmp_path):
    """Two GPUs exchanging by SendRecv, arriving together: transfer, not waiting; the fix speaks of the
    exchange."""
    export = ExportBuilder("2026.2")
    for index in range(5):
        t = 1_000_000 + index * 2_000_000
        for device, pid in ((0, 100), (1, 200)):
            export.kernel(t, t + 800_000, SEND_RECV, device=device, pid=pid, launch_at=t - 10_000)
    finding = communication(export.write(tmp_path / "job.sqlite"))
    assert finding["What"].startswith("cause: point-to-point exchange.")
    assert "bucket_cap_mb" not in finding["Fix"] and "isend/irecv" in finding["Fix"]


@pytest.mark.shared
def test_the_video_export_waits_for_a_late_gpu():
    """Labelled by hand: cuda:1 spent 23.8 ms in SendRecv of which 18.2 ms waiting for cuda:0, whose sends came
    late (launched late on the host): the cause is cuda:0, not the link."""
    path = SHARED_TRACES / "h100_videogen_2gpu_b_nsys2026.2.sqlite"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    finding = communication(path)
    assert finding["What"].startswith("cause: waiting for rank cuda:0.")
    assert "18.219 ms was waiting for the last peer" in finding["What"]
    assert "make rank cuda:0 arrive sooner" in finding["Fix"]
