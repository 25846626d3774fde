"""`tracekit report --html`: one self-contained page (no request leaves it) with the report's tables,
sortable, and each trace's timeline; checked as a file, then in a real browser (Chromium driven by
Playwright) on two real traces: one nsys export of two GPUs, one torch.profiler trace."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers.browser import open_page
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED

import tracekit
from tracekit.analysis.primitives.step_window import step_rows
from tracekit.render.colours import CATEGORY_COLOURS
from tracekit.report.traces import write_report

GEMM = "ampere_sgemm_128x64_tn"
HOSTILE = "</script><script>document.title='owned'</script>"


def built(path: Path) -> Path:
    b = ExportBuilder("2026.2")
    for base in (0, 10_000):
        b.push_pop(base, base + 9_000, "step")
        b.push_pop(base + 100, base + 4_000, "forward")
        b.kernel(base + 1_000, base + 2_000, GEMM, launch_at=base + 200)
        b.kernel(base + 3_000, base + 3_100, HOSTILE, launch_at=base + 300, stream=9)
    return b.write(path)


def timelines_of(page: str) -> list[dict]:
    found = re.findall(r'<script type="application/json" class="tracekit-timeline"[^>]*>(.*?)</script>', page, re.S)
    return [json.loads(text) for text in found]


def test_the_page_holds_everything_and_fetches_nothing(tmp_path):
    export = built(tmp_path / "steps.sqlite")
    markdown = write_report([export], tmp_path / "report", html=True)
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # no script, style or picture from elsewhere
    separators = re.findall(r"^\|[-: |]+\|$", markdown.read_text(), re.M)  # one under each Markdown table's header
    assert page.count('<table class="sortable">') == len(separators) >= 5  # every table of report.md
    assert page.count("<figure") == page.count("<svg") == markdown.read_text().count("![") > 0  # every picture, SVG
    assert HOSTILE not in page  # a kernel's name cannot end the script that holds it
    (timeline,) = timelines_of(page)
    assert timeline["count"] == 4 and len(timeline["ops"]["start_step"]) == 4
    # by lane (stream 7, then 9), then time, from the first op (1,000 ns): each start a step from the last
    # (after the phases lane, the thread's two depths of ranges and its CUDA API calls)
    assert (timeline["ops"]["lane_counts"], timeline["ops"]["start_step"]) == (
        [0, 0, 0, 0, 2, 2, 0],
        [0, 10_000, 2_000, 10_000],
    )
    assert [timeline["names"][code] for code in timeline["ops"]["name"]][-1] == HOSTILE
    assert timeline["steps"] == {"start": [-1_000, 9_000], "duration": [9_000, 9_000]}
    assert timeline["colours"][timeline["categories"].index("matmul")] == CATEGORY_COLOURS["matmul"]
    assert [lane["name"] for lane in timeline["lanes"]] == [
        "phases",  # the forward ranges
        "tid 100 · ranges",  # the thread's ranges: step, and forward inside it
        "tid 100 · ranges",
        "tid 100 · ranges",  # its calls, below
        "GPU 0 · stream 7",
        "GPU 0 · stream 9",
        "GPU 0 · idle",
    ]
    # each op's launching call was made inside "forward" (inside "step"): the innermost range is named
    assert [timeline["range_names"][code] for code in timeline["op_range"]] == ["forward"] * 4


def test_cells_keep_their_raw_values_for_sorting(tmp_path):
    page = (write_report([built(tmp_path / "s.sqlite")], tmp_path / "r", html=True).parent / "report.html").read_text()
    # the kernel table's Total Time (ms): 2 x 1,000 ns of GEMM shown as 0.002, sorted by 0.002 exactly
    assert 'data-value="0.002"' in page


# -- in a browser ---------------------------------------------------------------------------------------

REAL = {
    "nsys-2gpu": SHARED / "traces" / "h100_videogen_2gpu_b_nsys2026.2.sqlite",
    "torch-profiler": SHARED / "kineto" / "a100_ddp_rank0of2_nccl.json.gz",
}
NOTHING_SEEN = {"errors": [], "requests": [], "dialogs": []}


@pytest.mark.shared
@pytest.mark.parametrize("name", list(REAL))
def test_the_report_in_a_browser(browser, tmp_path, name):
    source = REAL[name]
    if not source.exists():
        pytest.skip(f"{source} is absent")
    write_report([source], tmp_path / "report", html=True)
    path = (tmp_path / "report" / "report.html").resolve()
    page, seen = open_page(browser, path)
    trace = tracekit.open_trace(source)
    ops = trace.gpu_ops
    # the timeline holds every GPU op: as many as `kernels --ops all` counts
    all_ops = int(tracekit.kernels(trace, ops="all")["kernels"]["Instances"].sum())
    assert page.evaluate("tracekit.timelines[0].count") == len(ops) == all_ops
    assert page.evaluate("tracekit.timelines[0].visibleOps()") == len(ops)
    # zoom to one step (the torch.profiler trace has them) or a stretch of the nsys trace: the window
    # changes, and the ops drawn are exactly those overlapping it
    origin = int(ops["start"].min())
    steps = step_rows(trace)
    if len(steps):
        start, end = int(steps["start"].iloc[0]) - origin, int(steps["end"].iloc[0]) - origin
    else:
        span = int(ops["end"].max()) - origin
        start, end = span // 2, span // 2 + span // 20
    page.evaluate(f"tracekit.timelines[0].zoomTo({start}, {end})")
    assert page.evaluate("tracekit.timelines[0].view") == [start, end]
    relative_start, relative_end = ops["start"].to_numpy() - origin, ops["end"].to_numpy() - origin
    expected = int(((relative_start <= end) & (relative_end >= start)).sum())
    assert 0 < page.evaluate("tracekit.timelines[0].visibleOps()") == expected < len(ops)
    # a table sorts by its time column: the first click puts the largest first
    header = page.locator("table.sortable th", has_text=re.compile(r"^Total Time \(ms\)$")).first
    header.click()
    table = header.locator("xpath=ancestor::table")
    column = int(header.evaluate("cell => cell.cellIndex"))
    values = table.evaluate(f"t => Array.from(t.tBodies[0].rows).map(r => Number(r.cells[{column}].dataset.value))")
    assert len(values) > 1 and values == sorted(values, reverse=True)
    header.click()
    values = table.evaluate(f"t => Array.from(t.tBodies[0].rows).map(r => Number(r.cells[{column}].dataset.value))")
    assert values == sorted(values)
    # an op's description names the range its launching call was made in (when it has one)
    described = page.evaluate(
        """() => { const t = tracekit.timelines[0], i = t.opRange.findIndex(code => code >= 0);
                   return i < 0 ? null : [t.describe({lane: t.ops.lane[i], index: i, gaps: false, table: t.ops}),
                                          t.data.range_names[t.opRange[i]]]; }"""
    )
    assert described is not None  # both traces launch their ops inside ranges
    assert described[0].endswith("launched in: " + described[1])
    # hovering over a drawn op names it
    box = page.locator(".timeline canvas").first.bounding_box()
    assert box is not None
    page.evaluate("tracekit.timelines[0].zoomTo(0, tracekit.timelines[0].extent[1])")
    page.mouse.move(box["x"] + 400, box["y"] + 22 + 18 + 9)
    page.screenshot(path=str(tmp_path / f"report-{name}.png"), full_page=False)  # for people to look at
    assert (tmp_path / f"report-{name}.png").stat().st_size > 10_000
    assert seen == NOTHING_SEEN
    page.close()


def test_level_of_detail_keeps_gaps_visible(browser, tmp_path):
    """Ten thousand kernels of 900 ns each 1 µs apart, all in view: far more than pixels, so the page
    draws busy fractions; every pixel column of the lane is drawn but none fully opaque (the 10 % idle
    shows), while a lane with no gaps would be."""
    b = ExportBuilder("2026.2")
    for index in range(10_000):
        b.kernel(index * 1_000, index * 1_000 + 900, GEMM)
    export = b.write(tmp_path / "dense.sqlite")
    write_report([export], tmp_path / "r", html=True)
    page, seen = open_page(browser, (tmp_path / "r" / "report.html").resolve())
    alphas = page.evaluate(
        """() => {
          const t = tracekit.timelines[0], c = t.canvas, ratio = window.devicePixelRatio || 1;
          const y = Math.round((22 + 18 + 9) * ratio), ctx = c.getContext('2d');
          const row = ctx.getImageData(Math.round(160 * ratio), y, Math.round((c.clientWidth - 170) * ratio), 1).data;
          const out = []; for (let i = 3; i < row.length; i += 4) out.push(row[i]); return out;
        }"""
    )
    alpha = np.array(alphas)
    assert (alpha > 0).mean() > 0.95 and alpha.max() < 255 and np.median(alpha) > 200
    assert seen == NOTHING_SEEN
    page.close()


def test_one_colour_per_category_in_every_picture(tmp_path, monkeypatch):
    """Every picture of a two-trace report (PNG charts and the HTML timelines) gives each category the
    same colour: its entry in render.colours, whatever other categories share the picture."""
    from matplotlib.colors import to_hex

    from tracekit.render import plots

    drawn = []
    draw = plots.draw
    monkeypatch.setattr(plots, "draw", lambda chart: drawn.append(draw(chart)) or drawn[-1])
    first, second = built(tmp_path / "first.sqlite"), tmp_path / "second.sqlite"
    b = ExportBuilder("2026.2")
    b.push_pop(0, 9_000, "forward")
    b.kernel(100, 900, "void softmax_warp_forward<float>()", launch_at=50)  # a category the first lacks
    b.kernel(1_000, 1_500, GEMM, launch_at=60)
    b.write(second)
    folder = write_report([first, second], tmp_path / "report", html=True).parent
    seen: dict[str, set[str]] = {}
    for figure in drawn:
        for axes in figure.axes:
            for handle, label in zip(*axes.get_legend_handles_labels()):
                if label in CATEGORY_COLOURS:
                    patch = handle.patches[0] if hasattr(handle, "patches") else handle  # a bar chart's bars
                    seen.setdefault(label, set()).add(to_hex(patch.get_facecolor()))
    for timeline in timelines_of((folder / "report.html").read_text()):
        for category, colour in zip(timeline["categories"], timeline["colours"]):
            seen.setdefault(category, set()).add(colour)
    assert {"matmul", "softmax"} <= {
        label for figure in drawn for a in figure.axes for label in a.get_legend_handles_labels()[1]
    }
    assert len(drawn) >= 2  # the categories of each input, and the comparison's bars
    assert seen and all(colours == {CATEGORY_COLOURS[category]} for category, colours in seen.items()), seen


def test_a_run_folder_s_memory_lies_on_the_trace_s_time_axis(browser, tmp_path):
    """A run folder with a trace and a snapshot: the page's timeline has a memory lane, its times on the
    trace's axis (the snapshot's wall-clock stamps against the export's session start)."""
    from helpers.snapshot_builder import SnapshotBuilder, stack

    epoch_us = 1_763_820_000_000_000  # the built exports' session start, µs
    run = tmp_path / "run"
    run.mkdir()
    built(run / "trace.sqlite")
    snapshot = SnapshotBuilder()
    snapshot.segment_event("segment_alloc", 0x0, 64 * 2**20, epoch_us + 1)  # 1,000 ns: the first op's start
    snapshot.alloc(0x1000, 3 * 2**20, epoch_us + 5, stack("model.py:3 forward"))
    snapshot.segment(0x0, 64 * 2**20, [(0x1000, 3 * 2**20, "active_allocated")])
    snapshot.dump(run / "memory.pickle")
    write_report([run], tmp_path / "report", html=True)
    page_path = (tmp_path / "report" / "report.html").resolve()
    (timeline,) = timelines_of(page_path.read_text())
    memory = timeline["memory"]
    assert (
        memory["start"] == [0, 4_000]
        and memory["allocated_mib"] == [0.0, 3.0]
        and memory["reserved_mib"] == [64.0, 64.0]
    )
    page, seen = open_page(browser, page_path)
    # 5 lanes (phases, the thread's ranges folded, 2 streams, idle) and the memory lane's room
    assert page.evaluate("tracekit.timelines[0].height()") == 22 + 18 + 5 * 18 + 48 + 4
    assert seen == NOTHING_SEEN
    page.close()


def test_a_cpu_only_capture_still_shows_its_steps(tmp_path):
    b = ExportBuilder("2026.2")
    for base in (5_000, 15_000):
        b.push_pop(base, base + 8_000, "step")
    folder = write_report([b.write(tmp_path / "cpu.sqlite")], tmp_path / "r", html=True).parent
    (timeline,) = timelines_of((folder / "report.html").read_text())
    assert timeline["count"] == 0 and [lane["name"] for lane in timeline["lanes"]] == ["tid 100 · ranges"]
    assert timeline["steps"] == {"start": [0, 10_000], "duration": [8_000, 8_000]}


def test_sentences_wrap_in_the_page_and_other_text_does_not():
    import pandas as pd

    from tracekit.render.html import table_html

    page = table_html(pd.DataFrame({"Finding": ["host stall"], "What": ["cuda:0 waited 6 ms"], "Time (ns)": [5]}))
    assert '<td class="text">host stall</td>' in page
    assert '<td class="text prose">cuda:0 waited 6 ms</td>' in page
    assert '<td class="number" data-value="5.0">5</td>' in page
