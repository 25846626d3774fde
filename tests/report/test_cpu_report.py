"""The report of a CPU capture (``make demo`` on a machine without a GPU): NVTX ranges, no GPU op. Its
timeline shows the steps' phases, its legend only what occurs, its tables no GPU columns of zeros, its
headings the counts of their tables, its help only what can be hovered, and its axis labels whole."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers.nsys_builder import ExportBuilder

import tracekit
from tracekit.render.colours import PHASE_COLOURS
from tracekit.report.timeline_data import timeline_data
from tracekit.report.traces import write_report

STEPS = 5
STEP_NS = 20_100  # the last step ends at 100,400 ns from the first: just past the axis's 100 us tick
FIRST_STEP = 1_000
# each step's phases, from its start (ns): as tracekit's workloads name them
PHASES = {"forward": (100, 5_000), "backward": (5_100, 12_000), "optimizer": (12_100, 17_900)}


def cpu_capture(path: Path, extra_names: int = 0, scale: int = 1) -> Path:
    """What `tracekit capture` records on a CPU (--trace=nvtx): the capture range, five steps with their
    phases, layers and attention inside forward; no CUDA table. ``extra_names``: ranges of as many more
    names inside the first step; ``scale``: every time that many times longer (25,000: steps of about
    0.5 s, as ``make demo``'s on a CPU)."""
    b = ExportBuilder("2022.4")
    b.push_pop(0, scale * (FIRST_STEP + STEPS * STEP_NS), "tracekit-capture")
    for index in range(STEPS):
        base = FIRST_STEP + index * STEP_NS
        b.push_pop(scale * base, scale * (base + 20_000), "step")
        for name, (start, end) in PHASES.items():
            b.push_pop(scale * (base + start), scale * (base + end), name)
        b.push_pop(scale * (base + 200), scale * (base + 4_000), "layer.0")
        b.push_pop(scale * (base + 300), scale * (base + 3_000), "attention")
        b.push_pop(scale * (base + 400), scale * (base + 1_000), "softmax")
    for index in range(extra_names):
        start = FIRST_STEP + 13_000 + index * 10
        b.push_pop(scale * start, scale * (start + 5), f"extra.{index}")
    return b.write(path)


def gpu_trace(path: Path) -> Path:
    b = ExportBuilder("2026.2")
    b.push_pop(0, 9_000, "forward")
    b.kernel(1_000, 2_000, "ampere_sgemm_128x64_tn", launch_at=200)
    return b.write(path)


def starts(packed: dict) -> np.ndarray:
    """The absolute starts of packed rows (each a step from the one before it in its lane)."""
    steps, out, row = packed["start_step"], [], 0
    for count in packed["lane_counts"]:
        out += np.cumsum(steps[row : row + count]).tolist()
        row += count
    return np.array(out, dtype=np.int64)


def test_the_timeline_shows_each_step_s_phases(tmp_path):
    data = timeline_data(tracekit.open_trace(cpu_capture(tmp_path / "cpu.sqlite")), "cpu")
    assert data["lanes"][0] == {"name": "phases", "kind": "ranges", "pid": 100} and data["count"] == 0
    assert {lane["name"] for lane in data["lanes"][1:]} == {"tid 100 · ranges"}  # the thread's ranges by depth
    assert data["phases"] == list(PHASES) and data["phase_colours"] == [PHASE_COLOURS[p] for p in PHASES]
    ranges = data["ranges"]
    assert ranges["lane_counts"] == [3 * STEPS] + [0] * (len(data["lanes"]) - 1)  # all on the phases lane
    expected = sorted(
        (index * STEP_NS + start, end - start, list(PHASES).index(name))
        for index in range(STEPS)
        for name, (start, end) in PHASES.items()
    )  # ns from the first step, which is the axis's origin in a trace without GPU ops
    assert data["origin_ns"] == FIRST_STEP
    assert list(zip(starts(ranges).tolist(), ranges["duration"], ranges["category"])) == expected
    assert [data["phase_names"][code] for code in ranges["name"]] == [list(PHASES)[code] for *_, code in expected]
    assert data["steps"]["start"] == [index * STEP_NS for index in range(STEPS)]


def test_phases_found_by_their_names_keep_the_range_s_name(tmp_path):
    b = ExportBuilder("2026.2")
    b.push_pop(100, 900, "forward pass")
    b.push_pop(1_000, 1_900, "backward pass")
    data = timeline_data(tracekit.open_trace(b.write(tmp_path / "named.sqlite")), "named")
    assert data["phases"] == ["forward", "backward"]
    assert [data["phase_names"][code] for code in data["ranges"]["name"]] == ["forward pass", "backward pass"]


def test_the_legend_has_only_the_categories_that_occur(tmp_path):
    cpu = timeline_data(tracekit.open_trace(cpu_capture(tmp_path / "cpu.sqlite")), "cpu")
    assert cpu["categories"] == [] and cpu["colours"] == []
    gpu = timeline_data(tracekit.open_trace(gpu_trace(tmp_path / "gpu.sqlite")), "gpu")
    assert gpu["categories"] == ["matmul"] and gpu["ops"]["category"] == [0]
    page = (write_report([tmp_path / "cpu.sqlite"], tmp_path / "r", html=True).parent / "report.html").read_text()
    legend = re.search(r'<p class="legend">(.*?)</p>', page)
    assert legend is not None
    # the phases, the thread's ranges and the steps: no kernel category, no idle cause, no launch arrow
    assert re.findall(r"</i>([^<]+)</span>", legend.group(1)) == [*PHASES, "range", "step", "other step"]


def report_tables(markdown: str) -> list[tuple[str, list[str], int]]:
    """Each Markdown table of a report: the paragraph above it, its header cells and its row count."""
    tables = []
    for found in re.finditer(r"((?:^[^|\n].*\n)+)\n(^\|.*\|\n)^\|[-:| ]+\|\n((?:^\|.*\|\n)*)", markdown, re.M):
        header = [cell.strip() for cell in found.group(2).strip().strip("|").split("|")]
        tables.append((found.group(1).strip().splitlines()[-1], header, len(found.group(3).splitlines())))
    return tables


def test_no_gpu_columns_without_gpu_ops(tmp_path):
    markdown = write_report([cpu_capture(tmp_path / "cpu.sqlite")], tmp_path / "r").read_text()
    tables = report_tables(markdown)
    assert len(tables) >= 2  # the ranges, and inside attention
    assert [header for _, header, _ in tables if any(cell.startswith("GPU") for cell in header)] == []
    assert "CPU and GPU time" not in markdown and "attention ranges' CPU time" in markdown
    # with GPU ops the columns are there
    gpu = write_report([gpu_trace(tmp_path / "gpu.sqlite")], tmp_path / "g").read_text()
    assert any("GPU Ops" in header for _, header, _ in report_tables(gpu))


def test_the_cpu_report_names_the_sections_it_leaves_out(tmp_path):
    """Each section a GPU trace's report has and a CPU capture's lacks is named where the CPU report
    says what is missing (it said only "the GPU sections are left out"), and the trace line says no
    GPU was traced (it said "GPUs: not recorded")."""
    cpu = write_report([cpu_capture(tmp_path / "cpu.sqlite")], tmp_path / "cpu").read_text()
    gpu = write_report([gpu_trace(tmp_path / "gpu.sqlite")], tmp_path / "gpu").read_text()
    headings = set(re.findall(r"^### (.+)$", gpu, re.M)) - set(re.findall(r"^### (.+)$", cpu, re.M))
    assert {"What to fix first", "Top kernels", "Why the GPU waits"} <= headings
    said = next(paragraph for paragraph in cpu.split("\n\n") if paragraph.startswith("No CUDA kernels"))
    assert [heading for heading in headings if heading.lower() not in said.lower()] == [], said
    assert "what to fix first, GPU time by phase and category, top kernels and why the GPU waits" in said
    assert "GPUs: none traced" in cpu and "not recorded" not in cpu


@pytest.mark.parametrize("extra_names", [0, 12])
def test_headings_count_their_tables_rows(tmp_path, extra_names):
    """8 range names: "All 8"; 20 names, 15 shown: "The 15"; whatever a paragraph counts, its table has."""
    export = cpu_capture(tmp_path / "cpu.sqlite", extra_names)
    tables = report_tables(write_report([export], tmp_path / "r").read_text())
    counted = [(int(found.group(1)), rows) for above, _, rows in tables if (found := re.search(r"\b(\d+) ", above))]
    assert counted and all(said == rows for said, rows in counted), counted
    names = 8 + extra_names
    ranges = next(above for above, header, _ in tables if header[0] == "Range" and "Depth" in header)
    assert ranges.startswith(f"All {names} range names" if names < 15 else "The 15 range names with the most")


# -- in a browser ---------------------------------------------------------------------------------------

# Every text the page draws on a canvas: its x, its width and the canvas's width (CSS px).
RECORD_TEXT = """
window.drawnTexts = [];
const fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, x, y) {
  window.drawnTexts.push({text: String(text), x: x, width: this.measureText(text).width,
                          canvas: this.canvas.clientWidth});
  return fillText.apply(this, arguments);
};
"""


def open_report(browser, path: Path, width: int):
    page = browser.new_page(viewport={"width": width, "height": 800})
    page.add_init_script(RECORD_TEXT)
    load_report(page, path)
    return page


def load_report(page, path: Path) -> None:
    """The report loaded anew (the recording of drawn texts starts again with it), drawn."""
    page.goto(path.as_uri())
    page.wait_for_function("() => window.tracekit && window.tracekit.ready === true", timeout=10_000)


def test_the_page_draws_phases_and_names_only_what_it_has(browser, tmp_path):
    cpu = write_report([cpu_capture(tmp_path / "cpu.sqlite")], tmp_path / "cpu", html=True).parent / "report.html"
    page = open_report(browser, cpu, 1200)
    assert page.locator(".timeline .help").inner_text().endswith("hover: a phase or a range")  # no op to hover
    # the middle of step 1's forward bar, on the phases lane: the phase is found and described
    timeline = "tracekit.timelines[0]"
    x = page.evaluate(
        f"{timeline}.x({(PHASES['forward'][0] + PHASES['forward'][1]) // 2}, {timeline}.canvas.clientWidth)"
    )
    hit = page.evaluate(
        f"(() => {{ const h = {timeline}.find({x}, 22 + 18 + 9); return h && {timeline}.describe(h); }})()"
    )
    assert hit is not None and hit.startswith("forward\n") and hit.endswith("\nphases")
    page.close()
    gpu = write_report([gpu_trace(tmp_path / "gpu.sqlite")], tmp_path / "gpu", html=True).parent / "report.html"
    page = open_report(browser, gpu, 1200)
    help_text = page.locator(".timeline .help").inner_text()
    assert help_text.endswith("hover: a phase, a range, a CUDA API call, an op or a gap")
    page.close()


def test_every_axis_label_is_drawn_whole(browser, tmp_path):
    """At any width, the last time on the axis ends inside the canvas (it was cut at the right edge)."""
    path = write_report([cpu_capture(tmp_path / "cpu.sqlite")], tmp_path / "r", html=True).parent / "report.html"
    page = browser.new_page()  # one page, the report loaded anew at each width (a new page costs ~0.5 s more)
    page.add_init_script(RECORD_TEXT)
    for width in range(700, 1500, 50):
        page.set_viewport_size({"width": width, "height": 800})
        load_report(page, path)
        texts = page.evaluate("window.drawnTexts")
        labels = [text for text in texts if re.fullmatch(r"[\d.]+ (ns|us|ms|s)", text["text"])]
        assert len(labels) >= 3, texts
        cut = [text for text in texts if text["x"] < 0 or text["x"] + text["width"] > text["canvas"] + 0.5]
        assert cut == [], (width, cut)
    page.close()


def axis_labels(page) -> list[str]:
    texts = page.evaluate("window.drawnTexts")
    page.evaluate("window.drawnTexts = []")
    return [text["text"] for text in texts if re.fullmatch(r"-?[\d.,]+ (ns|us|ms|s)", text["text"])]


@pytest.mark.parametrize(
    ("scale", "whole", "zoom", "zoomed"),
    [
        # make demo's steps of 0.5 s: the axis read "0 ns, 500.000 ms, 1.000 s, 1.500 s"
        (25_000, ["0.0 s", "0.5 s", "1.0 s", "1.5 s", "2.0 s", "2.5 s"], (1e9, 1.04e9), ["1.000 s", "1.005 s"]),
        (25_000, None, (250e6, 262.5e6), ["250 ms", "252 ms", "254 ms"]),
        (1, ["0 us", "20 us", "40 us", "60 us", "80 us", "100 us"], (10_000, 10_500), ["10.00 us", "10.05 us"]),
    ],
)
def test_the_axis_reads_in_one_unit_with_the_decimals_its_step_needs(browser, tmp_path, scale, whole, zoom, zoomed):
    """One unit per axis (the one its largest time reads in), and as many decimals as tell its ticks
    apart: not "0 ns", "500.000 ms", "1.000 s" on one axis."""
    export = cpu_capture(tmp_path / "cpu.sqlite", scale=scale)
    path = write_report([export], tmp_path / "r", html=True).parent / "report.html"
    page = open_report(browser, path, 1200)
    assert whole is None or axis_labels(page) == whole
    page.evaluate("window.drawnTexts = []")
    page.evaluate(f"tracekit.timelines[0].zoomTo({zoom[0]}, {zoom[1]})")
    assert axis_labels(page)[: len(zoomed)] == zoomed
    page.close()
