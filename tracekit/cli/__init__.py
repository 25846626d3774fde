"""The ``tracekit`` command: a click group with a module per command group.

Each command parses options, calls one library function and hands its Result to the renderer
(``common.emit``); library errors become one line and exit status 1 (``common.TracekitGroup``).
Importing this package loads click and nothing heavy: pandas, numpy, pyarrow, matplotlib and torch
are imported inside the command that needs them.
"""

from __future__ import annotations

import click

from tracekit import __version__
from tracekit.cli.bench import bench
from tracekit.cli.capture import capture
from tracekit.cli.common import TracekitGroup
from tracekit.cli.many import compare, ranks
from tracekit.cli.memory import memory
from tracekit.cli.report import report
from tracekit.cli.traces import breakdown, diff, export, idle, kernels, launches, overlap, ranges, steps, syncs


@click.group(cls=TracekitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def main():
    """Where a PyTorch training step's GPU time and memory go, from Nsight Systems traces."""


for command in (
    kernels,
    ranges,
    breakdown,
    steps,
    launches,
    idle,
    overlap,
    syncs,
    ranks,
    compare,
    diff,
    memory,
    report,
    export,
    bench,
    capture,
):
    main.add_command(command)
