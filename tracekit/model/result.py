"""``Result``: what an analysis hands to the renderer and to the report.

A result is one or more named tables, notes for the reader, and charts. A table is a DataFrame whose
column names carry their units ("Total Time (ns)", "Size (MiB)", "Time (%)"): the renderer converts
time columns to the unit a user asks for and decides each column's format once. A chart is the data
of a picture and the kind of picture it is; ``tracekit.render.plots`` draws it, so an analysis decides
what to show without importing matplotlib.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

UNIT = re.compile(r"\(([^()]+)\)$")


def column_unit(column: str) -> str | None:
    """The unit a column name ends with: "Total Time (ns)" -> "ns"; None without one."""
    found = UNIT.search(column)
    return found.group(1) if found else None


@dataclass
class Table:
    """One named table: ``name`` is its key in JSON and its file name; ``title`` heads it for people."""

    name: str
    frame: pd.DataFrame
    title: str = ""
    cards: int = 0
    """A terminal shows each row as a card instead (its first ``cards`` columns as a heading, the others
    as labelled, wrapped lines): for rows of sentences. Files are tables whatever this says."""

    @property
    def units(self) -> dict[str, str]:
        """Each column's unit, from its name ("Total Time (ns)" -> "ns"); columns without one left out."""
        return {str(column): unit for column in self.frame.columns if (unit := column_unit(str(column)))}


@dataclass
class Chart:
    """A picture to draw: ``kind`` names the drawing function, one of ``render.plots`` or a command's own as
    "module:function" of (title, data) -> matplotlib Figure; ``data`` its inputs."""

    kind: str
    title: str
    data: dict[str, Any]


@dataclass
class Result:
    """Named tables (in display order), notes, and charts by name."""

    tables: list[Table]
    """The tables, in display order: each a name, a pandas DataFrame of raw values and a title."""
    notes: list[str] = field(default_factory=list)
    """What the figures need said beside them (rows left out, approximations, what a trace lacks)."""
    charts: dict[str, Chart] = field(default_factory=dict)
    """Pictures of the result by name, drawn by the command line (``--plot``, ``--picture``)."""

    @classmethod
    def of(cls, name: str, frame: pd.DataFrame, title: str = "", notes: list[str] | None = None) -> Result:
        """A result of one table."""
        return cls([Table(name, frame, title)], list(notes or []))

    @property
    def frame(self) -> pd.DataFrame:
        """The first table (the only one, for most commands); an empty frame for a result of no table."""
        return self._chosen(None).frame

    def table(self, name: str) -> pd.DataFrame:
        """The table called ``name``; KeyError naming the tables there are otherwise."""
        return self._chosen(name).frame

    @property
    def names(self) -> list[str]:
        """The tables' names, in display order."""
        return [table.name for table in self.tables]

    def __getitem__(self, name: str) -> pd.DataFrame:
        """``result["kernels"]``: the table called ``name``."""
        return self.table(name)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self):
        """The tables' names, in display order (``list(result)``, ``for name in result``, as a mapping)."""
        return iter(self.names)

    def keys(self) -> list[str]:
        """The tables' names, in display order."""
        return self.names

    def to_pandas(self, name: str | None = None) -> pd.DataFrame:
        """The table called ``name`` (default: the first, the command's main table) as a DataFrame of raw
        values; its units are in ``frame.attrs["units"]`` too."""
        table = self._chosen(name)
        frame = table.frame.copy(deep=False)
        frame.attrs["units"] = table.units
        return frame

    def units(self, name: str | None = None) -> dict[str, str]:
        """Column -> unit ("ns", "%", "MiB", ...) of the table called ``name`` (default: the first)."""
        return self._chosen(name).units

    def _chosen(self, name: str | None) -> Table:
        """The table called ``name``, or the first; a result of no table has an empty one (no rows, no
        columns) as its first. KeyError naming the tables there are for a name not among them."""
        if name is None:
            if self.tables:
                return self.tables[0]
            import pandas as pd

            return Table("", pd.DataFrame())
        table = next((t for t in self.tables if t.name == name), None)
        if table is None:
            raise KeyError(f"no table {name!r}; this result has {', '.join(self.names) or 'no tables'}")
        return table
