"""The ``sequences`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.kernels.sequences``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import OptionError, Options, flag, named, text, whole

MAX_SEQUENCE_LENGTH = 64  # kernels in a sliding window: the windows of a million-kernel trace stay in memory


@dataclass(frozen=True)
class SequencesOptions(Options):
    """``sequences``: the kernel sequences a trace repeats (worth fusing), and HolisticTraceAnalysis's per operator."""

    length: int = whole(
        3,
        "kernels in a sequence; with {operator}: the fewest GPU ops an operator instance "
        "launched to count (HolisticTraceAnalysis's min_pattern_len)",
    )
    min_count: int = whole(2, "only sequences seen at least this many times")
    top: int = whole(15, "sequences listed, the most frequent first")
    operator: str | None = text(
        "instead: per outermost operator or range whose name contains NAME, the GPU ops "
        "launched inside it, in GPU order (HolisticTraceAnalysis's "
        "get_frequent_cuda_kernel_sequences)"
    )
    name: str = shared.kernel_name("short", shared.SHORT_NAME_HELP)
    drop_last_step: bool = shared.drop_last_step()
    as_hta: bool = flag(
        "with {operator}: HolisticTraceAnalysis 0.5's instances (only those at the smallest call depth, "
        "the backward thread counted under its step) and GPU rows (stream synchronizations too)"
    )

    def check(self) -> None:
        if self.operator is None and self.length > MAX_SEQUENCE_LENGTH:
            raise OptionError(
                f"{named('length')} is at most {MAX_SEQUENCE_LENGTH} kernels (without "
                f"{named('operator')}), not {self.length}"
            )
        if self.as_hta and self.operator is None:
            raise OptionError(
                f"{named('as_hta')} applies to {named('operator')} (HolisticTraceAnalysis's "
                "sequences start at an operator): give it too"
            )


COMMAND = Command(
    "sequences",
    "The kernel sequences TRACE repeats, the candidates for fusing: runs of {length} consecutive kernels "
    "on a stream seen {min_count} times or more, their time, the gaps between their kernels and the range "
    "they come from. With {operator} NAME, HolisticTraceAnalysis's: the GPU ops each operator named NAME "
    "launched, as a pattern.",
    SequencesOptions,
    "trace",
    run="tracekit.analysis.kernels.sequences:sequences_table",
    unit="us",
    doc="""The kernel sequences a trace repeats ("sequences": runs of ``length`` consecutive kernels on a stream,
their count, time, gaps and origin); with ``operator``, HolisticTraceAnalysis's
get_frequent_cuda_kernel_sequences (per instance of that operator, the GPU ops it launched).""",
    examples=('tracekit.sequences("trace.json.gz", length=4)["sequences"]',),
)
