"""The Markdown of a report being written: text, tables rendered by the one renderer (each followed
by the tracekit command that reproduces it), and charts saved as PNG files beside report.md. The same
blocks make report.html (``render.html``): nothing is computed twice. A report folder is written whole
(``write_report_folder``): a previous report is replaced, never mixed with the new one.

Text is Markdown written by the report; what it quotes from the inputs (names, paths, notes, errors)
goes through ``render.markup`` (``md_text``, ``md_code``, ``md_prose``), so no name is ever markup."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from tracekit.files import foreign_entries, replace_folder, write_text
from tracekit.model.result import Chart
from tracekit.render import plots
from tracekit.render.markup import md_code, md_prose
from tracekit.render.safe_text import printable
from tracekit.render.tables import in_unit, table_text

T = TypeVar("T")
# The first words of report.md, one per kind of report: how a folder is known as a previous report.
TRACES_HEADING, BENCH_HEADING = "# tracekit report:", "# Benchmarks:"
REPORT_PAGES = ("report.md", "report.html")


def write_report_folder(folder: str | Path, write_into: Callable[[Path], T]) -> T:
    """``write_into(staging)`` writes a report into a hidden sibling of ``folder``, which then replaces
    ``folder`` whole (``files.replace_folder``). ``folder`` must be absent, empty or a previous report."""
    return replace_folder(folder, write_into, not_a_report, "a tracekit report's")


def not_a_report(folder: Path) -> list[str]:
    """The names in ``folder`` that a tracekit report did not write: anything but report.md, report.html
    and pictures (.png), and, unless the folder is empty, a report.md that does not start with one of
    tracekit's headings (a folder of someone's pictures is not a report)."""
    foreign = foreign_entries(folder, lambda name: name in REPORT_PAGES or name.endswith(".png"))
    if foreign or not any(folder.iterdir()):
        return foreign
    try:
        with open(folder / "report.md", encoding="utf-8", errors="replace") as markdown:
            first = markdown.readline()
    except FileNotFoundError:
        return sorted(entry.name for entry in folder.iterdir())  # pictures without a report
    return [] if first.startswith((TRACES_HEADING, BENCH_HEADING)) else ["report.md"]


class Document:
    """Markdown lines for a report in ``folder``; pictures are named ``<prefix><name>.png``."""

    def __init__(self, folder: Path, prefix: str = ""):
        self.folder, self.prefix = folder, prefix
        self.lines: list[str] = []
        self.blocks: list[Block] = []  # the same content for report.html

    def text(self, *lines: str) -> None:
        """Paragraphs and headings of Markdown, whose quoted names the caller escaped with ``md_text`` or
        ``md_code`` (control characters are escaped here too)."""
        self.lines += [printable(line) for line in lines] + [""]
        self.blocks += [Block("text", printable(line)) for line in lines]

    def note(self, note: str) -> None:
        """A note of tracekit's (plain text, `...` for code, names of the inputs inside) as a quote."""
        self.text(f"> note: {md_prose(note)}")

    def table(
        self, frame: pd.DataFrame, command: str | None = None, unit: str = "ms", page: pd.DataFrame | None = None
    ) -> None:
        """A table (time columns in ``unit``), and the command that prints it; ``page``: the table report.html
        shows instead, where it has room for more columns (advise's findings with their evidence)."""
        self.lines += [table_text(frame, "md", unit=unit), ""]
        if command:
            self.lines += [f"<sub>{md_code(command)}</sub>", ""]
        self.blocks.append(Block("table", in_unit(frame if page is None else page, unit), command or ""))

    def picture(self, chart: Chart, name: str, caption: str) -> None:
        file = f"{self.prefix}{name}.png"
        plots.save(chart, self.folder / file)
        self.lines += [f"![{caption}]({file})", ""]
        self.blocks.append(Block("picture", chart, caption))

    def extend(self, other: Document) -> None:
        self.lines += other.lines
        self.blocks += other.blocks

    def write(self, path: Path) -> Path:
        """report.md, written whole (a temporary file renamed into place)."""
        return write_text(path, "\n".join(self.lines).rstrip() + "\n")

    def write_html(self, path: Path, title: str, timelines: list[dict]) -> Path:
        """report.html: the same blocks as one self-contained page (``render.html``), with ``timelines``."""
        from tracekit.render.html import report_page

        return write_text(path, report_page(title, self.blocks, timelines))


@dataclass(frozen=True)
class Block:
    """One piece of a report: ``text`` (a Markdown line), ``table`` (a DataFrame in its display unit, the
    command that prints it) or ``picture`` (the chart, drawn again as SVG for the page; its caption)."""

    kind: str
    content: Any
    extra: Any = None
