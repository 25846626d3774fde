"""report.html's CUDA API lanes (issue 43, item 4): each thread's CUDA API calls (launches, copies,
synchronisations) in a lane of their own below its ranges, or a group of their own for a thread with no
range, so every op whose launching call is in the trace has an arrow from that call; bounded as the other
host rows are (the longest kept, a note when some are left out)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.browser import open_page
from helpers.nsys_builder import ExportBuilder

from tracekit.report import host_lanes
from tracekit.report.timeline_data import timeline_data
from tracekit.report.traces import write_report
from tracekit.sources import open_trace

SYNC = "cudaStreamSynchronize_v3020"
LAUNCH = "cudaLaunchKernel_v7000"


def launching_threads(path: Path) -> Path:
    """Thread 100 has ranges (step > forward), launches a kernel and synchronizes inside them; thread 102
    only launches (two kernels), thread 103 too (one kernel, the shortest call). The first op starts at
    1,000 ns, the page's zero."""
    b = ExportBuilder("2026.2")
    b.push_pop(0, 9_000, "step", tid=100)
    b.push_pop(100, 4_000, "forward", tid=100)
    b.kernel(1_000, 2_000, "ampere_sgemm_128x64_tn", launch_at=200, tid=100)  # a call of 5 ns
    b.runtime(2_100, 2_900, SYNC, correlation=900, tid=100)
    b.kernel(5_000, 5_200, "ampere_sgemm_128x64_tn", launch_at=4_700, launch_end=4_760, tid=102)
    b.kernel(6_000, 6_400, "ampere_sgemm_128x64_tn", launch_at=5_500, launch_end=5_530, tid=102)
    b.kernel(7_000, 7_300, "ampere_sgemm_128x64_tn", launch_at=6_600, tid=103)
    return b.write(path)


def host_lanes_of(data: dict) -> list[tuple[str, int, int, bool]]:
    return [
        (lane["name"], lane["depth"], lane["depths"], lane.get("calls", False))
        for lane in data["lanes"]
        if lane["kind"] == "host"
    ]


def rows_by_lane(data: dict) -> dict[int, list[tuple[int, int, str, str]]]:
    """The host rows of each lane as (start from the first op, duration, name, kind), steps added up."""
    host, rows, row = data["host"], {}, 0
    for lane, count in enumerate(host["lane_counts"]):
        start = 0
        for _ in range(count):
            start = host["start_step"][row] + (start if lane in rows else 0)
            rows.setdefault(lane, []).append(
                (
                    start,
                    host["duration"][row],
                    data["host_names"][host["name"][row]],
                    data["host_kinds"][host["category"][row]],
                )
            )
            row += 1
    return rows


def test_a_thread_that_only_launches_has_a_lane_of_its_calls(tmp_path):
    """The calls of a thread with ranges are a lane below its deepest range; a thread that only launches
    gets a group of its calls; each launching thread's lane is its calls' lane, at their exact times."""
    data = timeline_data(open_trace(launching_threads(tmp_path / "threads.sqlite")), "threads")
    assert host_lanes_of(data) == [
        ("tid 100 · ranges", 0, 3, False),
        ("tid 100 · ranges", 1, 3, False),
        ("tid 100 · ranges", 2, 3, True),
        ("tid 102 · CUDA API", 0, 1, True),
        ("tid 103 · CUDA API", 0, 1, True),
    ]
    first = next(index for index, lane in enumerate(data["lanes"]) if lane["kind"] == "host")
    assert rows_by_lane(data) == {
        first: [(-1_000, 9_000, "step", "range")],
        first + 1: [(-900, 3_900, "forward", "range")],
        first + 2: [(-800, 5, LAUNCH, "CUDA API"), (1_100, 800, SYNC, "CUDA API")],
        first + 3: [(3_700, 60, LAUNCH, "CUDA API"), (4_500, 30, LAUNCH, "CUDA API")],
        first + 4: [(5_600, 5, LAUNCH, "CUDA API")],
    }
    assert data["threads"] == [
        {"name": "tid 100", "lane": first + 2},
        {"name": "tid 102", "lane": first + 3},
        {"name": "tid 103", "lane": first + 4},
    ]
    assert data["launch"] == {"thread_runs": [1, 0, 2, 1, 1, 2], "lead": [800, 300, 500, 400]}
    assert data["host_kinds"][2] == "CUDA API" and data["host_colours"][2] == "#637939"
    assert data["host_note"] == ""


def test_calls_are_bounded_and_a_thread_keeps_its_lane_when_all_are_left_out(tmp_path, monkeypatch):
    """At most HOST_ROWS calls, the longest (the synchronization first), a note saying so; thread 103,
    whose one call is left out, keeps its (empty) lane for its ops' arrows."""
    monkeypatch.setattr(host_lanes, "HOST_ROWS", 3)
    data = timeline_data(open_trace(launching_threads(tmp_path / "threads.sqlite")), "threads")
    first = next(index for index, lane in enumerate(data["lanes"]) if lane["kind"] == "host")
    rows = rows_by_lane(data)
    assert rows[first + 2] == [(1_100, 800, SYNC, "CUDA API")]  # its 5 ns launch left out
    assert rows[first + 3] == [(3_700, 60, LAUNCH, "CUDA API"), (4_500, 30, LAUNCH, "CUDA API")]
    assert first + 4 not in rows and data["host"]["lane_counts"][first + 4] == 0
    assert data["threads"][2] == {"name": "tid 103", "lane": first + 4}
    assert data["host_note"] == "the CUDA API lanes hold the 3 longest of 5 calls"


def test_the_arrow_starts_at_the_launching_call(browser, tmp_path):
    """In Chromium: hovering an op of the thread that only launches draws its arrow from its call (the
    call's start, the thread's lane); an op of a thread with ranges, from its group's folded lane, then,
    the group opened, from its CUDA API lane, where hovering the sync names it and the ranges around it.
    The legend names the calls' colour, and the page is no wider than the window."""
    trace = launching_threads(tmp_path / "threads.sqlite")
    page_path = (write_report([trace], tmp_path / "report", html=True).parent / "report.html").resolve()
    page, seen = open_page(browser, page_path)
    timeline = "tracekit.timelines[0]"

    def canvas_box() -> dict:  # where the canvas is now (measured at each move: the page may lay out again)
        box = page.locator(".timeline canvas").first.bounding_box()
        assert box is not None
        return dict(box)

    def at_row(row: int) -> float:  # the middle of the row'th lane shown, in the canvas's pixels
        return 22 + 18 + row * 18 + 9

    def x_at(ns: int) -> float:  # the trace's time (ns from the first op, 1,000 ns) on the canvas
        return page.evaluate(f"(t => t.x({ns} - 1000, t.plotWidth()))({timeline})")

    def labels() -> list[str]:
        return page.evaluate(f"(t => Array.from(t.order).map(l => t.laneLabel(l)))({timeline})")

    def hover_op(index: int, start: int, end: int) -> dict:
        """The pointer on op ``index`` (``start``-``end`` ns) on its stream's lane: the arrow drawn."""
        row = labels().index("GPU 0 · stream 7")
        box = canvas_box()
        page.mouse.move(box["x"] + (x_at(start) + x_at(end)) / 2, box["y"] + at_row(row))
        assert page.evaluate(f"{timeline}.hovered.index") == index
        arrow = page.evaluate(f"{timeline}.arrow")
        assert arrow is not None and arrow["to"] == pytest.approx([x_at(start), at_row(row)])
        return arrow

    # thread 102's op at 5,000 ns: from its call at 4,700 ns, on the lane of its calls
    arrow = hover_op(1, 5_000, 5_200)
    assert arrow["from"] == pytest.approx([x_at(4_700), at_row(labels().index("tid 102 · CUDA API"))])
    assert "launched 300 ns before, by tid 102" in (page.locator(".timeline .tip").first.text_content() or "")
    arrow = hover_op(3, 7_000, 7_300)
    assert arrow["from"] == pytest.approx([x_at(6_600), at_row(labels().index("tid 103 · CUDA API"))])
    # thread 100's calls lie folded in its group's lane; opened, on their own lane under the ranges
    folded = labels().index("▸ tid 100 · ranges")
    assert hover_op(0, 1_000, 2_000)["from"] == pytest.approx([x_at(200), at_row(folded)])
    page.evaluate(f"{timeline}.toggle({timeline}.order[{folded}])")
    assert labels()[folded : folded + 3] == ["▾ tid 100 · ranges", "  depth 1", "  CUDA API"]
    assert hover_op(0, 1_000, 2_000)["from"] == pytest.approx([x_at(200), at_row(folded + 2)])
    box = canvas_box()
    page.mouse.move(box["x"] + x_at(2_500), box["y"] + at_row(folded + 2))  # the synchronization
    tip = page.locator(".timeline .tip").first.text_content() or ""
    assert tip == f"{SYNC}\n800 ns at 1.1 us\nCUDA API · tid 100 · ranges\ninside: step › forward"
    legend = page.evaluate(
        "Array.from(document.querySelectorAll('.legend span')).map(s => [s.dataset.colour, s.textContent])"
    )
    assert ["#637939", "CUDA API"] in legend
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    assert seen == {"errors": [], "requests": [], "dialogs": []}
    page.close()
