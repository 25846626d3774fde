"""`tracekit idle`: every gap gets the cause it was built with; on real traces the causes add up to
each GPU's idle time."""

from __future__ import annotations

import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED, shared_export_paths

import tracekit
from tracekit.analysis.waits.idle import idle_gaps
from tracekit.sources import open_trace

US = 1_000  # ns


def built(tmp_path):
    """One gap per cause on cuda:0 (times in us), and one on cuda:1 (host not launching)."""
    b = ExportBuilder("2026.2")
    b.kernel(0, 100 * US, "a", launch_at=-50 * US)
    # gap 100..200, sync: the CPU waits in cudaDeviceSynchronize 90..150, then launches at 160
    b.runtime(90 * US, 150 * US, "cudaDeviceSynchronize_v3020", 900)
    b.kernel(200 * US, 300 * US, "b", launch_at=160 * US)
    # gap 300..310, launch overhead: c was queued at 250 and started 10 us after b ended
    b.kernel(310 * US, 400 * US, "c", launch_at=250 * US)
    # gap 400..500, other stream or device: d queued at 350, after a stream wait at 340
    b.runtime(340 * US, 341 * US, "cudaStreamWaitEvent_v3020", 901)
    b.kernel(500 * US, 600 * US, "d", launch_at=350 * US)
    # gap 600..700, host not launching: e launched at 650, during the gap
    b.kernel(700 * US, 800 * US, "e", launch_at=650 * US)
    # gap 800..900, dependency not in trace: f queued at 750, no stream wait, started 100 us late
    b.kernel(900 * US, 1000 * US, "f", launch_at=750 * US)
    # gap 1000..1100, other: g has no launching call in the trace
    b.kernel(1100 * US, 1200 * US, "g")
    b.kernel(0, 10 * US, "h", device=1, launch_at=-5 * US)
    b.kernel(60 * US, 70 * US, "i", device=1, launch_at=40 * US)  # launched during the gap 10..60
    return b.write(tmp_path / "idle.sqlite")


def test_every_gap_gets_its_cause(tmp_path):
    path = built(tmp_path)
    gaps = idle_gaps(open_trace(path))
    assert list(zip(gaps["GPU"], gaps["Start (ns)"] // US, gaps["Idle (ns)"] // US, gaps["Cause"])) == [
        ("cuda:0", 100, 100, "sync"),
        ("cuda:0", 300, 10, "launch overhead"),
        ("cuda:0", 400, 100, "other stream or device"),
        ("cuda:0", 600, 100, "host not launching"),
        ("cuda:0", 800, 100, "dependency not in trace"),
        ("cuda:0", 1000, 100, "other"),
        ("cuda:1", 10, 50, "host not launching"),
    ]
    result = tracekit.idle(path)
    rows = {(row["GPU"], row["Cause"]): row for row in result["idle"].to_dict("records")}
    assert (
        rows[("cuda:0", "sync")]["Share (%)"] == pytest.approx(1000 / 51)
        and rows[("cuda:1", "host not launching")]["Idle (ns)"] == 50 * US
    )
    assert any("method:" in note and "under 30 us" in note for note in result.notes)
    # The bound is an option: at 5 us the 10 us gap waited on something the trace does not show.
    tight = idle_gaps(open_trace(path), overhead_max_ns=5 * US)
    assert tight["Cause"].tolist()[1] == "dependency not in trace"


def test_a_stream_wait_before_an_op_without_launch_explains_nothing(tmp_path):
    """The op before the gap has no launching call: the search for a stream wait between the two
    launches has no lower bound, and a wait long before (here, before anything) blamed the gap on it."""
    b = ExportBuilder("2026.2")
    b.runtime(1 * US, 2 * US, "cudaStreamWaitEvent_v3020", 900)
    b.kernel(0, 100 * US, "a")  # no launching call in the trace
    b.kernel(300 * US, 400 * US, "b", launch_at=50 * US)  # queued, then 200 us late
    gaps = idle_gaps(open_trace(b.write(tmp_path / "wait.sqlite")))
    assert gaps["Cause"].tolist() == ["dependency not in trace"]


def test_an_op_queued_before_the_sync_did_not_wait_for_it(tmp_path):
    """HolisticTraceAnalysis's kernel wait: the op that ends the gap was launched before the blocking
    call, so the GPU had work queued; the sync running meanwhile is not why it idled (tracekit moved
    0.5-5 ms of such gaps to sync on real traces). And a long gap before a queued op is not launch
    overhead (one 58.86 ms gap was 46 % of a rank's idle time): the op waited on something unseen."""
    b = ExportBuilder("2026.2")
    b.kernel(0, 100 * US, "a", launch_at=-50 * US)
    b.kernel(105 * US, 200 * US, "b", launch_at=20 * US)  # queued at 20
    b.runtime(30 * US, 190 * US, "cudaStreamSynchronize_v3020", 900)  # running when the gap 100..105 begins
    b.kernel(58_960 * US, 59_000 * US, "c", launch_at=150 * US)  # queued, then 58.76 ms late
    b.runtime(195 * US, 58_990 * US, "cudaDeviceSynchronize_v3020", 901)
    gaps = idle_gaps(open_trace(b.write(tmp_path / "queued.sqlite")))
    assert list(zip(gaps["Idle (ns)"] // US, gaps["Cause"])) == [
        (5, "launch overhead"),
        (58_760, "dependency not in trace"),
    ]


def device_idle(path) -> dict[str, int]:
    gpus = tracekit.breakdown(path)["gpus"]
    return {
        row["GPU"]: row["Idle (ns)"]
        for row in gpus.to_dict("records")
        if row["Phase"] == "(whole trace)" and row["GPU"].startswith("cuda:")
    }


REAL = shared_export_paths() + sorted((SHARED / "kineto").glob("*.json.gz")) if (SHARED / "kineto").is_dir() else []


@pytest.mark.parametrize("path", REAL, ids=lambda path: path.name)
def test_causes_add_up_to_each_gpus_idle_on_real_traces(path):
    idle = tracekit.idle(path)["idle"]
    summed: dict[str, int] = {}
    for gpu, gap in zip(idle["GPU"], idle["Idle (ns)"]):
        summed[gpu] = summed.get(gpu, 0) + int(gap)
    expected = {gpu: idle for gpu, idle in device_idle(path).items() if idle}
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


@pytest.mark.parametrize("path", REAL, ids=lambda path: path.name)
def test_per_stream_causes_add_up_to_each_streams_idle(path):
    """Per stream (without HolisticTraceAnalysis, which the parity test needs): the gaps of a stream are
    the gaps between its own ops, and its causes add up to them."""
    from tracekit.analysis.primitives.intervals import merge_intervals

    trace = open_trace(path)
    gaps = idle_gaps(trace, per_stream=True)
    ops = trace.gpu_ops
    for keys, group in gaps.groupby(["GPU", "Stream"]):
        gpu, stream = keys  # pyright: ignore[reportGeneralTypeIssues]  (a two-column groupby gives pairs)
        mine = ops.loc[(ops["device"] == int(str(gpu)[5:])) & (ops["stream"] == stream)]
        low, high = merge_intervals(mine["start"].to_numpy(), mine["end"].to_numpy())
        assert int(group["Idle (ns)"].sum()) == int((low[1:] - high[:-1]).sum()), (gpu, stream)


def test_gaps_are_found_once_per_trace_and_each_caller_gets_its_own(tmp_path, monkeypatch):
    """A report asks for the gaps twice (its idle table, its timeline): they are found once, and changing
    one caller's frame changes nothing for the next."""
    from tracekit.analysis.waits import idle

    b = ExportBuilder("2026.2")
    b.kernel(0, 100, "a", launch_at=-50)
    b.kernel(300, 400, "b", launch_at=250)
    trace = open_trace(b.write(tmp_path / "two.sqlite"))
    found = []
    compute = idle._idle_gaps
    monkeypatch.setattr(idle, "_idle_gaps", lambda *args: found.append(args) or compute(*args))
    first = idle_gaps(trace)
    first.loc[:, "Idle (ns)"] = -1
    assert idle_gaps(trace)["Idle (ns)"].tolist() == [200] and len(found) == 1
    idle_gaps(trace, overhead_max_ns=5)  # other options: found anew
    assert len(found) == 2


def test_the_gaps_lengths_per_cause(tmp_path):
    """Three host-not-launching gaps of 100, 200 and 600 ns and one sync gap of 200: their statistics."""
    b = ExportBuilder("2026.2")
    b.kernel(0, 100, "a", launch_at=-50)
    b.kernel(200, 300, "b", launch_at=150)  # launched in the gap 100..200
    b.kernel(500, 600, "c", launch_at=450)  # gap 300..500
    b.kernel(1_200, 1_300, "d", launch_at=1_100)  # gap 600..1200
    b.runtime(1_250, 1_400, "cudaDeviceSynchronize_v3020", 900)  # running when the gap 1300..1500 begins
    b.kernel(1_500, 1_600, "e", launch_at=1_410)
    intervals = tracekit.idle(b.write(tmp_path / "lengths.sqlite"))["intervals"].set_index("Cause")
    host = intervals.loc["host not launching"]
    assert (host["Gaps"], host["Mean (ns)"], host["Min (ns)"], host["Median (ns)"], host["Max (ns)"]) == (
        3,
        300,
        100,
        200,
        600,
    )
    assert host["StdDev (ns)"] == pytest.approx(264.575, abs=0.001)
    assert (intervals.loc["sync", "Gaps"], intervals.loc["sync", "Mean (ns)"]) == (1, 200)
