"""`tracekit syncs`: blocking host calls, their range, and the GPU idle after them, exact numbers."""

from __future__ import annotations

import json

from helpers.nsys_builder import ExportBuilder

import tracekit


def test_blocking_calls_and_the_idle_after(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1000, "step")
    b.push_pop(500, 700, "loss.item")
    b.kernel(100, 600, "gemm", launch_at=10)
    b.runtime(520, 610, "cudaStreamSynchronize_v3020", 900)  # waits for gemm; GPU idle 600..800
    b.runtime(620, 625, "cudaMemcpyAsync_v3020", 901)  # not counted: blocks only for pageable memory
    b.kernel(800, 900, "relu", launch_at=700)
    b.runtime(905, 950, "cudaDeviceSynchronize_v3020", 902)  # returns after the last op: no next op
    b.runtime(1200, 1210, "cudaMemcpy_v3020", 903)  # outside every range
    path = b.write(tmp_path / "s.sqlite")
    result = tracekit.syncs(path)
    rows = {(row["API"], row["Range"]): row for row in result["syncs"].to_dict("records")}
    assert set(rows) == {
        ("cudaStreamSynchronize", "loss.item"),
        ("cudaDeviceSynchronize", "step"),
        ("cudaMemcpy", "(no range)"),
    }
    stream = rows[("cudaStreamSynchronize", "loss.item")]
    assert (stream["Calls"], stream["Wait (ns)"], stream["GPU Idle After (ns)"]) == (1, 90, 200)
    assert rows[("cudaDeviceSynchronize", "step")]["GPU Idle After (ns)"] == 0
    longest = result["longest"].iloc[0]
    assert longest["API"] == "cudaStreamSynchronize" and longest["Start (ns)"] == 420
    assert any("3 blocking calls" in note for note in result.notes)


def test_a_trace_without_syncs(cli, tmp_path):
    """The command line's side: an empty JSON list, the reason on standard error."""
    b = ExportBuilder("2026.2")
    b.kernel(100, 200, "gemm", launch_at=10)
    result = cli("syncs", b.write(tmp_path / "k.sqlite"), "--format", "json")
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert "no blocking host calls" in result.stderr


def test_a_call_recorded_twice_counts_once(tmp_path):
    """nsys 2022.4 writes a runtime call twice, cudaStreamSynchronize around cudaStreamSynchronize_v3020:
    one wait, not two (the 128 stream syncs of cuda_matmul_nsys2022.4 once read as 256)."""
    b = ExportBuilder("2022.4")
    b.kernel(100, 600, "gemm", launch_at=10)
    b.runtime(520, 610, "cudaStreamSynchronize", 900)
    b.runtime(521, 609, "cudaStreamSynchronize_v3020", 900)
    b.kernel(800, 900, "relu", launch_at=700)
    rows = tracekit.syncs(b.write(tmp_path / "twice.sqlite"))["syncs"].to_dict("records")
    assert [(row["API"], row["Calls"], row["Wait (ns)"], row["GPU Idle After (ns)"]) for row in rows] == [
        ("cudaStreamSynchronize", 1, 90, 200)
    ]
