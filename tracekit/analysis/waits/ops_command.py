"""The ``ops`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.waits.ops``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import Options, whole


@dataclass(frozen=True)
class OpsOptions(Options):
    """``ops``: per CPU operator, its kernels and the delay to the first, as HolisticTraceAnalysis measures it."""

    top: int = whole(15, "operators (and kernel sequences) listed")
    name: str = shared.kernel_name("short", shared.SHORT_NAME_HELP)
    drop_last_step: bool = shared.drop_last_step()


COMMAND = Command(
    "ops",
    "Per CPU operator of TRACE (aten::, from torch.profiler or emit_nvtx): the kernels it launched, their "
    "time, and the delay from its start to its first kernel (launch call, then the GPU), as "
    "HolisticTraceAnalysis measures it; and the kernel sequences each operator launches.",
    OpsOptions,
    "trace",
    run="tracekit.analysis.waits.ops:kernels_per_operator",
    unit="us",
    doc="""Per CPU operator ("ops"): its kernels, their time and the delays to its first kernel; "sequences": the
kernel sequences per operator (HolisticTraceAnalysis's get_aten_op_kernels_and_delay).""",
    examples=('tracekit.ops("trace.json.gz")["ops"]',),
)
