"""`tracekit idle`: every gap gets the cause it was built with; on real traces the causes add up to
each GPU's idle time."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED, shared_export_paths
from nsys_builder import ExportBuilder

from tracekit.analysis.idle import idle_gaps
from tracekit.sources import open_trace


def built(tmp_path):
    """Five gaps on cuda:0, one per cause, and one on cuda:1 (host not launching)."""
    b = ExportBuilder("2026.2")
    b.kernel(0, 100, "a", launch_at=-50)
    # gap 100..200, sync: the CPU waits in cudaDeviceSynchronize 90..150, then launches at 160
    b.runtime(90, 150, "cudaDeviceSynchronize_v3020", 900)
    b.kernel(200, 300, "b", launch_at=160)
    # gap 300..400, launch latency: c was launched at 250 (queued before the gap) and started late
    b.kernel(400, 500, "c", launch_at=250)
    # gap 500..600, other stream or device: d launched at 450 after a stream wait at 440
    b.runtime(440, 445, "cudaStreamWaitEvent_v3020", 901)
    b.kernel(600, 700, "d", launch_at=450)
    # gap 700..800, host not launching: e launched at 750, during the gap
    b.kernel(800, 900, "e", launch_at=750)
    # gap 900..1000, other: f has no launching call in the trace
    b.kernel(1000, 1100, "f")
    b.kernel(0, 10, "g", device=1, launch_at=-5)
    b.kernel(60, 70, "h", device=1, launch_at=40)  # launched during the gap 10..60
    return b.write(tmp_path / "idle.sqlite")


def test_every_gap_gets_its_cause(cli, tmp_path):
    path = built(tmp_path)
    gaps = idle_gaps(open_trace(path))
    assert list(zip(gaps["GPU"], gaps["Start (ns)"], gaps["Idle (ns)"], gaps["Cause"])) == [
        ("cuda:0", 100, 100, "sync"),
        ("cuda:0", 300, 100, "launch latency"),
        ("cuda:0", 500, 100, "other stream or device"),
        ("cuda:0", 700, 100, "host not launching"),
        ("cuda:0", 900, 100, "other"),
        ("cuda:1", 10, 50, "host not launching"),
    ]
    result = cli("idle", path, "--unit", "ns", "--format", "json")
    rows = {(row["GPU"], row["Cause"]): row for row in json.loads(result.stdout)["idle"]}
    assert rows[("cuda:0", "sync")]["Share (%)"] == 20.0 and rows[("cuda:1", "host not launching")]["Idle (ns)"] == 50
    assert "method:" in result.stderr


def device_idle(cli, path) -> dict[str, int]:
    gpus = json.loads(cli("breakdown", path, "--format", "json").stdout)["gpus"]
    return {
        row["GPU"]: row["Idle (ns)"]
        for row in gpus
        if row["Phase"] == "(whole trace)" and row["GPU"].startswith("cuda:")
    }


REAL = shared_export_paths() + sorted((SHARED / "kineto").glob("*.json.gz")) if (SHARED / "kineto").is_dir() else []


@pytest.mark.parametrize("path", REAL, ids=lambda path: path.name)
def test_causes_add_up_to_each_gpus_idle_on_real_traces(cli, path):
    result = cli("idle", path, "--unit", "ns", "--format", "json")
    assert result.exit_code == 0, result.output
    summed: dict[str, int] = {}
    for row in json.loads(result.stdout)["idle"]:
        summed[row["GPU"]] = summed.get(row["GPU"], 0) + row["Idle (ns)"]
    expected = {gpu: idle for gpu, idle in device_idle(cli, path).items() if idle}
    assert summed == expected


def test_a_sync_that_starts_inside_a_gap_is_not_its_cause(tmp_path):
    """A blocking call explains a gap only when it was running as the GPU ran out of work: one called
    late in the gap returns at once (nothing left to wait for); the host was busy elsewhere."""
    b = ExportBuilder("2026.2")
    b.kernel(0, 100, "a", launch_at=-50)
    b.runtime(95, 3_000, "cudaHostAlloc_v3020", 900)  # not blocking on the GPU: the host is busy
    b.runtime(3_000, 3_016, "cudaStreamSynchronize_v3020", 901)  # called inside the gap 100..4000
    b.kernel(4_000, 4_100, "b", launch_at=3_020)
    b.runtime(4_050, 4_200, "cudaDeviceSynchronize_v3020", 902)  # running when the gap 4100..4300 begins
    b.kernel(4_300, 4_400, "c", launch_at=4_210)
    gaps = idle_gaps(open_trace(b.write(tmp_path / "late-sync.sqlite")))
    assert list(zip(gaps["Start (ns)"], gaps["Idle (ns)"], gaps["Cause"])) == [
        (100, 3_900, "host not launching"),
        (4_100, 200, "sync"),
    ]
