"""The ``ranks`` command, declared once: its options and ``COMMAND``; the analysis lives apart (many:
``analysis.many.ranks``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import Options


@dataclass(frozen=True)
class RanksOptions(Options):
    """``ranks``: per rank of a distributed job (or per run), steps, busy/idle, compute vs communication."""

    step_range: str | None = shared.step_range()
    drop_last_step: bool = shared.drop_last_step()
    top: int | None = shared.top(help="kernels listed that differ most between ranks (default 15)")


COMMAND = Command(
    "ranks",
    "Per rank of a distributed job (or per run): step time, GPU busy/idle, compute vs communication, "
    "NCCL collectives; the slowest and fastest rank, and the kernels that differ most between ranks.\n\n"
    "INPUTS: the ranks' traces (files, globs, or a folder of them).",
    RanksOptions,
    "many",
    part="tracekit.analysis.many.ranks:ranks_part",
    merger="tracekit.analysis.many.ranks:RanksMerger",
    title="ranks compared",
    doc="""Per rank of a distributed job (or per run): step time, busy/idle, compute vs communication (table
"ranks"), their spread, the collectives per rank and the kernels that differ most between ranks.""",
    examples=('tracekit.ranks("job/rank*.sqlite")["ranks"]',),
)
