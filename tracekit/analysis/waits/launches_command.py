"""The ``launches`` command, declared once: its options and ``COMMAND``; the analysis lives apart (one input:
``analysis.waits.launches``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracekit.model import option_fields as shared
from tracekit.model.command import Command
from tracekit.model.options import Options


@dataclass(frozen=True)
class LaunchesOptions(Options):
    """``launches``: launch delays as nsys's kernexecsum."""

    top: int | None = shared.top()
    name: str = shared.kernel_name()
    drop_last_step: bool = shared.drop_last_step()


COMMAND = Command(
    "launches",
    "Launch delays of TRACE's kernels, as nsys's kernexecsum: per launching thread, device, API and "
    "kernel, the launch call's time (API), the wait from the call's end to the kernel's start (queue), "
    "the kernel's time, and the total.",
    LaunchesOptions,
    "trace",
    run="tracekit.analysis.waits.launches:launch_delays",
    doc="""Launch delays as nsys's kernexecsum (table "launches"): per launching thread, device, API and kernel,
the launch call's time, the queue wait from the call's end to the kernel's start, and the kernel's.""",
    examples=('tracekit.launches("trace.sqlite", name="short", top=10)["launches"]',),
)
