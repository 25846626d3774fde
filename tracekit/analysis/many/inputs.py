"""Many traces at once: each input becomes a ``Part`` and the parts fold into one Result.

A Part is what one file contributes: its own tables (exactly what the command prints for that file
alone, ``top`` applied), its notes, and small mergeable pieces (per-group counts, sums, minima,
maxima, M2 and median samples or sketches; see ``merge_stats``). Nothing of the trace itself travels:
a part of a 1M-kernel export is a few hundred KB, so a pool or a Dask cluster can read the files and
send parts back to one client, whose memory then grows with the aggregates, not with the traces.

The folded Result holds the aggregate tables over every input first, then each per-input table with a
``Rank`` column (when every input names a distinct rank: torch.profiler's distributedInfo, or a
``rank<N>`` in the file name) or a ``Run`` column (the run folder's or file's name).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from tracekit.model.result import Result, Table

RANK, RUN = "Rank", "Run"


@dataclass
class Part:
    """One input's contribution: ``tables`` as printed for it alone, ``pieces`` for the merge."""

    source: str
    label: str
    rank: int | None = None
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pieces: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class Failure:
    """An input that could not be read, and the one-line reason."""

    source: str
    reason: str

    def where(self) -> str:
        """The reason, led by the input's path where it does not already start with it."""
        return self.reason if self.reason.startswith(self.source) else f"{self.source}: {self.reason}"


class Merger(Protocol):
    """Folds the pieces of one command's parts, one part at a time, into aggregate tables."""

    def add(self, index: int, pieces: dict[str, Any]) -> None: ...

    def tables(self, labels: dict[int, Any], column: str) -> tuple[list[Table], list[str]]: ...


class Accumulator:
    """Parts in, one Result out; parts may arrive in any order (``index`` is the input's position)."""

    def __init__(self, merger: Merger, title: str):
        self.merger = merger
        self.title = title
        self.parts: dict[int, Part] = {}  # without their tables and pieces: small
        self.per_input: dict[str, list[tuple[int, pd.DataFrame]]] = {}
        self.titles: dict[str, str] = {}
        self.failures: list[tuple[int, Failure]] = []

    def add(self, index: int, part: Part | Failure) -> None:
        if isinstance(part, Failure):
            self.failures.append((index, part))
            return
        self.merger.add(index, part.pieces)
        for table in part.tables:
            self.per_input.setdefault(table.name, []).append((index, table.frame))
            self.titles.setdefault(table.name, table.title)
        self.parts[index] = Part(part.source, part.label, part.rank, notes=part.notes, config=part.config)

    def label_column(self) -> tuple[str, dict[int, Any]]:
        """``Rank`` with each input's rank when every input has a distinct one, else ``Run`` with names."""
        ranks = {index: part.rank for index, part in self.parts.items()}
        if ranks and None not in ranks.values() and len(set(ranks.values())) == len(ranks):
            return RANK, ranks
        return RUN, {index: part.label for index, part in self.parts.items()}

    def result(self) -> Result:
        column, labels = self.label_column()
        order = sorted(self.parts, key=lambda index: (labels[index], index))
        aggregate, notes = self.merger.tables(labels, column) if order else ([], [])
        tables = list(aggregate)
        for name, frames in self.per_input.items():
            labelled = []
            for index, frame in sorted(frames, key=lambda item: (labels[item[0]], item[0])):
                frame = frame.copy()
                frame.insert(0, column, labels[index])
                labelled.append(frame)
            title = self.titles[name].rsplit(":", 1)[0]
            tables.append(
                Table(
                    f"{name}_by_{column.lower()}",
                    pd.concat(labelled, ignore_index=True),
                    f"{title}, per {column.lower()}",
                )
            )
        read = len(self.parts)
        kind = ("rank" if column == RANK else "input") + ("s" if read != 1 else "")
        notes.insert(0, f"{read} {kind} read" + (f", {len(self.failures)} could not be" if self.failures else ""))
        notes += [
            failure.reason if failure.reason.startswith(failure.source) else f"{failure.source}: {failure.reason}"
            for _, failure in sorted(self.failures, key=lambda item: item[0])
        ]  # a reader's message often names the file already
        notes += _common_notes(self.parts, labels, column)
        if tables:
            tables[0].title = f"{tables[0].title} ({self.title} over {read} {kind})"
        return Result(tables, notes, charts=dict(getattr(self.merger, "charts", {})))


def _common_notes(parts: dict[int, Part], labels: dict[int, Any], column: str) -> list[str]:
    """Each input's notes: a note every input has once, the others with the input they come from."""
    counts: dict[str, int] = {}
    for part in parts.values():
        for note in dict.fromkeys(part.notes):
            counts[note] = counts.get(note, 0) + 1
    shared = [note for note, count in counts.items() if count == len(parts)]
    own = [
        f"{column.lower()} {labels[index]}: {note}"
        for index, part in sorted(parts.items())
        for note in dict.fromkeys(part.notes)
        if counts[note] < len(parts)
    ]
    return shared + own
