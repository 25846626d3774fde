"""Names that try to be markup (``helpers.hostile``) as kernel, NVTX range, torch.profiler operator and file
names: report.html shows every table and runs its own script and nothing else in Chromium; report.md and
every ``--format md`` table keep them text (checked as text, then rendered by Python-Markdown, which passes
HTML through, and opened in Chromium); the timeline file keeps them exactly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.browser import open_page
from helpers.hostile import HOSTILE_FILE_NAMES, HOSTILE_NAMES, hostile_export, hostile_kineto

from tracekit.render.safe_text import printable
from tracekit.report.traces import write_report

# Each report section lists its 10 top kernels and 15 top ranges: inputs of 7 names show every name.
CHUNKS = [HOSTILE_NAMES[index : index + 7] for index in range(0, len(HOSTILE_NAMES), 7)]
SHOWN = [printable(name) for name in HOSTILE_NAMES]  # as every output for people shows them
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)")
# what a page may hold besides the report's own elements: nothing that runs, loads or restyles
INJECTED = """() => ({
  scripts: document.scripts.length, styles: document.querySelectorAll('style').length - document.querySelectorAll('svg style').length,
  elements: document.querySelectorAll('img, iframe, object, embed, plaintext, textarea, a[href], link').length,
  handlers: Array.from(document.querySelectorAll('*')).filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
  hidden: Array.from(document.querySelectorAll('table')).filter(t => t.offsetParent === null).length,
})"""
CELLS = "() => Array.from(document.querySelectorAll('td, th')).map(cell => cell.textContent)"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """report.md and report.html of the names as nsys kernels and ranges (three inputs of 7 names, one
    page), as torch.profiler operators and kernels (one input), and of one trace named by each file payload."""
    folder = tmp_path_factory.mktemp("hostile")
    made: dict[str, list[str | Path]] = {
        "nsys": [hostile_export(folder / f"names-{index}.sqlite", chunk) for index, chunk in enumerate(CHUNKS)],
        "torch": [hostile_kineto(folder / "ops.json", HOSTILE_NAMES)],
    }
    for index, name in enumerate(HOSTILE_FILE_NAMES):
        made[f"file-{index}"] = [hostile_export(folder / f"{name}.sqlite", ["gemm"])]
    return {key: write_report(inputs, folder / f"report-{key}", html=True) for key, inputs in made.items()}


def table_count(markdown: str) -> int:
    return len(re.findall(r"^\|[-: |]+\|$", markdown, re.M))  # the line under each table's header


def check_markdown(markdown: str) -> None:
    """No name's "<" or ">" outside a code span (whose content no renderer takes for markup), and every row
    of a table with as many cell separators as its header."""
    outside = CODE_SPAN.sub("", markdown).replace("<sub>", "").replace("</sub>", "")
    outside = re.sub(r"^> ", "", outside, flags=re.M)  # the report's notes are quotes
    assert "<" not in outside and ">" not in outside, [line for line in outside.splitlines() if "<" in line]
    for table in re.findall(r"(?:^\|.*\|$\n?)+", markdown, re.M):
        separators = {len(re.findall(r"(?<!\\)\|", line)) for line in table.splitlines()}
        assert len(separators) == 1, table


def rendered(markdown: str, path: Path) -> Path:
    """``markdown`` as a page by Python-Markdown, which passes raw HTML through as GitHub's renderer does not."""
    markdown_module = pytest.importorskip("markdown", reason="Python-Markdown is not installed (the docs extra)")
    pictures = re.compile(r"^!\[[\w ,;'-]+\]\([\w-]+\.png\)$", re.M)  # the report's own PNGs, not loaded here
    assert len(pictures.findall(markdown)) == markdown.count("![")
    html = markdown_module.markdown(pictures.sub("", markdown), extensions=["tables"])
    path.write_text(f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{html}</body></html>')
    return path


@pytest.mark.parametrize("key", ["nsys", "torch"])
def test_every_name_is_text_in_the_page(browser, reports, key):
    markdown = reports[key].read_text()
    page, seen = open_page(browser, (reports[key].parent / "report.html").resolve())
    assert seen == {"errors": [], "requests": [], "dialogs": []}
    assert page.evaluate("document.querySelectorAll('table.sortable').length") == table_count(markdown) >= 9
    inputs = 3 if key == "nsys" else 1  # the page's script and each input's timeline data
    assert page.evaluate(INJECTED) == {"scripts": 1 + inputs, "styles": 1, "elements": 0, "handlers": 0, "hidden": 0}
    if key == "nsys":  # (the torch.profiler reader cuts kernels' base names at "<" or "(")
        cells = set(page.evaluate(CELLS))
        assert [name for name in SHOWN if name not in cells] == []  # each name is a table cell of its own
    timelines = page.evaluate("tracekit.timelines.map(t => t.data.names)")
    assert sorted(name for names in timelines for name in names) == sorted(SHOWN)
    painted = page.evaluate(
        """() => tracekit.timelines.map(t => { const c = t.canvas, data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                                                let n = 0; for (let i = 3; i < data.length; i += 4) n += data[i] > 0; return n; })"""
    )
    assert len(painted) == len(timelines) and min(painted) > 1_000  # the page's own script drew every timeline
    page.close()


@pytest.mark.parametrize("key", [f"file-{index}" for index in range(len(HOSTILE_FILE_NAMES))])
def test_a_file_name_is_text_in_the_page(browser, reports, key):
    name = HOSTILE_FILE_NAMES[int(key.split("-")[1])]
    markdown = reports[key].read_text()
    check_markdown(markdown)
    page, seen = open_page(browser, (reports[key].parent / "report.html").resolve())
    assert seen == {"errors": [], "requests": [], "dialogs": []}
    assert page.evaluate("document.querySelectorAll('table.sortable').length") == table_count(markdown) >= 10
    assert page.evaluate(INJECTED) == {"scripts": 2, "styles": 1, "elements": 0, "handlers": 0, "hidden": 0}
    headings = page.evaluate("() => Array.from(document.querySelectorAll('h2, p')).map(e => e.textContent)")
    assert any(heading.endswith(f"{name}.sqlite") for heading in headings)  # the input's heading, as it is
    assert any(text.startswith("Trace /") and f"/{name}.sqlite: Nsight" in text for text in headings)
    commands = page.evaluate("() => Array.from(document.querySelectorAll('p.command')).map(e => e.textContent)")
    assert commands and all(name in command for command in commands)
    page.close()


@pytest.mark.parametrize("key", ["nsys", "torch", "file-0", "file-2"])
def test_report_md_keeps_every_name_text(browser, reports, key, tmp_path):
    """report.md: no name is markup as written, nor once rendered by a renderer that passes HTML through."""
    markdown = reports[key].read_text()
    check_markdown(markdown)
    page, seen = open_page(browser, rendered(markdown, tmp_path / "report-md.html"), wait_for=None)
    assert seen == {"errors": [], "requests": [], "dialogs": []}
    assert page.evaluate("document.querySelectorAll('table').length") == table_count(markdown)
    assert page.evaluate(INJECTED) == {"scripts": 0, "styles": 0, "elements": 0, "handlers": 0, "hidden": 0}
    if key == "nsys":
        cells = set(page.evaluate(CELLS))
        assert [name for name in SHOWN if name not in cells] == []  # as written: no emphasis, link or entity
    page.close()


@pytest.mark.parametrize(
    ("command", "source", "prefix"),
    [
        (["kernels"], hostile_export, ""),
        (["ranges"], hostile_export, ""),
        (["ranges", "--domain", "cpu_op"], hostile_kineto, "cpu_op:"),
    ],  # torch.profiler's operators
    ids=["kernels", "ranges", "operators"],
)
def test_md_tables_keep_every_name_text(browser, cli, command, source, prefix, tmp_path):
    """``--format md`` and ``-o x.md``: the same text, no name markup as written nor once rendered."""
    trace = source(tmp_path / ("names.sqlite" if source is hostile_export else "names.json"), HOSTILE_NAMES)
    printed = cli(*command, trace, "--format", "md")
    assert printed.exit_code == 0, printed.output
    written = tmp_path / "table.md"
    assert cli(*command, trace, "-o", written).exit_code == 0
    assert written.read_text() == printed.stdout
    check_markdown(printed.stdout)
    page, seen = open_page(browser, rendered(printed.stdout, tmp_path / "table.html"), wait_for=None)
    assert seen == {"errors": [], "requests": [], "dialogs": []}
    assert page.evaluate(INJECTED) == {"scripts": 0, "styles": 0, "elements": 0, "handlers": 0, "hidden": 0}
    cells = set(page.evaluate(CELLS))
    assert [name for name in SHOWN if prefix + name not in cells] == []
    page.close()


def test_the_timeline_file_keeps_every_name(cli, tmp_path):
    """Chrome trace events are data: JSON that reads back the names exactly (Perfetto shows them as text)."""
    export = hostile_export(tmp_path / "names.sqlite", HOSTILE_NAMES)
    written = tmp_path / "timeline.json"
    assert cli("timeline", export, "-o", written).exit_code == 0
    events = json.loads(written.read_text())["traceEvents"]
    names = {event.get("name") for event in events}
    assert set(HOSTILE_NAMES) <= names
