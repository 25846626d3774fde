"""Reads started before a command's input opens: SQLite runs without Python's lock, so an export's
columns are read on a thread while the analysis modules and pandas are still importing."""

from __future__ import annotations

from pathlib import Path

from tracekit.analysis.kernels.columns import command_columns
from tracekit.analysis.kernels.kernels_command import KernelsOptions
from tracekit.analysis.primitives.op_selection import NAME_COLUMNS
from tracekit.errors import TracekitError


def kernels_ahead(path: str | Path, options: KernelsOptions) -> None:
    """Start reading the GPU-op columns ``kernels`` with ``options`` uses (``sources.nsys.read_ahead``)."""
    from tracekit.sources import trace_file
    from tracekit.sources.nsys.read_ahead import read_gpu_ops_ahead

    if options.name not in NAME_COLUMNS:
        return
    columns = command_columns(
        options.by, options.name, options.by_launch_config, bool(options.ranges), options.drop_last_step
    )
    try:
        if columns is not None:
            read_gpu_ops_ahead(trace_file(path), columns)
    except TracekitError:
        return  # the command itself says what is wrong with the input
