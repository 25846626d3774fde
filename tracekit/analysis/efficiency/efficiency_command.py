"""The ``efficiency`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.efficiency.efficiency``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command, Picture
from tracekit.model.options import Options, choice, specs, text


@dataclass(frozen=True)
class EfficiencyOptions(Options):
    """``efficiency``: achieved FLOP/s and bandwidth against the GPU's limits, per operator, kernel, phase or step."""

    by: str = choice(
        "auto",
        ("auto", "op", "kernel", "phase", "step"),
        "one row per CPU operator (aten::mm ...), kernel, phase (forward, backward, optimizer) or step; auto: "
        "per operator where the trace records their shapes, else per kernel",
    )
    top: int | None = shared.top(20, "only the N groups with the most GPU time")
    name: str = shared.kernel_name("short", shared.SHORT_NAME_HELP)
    ranges: tuple[str, ...] = specs(
        (), "only GPU work launched inside these NVTX ranges: a name, a path or a glob; repeatable", repeat=True
    )
    phases: tuple[str, ...] = shared.phases()
    step_range: str | None = shared.step_range()
    drop_last_step: bool = shared.drop_last_step()
    peaks: str | None = text(
        "a JSON file of GPU peaks that corrects or adds GPUs (the format of docs/reference/gpu-peaks.md)", "FILE"
    )


COMMAND = Command(
    "efficiency",
    "How close TRACES' GPU work ran to the hardware's limits: per operator, kernel, phase or step its FLOPs and "
    "bytes, achieved TFLOP/s and TB/s, the roofline's bound for the precision and unit used, the share of the "
    "roofline reached, theoretical occupancy, and what was not known.\n\n"
    "Several traces (paths, globs, a folder): their groups added up, then each one's rows.",
    EfficiencyOptions,
    "traces",
    run="tracekit.analysis.efficiency.efficiency:efficiency_table",
    part="tracekit.analysis.many.efficiency:efficiency_part",
    merger="tracekit.analysis.many.efficiency:EfficiencyMerger",
    picture=Picture(
        "picture",
        "also draw the roofline: each group by its arithmetic intensity and achieved TFLOP/s, under the GPU's roofs",
        ("roofline",),
        "no group has both FLOPs and bytes",
    ),
    report="How close to the hardware",
    doc="""Per group ("efficiency"): Count, Kernels, GPU Time (ns), GFLOP, GB, TFLOP/s, TB/s, FLOP/Byte, Precision,
Unit, Bound, Roofline (%), Occupancy (%), Not Known; "peaks": which GPU each device was taken for, its
memory bandwidth and dense peaks, and the source.""",
    examples=(
        'tracekit.efficiency("trace.json.gz")["efficiency"]',
        'tracekit.efficiency("trace.json.gz", by="kernel")["efficiency"]',
    ),
)
