"""The Markdown of a report being written: text, tables rendered by the one renderer (each followed
by the tracekit command that reproduces it), and charts saved as PNG files beside report.md."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tracekit.files import write_text
from tracekit.model.result import Chart
from tracekit.render import plots
from tracekit.render.safe_text import printable
from tracekit.render.tables import table_text


class Document:
    """Markdown lines for a report in ``folder``; pictures are named ``<prefix><name>.png``."""

    def __init__(self, folder: Path, prefix: str = ""):
        self.folder, self.prefix = folder, prefix
        self.lines: list[str] = []

    def text(self, *lines: str) -> None:
        """Paragraphs; names quoted in them come from inputs, so control characters are escaped."""
        self.lines += [printable(line) for line in lines] + [""]

    def table(self, frame: pd.DataFrame, command: str | None = None, unit: str = "ms") -> None:
        """A table (time columns in ``unit``), and the command that prints it."""
        self.lines += [table_text(frame, "md", unit=unit), ""]
        if command:
            self.lines += [f"<sub>`{command}`</sub>", ""]

    def picture(self, chart: Chart, name: str, caption: str) -> None:
        file = f"{self.prefix}{name}.png"
        plots.save(chart, self.folder / file)
        self.lines += [f"![{caption}]({file})", ""]

    def extend(self, other: Document) -> None:
        self.lines += other.lines

    def write(self, path: Path) -> Path:
        """report.md, written whole (a temporary file renamed into place)."""
        return write_text(path, "\n".join(self.lines).rstrip() + "\n")
