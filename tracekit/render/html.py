"""report.html: a report's blocks (``report.document``) as one self-contained page that opens from disk:
the style, the script (``assets/``) and the pictures (SVG, drawn by the code that draws the PNGs) are inlined, a content
security policy forbids every request, and nothing is fetched from a network.

Tables are the renderer's cells (the same formatting as the terminal and Markdown) with each cell's
raw value beside it (``data-value``) for sorting; timelines are the data ``report.timeline_data`` made,
embedded as JSON and drawn by the page's script on a canvas. Every text from an input is escaped for
where it lands (``render.markup``): element text and attributes, the report's Markdown lines, the JSON
inside a script element.
"""

from __future__ import annotations

import io
import re
from html import escape
from importlib import resources
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

from tracekit.model.result import Chart
from tracekit.render.markup import html_inline, script_json
from tracekit.render.safe_text import printable
from tracekit.render.tables import formatted_cells

# Nothing may be fetched: scripts and styles inline, images from data: URIs only.
POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


# Columns of sentences (advise's findings and evidence): they wrap in the page instead of running wide.
PROSE_COLUMNS = frozenset({"What", "Bound", "Fix", "Evidence"})


# The page's script: its parts in order, inlined as one function (report.js last: it starts the page).
SCRIPTS = ("tables.js", "time_axis.js", "timeline.js", "timeline_lanes.js", "report.js")


# Text cells longer than this (characters) may be cut with an ellipsis in the page: they get a title.
TITLED_TEXT = 30


def asset(name: str) -> str:
    return resources.files("tracekit.render").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def report_page(title: str, blocks: list[Any], timelines: list[dict]) -> str:
    """The whole page: title, each trace's timeline, then the report's blocks in order."""
    title = printable(title)
    parts = [f"<h1>{escape(title)}</h1>"]
    for index, data in enumerate(timelines):
        parts.append(timeline_html(index, data))
    for block in blocks:
        if block.kind == "text":
            parts.append(_text(block.content))
        elif block.kind == "table":
            parts.append(table_html(block.content, block.extra))
        elif block.kind == "picture":
            parts.append(_picture(block.content, block.extra))
    body = "\n".join(part for part in parts if part)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        f'<meta name="viewport" content="width=device-width"><title>{escape(title)}</title>'
        f"<style>{asset('report.css')}</style></head><body>\n{body}\n<script>{script()}</script></body></html>\n"
    )


def script() -> str:
    """The page's script: every part of it in one function, so none of its names leaks into the page's."""
    return '(function () {\n"use strict";\n' + "\n".join(asset(name) for name in SCRIPTS) + "\n})();"


def _text(line: str) -> str:
    heading = re.match(r"^(#{1,4}) (.*)$", line)
    if heading:
        if len(heading.group(1)) == 1:
            return ""  # the page's own title
        level = len(heading.group(1))
        return f"<h{level}>{html_inline(heading.group(2))}</h{level}>"
    if line.startswith("> "):
        return f'<p class="note">{html_inline(line[2:])}</p>'
    return f"<p>{html_inline(line)}</p>" if line.strip() else ""


def table_html(frame: pd.DataFrame, command: str = "") -> str:
    """A sortable table: the renderer's cells, each number's raw value in ``data-value``."""
    if frame.empty:
        return "<p>(no rows)</p>"
    headers, columns, right = formatted_cells(frame)
    values = [_sort_values(frame[column]) for column in frame.columns]
    head = "".join(
        f'<th class="{"number" if align else "text"}">{escape(header)}</th>' for header, align in zip(headers, right)
    )
    rows = []
    kinds = [
        "number" if align else "text prose" if header in PROSE_COLUMNS else "text"
        for header, align in zip(headers, right)
    ]
    for row in range(len(frame)):
        cells = []
        for cells_of, raw, kind in zip(columns, values, kinds):
            value = f' data-value="{raw[row]}"' if raw is not None and raw[row] is not None else ""
            text = cells_of[row]
            # a text cell long enough to be cut at its column's width (28em) carries all of it as its title
            title = f' title="{escape(text)}"' if kind == "text" and len(text) > TITLED_TEXT else ""
            cells.append(f'<td class="{kind}"{value}{title}>{escape(text)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    command_line = f'<p class="command"><code>{escape(printable(command))}</code></p>' if command else ""
    return (
        f'<div class="table-wrap"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>{command_line}"
    )


def _sort_values(column: pd.Series) -> list[str | None] | None:
    """A numeric column's values as text for sorting (None for a missing one); None for text columns."""
    if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return None
    numbers = pd.Series(pd.to_numeric(column, errors="coerce")).astype("float64").to_numpy()
    return [None if np.isnan(number) else repr(float(number)) for number in numbers]


def _picture(chart: Chart, caption: str) -> str:
    """The chart as inline SVG (sharp at any zoom, searchable text), drawn by the same code as its PNG."""
    from tracekit.render import plots

    with matplotlib.rc_context({**plots.PLAIN_TEXT, "svg.fonttype": "none"}):  # text stays text
        buffer = io.BytesIO()
        # no RDF metadata: its namespace addresses read like links, though nothing is fetched
        plots.draw(chart).savefig(
            buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None}
        )
    svg = buffer.getvalue().decode("utf-8")
    svg = svg[svg.index("<svg") :]  # without the XML declaration and doctype
    return f'<figure role="img" aria-label="{escape(caption)}">{svg}<figcaption>{escape(caption)}</figcaption></figure>'


def timeline_html(index: int, data: dict) -> str:
    """A trace's timeline: a holder for the canvas, the data as JSON, a legend of every colour it draws."""
    payload = script_json(data)
    legend = "".join(
        f"<b>{escape(group)}</b> "
        + "".join(
            f'<span data-colour="{escape(colour)}"><i style="background:{escape(colour)}"></i>{escape(printable(name))}</span>'
            for name, colour in entries
        )
        for group, entries in legend_entries(data)
        if entries
    )
    notes = [data.get("memory_note"), data.get("host_note")]
    note = "".join(f'<p class="note">note: {escape(printable(text))}</p>' for text in notes if text)
    return (
        f"<h2>Timeline: {escape(printable(data['title']))}</h2>"
        f'<p class="legend">{legend}</p><div class="timeline" id="timeline-{index}"></div>{note}'
        f'<script type="application/json" class="tracekit-timeline" data-target="timeline-{index}">{payload}</script>'
    )


def legend_entries(data: dict) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every colour the timeline of ``data`` draws, by group, with what it means: the phases, kernel
    categories, idle causes and host rows that occur, and the marks (steps, memory, launch arrows) it has."""
    host = data.get("host") or {"category": []}
    kinds = sorted(set(host["category"]))
    marks = data.get("marks", {})
    shown = [
        *(["step", "other step"] if data["steps"]["start"] else []),
        *(["memory allocated", "memory reserved"] if data.get("memory") else []),
        *(["launch arrow"] if any(thread["lane"] >= 0 for thread in data.get("threads", [])) else []),
    ]
    return [
        ("phases", list(zip(data["phases"], data["phase_colours"]))),
        ("kernels", list(zip(data["categories"], data["colours"]))),
        ("idle", list(zip(data["causes"], data["cause_colours"]))),
        ("host", [(data["host_kinds"][kind], data["host_colours"][kind]) for kind in kinds]),
        ("marks", [(mark, marks[mark]) for mark in shown]),
    ]
