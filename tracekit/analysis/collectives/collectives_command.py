"""The ``collectives`` command, declared once: its options and ``COMMAND``; the analysis lives apart (many:
``analysis.many.collectives``, over ``analysis.collectives``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command, Picture
from tracekit.model.options import Options, number


@dataclass(frozen=True)
class CollectivesOptions(Options):
    """``collectives``: what each collective moved, how fast, and who waited for whom across ranks."""

    step_range: str | None = shared.step_range()
    top: int | None = shared.top(help="the collectives listed with the most waiting (default 15)")
    link_bandwidth: float = number(
        0.0,
        "the link a collective's bus bandwidth is held against, per direction (0: the GPU's own: NVLink, else "
        "PCIe; give the network's when the job spans nodes)",
        unit="GB/s",
        metavar="GB/S",
    )


COMMAND = Command(
    "collectives",
    "What each collective (NCCL, RCCL) moved and how fast, per operation, dtype and process group: count, bytes, "
    "time, algorithm and bus bandwidth; matched across ranks, each rank's time split into waiting for the last "
    "peer and transfer, and what computation did not hide of each; the ranks that arrived late and why; "
    "patterns worth fixing (a late rank, unbucketed gradient sync, all-to-all, slow transfer).\n\n"
    "INPUTS: one export of every rank (one process per GPU), the ranks' traces (files, globs), or a folder.",
    CollectivesOptions,
    "traces",
    run="tracekit.analysis.many.collectives:collectives_table",
    part="tracekit.analysis.many.collectives:collectives_part",
    merger="tracekit.analysis.many.collectives:CollectivesMerger",
    title="collectives compared",
    picture=Picture(
        "picture",
        "also draw each rank's collective time: waiting for the last peer and transfer, exposed and hidden",
        ("waits",),
        "no collective kernels",
    ),
    report="Collectives across ranks",
    doc="""Per operation, dtype and group ("collectives"), per rank and operation ("ranks"), the collectives
waited on longest with their last rank and cause ("late"), and the patterns found ("patterns").""",
    examples=('tracekit.collectives("job/rank*.json")["ranks"]',),
)
