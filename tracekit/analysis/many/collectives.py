"""``collectives`` over one trace or many: each input's collective kernels (``collectives.rank_record``), put
side by side under one rank label per GPU, matched and split (``collectives.across_ranks``), with the
patterns found (``collectives.patterns``).

A rank is a GPU of an input: with one input holding several GPUs (one export of a node's job), each GPU is a
rank ("cuda:N"); with one GPU per input, each input is (its rank, else its name); otherwise both ("input
cuda:N"). The link a bus bandwidth is held against is the option's, else the GPUs' own where every rank's
GPU is known and they agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tracekit.analysis.collectives.across_ranks import (
    compare_ranks,
    late_table,
    rank_table,
    summary_table,
)
from tracekit.analysis.collectives.collectives_command import CollectivesOptions
from tracekit.analysis.collectives.exchange import exchange_matrix
from tracekit.analysis.collectives.exposure import CoveredPieces
from tracekit.analysis.collectives.patterns import collective_patterns
from tracekit.analysis.collectives.rank_record import RankRecord, rank_record
from tracekit.analysis.hardware.link_bandwidths import Link
from tracekit.analysis.many.inputs import Part
from tracekit.errors import NothingToAnalyseError
from tracekit.model.options import named
from tracekit.model.result import Chart, Result, Table
from tracekit.model.trace import Trace

LATE_TOP = 15


def collectives_part(trace: Trace, part: Part, options: CollectivesOptions, limit: int) -> Part:
    """One input's record (its tables come from the merge: alone it is compared with itself)."""
    record = rank_record(trace, options.step_range)
    part.notes += record.notes
    part.pieces = {"record": record}
    return part


def collectives_table(trace: Trace, options: CollectivesOptions | None = None) -> Result:
    """One trace: its GPUs are the ranks."""
    options = options or CollectivesOptions()
    record = rank_record(trace, options.step_range)
    merger = CollectivesMerger(options, 0)
    merger.add(0, {"record": record})
    label = f"{trace.meta.rank}" if trace.meta.rank is not None else Path(trace.name).name
    tables, notes = merger.tables({0: label}, "Run")
    return Result(tables, record.notes + notes, charts=merger.charts)


class CollectivesMerger:
    """Every input's record, compared across ranks."""

    def __init__(self, options: CollectivesOptions, limit: int):
        self.options = options
        self.records: dict[int, RankRecord] = {}
        self.charts: dict[str, Chart] = {}

    def add(self, index: int, pieces: dict[str, Any]) -> None:
        self.records[index] = pieces["record"]

    def tables(self, labels: dict[int, Any], column: str) -> tuple[list[Table], list[str]]:
        calls, covered, steps, links = self._gathered(labels, column)
        if calls.empty:
            raise NothingToAnalyseError(
                "no collective kernels (NCCL, RCCL, MSCCL) in the input: nothing to compare across ranks"
            )
        compared = compare_ranks(calls, covered)
        notes = list(compared.notes)
        link, link_note = self._link(links)
        if link_note:
            notes.append(link_note)
        summary = summary_table(compared, steps)
        summary["Link (GB/s)"] = link.gb_per_s if link else np.nan
        ranks = rank_table(compared)
        late = late_table(compared, self.options.top or LATE_TOP)
        matrix, exchange_notes = exchange_matrix(compared.calls)
        notes += exchange_notes
        patterns = collective_patterns(compared, ranks, summary, steps, matrix)
        if compared.calls["rank"].nunique() < 2:
            notes.append("one rank: nothing to match across ranks (give every rank's trace to see waits)")
        self.charts = {"waits": _waits_chart(ranks)} if len(ranks) else {}
        return [
            Table("collectives", summary, "Collectives per operation, dtype and group, times summed over every rank"),
            Table("ranks", ranks, "Per rank: waiting for the last peer and transfer"),
            Table("late", late, "The collectives waited on longest"),
            Table("patterns", patterns, "Patterns"),
            *([Table("exchange", matrix, "All-to-all: bytes per sending and receiving rank")] if len(matrix) else []),
        ], notes

    def _gathered(
        self, labels: dict[int, Any], column: str
    ) -> tuple[pd.DataFrame, CoveredPieces, dict[Any, int], dict[str, Link | None]]:
        """Every record's calls with their rank label, the covered pieces owned by the joined rows, each rank's
        steps (0: none) and each rank's link."""
        one_input = len(self.records) == 1
        frames, owners, starts, ends, links = [], [], [], [], {}
        steps: dict[Any, int] = {}
        offset = 0
        for index in sorted(self.records):
            record = self.records[index]
            devices = record.calls["device"].to_numpy()
            several = len(np.unique(devices)) > 1
            name = labels[index]
            # one label per GPU, spread over its calls
            gpus, at = np.unique(devices, return_inverse=True)
            per_gpu = np.asarray([_rank_label(name, int(device), several, one_input) for device in gpus], dtype=object)
            frames.append(record.calls.assign(rank=per_gpu[at.reshape(-1)]))
            owners.append(record.covered.owner + offset)
            starts.append(record.covered.start)
            ends.append(record.covered.end)
            offset += len(record.calls)
            steps.update({_rank_label(name, device, several, one_input): n for device, n in record.steps.items()})
            links.update({_rank_label(name, device, several, one_input): link for device, link in record.links.items()})
        calls = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        join = lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
        return calls, CoveredPieces(join(owners), join(starts), join(ends)), steps, links

    def _link(self, links: dict[str, Link | None]) -> tuple[Link | None, str | None]:
        if self.options.link_bandwidth > 0:
            return Link(f"{named('link_bandwidth')}", float(self.options.link_bandwidth)), None
        known = {link for link in links.values() if link is not None}
        if len(known) == 1 and None not in links.values():
            link = known.pop()
            return link, f"bus bandwidth held against the GPUs' {link.name}: {link.gb_per_s:,.0f} GB/s per direction"
        return None, (
            f"the GPUs' link is unknown (the trace does not name a GPU of the table, or the ranks' differ): give "
            f"{named('link_bandwidth')} to hold bus bandwidth against one"
        )


def _rank_label(name: Any, device: int, several: bool, one_input: bool) -> Any:
    """A rank's label: its GPU in the only input, its input's label, or both."""
    if several:
        return f"cuda:{device}" if one_input else f"{name} cuda:{device}"
    return name


def _waits_chart(ranks: pd.DataFrame) -> Chart:
    """Per rank: its collective time as exposed and hidden wait and transfer (ms)."""
    per_rank = ranks.groupby("Rank", sort=False).agg(
        wait=("Wait (ns)", "sum"),
        transfer=("Transfer (ns)", "sum"),
        exposed_wait=("Exposed Wait (ns)", "sum"),
        exposed_transfer=("Exposed Transfer (ns)", "sum"),
    )
    rows = [
        [
            str(rank),
            exposed_wait / 1e6,
            (wait - exposed_wait) / 1e6,
            exposed_transfer / 1e6,
            (transfer - exposed_transfer) / 1e6,
        ]
        for rank, wait, transfer, exposed_wait, exposed_transfer in zip(
            per_rank.index,
            per_rank["wait"],
            per_rank["transfer"],
            per_rank["exposed_wait"],
            per_rank["exposed_transfer"],
        )
    ]
    return Chart("wait_transfer", "Collective time per rank: waiting for the last peer, and transfer", {"rows": rows})
