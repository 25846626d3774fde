"""The timeline's events as columns, before any file format: every decision of what goes where (which track,
which name, which arguments, which arrows) is made once here, by ``tracks``, and each format encodes the same
columns (``json_format`` as Chrome trace-event text, ``perfetto`` as Perfetto's protobuf).

A chunk (``Slices``) is a slice of rows of one table: names and categories as codes into a ``Texts`` table
shared by every chunk of that table (so each distinct text is escaped or interned once per file or sequence,
never once per event), process and track ids, times in integer ns, arguments as columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

MISSING = "?"  # the text of a missing value


class Texts:
    """Distinct texts, the last of them ``MISSING``; ``codes(values)`` gives each value's position."""

    def __init__(self, texts: list[str]):
        self.texts = [*texts, MISSING]

    @cached_property
    def json(self) -> list[str]:
        """Each text as a JSON string literal (quotes and escapes included)."""
        return [json.dumps(text, ensure_ascii=False) for text in self.texts]

    @cached_property
    def utf8(self) -> list[bytes]:
        return [text.encode("utf-8", "surrogatepass") for text in self.texts]


class JsonValues(Texts):
    """Texts that are JSON values (torch.profiler's ``"Input Dims": [[2, 3], []]``): the JSON format writes each
    as the value it is, Perfetto's as its text. Each is the one-line text ``json.dumps`` makes of it (so a
    pretty-printed trace's values hold no line breaks); one that does not parse is a JSON string."""

    def __init__(self, texts: list[str]):
        super().__init__([_json_value(text) for text in texts])

    @cached_property
    def json(self) -> list[str]:
        return [*self.texts[:-1], "null"]  # (a missing value is never written: its ``Arg`` is absent there)


def _json_value(text: str) -> str:
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, allow_nan=False)
    except ValueError:  # (not JSON, or NaN: no JSON value)
        return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class Labels:
    """A text per row: ``codes`` into ``table.texts``."""

    codes: np.ndarray
    table: Texts

    @classmethod
    def of(cls, values: pd.Categorical | pd.Series | np.ndarray | list) -> Labels:
        """The values of a column (a categorical's categories become the table; missing values read "?")."""
        if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
            categorical = pd.Categorical(values)
        elif isinstance(values, pd.Categorical):
            categorical = values
        else:
            categorical = pd.Categorical(np.asarray(values, dtype=object))
        return cls.of_codes(np.asarray(categorical.codes), [str(name) for name in categorical.categories])

    @classmethod
    def of_codes(cls, codes: np.ndarray, texts: list[str]) -> Labels:
        """Codes into ``texts`` (which may repeat a text; -1: missing)."""
        codes = np.asarray(codes, dtype=np.int64)
        return cls(np.where(codes < 0, len(texts), codes), Texts(texts))

    @classmethod
    def constant(cls, text: str, count: int) -> Labels:
        return cls(np.zeros(count, dtype=np.int64), Texts([text]))

    def __getitem__(self, rows: slice | np.ndarray) -> Labels:
        return Labels(self.codes[rows], self.table)

    def __len__(self) -> int:
        return len(self.codes)


Values = np.ndarray | Labels | tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Arg:
    """One argument of a chunk's slices: integers, texts (``Labels``) or a triple of integers ([x, y, z]);
    ``present``: the rows that have it (None: every row); ``decimals`` 3: integers are thousandths, written
    as decimals ("1.234"); ``per_row``: a value each row has its own of (a correlation id, a copy's bytes),
    which an encoder writes row by row rather than among the values rows share (a kernel's grid and block)."""

    name: str
    values: Values
    present: np.ndarray | None = None
    decimals: int = 0
    per_row: bool = False

    def __getitem__(self, rows: slice | np.ndarray) -> Arg:
        values = self.values
        part = tuple(value[rows] for value in values) if isinstance(values, tuple) else values[rows]
        present = None if self.present is None else self.present[rows]
        return Arg(self.name, part, present, self.decimals, self.per_row)


@dataclass(frozen=True)
class Slices:
    """Slices on tracks (a track: ``pid``, ``tid``), times in integer ns. ``flow_in``: the id of the arrow
    that ends at each slice (-1: none); ``flow_out``: (arrows starting at each slice, their ids in row
    order); ``colour``: chrome://tracing's reserved colour names (JSON only: Perfetto colours by name)."""

    category: Labels
    name: Labels
    pid: np.ndarray
    tid: np.ndarray
    start: np.ndarray
    duration: np.ndarray
    args: tuple[Arg, ...] = ()
    flow_in: np.ndarray | None = None
    flow_out: tuple[np.ndarray, np.ndarray] | None = None
    colour: Labels | None = None

    def __len__(self) -> int:
        return len(self.start)

    @property
    def flows(self) -> int:
        """Arrow ends the chunk holds (a start or an end each)."""
        ends = 0 if self.flow_in is None else int((self.flow_in >= 0).sum())
        return ends + (0 if self.flow_out is None else len(self.flow_out[1]))


@dataclass(frozen=True)
class Counters:
    """Counter values on a process: ``series`` name -> integer values (``decimals`` as in ``Arg``) at
    ``times`` (ns); Perfetto draws a track per series, named "<name> <series>"."""

    pid: int
    name: str
    times: np.ndarray
    series: dict[str, np.ndarray]
    decimals: int = 0

    def __len__(self) -> int:
        return len(self.times)


@dataclass(frozen=True)
class Track:
    """A process (``tid`` None) or one of its tracks, its name and place among its siblings; ``thread``: a
    host thread (a real tid, or a lane of one), not a track tracekit made (a GPU stream, the idle gaps, a
    sequence); ``lane_of``: the thread or stream a lane is beside (``track_lanes``), which readers read back."""

    pid: int
    tid: int | None
    name: str
    order: int
    thread: bool = False
    lane_of: int | None = None


@dataclass
class Metadata:
    """The processes and tracks of one input."""

    tracks: list[Track] = field(default_factory=list)

    def __len__(self) -> int:
        return 2 * len(self.tracks)  # a name and a sort index each (Chrome's metadata events)
