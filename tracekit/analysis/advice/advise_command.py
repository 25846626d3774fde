"""The ``advise`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``commands.advice``, many: ``analysis.advice.many``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model.command import Command
from tracekit.model.options import OptionError, Options, named, number, text, whole


@dataclass(frozen=True)
class AdviseOptions(Options):
    """``advise``: findings ranked by the time they could recover, and nsys's expert rules."""

    gap_ms: float = number(
        500, "gpu-starv: list GPU gaps longer than this (ms; nsys's gap option)", unit="ms", metavar="MS"
    )
    threshold: float = number(
        50,
        "gpu-low-util: list chunks of a GPU's span used less than this (%; nsys's threshold option)",
        metavar="PERCENT",
    )
    chunks: int = whole(30, "gpu-low-util: chunks a GPU's span is cut into (1 to 1000; nsys's chunks option)")
    rows: int = whole(50, "rows of each nsys rule's table (nsys's rows option)")
    memory: str | None = text(
        "a CUDA memory snapshot (pickle) to read out-of-memory errors, activations and "
        "fragmentation from (default: a run folder's own)",
        metavar="SNAPSHOT",
        one_input=True,
    )

    def check(self) -> None:
        if not 1 <= self.chunks <= 1000:
            raise OptionError(f"{named('chunks')} must be between 1 and 1000 (nsys's bounds), not {self.chunks}")


COMMAND = Command(
    "advise",
    "What to fix first in TRACE: findings ranked by the time a fix could give back (blocking syncs, "
    "launch-bound stretches, host stalls, pageable and synchronous copies, copies on compute streams, "
    "FP32 matmul, unfused optimizer steps, exposed communication; with a memory snapshot, out-of-memory "
    "errors, activations dominating the peak, fragmentation), each with its evidence and the usual fix; "
    "then nsys's expert "
    "rules (gpu-starv, gpu-low-util, cuda-sync-api, cuda-sync-memcpy, cuda-sync-memset, cuda-async-memcpy) "
    "as nsys analyze reports them. Several traces (the ranks of a job): their findings together, the "
    "straggler rank, and a row per rank.",
    AdviseOptions,
    "traces",
    run="tracekit.commands.advice:advise_with_snapshot",
    part="tracekit.analysis.advice.many:advise_part",
    merger="tracekit.analysis.advice.many:AdviseMerger",
    title="advice",
    unit="ms",
    doc="""What to fix first: "findings" ranked by the time a fix could give back, with their "evidence", then
nsys's expert rules, a table each where they found something (``gap_ms``, ``threshold``, ``chunks``,
``rows``: nsys's options). ``memory``: a snapshot to read memory findings from (default: a run's own).
Several traces (a job's ranks): their findings together, the straggler, and a row per rank ("ranks").""",
    examples=('tracekit.advise("trace.sqlite")["findings"]',),
)
