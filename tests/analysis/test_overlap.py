"""`tracekit overlap`: communication hidden under computation, per GPU and per step, exact numbers."""

from __future__ import annotations

from helpers.nsys_builder import ExportBuilder

import tracekit

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def test_overlap_per_gpu_and_step(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1000, "step")
    b.kernel(100, 300, NCCL, stream=8, launch_at=1)  # two collectives overlapping each other: union 100..400
    b.kernel(250, 400, NCCL, stream=9, launch_at=2)
    b.kernel(200, 350, "volta_sgemm_128x64_nn", launch_at=3)  # hides 200..350 of them
    b.memcpy(380, 500, launch_at=4)  # a copy hides nothing
    b.push_pop(1000, 2000, "step")
    b.kernel(1100, 1200, NCCL, device=1, launch_at=1001)  # device 1: all exposed
    path = b.write(tmp_path / "o.sqlite")
    result = tracekit.overlap(path, per_step=True)
    rows = {(row["GPU"], row["Step"]): row for row in result["overlap"].to_dict("records")}
    whole = rows[("cuda:0", "(whole trace)")]
    assert (whole["Communication (ns)"], whole["Overlapped (ns)"], whole["Exposed (ns)"], whole["Overlap (%)"]) == (
        300,
        150,
        150,
        50.0,
    )
    assert rows[("cuda:0", "step")]["Overlapped (ns)"] == 150
    one = rows[("cuda:1", "(whole trace)")]
    assert (one["Communication (ns)"], one["Exposed (ns)"], one["Overlap (%)"]) == (100, 100, 0.0)
