"""report.html's timeline at any number of lanes: a canvas holds at most 40 of them (above about 3,600
lanes a canvas grew past Chromium's limits and painted nothing, silently), a scroll bar moves through the
rest, and the page says which lanes it shows of how many."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.browser import open_page
from helpers.nsys_builder import ExportBuilder

from tracekit.model.trace import Trace
from tracekit.render.html import report_page
from tracekit.report.timeline_data import timeline_data
from tracekit.sources import open_trace

SHOWN = 40  # lanes on the canvas (report.js)
KERNEL_NS, SPREAD_NS = 500_000, 1_000_000
# alpha of the pixels of one lane's row, from the label column's edge to the scroll bar
ROW_ALPHA = """row => { const t = tracekit.timelines[0], ratio = window.devicePixelRatio || 1;
  const y = Math.round((22 + 18 + row * 18 + 9) * ratio), x0 = Math.round(151 * ratio);
  const data = t.canvas.getContext('2d').getImageData(x0, y, Math.round(t.plotWidth() * ratio) - x0, 1).data;
  const out = []; for (let i = 3; i < data.length; i += 4) out.push(data[i]); return out; }"""


def many_streams(tmp_path, streams: int) -> Trace:
    """One kernel on each of ``streams`` streams, stream s's from s x (1 ms / streams) for 500 µs (in
    memory: a built export of one kernel, its row repeated)."""
    b = ExportBuilder("2026.2")
    b.kernel(0, KERNEL_NS, "ampere_sgemm_128x64_tn")
    one = open_trace(b.write(tmp_path / "one.sqlite"))
    index = np.arange(streams)
    starts = index * (SPREAD_NS // streams)
    ops = one.gpu_ops.iloc[np.zeros(streams, dtype=np.int64)].reset_index(drop=True)
    ops = ops.assign(start=starts, end=starts + KERNEL_NS, stream=index, correlation_id=index + 1)
    return Trace.from_frames(one.meta, ops.astype(one.gpu_ops.dtypes.to_dict()))


@pytest.mark.parametrize("streams", [5_000, 100_000])
def test_the_timeline_draws_any_number_of_lanes(browser, tmp_path, streams):
    data = timeline_data(many_streams(tmp_path, streams), "streams")
    lanes = streams + 1  # and GPU 0's idle lane
    assert len(data["lanes"]) == lanes and data["lanes"][-1]["name"] == "GPU 0 · idle"
    path = tmp_path / "streams.html"
    path.write_text(report_page("streams", [], [data]))
    page, seen = open_page(browser, path.resolve())
    assert seen == {"errors": [], "requests": [], "dialogs": []}
    canvas = page.evaluate("(() => { const c = tracekit.timelines[0].canvas; return [c.height, c.clientHeight]; })()")
    ratio = page.evaluate("window.devicePixelRatio")
    assert canvas == [(22 + 18 + SHOWN * 18 + 4) * ratio, 22 + 18 + SHOWN * 18 + 4]  # not 18 px a lane
    help_text = page.locator(".timeline .help").text_content() or ""
    assert help_text.startswith(f"lanes 1–40 of {lanes:,} (scroll bar")
    # every lane shown is painted: its kernel covers a third of the view or more
    for row in (0, SHOWN - 1):
        assert (np.array(page.evaluate(ROW_ALPHA, row)) > 0).mean() > 0.3
    # the scroll bar half way down: the lanes in the middle, their kernels where their starts are
    page.locator(".timeline .lanes-scroll").evaluate("s => { s.scrollTop = (s.scrollHeight - s.clientHeight) / 2; }")
    page.wait_for_function("tracekit.timelines[0].first > 0")
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    first = page.evaluate("tracekit.timelines[0].first")
    assert abs(first - (lanes - SHOWN) / 2) <= 1
    assert (page.locator(".timeline .help").text_content() or "").startswith(
        f"lanes {first + 1:,}–{first + SHOWN:,} of"
    )
    start = first * (SPREAD_NS // streams)
    edge = page.evaluate(f"tracekit.timelines[0].x({start}, tracekit.timelines[0].plotWidth())")
    alpha = np.array(page.evaluate(ROW_ALPHA, 0))
    column = int(round(edge)) - 151  # the row's pixels start at x = 151
    assert 100 < column and alpha[: column - 2].max() == 0 and alpha[column + 2 : column + 100].min() > 0
    # the end: the idle lane is the last one shown
    page.evaluate(f"tracekit.timelines[0].scrollToLane({lanes})")
    assert page.evaluate("tracekit.timelines[0].first") == lanes - SHOWN
    assert page.evaluate("(t => t.data.lanes[t.first + t.shown - 1].name)(tracekit.timelines[0])") == "GPU 0 · idle"
    page.close()


def test_a_few_lanes_fit_without_a_scroll_bar(browser, tmp_path):
    data = timeline_data(many_streams(tmp_path, 3), "streams")
    path = tmp_path / "few.html"
    path.write_text(report_page("few", [], [data]))
    page, seen = open_page(browser, path.resolve())
    assert seen == {"errors": [], "requests": [], "dialogs": []}
    assert page.locator(".timeline .lanes-scroll").count() == 0
    assert (page.locator(".timeline .help").text_content() or "").startswith("4 lanes · wheel: zoom")
    assert page.evaluate("tracekit.timelines[0].height()") == 22 + 18 + 4 * 18 + 4
    page.close()
