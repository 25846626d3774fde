"""A Result as HTML for a notebook (``_repr_html_``): each table under its title, cells formatted as in
the terminal table (thousands separators, one precision per column), the first rows only for long
tables, then the notes. The DataFrames themselves keep the raw values; this is only how they look."""

from __future__ import annotations

from html import escape

from tracekit.model.result import Result
from tracekit.render.tables import formatted_cells

MAX_ROWS = 50


def result_html(result: Result, max_rows: int = MAX_ROWS) -> str:
    """Every table of ``result`` (its first ``max_rows`` rows) and its notes, as one HTML fragment."""
    parts = []
    for table in result.tables:
        frame = table.frame
        shown = frame.head(max_rows)
        headers, columns, right = formatted_cells(shown)
        head = "".join(f"<th>{escape(header)}</th>" for header in headers)
        rows = "".join(
            "<tr>"
            + "".join(
                f'<td style="text-align:{"right" if align else "left"}">{escape(cell)}</td>'
                for cell, align in zip(cells, right)
            )
            + "</tr>"
            for cells in zip(*columns)
        )
        more = (
            f"<p>… {len(frame) - max_rows:,} more rows: <code>result[{table.name!r}]</code></p>"
            if len(frame) > max_rows
            else ""
        )
        title = escape(table.title or table.name)
        parts.append(
            f"<h4>{title} <small><code>{escape(table.name)}</code></small></h4>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{more}"
        )
    if result.notes:
        parts.append("<ul>" + "".join(f"<li>note: {escape(note)}</li>" for note in result.notes) + "</ul>")
    return "\n".join(parts)
