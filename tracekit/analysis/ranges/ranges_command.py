"""The ``ranges`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.ranges.summary``, many: ``analysis.many.tables``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import OptionError, Options, flag, named, text, whole


@dataclass(frozen=True)
class RangesOptions(Options):
    """``ranges``: nsys's range summary (nvtxsum) plus the GPU work launched inside each range."""

    top: int | None = shared.top(help="only the N range names with the most time")
    tree: bool = flag("one instance of the outermost range as an indented tree", one_input=True)
    root: str | None = text(
        "with {tree}: the range to draw (default: the outermost range with the most time)", one_input=True
    )
    instance: int | None = whole(
        None,
        "with {tree}: which instance, 0-based in time order (default: the one of median duration)",
        minimum=0,
        one_input=True,
    )
    max_depth: int | None = whole(None, "with {tree}: levels below the root", minimum=0, one_input=True)
    within: str | None = text(
        "the children of these ranges, with their share of the parents' CPU and GPU time",
        metavar="SPEC",
        one_input=True,
    )
    raw_names: bool = flag(
        "one row per distinct name, as nsys's nvtxsum (default: emit_nvtx ranges "
        "'aten::mm, seq = 3, op_id = 7' grouped by op; {tree} always shows each range's own name)"
    )
    domain: str | None = shared.domain()
    same_thread: bool = shared.same_thread()
    gpu_side: bool = flag(
        "also each range's GPU time measured on the GPU side: the union of the GPU ops it launched "
        "(GPU Busy), and torch.profiler's GPU-side spans of its name",
        one_input=True,
    )

    def check(self) -> None:
        if self.gpu_side and (self.tree or self.within):
            raise OptionError(
                f"{named('gpu_side')} adds columns to the range table: not with "
                f"{named('tree' if self.tree else 'within')}"
            )


COMMAND = Command(
    "ranges",
    "NVTX ranges of TRACES: nsys's range summary (nvtxsum) plus the GPU work launched inside each.\n\n"
    "Several traces: each one's table with a Rank or Run column, and the summary over all of them.",
    RangesOptions,
    "traces",
    run="tracekit.analysis.ranges.summary:range_summary",
    part="tracekit.analysis.many.tables:ranges_part",
    merger="tracekit.analysis.many.tables:RangesMerger",
    title="range summary",
    doc="""NVTX ranges: nsys's range summary (table "ranges") plus the GPU work launched inside each (``gpu_side``:
also measured on the GPU side, GPU Busy and torch.profiler's GPU-side spans); or one instance as a tree
(``tree``: table "tree"), or the children of the ranges ``within`` matches ("within").""",
    examples=(
        'tracekit.ranges("trace.sqlite", top=10)["ranges"]',
        'tracekit.ranges("trace.sqlite", within="attention")["within"]',
    ),
)
