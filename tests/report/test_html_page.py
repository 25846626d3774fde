"""report.html as people read it (issue 43, item 4), in Chromium on two real traces (an nsys export of two
GPUs and a torch.profiler trace of a DDP rank): the time axis and the tooltips, the legend, the host lanes
and the launch arrows, tables that fit the page, the findings with their evidence and bound."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.browser import open_page
from helpers.paths import SHARED

from tracekit.render.colours import HOST_COLOURS
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


# every colour a rectangle is filled with in the timeline's plot (right of the labels, below the axis)
RECORD_FILLS = """window.plotFills = new Set();
const fillRect = CanvasRenderingContext2D.prototype.fillRect;
CanvasRenderingContext2D.prototype.fillRect = function (x, y, w, h) {
  if (x >= 150 && y >= 22 && w > 0) window.plotFills.add(String(this.fillStyle).toLowerCase());
  return fillRect.apply(this, arguments);
};"""


@pytest.fixture(params=list(REAL))
def real_page(request, browser, reports):
    if request.param not in reports:
        pytest.skip(f"{REAL[request.param]} is absent")
    page, seen = open_page(browser, reports[request.param], init_script=RECORD_FILLS)
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


# -- host lanes and launch arrows ----------------------------------------------------------------------


def test_each_thread_has_a_lane_and_each_op_its_launching_thread(tmp_path):
    """Two threads with ranges (one nested two deep) and a third that only launches: a group of lanes per
    annotated thread (one lane per depth, its calls below), one of its calls for the third, and each op's
    launching thread, its calls' lane, and lead (op start - call start)."""
    from helpers.nsys_builder import ExportBuilder

    from tracekit.report.timeline_data import timeline_data
    from tracekit.sources import open_trace

    b = ExportBuilder("2026.2")
    b.push_pop(0, 9_000, "step", tid=100)
    b.push_pop(100, 4_000, "forward", tid=100)
    b.push_pop(500, 2_500, "load batch", tid=101)
    b.kernel(1_000, 2_000, "ampere_sgemm_128x64_tn", launch_at=200, tid=100)
    b.kernel(3_000, 3_100, "ampere_sgemm_128x64_tn", launch_at=2_000, tid=101)
    b.kernel(5_000, 5_200, "ampere_sgemm_128x64_tn", launch_at=4_700, tid=102)
    data = timeline_data(open_trace(b.write(tmp_path / "threads.sqlite")), "threads")
    host = [(lane["name"], lane["depth"], lane["depths"]) for lane in data["lanes"] if lane["kind"] == "host"]
    assert host == [
        ("tid 100 · ranges", 0, 3),
        ("tid 100 · ranges", 1, 3),
        ("tid 100 · ranges", 2, 3),  # its calls
        ("tid 101 · ranges", 0, 2),
        ("tid 101 · ranges", 1, 2),
        ("tid 102 · CUDA API", 0, 1),
    ]
    first = next(index for index, lane in enumerate(data["lanes"]) if lane["kind"] == "host")
    # the rows by lane, then time, from the first op (1,000 ns); a launch takes 5 ns
    assert data["host"]["lane_counts"][first : first + 6] == [1, 1, 1, 1, 1, 1]
    assert data["host"]["start_step"] == [-1_000, -900, -800, -500, 1_000, 3_700]
    assert data["host"]["duration"] == [9_000, 3_900, 5, 2_000, 5, 5]
    names = [data["host_names"][code] for code in data["host"]["name"]]
    assert names == [
        "step",
        "forward",
        "cudaLaunchKernel_v7000",
        "load batch",
        "cudaLaunchKernel_v7000",
        "cudaLaunchKernel_v7000",
    ]
    assert [thread["name"] for thread in data["threads"]] == ["tid 100", "tid 101", "tid 102"]
    assert [thread["lane"] for thread in data["threads"]] == [first + 2, first + 4, first + 5]
    assert data["launch"] == {"thread_runs": [1, 0, 1, 1, 1, 2], "lead": [800, 1_000, 300]}


def host_groups(source: Path) -> set[str]:
    """The thread lanes a trace should get: one per (thread, ranges or CPU ops) with any range, and one of
    CUDA API calls per thread with calls and no range."""
    import tracekit

    trace = tracekit.open_trace(source)
    ranges, calls = trace.ranges, trace.launches
    ranges = ranges.loc[ranges["domain"].astype(str) != "gpu"]
    several = len(set(ranges["pid"]) | set(calls["pid"])) > 1
    name = lambda pid, tid: (f"pid {pid}" if pid == tid else f"pid {pid} · tid {tid}") if several else f"tid {tid}"
    groups = set()
    for (pid, tid, cpu), _ in ranges.groupby(["pid", "tid", ranges["domain"].astype(str) == "cpu_op"]):
        groups.add(f"{name(pid, tid)} · {'CPU ops' if cpu else 'ranges'}")
    annotated = set(zip(ranges["pid"], ranges["tid"]))
    groups |= {f"{name(pid, tid)} · CUDA API" for pid, tid in set(zip(calls["pid"], calls["tid"])) - annotated}
    return groups


@pytest.mark.shared
def test_a_lane_per_annotated_thread_that_opens_by_depth(real_page, request):
    source = REAL[request.node.callspec.params["real_page"]]
    shown = real_page.evaluate("(t => Array.from(t.order).map(l => t.data.lanes[l]))(tracekit.timelines[0])")
    headers = [lane["name"] for lane in shown if lane["kind"] == "host"]
    assert len(headers) == len(set(headers)) and set(headers) == host_groups(source)  # folded: one lane each
    assert all(lane["depth"] == 0 for lane in shown if lane["kind"] == "host")
    # a click on a thread's name opens one lane per depth under it; a second click folds them again
    row, depths, calls = real_page.evaluate(
        """(t => { const l = t.data.lanes.findIndex(x => x.kind === 'host' && x.depths > 2);
                   const info = t.data.lanes[l], last = t.data.lanes[l + info.depths - 1];
                   return [t.rowOf[l] - t.first, info.depths, last.calls === true]; })(tracekit.timelines[0])"""
    )
    ranges = depths - calls  # the lanes of ranges, then the lane of the thread's calls
    box = real_page.locator(".timeline canvas").first.bounding_box()
    assert box is not None
    before = real_page.evaluate("tracekit.timelines[0].lanes")
    real_page.mouse.click(box["x"] + 40, box["y"] + 22 + 18 + row * 18 + 9)
    real_page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    assert real_page.evaluate("tracekit.timelines[0].lanes") == before + depths - 1
    labels = real_page.evaluate(
        f"(t => Array.from(t.order).slice({row}, {row + depths}).map(l => t.laneLabel(l)))(tracekit.timelines[0])"
    )
    assert (
        labels[0].startswith("▾ ") and labels[1:] == [f"  depth {d}" for d in range(1, ranges)] + ["  CUDA API"] * calls
    )
    # hovering the opened lanes' deepest range names it, and the ranges around it
    described = real_page.evaluate(
        f"""(t => {{ const lane = t.order[{row + ranges - 1}], run = t.host.runs[lane];
                    let i = run[0]; for (let k = run[0]; k < run[1]; k++) if (t.host.duration[k] > t.host.duration[i]) i = k;
                    t.zoomTo(t.host.start[i], t.host.start[i] + t.host.duration[i]);
                    return [t.data.host_names[t.host.name[i]], t.enclosing(lane, i), t.rowOf[lane] - t.first]; }})
           (tracekit.timelines[0])"""
    )
    name, inside, deepest = described
    real_page.mouse.move(box["x"] + 700, box["y"] + 22 + 18 + deepest * 18 + 9)
    tip = real_page.locator(".timeline .tip").first.text_content() or ""
    assert tip.startswith(name + "\n") and len(inside) == ranges - 1 and tip.endswith("inside: " + " › ".join(inside))
    real_page.mouse.click(box["x"] + 40, box["y"] + 22 + 18 + row * 18 + 9)
    real_page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    assert real_page.evaluate("tracekit.timelines[0].lanes") == before


@pytest.mark.shared
def test_hovering_an_op_draws_its_launch_arrow_from_its_thread(real_page):
    """An op launched by a thread with a lane (the longest lead of an op wide enough to point at): hovered, an arrow runs from the launching call's time on that
    thread's lane to the op's start on its stream, and the tooltip names the thread and the lead."""
    op = real_page.evaluate(
        """(t => { let i = -1, best = 0;
                   for (let k = 0; k < t.ops.count; k++) {
                     const thread = t.launches.thread[k];
                     if (thread >= 0 && t.data.threads[thread].lane >= 0 && t.launches.lead[k] > best &&
                         t.ops.duration[k] * 5 > t.launches.lead[k]) { best = t.launches.lead[k]; i = k; }
                   }
                   const start = t.ops.start[i], lead = t.launches.lead[i], end = start + t.ops.duration[i];
                   t.zoomTo(start - lead * 1.5, end + lead * 0.5);
                   const width = t.plotWidth(), lane = t.ops.lane[i], thread = t.data.threads[t.launches.thread[i]];
                   return { x: (t.x(start, width) + t.x(Math.min(end, t.view[1]), width)) / 2, row: t.rowOf[lane] - t.first,
                            from: [t.x(start - lead, width), 22 + 18 + (t.shownRow(thread.lane) - t.first) * 18 + 9],
                            to: [t.x(start, width), 22 + 18 + (t.rowOf[lane] - t.first) * 18 + 9],
                            thread: thread.name, lead: lead, index: i }; })(tracekit.timelines[0])"""
    )
    box = real_page.locator(".timeline canvas").first.bounding_box()
    assert box is not None and op["lead"] > 0
    real_page.mouse.move(box["x"] + op["x"], box["y"] + 22 + 18 + op["row"] * 18 + 9)
    arrow = real_page.evaluate("tracekit.timelines[0].arrow")
    assert arrow is not None and real_page.evaluate("tracekit.timelines[0].hovered.index") == op["index"]
    assert arrow["from"] == pytest.approx(op["from"]) and arrow["to"] == pytest.approx(op["to"])
    tip = real_page.locator(".timeline .tip").first.text_content() or ""
    assert f"before, by {op['thread']}" in tip
    # the arrow is drawn: dark pixels on the overlay half way along it
    middle = [(a + b) / 2 for a, b in zip(arrow["from"], arrow["to"])]
    alpha = real_page.evaluate(
        f"""(t => {{ const r = window.devicePixelRatio || 1;
                    return t.overlay.getContext('2d').getImageData(Math.round({middle[0]} * r) - 2, Math.round({middle[1]} * r) - 2, 5, 5).data
                      .filter((_, i) => i % 4 === 3).reduce((a, b) => Math.max(a, b), 0); }})(tracekit.timelines[0])"""
    )
    assert alpha > 100
    real_page.mouse.move(box["x"] + 5, box["y"] + 5)  # away: the arrow goes
    assert real_page.evaluate("tracekit.timelines[0].arrow") is None


@pytest.mark.shared
def test_each_threads_cuda_api_calls_are_in_the_page(browser, reports):
    """nsys's CUDA API calls (launches, copies, synchronisations) in the page, every one of them (fewer than
    HOST_ROWS) at its time on its thread's calls lane: below the ranges of a thread with NVTX ranges, in a
    group of their own for the threads that only launch (no NVTX range); so each op whose launching call
    is in the trace has a lane its arrow starts from."""
    import tracekit

    if "nsys-2gpu" not in reports:
        pytest.skip(f"{REAL['nsys-2gpu']} is absent")
    page, seen = open_page(browser, reports["nsys-2gpu"])
    shown = page.evaluate(
        """(t => { const calls = {};
                   t.data.lanes.forEach((lane, l) => { if (!lane.calls) return;
                     const run = t.host.runs[l];
                     calls[lane.name] = [];
                     for (let i = run[0]; i < run[1]; i++) calls[lane.name].push([t.host.start[i], t.host.duration[i],
                       t.data.host_names[t.host.name[i]], t.data.host_kinds[t.host.category[i]]]); });
                   return { calls: calls, threads: t.data.threads, origin: t.data.origin_ns }; })(tracekit.timelines[0])"""
    )
    assert seen == NOTHING_SEEN
    page.close()
    trace = tracekit.open_trace(REAL["nsys-2gpu"])
    calls, ranges = trace.launches, trace.ranges
    annotated = set(zip(ranges["pid"], ranges["tid"]))
    expected = {}
    for pid, tid in set(zip(calls["pid"], calls["tid"])):
        rows = calls.loc[(calls["pid"] == pid) & (calls["tid"] == tid)]
        thread = f"pid {pid}" if pid == tid else f"pid {pid} · tid {tid}"
        label = f"{thread} · {'ranges' if (pid, tid) in annotated else 'CUDA API'}"
        starts = rows["start"].to_numpy() - shown["origin"]
        expected[label] = [
            [int(start), int(duration), str(name), "CUDA API"]
            for start, duration, name in zip(starts, rows["duration"], rows["name"].astype(str))
        ]
    assert {label for label in expected if label.endswith("· CUDA API")}  # threads that only launch
    assert {label: sorted(rows) for label, rows in shown["calls"].items()} == {
        label: sorted(rows) for label, rows in expected.items()
    }
    assert shown["threads"] and all(thread["lane"] >= 0 for thread in shown["threads"])


# -- the legend --------------------------------------------------------------------------------------


@pytest.mark.shared
def test_every_colour_drawn_has_a_legend_entry(real_page):
    """Each colour the timeline fills a bar with (kernels, idle causes, phases, host ranges and CPU ops,
    steps), at the whole trace and zoomed in, has a legend entry; every idle cause drawn is named there."""
    legend = real_page.evaluate(
        """Array.from(document.querySelectorAll('.legend span')).map(s => [s.dataset.colour.toLowerCase(), s.textContent])"""
    )
    legend = [tuple(entry) for entry in legend]
    colours = {colour for colour, _ in legend}
    assert len(colours) == len(legend)  # one entry a colour
    real_page.evaluate(
        "(t => { t.zoomTo(t.extent[1] * 0.4, t.extent[1] * 0.41); t.zoomTo(t.extent[0], t.extent[1]); })(tracekit.timelines[0])"
    )
    drawn = set(real_page.evaluate("Array.from(window.plotFills)"))
    assert drawn and drawn <= colours, drawn - colours
    assert HOST_COLOURS["CUDA API"] in drawn and (HOST_COLOURS["CUDA API"], "CUDA API") in legend  # both traces call
    causes = real_page.evaluate("tracekit.timelines[0].data.causes")
    assert causes and set(causes) <= {text for _, text in legend}  # the idle lanes' colours are named


# -- tables --------------------------------------------------------------------------------------------


@pytest.mark.shared
def test_no_element_is_wider_than_the_page(real_page):
    """Nothing runs past the window: a table wider than the page scrolls inside its box, its first column
    staying in place; a long name is cut with an ellipsis and its cell's title holds all of it."""
    assert real_page.evaluate("document.documentElement.scrollWidth") <= 1400
    outside = real_page.evaluate(
        """Array.from(document.querySelectorAll('body *')).filter(e => !e.closest('.table-wrap') || e.matches('.table-wrap'))
             .filter(e => e.getBoundingClientRect().right > innerWidth).map(e => e.tagName + '.' + e.className)"""
    )
    assert outside == []
    cells = real_page.evaluate(
        """Array.from(document.querySelectorAll('td.text:not(.prose)')).map(c =>
             [c.scrollWidth > c.clientWidth + 1, c.title, c.textContent, c.getBoundingClientRect().width])"""
    )
    cut = [(title, text) for is_cut, title, text, _ in cells if is_cut]
    assert cut and all(title == text for title, text in cut)  # every name cut has its whole self on hover
    assert max(width for *_, width in cells) <= 28 * 12 + 2 * 8 + 1  # 28em of 12px and the padding
    # the widest table scrolls in its box; its first column stays at the box's left edge
    moved = real_page.evaluate(
        """() => { const wraps = Array.from(document.querySelectorAll('.table-wrap'));
                   const wrap = wraps.sort((a, b) => b.scrollWidth - a.scrollWidth)[0];
                   if (wrap.scrollWidth <= wrap.clientWidth) return null;
                   const row = wrap.querySelector('tbody tr'), first = row.cells[0], last = row.cells[row.cells.length - 1];
                   const before = [first.getBoundingClientRect().left, last.getBoundingClientRect().left];
                   wrap.scrollLeft = wrap.scrollWidth;
                   return [before, [first.getBoundingClientRect().left, last.getBoundingClientRect().left],
                           wrap.getBoundingClientRect().left]; }"""
    )
    if moved is not None:  # (a page whose tables all fit has nothing to scroll)
        (first_before, last_before), (first_after, last_after), left = moved
        assert first_after == pytest.approx(first_before) == pytest.approx(left, abs=1) and last_after < last_before


# -- findings -------------------------------------------------------------------------------------------


@pytest.mark.shared
def test_the_findings_show_their_bound_and_evidence(real_page, request):
    """Each finding's row holds its bound and the start of its evidence, as `tracekit advise` gives them."""
    import tracekit
    from tracekit.analysis.advice.advise_command import AdviseOptions
    from tracekit.commands import run_command

    advice = run_command(
        "advise", tracekit.open_trace(REAL[request.node.callspec.params["real_page"]]), AdviseOptions()
    )
    findings, evidence = advice.table("findings"), advice.table("evidence")
    assert len(findings) and len(evidence)
    rows = real_page.evaluate(
        """() => { const table = Array.from(document.querySelectorAll('table.sortable'))
                     .find(t => Array.from(t.tHead.rows[0].cells).some(c => c.textContent === 'Finding'));
                   const heads = Array.from(table.tHead.rows[0].cells).map(c => c.textContent);
                   return Array.from(table.tBodies[0].rows).map(r =>
                     Object.fromEntries(heads.map((h, i) => [h, r.cells[i].textContent]))); }"""
    )
    assert [row["Finding"] for row in rows] == findings["Finding"].tolist()
    assert [row["Bound"] for row in rows] == findings["Bound"].tolist()
    for row, rank in zip(rows, findings["Rank"]):
        first = evidence.loc[evidence["Rank"] == rank, "Evidence"]
        assert row["Evidence"].startswith(str(first.iloc[0])) if len(first) else row["Evidence"] == ""
    assert any(row["Evidence"] for row in rows)


# -- pictures ------------------------------------------------------------------------------------------


def test_no_category_chart_of_one_bar(tmp_path):
    """Without phases the category chart would be one bar (the whole trace), what the table beside it says:
    it is not drawn; with a phase it compares two bars and is."""
    from helpers.nsys_builder import ExportBuilder

    pages = {}
    for phased in (False, True):
        b = ExportBuilder("2026.2")
        if phased:
            b.push_pop(0, 9_000, "forward")
        b.kernel(1_000, 2_000, "ampere_sgemm_128x64_tn", launch_at=200)
        b.kernel(3_000, 3_500, "void softmax_warp_forward<float>()", launch_at=300)
        folder = write_report([b.write(tmp_path / f"{phased}.sqlite")], tmp_path / f"report-{phased}", html=True).parent
        pages[phased] = (folder / "report.html").read_text(), sorted(path.name for path in folder.glob("*.png"))
    assert "share of kernel time by category" not in pages[False][0] and "categories.png" not in pages[False][1]
    assert "share of kernel time by category" in pages[True][0] and "categories.png" in pages[True][1]


@pytest.mark.shared
def test_every_picture_in_the_page_compares_something(real_page):
    """The category chart is drawn only where the breakdown table has phases to compare (more than its
    whole-trace row)."""
    rows, charts = real_page.evaluate(
        """() => { const table = Array.from(document.querySelectorAll('table.sortable'))
                     .find(t => t.tHead.rows[0].cells[0].textContent === 'Phase');
                   return [table.tBodies[0].rows.length,
                           Array.from(document.querySelectorAll('figcaption')).filter(c => c.textContent.startsWith('share of kernel time')).length]; }"""
    )
    assert charts == (1 if rows > 1 else 0)
