"""What a tool call does in its own process (``child``): a registry command run as the API runs it
(``run_command``), its Result cut to the rows a reply carries and made into a ``Reply``; or a report
written under ``--out``. The fork server imports this module once, and with it pandas and the renderer.

A Reply holds the tables with their raw values (times in ns, as the API gives them) and each column's unit,
the notes, a short text rendering for the model (the command line's table, in the unit asked for), and the
picture as PNG bytes where one was asked for. Rows past ``max_rows`` are left out, and a note says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tracekit.commands.execute import run_command
from tracekit.mcp.confine import Confinement
from tracekit.mcp.tools import CommandCall
from tracekit.model.result import Result, Table
from tracekit.render import SUFFIX_FORMATS
from tracekit.render.tables import json_records, render_text, write
from tracekit.session import Session, Settings

MAX_TEXT_CHARS = 30_000  # the text for the model; the structured tables carry the rows


@dataclass
class Reply:
    """A tool's answer: ``structured`` (JSON: tables, notes, files written), ``text``, PNG ``images``."""

    structured: dict[str, Any]
    text: str
    images: list[bytes] = field(default_factory=list)


def command_job(call: CommandCall, inputs: list[str], output: str | None, max_rows: int, settings: Settings) -> Reply:
    """``call`` on the resolved ``inputs``; every row written to ``output`` (resolved, under --out) when given."""
    with Session(settings):
        result = run_command(call.command, inputs, call.options, call.many)
        files = (
            [str(path) for path in write(result, SUFFIX_FORMATS[Path(output).suffix.lower()], output, call.unit)]
            if output
            else []
        )
        images, notes = [], []
        if call.picture and call.command.picture is not None:
            chart = next((result.charts[name] for name in call.command.picture.charts if name in result.charts), None)
            if chart is None:
                notes.append(f"no picture: {call.command.picture.missing}")
            else:
                from tracekit.render.plots import png

                images.append(png(chart))
    top = "top" in {item.name for item in fields(call.options)}
    reply = result_reply(call.command.name, result, max_rows, call.unit, files, notes, top)
    reply.images += images
    return reply


def result_reply(
    name: str, result: Result, max_rows: int, unit: str, files: list[str], notes: list[str], top: bool = False
) -> Reply:
    """A Result as a Reply: each table's first ``max_rows`` rows (raw values), a note for each table cut."""
    shown: list[Table] = []
    tables = []
    cut_notes = []
    for table in result.tables:
        frame = table.frame.head(max_rows)
        if len(frame) < len(table.frame):
            hint = "top to rank fewer, " if top else ""
            cut_notes.append(
                f"{table.name}: the first {len(frame):,} of {len(table.frame):,} rows (the server's --max-rows); "
                f"{hint}output=FILE for every row"
            )
        shown.append(Table(table.name, frame, table.title, table.cards))
        tables.append(
            {
                "name": table.name,
                "title": table.title,
                "units": table.units,
                "columns": [str(column) for column in table.frame.columns],
                "rows": json_records(frame),
                "total_rows": len(table.frame),
            }
        )
    all_notes = [*result.notes, *cut_notes, *notes]
    text = render_text(Result(shown, all_notes), "table", unit)
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + f"\n... (text cut at {MAX_TEXT_CHARS:,} characters; the tables hold the rows)"
    structured = {"command": name, "tables": tables, "notes": all_notes, "files": files}
    # JSON as the wire carries it: a value pandas left as an object (a tuple, a Timestamp) becomes text
    return Reply(json.loads(json.dumps(structured, default=str)), text)


def report_job(
    inputs: list[str | Path],
    confinement: Confinement,
    folder: str | None,
    html: bool,
    phases: tuple[str, ...],
    step_range: str | None,
    settings: Settings,
) -> Reply:
    """``tracekit report`` of the resolved ``inputs`` into ``folder`` (resolved, under --out; default:
    reports/<the inputs' names> there): report.md's text, and the files written."""
    from tracekit.report.traces import report_name, write_report

    notes: list[str] = []
    folder = folder or str(confinement.writable(f"reports/{report_name([Path(path) for path in inputs])}"))
    with Session(settings):
        path = write_report(inputs, folder, html=html, phases=phases, step_range=step_range, notes=notes)
    text = path.read_text()
    files = sorted(str(entry) for entry in path.parent.iterdir())
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + f"\n... (cut at {MAX_TEXT_CHARS:,} characters: the whole report is {path})"
    return Reply({"report": str(path), "files": files, "notes": notes}, text)


def listing_job(confinement: Confinement, under: str | None, limit: int) -> Reply:
    """The traces under the roots (``catalog.list_traces``), one line each for the model."""
    from tracekit.mcp.catalog import list_traces

    listing = list_traces(confinement, under, limit)
    lines = [f"{entry['path']}  ({entry['what']}, {entry['bytes']:,} bytes)" for entry in listing["traces"]]
    lines = lines or ["no traces under the server's folders"]
    return Reply(listing, "\n".join(lines + [f"note: {note}" for note in listing["notes"]]))
