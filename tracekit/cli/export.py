"""``tracekit export``: a trace's normalized tables as Parquet files (the Python API gives them as
DataFrames: ``tracekit.open_trace(path).gpu_ops``)."""

from __future__ import annotations

import click

from tracekit.cli.common import emit, nsys_option


@click.command("export")
@click.argument("trace", type=click.Path())
@click.option(
    "--parquet",
    "folder",
    required=True,
    type=click.Path(file_okay=False),
    help="folder for gpu_ops.parquet, launches.parquet, ranges.parquet, meta.json",
)
@click.option(
    "--memory",
    "snapshot",
    type=click.Path(dir_okay=False),
    default=None,
    help="also a memory snapshot's events and allocations (default: a run folder's memory.pickle)",
)
@nsys_option
def export(trace, folder, snapshot, nsys):
    """Write TRACE's normalized tables as Parquet files for notebooks."""
    from pathlib import Path

    from tracekit.export import export_parquet
    from tracekit.sources import open_snapshot, open_trace, run_snapshot

    memory = open_snapshot(snapshot) if snapshot else run_snapshot(trace)
    emit(export_parquet(open_trace(trace, nsys), Path(folder), memory), "table", None)
