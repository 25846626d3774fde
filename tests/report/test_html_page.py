"""report.html as people read it (issue 43, item 4), in Chromium on two real traces (an nsys export of two
GPUs and a torch.profiler trace of a DDP rank): the time axis and the tooltips, the legend, the host lanes
and the launch arrows, tables that fit the page, the findings with their evidence and bound."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.browser import open_page
from helpers.paths import SHARED

from tracekit.report.traces import write_report

REAL = {
    "nsys-2gpu": SHARED / "traces" / "h100_videogen_2gpu_b_nsys2026.2.sqlite",
    "torch-profiler": SHARED / "kineto" / "a100_ddp_rank0of2_nccl.json.gz",
}
NOTHING_SEEN = {"errors": [], "requests": [], "dialogs": []}
# a time as the page writes it: a number of at most four significant digits and its unit
TIME = re.compile(r"^\+?(\d+(?:\.\d+)?) (s|ms|us|ns)$")


def significant_digits(number: str) -> int:
    return len(number.replace(".", "").lstrip("0")) or 1


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """report.html of each real trace, written once for the module."""
    pages = {}
    for name, source in REAL.items():
        if source.exists():
            folder = tmp_path_factory.mktemp(name) / "report"
            write_report([source], folder, html=True)
            pages[name] = (folder / "report.html").resolve()
    return pages


@pytest.fixture(params=list(REAL))
def real_page(request, browser, reports):
    if request.param not in reports:
        pytest.skip(f"{REAL[request.param]} is absent")
    page, seen = open_page(browser, reports[request.param])
    yield page
    assert seen == NOTHING_SEEN
    page.close()


def axis_after(page, start: str, end: str) -> dict:
    page.evaluate(f"(t => t.zoomTo({start}, {end}))(tracekit.timelines[0])")
    return page.evaluate("tracekit.timelines[0].axisLabels")


@pytest.mark.shared
def test_the_axis_has_one_unit_four_digits_and_stays_in_view(real_page):
    """Whole trace, a stretch in the middle and 10 µs near the end: every tick in one unit, at most four
    significant digits (ticks far from the start count from a base the axis names), all inside the plot."""
    plot = real_page.evaluate("[150, tracekit.timelines[0].plotWidth()]")
    extent = "tracekit.timelines[0].extent"
    for start, end in (
        (f"{extent}[0]", f"{extent}[1]"),
        (f"{extent}[1] * 0.4", f"{extent}[1] * 0.45"),
        (f"{extent}[1] * 0.9", f"{extent}[1] * 0.9 + 10000"),
    ):
        axis = axis_after(real_page, start, end)
        texts = [tick["text"] for tick in axis["ticks"]]
        matches = [TIME.match(text) for text in texts]
        assert len(texts) >= 3 and all(matches), texts
        assert len({match.group(2) for match in matches if match}) == 1, texts  # one unit
        assert all(significant_digits(match.group(1)) <= 4 for match in matches if match), texts
        assert all(plot[0] <= tick["left"] and tick["right"] <= plot[1] for tick in axis["ticks"]), axis
    assert axis["base"] is not None and re.match(r"^from \d+(\.\d+)? (s|ms)$", axis["base"])  # 10 µs at 90 %
    assert all(text.startswith("+") or text.startswith("0 ") for text in texts)


@pytest.mark.shared
def test_a_tooltip_at_the_right_edge_stays_in_the_window(real_page):
    """The pointer over the last op of a GPU lane, a few pixels from the plot's right edge: the tooltip (a
    kernel's long name) opens to the left, inside the window, and its times have at most four digits."""
    found = real_page.evaluate(
        """() => { const t = tracekit.timelines[0], lane = t.data.lanes.findIndex(l => l.kind === 'ops');
                   const run = t.ops.runs[lane], last = run[1] - 1, end = t.ops.start[last] + t.ops.duration[last];
                   t.zoomTo(end - Math.max(t.ops.duration[last] * 4, 2000), end);
                   return [t.rowOf[lane] - t.first, t.plotWidth()]; }"""
    )
    row, width = found
    box = real_page.locator(".timeline canvas").first.bounding_box()
    assert box is not None and 0 <= row < 40
    real_page.mouse.move(box["x"] + width - 3, box["y"] + 22 + 18 + row * 18 + 9)
    tip = real_page.locator(".timeline .tip").first
    assert tip.is_visible()
    rect = tip.bounding_box()
    assert rect is not None and rect["x"] >= 0 and rect["x"] + rect["width"] <= 1400
    times = re.findall(r"(\d+(?:\.\d+)?) (?:s|ms|us|ns)\b", tip.text_content() or "")
    assert times and all(significant_digits(number) <= 4 for number in times), tip.text_content()
