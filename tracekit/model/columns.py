"""How a table's columns are declared and checked: ``Column``, ``Schema`` (its ``check`` and ``empty``), and the
start/end/duration columns of an interval table; ``schema`` declares the tables themselves with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracekit.errors import InvalidTraceError

if TYPE_CHECKING:
    import pandas as pd

# Sums of durations are int64 (totals, prefix sums): past this they could wrap.
DURATION_SUM_LIMIT = 2**62


@dataclass(frozen=True)
class Column:
    """One column: its dtype (a numpy dtype name, "category", a pandas nullable "Int64", or "text": Python
    strings, held as object (pandas 2) or pandas' string dtype (pandas 3)),
    its unit ("ns", "us", "bytes"; "" for none), the fixed categories of a closed vocabulary, and what it
    holds."""

    name: str
    dtype: str
    unit: str = ""
    doc: str = ""
    categories: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Schema:
    """The declared columns of one table."""

    table: str
    columns: tuple[Column, ...]
    doc: str = ""
    interval: bool = False  # has start/end columns, and end >= start must hold

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def column(self, name: str) -> Column:
        return next(column for column in self.columns if column.name == name)

    def check(self, frame: pd.DataFrame, source: str, partial: bool = False) -> pd.DataFrame:
        """The frame itself when it fills this schema; InvalidTraceError (naming the table, the column
        and what is wrong) when a column is missing, extra, out of order or of another dtype. ``partial``:
        the frame holds some of the columns (in order), as a command that reads only what it uses gets."""
        have = [str(column) for column in frame.columns]
        expected = [name for name in self.names if name in set(have)] if partial else self.names
        if have != expected:
            missing = [name for name in expected if name not in have]
            extra = [name for name in have if name not in self.names]
            what = (
                f"missing {', '.join(missing)}"
                if missing
                else f"unexpected {', '.join(extra)}"
                if extra
                else "columns out of order"
            )
            raise InvalidTraceError(f"{source}: the {self.table} table breaks tracekit's column contract ({what})")
        for column in (column for column in self.columns if column.name in set(have)):
            dtype = frame[column.name].dtype
            if not _dtype_fits(dtype, column.dtype):
                raise InvalidTraceError(
                    f"{source}: {self.table}.{column.name} is {dtype}, the column contract says {column.dtype}"
                )
            if column.categories is not None and tuple(frame[column.name].cat.categories) != column.categories:
                raise InvalidTraceError(
                    f"{source}: {self.table}.{column.name} has categories "
                    f"{list(frame[column.name].cat.categories)}, the contract says {list(column.categories)}"
                )
        if self.interval and len(frame) and ("duration" in have or {"start", "end"} <= set(have)):
            # from start and end when the frame has them: a duration that disagrees with them is not trusted
            durations = (
                frame["end"].to_numpy() - frame["start"].to_numpy()
                if {"start", "end"} <= set(have)
                else frame["duration"].to_numpy()
            )
            bad = durations < 0
            if bad.any():
                raise InvalidTraceError(
                    f"{source}: {int(bad.sum())} rows of {self.table} end before they start; the input is damaged"
                )
            # Totals and prefix sums of durations are int64: a sum past 2^62 ns (146 years) would wrap.
            # Each time is plausible on its own (readers check that), so only a forged file gets here.
            if float(durations.sum(dtype="float64")) >= DURATION_SUM_LIMIT:
                raise InvalidTraceError(
                    f"{source}: the durations in {self.table} add up to more than 2^62 ns (146 years); "
                    "no capture holds that much, the input is damaged"
                )
        return frame

    def empty(self) -> pd.DataFrame:
        """A table of no rows with every declared column and dtype."""
        import pandas as pd

        frame = pd.DataFrame(index=pd.RangeIndex(0))
        for column in self.columns:
            if column.dtype == "category":
                frame[column.name] = pd.Categorical([], categories=list(column.categories or ()))
            elif column.dtype == "text":
                frame[column.name] = pd.Series([], dtype=object)
            else:
                frame[column.name] = pd.Series([], dtype=column.dtype)
        return frame


def _dtype_fits(dtype, declared: str) -> bool:
    if declared == "text":
        import numpy as np
        import pandas as pd

        return dtype == np.dtype(object) or isinstance(dtype, pd.StringDtype)
    return str(dtype) == declared


def times(what: str) -> tuple[Column, ...]:
    return (
        Column("start", "int64", "ns", f"when the {what} started"),
        Column("end", "int64", "ns", f"when the {what} ended (>= start)"),
        Column("duration", "int64", "ns", "end - start"),
    )
