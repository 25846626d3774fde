"""``efficiency`` over many inputs: each trace's groups' sums (``analysis.efficiency.groups.GroupSums``),
added by group into one table, exactly: GPU time, FLOPs, bytes, roofline time, occupancy-weighted time,
wall time and wall time x peak (MFU) all add; the precision, unit, bound and unknown reason of a group are
those with most GPU time over every input. The GPUs of every input are listed once per distinct GPU.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tracekit.analysis.efficiency.efficiency import KEY, measure, peaks_table
from tracekit.analysis.efficiency.efficiency_command import EfficiencyOptions
from tracekit.analysis.efficiency.groups import GroupSums, summary_table
from tracekit.analysis.many.inputs import Part
from tracekit.model.options import named
from tracekit.model.result import Table
from tracekit.model.trace import Trace


def efficiency_part(trace: Trace, part: Part, options: EfficiencyOptions, limit: int) -> Part:
    """One input's table (as alone) and its sums for the merge."""
    measured = measure(trace, options)
    key = KEY[measured.options.by]
    table = summary_table(measured.sums, key)
    part.tables = [Table("efficiency", table.head(options.top) if options.top else table, f"Efficiency: {trace.name}")]
    part.notes += measured.notes + [f"{100 * measured.unknown_share:.1f}% of kernel time has no roofline"]
    part.pieces = {"sums": measured.sums, "key": key, "peaks": peaks_table(trace, measured.devices)}
    return part


class EfficiencyMerger:
    """The groups of every input, their sums added."""

    def __init__(self, options: EfficiencyOptions, limit: int):
        self.top = options.top
        self.sums: list[GroupSums] = []
        self.keys: set[str] = set()
        self.peaks: list[pd.DataFrame] = []

    def add(self, index: int, pieces: dict[str, Any]) -> None:
        self.sums.append(pieces["sums"])
        self.keys.add(pieces["key"])
        self.peaks.append(pieces["peaks"])

    def tables(self, labels: dict[int, Any], column: str) -> tuple[list[Table], list[str]]:
        notes = []
        if len(self.keys) > 1:  # auto chose per operator for some inputs, per kernel for others
            notes.append(
                f"the inputs were grouped differently ({', '.join(sorted(self.keys))}: some record operators' shapes, "
                f"some do not); give {named('by')} to group them alike"
            )
        key = sorted(self.keys)[0]
        table = summary_table(GroupSums.merged(self.sums), key)
        gpus = pd.concat(self.peaks, ignore_index=True).drop(columns=["Device"]).drop_duplicates(ignore_index=True)
        return [
            Table("efficiency", table.head(self.top) if self.top else table, f"Efficiency by {key.lower()}"),
            Table("peaks", gpus, "The GPUs' limits"),
        ], notes
