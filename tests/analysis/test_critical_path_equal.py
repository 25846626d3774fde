"""The columnar critical path equals the one tracekit built event by event before (issue 38), edge for edge:
the same edges in the same order (source node, weight, kind, attributed event) and the same length, on
the built traces whose paths are known, on random traces of many steps (every step's window and the whole
trace, exact and HTA-rounded times), and where the rare rules decide: improperly nested ranges, and equal
paths in unrelated chains (networkx's topological order decides). And it works within its bounds: memory
per event of the window, and advise's limit counting what the graph holds.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.critical_path_reference import reference_path
from helpers.critical_path_traces import US, launch_then_sync, random_steps, stream_wait
from helpers.kineto_builder import KinetoBuilder
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.analysis.critical_path import analysis, cpu_chains, kahn_order, longest
from tracekit.analysis.critical_path.analysis import step_path
from tracekit.analysis.critical_path.events import Events, trace_events
from tracekit.analysis.critical_path.graph import build, window_rows
from tracekit.analysis.primitives.hta import hta_rounded
from tracekit.analysis.primitives.step_window import step_rows
from tracekit.errors import InvalidTraceError
from tracekit.sources import open_trace


def assert_same_path(events: Events, start: int, end: int, pid: int | None) -> int:
    """The window's path by both implementations, compared (or both refusing a cycle); returns its number
    of edges."""
    try:
        expected, expected_length = reference_path(events, start, end, pid)
    except InvalidTraceError:
        with pytest.raises(InvalidTraceError, match="cycle"):
            longest.longest_path(build(events, window_rows(events, start, end, pid)))
        return 0
    path = longest.longest_path(build(events, window_rows(events, start, end, pid)))
    found = list(
        zip(path.source.tolist(), path.weight.tolist(), path.kind.tolist(), path.attributed.tolist(), strict=True)
    )
    assert found == [(source, weight, kind, event) for source, _, weight, kind, event in expected]
    assert path.length == expected_length
    return len(found)


def assert_every_window(path, as_hta: bool) -> int:
    """Every step's window and the whole trace's; returns the windows' edges."""
    trace = open_trace(path)
    events = trace_events(trace, as_hta)
    steps = step_rows(trace)
    starts, ends = steps["start"].to_numpy(), steps["end"].to_numpy()
    if as_hta:
        starts, ends = hta_rounded(starts, ends)
    windows = [(int(events.start.min()), int(events.end.max()), None)]
    windows += [(int(start), int(end), int(pid)) for start, end, pid in zip(starts, ends, steps["pid"], strict=True)]
    return sum(assert_same_path(events, *window) for window in windows)


@pytest.mark.parametrize("as_hta", [False, True], ids=["ns", "hta"])
def test_the_traces_with_paths_known_by_hand_give_the_same_edges(tmp_path, as_hta):
    for path in (
        launch_then_sync(tmp_path),
        launch_then_sync(tmp_path, with_sync=False),
        launch_then_sync(tmp_path, step=True),
        stream_wait(tmp_path),
        stream_wait(tmp_path, wait=False),
    ):
        assert assert_every_window(path, as_hta) >= 4


def test_an_nsys_export_gives_the_same_edges(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(0, 10 * US, "aten::mm, seq = 1, op_id = 1")
    b.kernel(20 * US, 120 * US, "gemm_kernel", launch_at=2 * US, launch_end=5 * US)
    b.runtime(6 * US, 8 * US, "cudaEventRecord_v3020", correlation=50)
    b.event_record(50, stream=7, event=9, event_sync=1)
    b.runtime(9 * US, 11 * US, "cudaStreamWaitEvent_v3020", correlation=51)
    b.sync(12 * US, 13 * US, 2, correlation=51, stream=20, event=9, event_sync=1)
    b.kernel(125 * US, 135 * US, "third_kernel", stream=20, launch_at=12 * US, launch_end=15 * US)
    b.runtime(45 * US, 200 * US, "cudaStreamSynchronize_v3020", correlation=100)
    b.sync(181 * US, 182 * US, 3, correlation=100)
    b.push_pop(205 * US, 210 * US, "aten::item, seq = 3, op_id = 3")
    assert assert_every_window(b.write(tmp_path / "built.sqlite"), False) > 0


@pytest.mark.parametrize("seed", range(12))
def test_random_traces_of_many_steps_give_the_same_edges_in_every_window(tmp_path, seed):
    path = random_steps(tmp_path / "random.json", seed, steps=10, threads=2 + seed % 2)
    assert assert_every_window(path, False) > 0
    assert assert_every_window(path, True) > 0


@pytest.mark.parametrize("limit", ["KEY_LIMIT", "FEW_THREADS"])
def test_threads_walked_the_general_way_give_the_same_edges(tmp_path, monkeypatch, limit):
    """A capture whose threads' spans overflow one int64 key is walked by time, then by thread; threads past
    the few told apart a pass each are ranked by their (pid, tid) pairs."""
    monkeypatch.setattr(cpu_chains, limit, 0)
    path = random_steps(tmp_path / "random.json", 3, steps=6, threads=3)
    assert assert_every_window(path, False) > 0


def test_improperly_nested_ranges_pop_the_top_of_the_stack_as_before(tmp_path):
    """B starts inside A and ends after it: A's end pops B (the top), B's end pops A."""
    b = KinetoBuilder()
    b.annotation("aten::a", 0, 10, cat="cpu_op").annotation("aten::b", 5, 10, cat="cpu_op")
    b.annotation("forward", 6, 2).launch("cudaLaunchKernel", 7, 2, correlation=1)
    b.kernel("gemm_kernel", 12, 30, correlation=1).annotation("aten::c", 20, 5, cat="cpu_op")
    assert_every_window(b.write(tmp_path / "overlap.json"), False)


def test_equal_paths_in_unrelated_chains_end_where_networkx_order_puts_them_first(tmp_path, monkeypatch):
    """Two threads with the same operator: two paths of one length, ending in one Kahn generation."""
    b = KinetoBuilder()
    for tid in (100, 101):
        b.annotation("aten::mm", 0, 10, cat="cpu_op", tid=tid).launch("cudaEventRecord", 2, 3, correlation=tid, tid=tid)
    seen = _tied(monkeypatch)
    assert assert_every_window(b.write(tmp_path / "tie.json"), False) == 3
    assert len(seen) == 1 and len(seen[0]) == 2


@pytest.mark.parametrize("seed", [2, 30, 129])
def test_random_paths_tied_in_length_and_generation_end_as_networkx_orders_them(tmp_path, monkeypatch, seed):
    """Random traces whose windows tie (found by search): networkx's order between the tied ends, found on
    their trails back, is the one the reference replays node by node."""
    seen = _tied(monkeypatch)
    path = random_steps(tmp_path / "random.json", seed, steps=10, threads=2 + seed % 2)
    assert assert_every_window(path, False) > 0
    assert seen


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_threads_alike_tie_four_ways_and_end_as_networkx_orders_them(tmp_path, monkeypatch, seed):
    """Four threads doing the same work: windows where all four paths tie."""
    seen = _tied(monkeypatch)
    path = random_steps(tmp_path / "alike.json", seed, steps=8, threads=4, alike=True)
    assert assert_every_window(path, False) > 0
    assert assert_every_window(path, True) > 0
    assert len(seen) >= 4 and max(len(tied) for tied in seen) == 4


def _tied(monkeypatch) -> list[np.ndarray]:
    """The path ends networkx's order is asked to decide between, window by window (recorded)."""
    seen = []
    order = longest.first_in_kahn_order
    monkeypatch.setattr(
        longest,
        "first_in_kahn_order",
        lambda graph, tied, generations: seen.append(tied) or order(graph, tied, generations),
    )
    return seen


def test_a_tie_between_long_chains_is_settled_on_their_trails_not_by_replaying_the_window(tmp_path, monkeypatch):
    """Two threads doing the same work: two paths of one length, ending in one generation. Each end's trail
    back is one stretch that no edge enters (a thread's operators and calls): crossed at once, so the tie
    costs a look-up or two, not a visit of the window's 2,400 nodes."""
    b = KinetoBuilder()
    for tid in (100, 101):
        for index in range(300):
            b.annotation("aten::mm", 20 * index, 10, cat="cpu_op", tid=tid)
            b.launch("cudaEventRecord", 20 * index + 2, 3, correlation=1000 * tid + index, tid=tid)
    looked_up = _stretches_crossed(monkeypatch)
    assert assert_every_window(b.write(tmp_path / "tie.json"), False) == 4 * 300 - 1  # one thread's chain
    assert 0 < len(looked_up) <= 2


def test_a_tie_whose_trails_cross_a_sync_each_step_ends_as_networkx_orders_it(tmp_path, monkeypatch):
    """Two threads, each launching to its own stream and waiting for it, the same way: the tied ends' trails
    go back through every sync (each one's call end releases with its chain and its sync edge at once, a
    trigger to settle); a few look-ups per step, the edges the reference's replay gives."""
    b = KinetoBuilder()
    for tid, stream in ((100, 7), (101, 20)):
        for index in range(100):
            at, correlation = 100 * index, 10 * (1000 * tid + 2 * index)
            b.annotation("aten::mm", at, 60, cat="cpu_op", tid=tid)
            b.launch("cudaLaunchKernel", at + 2, 3, correlation=correlation, tid=tid)
            b.kernel("gemm_kernel", at + 10, 30, correlation=correlation, stream=stream)
            b.launch("cudaStreamSynchronize", at + 20, 25, correlation=correlation + 1, tid=tid)
            b.sync("Stream Sync", at + 44, 1, correlation + 1, stream=stream)
    seen = _tied(monkeypatch)
    looked_up = _stretches_crossed(monkeypatch)
    assert assert_every_window(b.write(tmp_path / "syncs.json"), False) > 0
    assert [len(tied) for tied in seen] == [2]
    assert len(looked_up) <= 10 * 100


def _stretches_crossed(monkeypatch) -> list[int]:
    """The inputs whose generation the tie-break looks up, one per stretch a trail crosses (recorded)."""
    looked_up: list[int] = []

    class Counting(list):
        def __getitem__(self, index):
            looked_up.append(index)
            return super().__getitem__(index)

    setup = kahn_order._KahnOrder.__init__

    def counting(self, graph, generations):
        setup(self, graph, generations)
        self.generation = Counting(self.generation)

    monkeypatch.setattr(kahn_order._KahnOrder, "__init__", counting)
    return looked_up


def test_a_cycle_is_refused_as_before():
    """A stream sync whose stream's last op was launched after the sync call ended (a damaged trace)."""
    kinds = np.array([2, 2, 3, 4], dtype=np.int8)  # CALL launch, CALL sync, GPU op, SYNC
    events = Events(
        role=kinds,
        start=np.array([20, 0, 30, 35]) * US,
        end=np.array([25, 10, 40, 36]) * US,
        name=np.zeros(4, dtype=np.int64),
        names=["x"],
        pid=np.full(4, 1),
        tid=np.array([1, 1, -1, -1]),
        device=np.array([-1, -1, 0, 0]),
        stream=np.array([-1, -1, 7, 7]),
        partner=np.array([2, 3, 0, 1]),
        correlation=np.array([1, 2, -1, -1]),
        queued=np.array([True, False, False, False]),
        blocking=np.array([False, True, False, False]),
        communication=np.zeros(4, dtype=bool),
        sync_kind=np.array([-1, -1, -1, 0], dtype=np.int8),
        event_stream=np.full(4, -1),
        event_correlation=np.full(4, -1),
        record_call=np.zeros(4, dtype=bool),
        queue=np.array([1, -1, 0, -1]),
    )
    assert assert_same_path(events, 0, 50 * US, None) == 0


def test_the_whole_trace_is_traced_in_at_most_300_bytes_per_event_of_its_window(tmp_path):
    """The bound docs/guide/advise.md states (the old graph of Python lists took about 1,200 bytes)."""
    import tracemalloc

    events = trace_events(open_trace(random_steps(tmp_path / "long.json", 7, steps=400, threads=3)))
    start, end = int(events.start.min()), int(events.end.max())
    rows = window_rows(events, start, end)
    assert len(rows) > 15_000
    tracemalloc.start()
    try:
        step_path(events, "(whole trace)", start, end, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 300 * len(rows)


def test_advise_traces_a_whole_trace_by_the_events_its_graph_holds(tmp_path, monkeypatch):
    """GPU ops without their launching calls (a replica of the GPU work, say) are no part of the graph: they
    do not count against the limit on what advise traces whole."""
    monkeypatch.setattr(analysis, "WHOLE_TRACE_LIMIT", 50)
    b = KinetoBuilder()
    b.annotation("aten::mm", 0, 10, cat="cpu_op").launch("cudaLaunchKernel", 2, 3, correlation=1)
    b.kernel("gemm_kernel", 20, 100, correlation=1)
    for index in range(200):  # launched by nothing in the trace
        b.kernel("replayed_kernel", 200 + 10 * index, 5, correlation=1000 + index)
    result = tracekit.advise(b.write(tmp_path / "replayed.json"))
    assert result["critical-path"][["Step", "Path (ns)"]].values.tolist() == [["(whole trace)", 120 * US]]
    assert "the critical path of the whole trace is 83 % GPU Compute" in " ".join(result.notes)


def test_a_window_past_the_limit_is_refused_naming_the_options_that_bound_it(tmp_path, monkeypatch):
    monkeypatch.setattr(analysis, "WINDOW_LIMIT", 5)
    with pytest.raises(tracekit.TracekitError, match=r"\(whole trace\): \d+ events in one window, more than the 5 "):
        tracekit.critical_path(launch_then_sync(tmp_path))
