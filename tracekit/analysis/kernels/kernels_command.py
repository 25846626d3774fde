"""The ``kernels`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.kernels.summary``, many: ``analysis.many.tables``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import OptionError, Options, choice, flag, named, specs


@dataclass(frozen=True)
class KernelsOptions(Options):
    """``kernels``: nsys's kernel summary (gpukernsum), or GPU time per category or kernel type."""

    top: int | None = shared.top()
    name: str = shared.kernel_name()
    by_launch_config: bool = flag("also split by grid and block dimensions (as nsys 2022.4)")
    by: str = choice(
        "kernel",
        ("kernel", "category", "type"),
        "one row per kernel, per category (matmul, elementwise, ...), or per kernel type and overlap "
        "(computation, communication, memory, as HolisticTraceAnalysis)",
    )
    ops: str = shared.ops()
    ranges: tuple[str, ...] = specs(
        (),
        "only GPU ops launched inside these NVTX ranges: a name (forward), a path "
        "(step/backward) or a glob (layer.*); repeatable",
        repeat=True,
    )
    domain: str | None = shared.domain()
    per_instance: bool = flag("divide totals and counts by the number of {ranges} instances", one_input=True)
    same_thread: bool = shared.same_thread()
    drop_last_step: bool = shared.drop_last_step()
    hardware: bool = flag(
        "also each kernel's precision and unit (from its name) and its theoretical occupancy over all its "
        "instances, time-weighted (how close to the GPU's limits: tracekit efficiency)",
        one_input=True,
    )

    def check(self) -> None:
        if self.hardware and self.by != "kernel":
            raise OptionError(f"{named('hardware')} adds columns to the per-kernel table: give {named('by')} kernel")
        if self.per_instance and not self.ranges:
            raise OptionError(
                f"{named('per_instance')} divides by the instances of {named('ranges')}: give {named('ranges')} too"
            )
        if self.per_instance and self.by == "type":
            raise OptionError(
                f"{named('per_instance')} does not apply to {named('by')} type (overlap is not a per-instance sum)"
            )


COMMAND = Command(
    "kernels",
    "Top GPU kernels of TRACES: nsys's kernel summary (gpukernsum), or time per category.\n\n"
    "Several traces (paths, globs, a folder): each one's table with a Rank or Run column, and the "
    "summary over all of them.",
    KernelsOptions,
    "traces",
    run="tracekit.analysis.kernels.summary:kernel_summary",
    part="tracekit.analysis.many.tables:kernels_part",
    merger="tracekit.analysis.many.tables:KernelsMerger",
    title="by {by}",
    prepare="tracekit.commands.read_ahead:kernels_ahead",
    doc="""Top GPU kernels: nsys's kernel summary (table "kernels": Total Time, Instances, Avg, Med, Min, Max,
StdDev in ns, Time (%), Name), or the time per category ("categories") or per kernel type and
overlap ("types"). ``ranges``: only GPU ops launched inside these range specs. Several traces: the
summary over all of them, then "kernels_by_rank" (or "_by_run") with each one's rows.""",
    examples=(
        'tracekit.kernels("trace.sqlite", top=5)["kernels"]',
        'tracekit.kernels("trace.sqlite", by="category", ranges="forward")["categories"]',
    ),
)
