"""The one renderer: a ``Result`` (one or more tables, notes) as terminal text, GitHub Markdown, CSV,
JSON or Parquet, on standard output or in files.

Table and Markdown are for people: integers get thousands separators (not ids: PID, TID, Device,
Stream), floats one precision per column, long names are shortened in the terminal only. CSV, JSON
and Parquet are for programs: values as computed, names whole. Each column's format is decided once
(``column_format``) and applied to the whole column, so rendering is linear in the rows. Time columns
("... (ns)") are converted to the unit asked for here, and only here.

Several tables: table/md/json print them all (JSON as one object keyed by table name); CSV on
standard output prints each after a "# <name>" line; with ``--output out.csv`` (or .parquet) each
table gets its own file, ``out.<name>.csv``. Every file is written whole: to a temporary name first,
then renamed.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from tracekit.errors import UsageError
from tracekit.files import check_target, write_together
from tracekit.model.result import Result, column_unit
from tracekit.render import FILE_FORMATS, FORMATS, TEXT_FORMATS
from tracekit.render.markup import md_prose, md_text
from tracekit.render.safe_text import printable, spreadsheet_safe

UNIT_SCALE = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
# Demangled kernel names run to thousands of characters; a terminal table keeps the start.
TABLE_TEXT_WIDTH = 110


def in_unit(frame: pd.DataFrame, unit: str) -> pd.DataFrame:
    """Time columns "... (ns)" converted to ``unit`` (ns, us, ms, s) and renamed to say so."""
    if unit not in UNIT_SCALE:
        raise UsageError(f"unknown unit {unit!r}; choose one of {', '.join(UNIT_SCALE)}")
    if unit == "ns":
        return frame
    converted = {}
    renames = {}
    for column in frame.columns:
        if isinstance(column, str) and column_unit(column) == "ns":
            converted[column] = frame[column].astype(float) / UNIT_SCALE[unit]
            renames[column] = column[: -len("(ns)")] + f"({unit})"
    return frame.assign(**converted).rename(columns=renames) if converted else frame


@dataclass(frozen=True)
class ColumnFormat:
    """How one column prints: its kind (int, id, float, bool, text, mixed), float decimals, alignment."""

    kind: str
    decimals: int
    right: bool

    def cells(self, series: pd.Series, for_terminal: bool) -> list[str]:
        """Every value of the column as text, in one pass."""
        values = series.tolist()
        if self.kind == "id":
            return ["" if pd.isna(value) else str(int(value)) for value in values]
        if self.kind == "int" and not series.hasnans:
            return [f"{value:,}" for value in values]
        if self.kind == "float":
            places = self.decimals
            rounded = half_away(series.to_numpy(dtype=float), places).tolist()
            return ["" if value != value else f"{value:,.{places}f}" for value in rounded]  # NaN != NaN
        return [_cell(value, for_terminal, self.decimals) for value in values]


def half_away(values: np.ndarray, places: int) -> np.ndarray:
    """``values`` rounded to ``places`` decimals, halves away from zero as nsys (SQLite's round) prints
    them; formatting alone would round them to even."""
    scale = 10.0**places
    return np.sign(values) * np.floor(np.abs(values) * scale + 0.5) / scale


# Units whose figures print with a fixed precision, as nsys prints them: shares and nanosecond statistics.
FIXED_DECIMALS = {"%": 1, "ns": 1}
MAX_DECIMALS = {"MiB": 3}  # sizes to the KiB: a few bytes' difference is not worth six decimals
# Integer columns that name a process, thread, GPU or stream: printed as the ids other tools show
# (nsys, ps, the evidence's "pid 5738"), never "5,738".
IDENTIFIERS = frozenset({"PID", "TID", "Device", "Stream"})


def table_formats(frame: pd.DataFrame) -> list[ColumnFormat]:
    """Every column's format, with one precision per unit across the table (so a row does not print
    one time with 5 decimals and the next with 6): a fixed one for shares and ns, else the finest any
    column of that unit needs."""
    formats = [
        ColumnFormat("id", 0, True)
        if column in IDENTIFIERS and pd.api.types.is_integer_dtype(frame[column].dtype)
        else column_format(frame[column])
        for column in frame.columns
    ]
    by_unit: dict[str, list[int]] = {}
    for index, column in enumerate(frame.columns):
        unit = column_unit(str(column))
        if unit and formats[index].kind in ("float", "mixed"):
            by_unit.setdefault(unit, []).append(index)
    for unit, indexes in by_unit.items():
        finest = max(formats[index].decimals for index in indexes)
        decimals = FIXED_DECIMALS.get(unit, min(finest, MAX_DECIMALS.get(unit, finest)))
        for index in indexes:
            formats[index] = replace(formats[index], decimals=decimals)
    return formats


def column_format(series: pd.Series) -> ColumnFormat:
    """Decide a column's format from all its values at once."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return ColumnFormat("bool", 1, False)
    if pd.api.types.is_integer_dtype(dtype):
        return ColumnFormat("int", 1, True)
    if pd.api.types.is_float_dtype(dtype):
        return ColumnFormat("float", column_decimals(series), True)
    return ColumnFormat("mixed", column_decimals(series), False)


def column_decimals(series: pd.Series) -> int:
    """One precision per float column, so its numbers line up: one decimal when the values are
    already rounded to 0.1 (nsys's numbers); otherwise enough decimals for two significant digits of
    the column's smallest non-zero value (2 to 6), or 1 for a column of large numbers."""
    # A Series in gives a Series out; to_numeric is annotated with every input kind's result.
    values = cast(pd.Series, pd.to_numeric(series, errors="coerce")).to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    if len(values) == 0 or np.allclose(values * 10, np.round(values * 10), atol=1e-9):
        return 1
    nonzero = np.abs(values[values != 0])
    smallest = nonzero.min() if len(nonzero) else 1.0
    if smallest >= 1:
        return 1 if np.abs(values).max() >= 100 else 2
    return int(min(6, max(2, math.ceil(-math.log10(smallest)) + 1)))


def _csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells made printable and spreadsheet-safe; numbers untouched. Headers too."""
    text_columns = [column for column in frame.columns if not pd.api.types.is_numeric_dtype(frame[column].dtype)]
    safe = (
        frame.assign(
            **{
                str(column): frame[column].map(
                    lambda value: value if not isinstance(value, str) else spreadsheet_safe(printable(value))
                )
                for column in text_columns
            }
        )
        if text_columns
        else frame
    )
    return safe.rename(columns=lambda column: spreadsheet_safe(printable(str(column))))


def _cell(value, for_terminal: bool, decimals: int) -> str:
    """One value of a column of mixed types (text with blanks, numbers stored as objects)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        return f"{float(half_away(np.asarray(float(value)), decimals)):,.{decimals}f}"
    text = printable(str(value))
    if for_terminal and len(text) > TABLE_TEXT_WIDTH:
        return text[: TABLE_TEXT_WIDTH - 1] + "…"
    return text


def formatted_cells(frame: pd.DataFrame) -> tuple[list[str], list[list[str]], list[bool]]:
    """Headers, each column's cells as people read them (whole texts), and which align right."""
    return _formatted(frame, for_terminal=False)


def _formatted(frame: pd.DataFrame, for_terminal: bool) -> tuple[list[str], list[list[str]], list[bool]]:
    headers = [printable(str(column)) for column in frame.columns]
    formats = table_formats(frame)
    cells = [fmt.cells(frame[column], for_terminal) for fmt, column in zip(formats, frame.columns)]
    return headers, cells, [fmt.right for fmt in formats]


def terminal_table(frame: pd.DataFrame) -> str:
    """Aligned columns for a terminal."""
    if frame.empty:
        return "(no rows)"
    headers, columns, right = _formatted(frame, for_terminal=True)
    widths = [
        max(len(header), max((len(cell) for cell in cells), default=0)) for header, cells in zip(headers, columns)
    ]

    def line(cells) -> str:
        return "  ".join(
            cell.rjust(width) if align else cell.ljust(width) for cell, width, align in zip(cells, widths, right)
        ).rstrip()

    rows = [line(headers), line(["-" * width for width in widths])]
    rows += [line(cells) for cells in zip(*columns)]
    return "\n".join(rows)


def terminal_cards(frame: pd.DataFrame, heading: int, width: int = 110) -> str:
    """Each row as a card: its first ``heading`` columns on one line, then every other column as a
    labelled line wrapped to ``width`` (rows whose cells are sentences read better so than in columns)."""
    import textwrap

    if frame.empty:
        return "(no rows)"
    headers, columns, _ = _formatted(frame, for_terminal=False)
    label = max(len(header) for header in headers[heading:]) + 2 if len(headers) > heading else 0
    cards = []
    for cells in zip(*columns):
        lines = ["  ".join(cell for cell in cells[:heading] if cell)]
        for header, cell in zip(headers[heading:], cells[heading:]):
            if cell:
                lines += textwrap.wrap(
                    cell, width, initial_indent="  " + f"{header}:".ljust(label), subsequent_indent=" " * (label + 2)
                ) or [f"  {header}:"]
        cards.append("\n".join(lines))
    return "\n\n".join(cards)


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub Markdown table (numbers right-aligned); every cell and header is text, never markup. A table
    of no rows reads "(no rows)", as in a terminal and report.html (a header alone read as a table)."""
    if frame.empty:
        return "(no rows)"
    headers, columns, right = _formatted(frame, for_terminal=False)
    rows = [
        "| " + " | ".join(md_text(header) for header in headers) + " |",
        "|" + "|".join("---:" if align else ":---" for align in right) + "|",
    ]
    columns = [cells if align else _md_cells(cells) for cells, align in zip(columns, right)]  # numbers need none
    rows += ["| " + " | ".join(cells) + " |" for cells in zip(*columns)]
    return "\n".join(rows)


def _md_cells(cells: list[str]) -> list[str]:
    """A text column's cells as Markdown text, each distinct text escaped once (names repeat)."""
    escaped = {cell: md_text(cell) for cell in set(cells)}
    return [escaped[cell] for cell in cells]


def json_records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts: numpy numbers as Python numbers, NaN and <NA> as null."""
    records = []
    for record in frame.to_dict(orient="records"):
        clean = {}
        for key, value in record.items():
            if isinstance(value, np.integer):
                value = int(value)
            elif isinstance(value, (float, np.floating)):
                value = None if math.isnan(value) else float(value)
            elif isinstance(value, np.bool_):
                value = bool(value)
            elif value is pd.NA:
                value = None
            clean[str(key)] = value
        records.append(clean)
    return records


def table_text(frame: pd.DataFrame, fmt: str, title: str = "", unit: str = "ns", cards: int = 0) -> str:
    """One table in a text format; ``title`` heads table and md output only; ``cards``: a terminal shows
    its rows as cards with that many heading columns (``Table.cards``)."""
    frame = in_unit(frame, unit)
    title = printable(title)
    if fmt == "table":
        body = terminal_cards(frame, cards) if cards else terminal_table(frame)
        return f"{title}\n\n{body}" if title else body
    if fmt == "md":
        return f"**{md_text(title)}**\n\n{markdown_table(frame)}" if title else markdown_table(frame)
    if fmt == "csv":
        return _csv_frame(frame).to_csv(index=False).rstrip("\n")
    if fmt == "json":
        return json.dumps(json_records(frame), indent=2)
    raise UsageError(f"unknown format {fmt!r}; choose one of {', '.join(TEXT_FORMATS)}")


def render_text(result: Result, fmt: str, unit: str = "ns") -> str:
    """The whole result as text. Notes follow the tables in table/md (csv and json leave them to the
    caller, for standard error)."""
    if fmt not in TEXT_FORMATS:
        raise UsageError(f"--format {fmt} writes a file: give it with --output PATH")
    if fmt == "json" and len(result.tables) != 1:  # (a result of no table: {}, still JSON)
        return json.dumps({table.name: json_records(in_unit(table.frame, unit)) for table in result.tables}, indent=2)
    if fmt == "csv" and len(result.tables) > 1:
        return "\n\n".join(f"# {table.name}\n{table_text(table.frame, 'csv', unit=unit)}" for table in result.tables)
    text = "\n\n".join(table_text(table.frame, fmt, table.title, unit, table.cards) for table in result.tables)
    if fmt in ("table", "md") and result.notes:
        shown = md_prose if fmt == "md" else printable
        text += ("\n\n" if text else "") + "\n".join(f"note: {shown(note)}" for note in result.notes)
    return text


def output_paths(result: Result, fmt: str, output: str | Path) -> dict[str, Path]:
    """Where ``write`` puts each table: all in ``output`` for table/md/json (and csv/parquet of one
    table), else one file per table, ``<stem>.<name><suffix>`` beside ``output`` (or
    ``<name>.<fmt>`` inside it when ``output`` is a folder)."""
    folder = Path(output).is_dir() or str(output).endswith(os.sep)
    output = Path(output)
    if len(result.tables) <= 1 or fmt not in ("csv", *FILE_FORMATS):  # (no table: one empty file)
        return {"": output}
    if folder:
        return {table.name: output / f"{table.name}.{fmt}" for table in result.tables}
    suffix = output.suffix or f".{fmt}"
    return {table.name: output.with_name(f"{output.stem}.{table.name}{suffix}") for table in result.tables}


def write(result: Result, fmt: str, output: str | Path, unit: str = "ns") -> list[Path]:
    """Write the result to ``output`` (see ``output_paths``); returns the files written."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    paths = output_paths(result, fmt, output)
    for path in paths.values():
        check_target(path)  # every file's folder before any table is rendered
    files = []
    for name, path in paths.items():
        part = Result([result.tables[result.names.index(name)]]) if name else result
        files.append((path, _writer(part, fmt, unit)))
    write_together(files)  # a file per table: all new, or (interrupted) all as they were
    return list(paths.values())


def _writer(part: Result, fmt: str, unit: str) -> Callable[[Path], object]:
    """What writes ``part`` in ``fmt`` into a (temporary) file, rendered when it is called."""
    if fmt in FILE_FORMATS:
        return lambda temporary: _parquet(in_unit(part.frame, unit)).to_parquet(temporary, index=False)
    return lambda temporary: temporary.write_text(render_text(part, fmt, unit) + "\n")


def _parquet(frame: pd.DataFrame) -> pd.DataFrame:
    """Parquet needs string column names and one type per object column."""
    safe = frame.copy()
    safe.columns = [str(column) for column in safe.columns]
    for column in safe.columns:
        if safe[column].dtype == object:
            safe[column] = safe[column].map(lambda value: None if value is None else str(value))
    return safe
