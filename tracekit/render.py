"""DataFrame -> text for the terminal (table), GitHub Markdown, CSV, JSON; or a Parquet file.

One renderer for every command, so ``--format`` means the same thing everywhere. Table and Markdown
are for people: integers get thousands separators, floats one precision per column (see
``column_decimals``), long names are shortened in the terminal table only. CSV, JSON and Parquet are for programs: values as computed, names whole.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.errors import UsageError

TEXT_FORMATS = ("table", "md", "csv", "json")
FILE_FORMATS = ("parquet",)
FORMATS = TEXT_FORMATS + FILE_FORMATS
# Demangled kernel names run to thousands of characters; a terminal table keeps the start.
TABLE_TEXT_WIDTH = 110


def render(frame: pd.DataFrame, fmt: str = "table", title: str | None = None) -> str:
    """Text of ``frame`` in a text format; ``title`` heads table and md output only."""
    if fmt == "table":
        body = _table(frame)
        return f"{title}\n\n{body}" if title else body
    if fmt == "md":
        body = _markdown(frame)
        return f"**{title}**\n\n{body}" if title else body
    if fmt == "csv":
        return frame.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        return json.dumps([_json_record(record) for record in frame.to_dict(orient="records")], indent=2)
    raise UsageError(f"unknown format {fmt!r}; choose one of {', '.join(TEXT_FORMATS)}")


def write(frame: pd.DataFrame, fmt: str, output: str | Path | None, title: str | None = None) -> str | None:
    """Render to ``output`` (a file) when given, else return the text for standard output."""
    if fmt in FILE_FORMATS:
        if output is None:
            raise UsageError(f"--format {fmt} writes a file: give it with --output PATH")
        _parquet_safe(frame).to_parquet(output, index=False)
        return None
    text = render(frame, fmt, title)
    if output is None:
        return text
    Path(output).write_text(text + "\n")
    return None


def format_cell(value, for_terminal: bool = True, decimals: int = 1) -> str:
    """A value as people read it: 1,234,567 / 12.3 / text (shortened in the terminal).

    ``decimals`` is the float precision chosen for the value's column.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):,.{decimals}f}"
    text = str(value)
    if for_terminal and len(text) > TABLE_TEXT_WIDTH:
        return text[: TABLE_TEXT_WIDTH - 1] + "…"
    return text


def column_decimals(series: pd.Series) -> int:
    """One precision per float column, so its numbers line up: one decimal when the values are
    already rounded to 0.1 (nsys's numbers); otherwise enough decimals for two significant digits of
    the column's smallest non-zero value (2 to 6), or 1 for a column of large numbers."""
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    if len(values) == 0 or np.allclose(values * 10, np.round(values * 10), atol=1e-9):
        return 1
    nonzero = np.abs(values[values != 0])
    smallest = nonzero.min() if len(nonzero) else 1.0
    if smallest >= 1:
        return 1 if np.abs(values).max() >= 100 else 2
    return int(min(6, max(2, math.ceil(-math.log10(smallest)) + 1)))


def _is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype)


def _table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(no rows)"
    headers = [str(column) for column in frame.columns]
    columns = [
        [format_cell(value, decimals=column_decimals(frame[column])) for value in frame[column].tolist()]
        for column in frame.columns
    ]
    widths = [max(len(header), *(len(cell) for cell in cells)) for header, cells in zip(headers, columns)]
    numeric = [_is_numeric(frame[column]) for column in frame.columns]

    def line(cells):
        return "  ".join(
            cell.rjust(width) if right else cell.ljust(width) for cell, width, right in zip(cells, widths, numeric)
        ).rstrip()

    rows = [line(headers), line(["-" * width for width in widths])]
    rows += [line(cells) for cells in zip(*columns)]
    return "\n".join(rows)


def _markdown(frame: pd.DataFrame) -> str:
    headers = [str(column) for column in frame.columns]
    numeric = [_is_numeric(frame[column]) for column in frame.columns]
    rows = [
        "| " + " | ".join(_md_escape(header) for header in headers) + " |",
        "|" + "|".join("---:" if right else ":---" for right in numeric) + "|",
    ]
    decimals = [
        column_decimals(frame[column]) if pd.api.types.is_float_dtype(frame[column].dtype) else 1
        for column in frame.columns
    ]
    for record in frame.itertuples(index=False):
        rows.append(
            "| "
            + " | ".join(
                _md_escape(format_cell(value, for_terminal=False, decimals=places))
                for value, places in zip(record, decimals)
            )
            + " |"
        )
    return "\n".join(rows)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _json_record(record: dict) -> dict:
    clean = {}
    for key, value in record.items():
        if isinstance(value, np.integer):
            value = int(value)
        elif isinstance(value, (float, np.floating)):
            value = None if math.isnan(value) else float(value)
        elif isinstance(value, np.bool_):
            value = bool(value)
        clean[str(key)] = value
    return clean


def _parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Parquet needs string column names and one type per object column."""
    safe = frame.copy()
    safe.columns = [str(column) for column in safe.columns]
    for column in safe.columns:
        if safe[column].dtype == object:
            safe[column] = safe[column].map(lambda value: None if value is None else str(value))
    return safe
