"""Commands on traces: ``kernels``, ``ranges``, ``breakdown``, ``diff``, ``export``.

A TRACE is an nsys .sqlite export, an .nsys-rep report (exported with nsys, the export kept beside
it), a torch.profiler trace, or a tracekit run folder. ``kernels``, ``ranges`` and ``breakdown`` also
take many: several paths, globs or a folder of them (``cli.many``: per input and over all of them).
"""

from __future__ import annotations

import click

from tracekit.cli.common import (
    domain_option,
    drop_last_step_option,
    emit,
    not_blank,
    nsys_option,
    ops_option,
    output_options,
    phases_option,
    range_option,
    same_thread_option,
    top_option,
    unit_option,
)
from tracekit.cli.many import is_many, many_options, run_many, split_many


@click.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path())
@top_option
@click.option(
    "--name",
    type=click.Choice(["demangled", "short"]),
    default="demangled",
    show_default=True,
    help="group by the full templated name or the base name",
)
@click.option("--by-launch-config", is_flag=True, help="also split by grid and block dimensions (as nsys 2022.4)")
@click.option(
    "--by",
    "by",
    type=click.Choice(["kernel", "category", "type"]),
    default="kernel",
    show_default=True,
    help="one row per kernel, per category (matmul, elementwise, ...), or per kernel type and overlap "
    "(computation, communication, memory, as HolisticTraceAnalysis)",
)
@ops_option
@range_option
@domain_option
@click.option("--per-instance", is_flag=True, help="divide totals and counts by the number of --range instances")
@same_thread_option
@drop_last_step_option
@unit_option()
@nsys_option
@many_options
@output_options
def kernels(
    traces,
    top,
    name,
    by_launch_config,
    by,
    ops,
    ranges,
    domain,
    per_instance,
    same_thread,
    drop_last_step,
    unit,
    nsys,
    fmt,
    output,
    **kwargs,
):
    """Top GPU kernels of TRACES: nsys's kernel summary (gpukernsum), or time per category.

    Several traces (paths, globs, a folder): each one's table with a Rank or Run column, and the
    summary over all of them."""
    if per_instance and not ranges:
        raise click.UsageError("--per-instance divides by the instances of --range: give --range too")
    many = split_many(kwargs)
    if not is_many(traces):
        _read_ahead(traces[0], by, name, by_launch_config, bool(ranges), drop_last_step)
    from tracekit.analysis.kernels import kernel_summary
    from tracekit.sources import open_trace

    if is_many(traces):
        if per_instance:
            raise click.UsageError("--per-instance takes one trace")
        options = dict(by=by, top=top, name=name, by_launch_config=by_launch_config, ops=ops, ranges=list(ranges),
                       same_thread=same_thread, domain=domain, drop_last_step=drop_last_step, nsys=nsys)  # fmt: skip
        emit(run_many("kernels", traces, options, many, f"by {by}"), fmt, output, unit)
        return
    result = kernel_summary(
        open_trace(traces[0], nsys),
        by=by,
        top=top,
        name=name,
        by_launch_config=by_launch_config,
        ops=ops,
        ranges=list(ranges),
        per_instance=per_instance,
        same_thread=same_thread,
        domain=domain,
        drop_last_step=drop_last_step,
    )
    emit(result, fmt, output, unit)


def _read_ahead(trace: str, by: str, name: str, by_launch_config: bool, ranges: bool, drop_last_step: bool) -> None:
    """Start reading the columns the summary uses while the analysis imports (``sources.read_ahead``)."""
    from tracekit.analysis.kernel_columns import NAME_COLUMNS, command_columns
    from tracekit.errors import TracekitError
    from tracekit.sources import trace_file
    from tracekit.sources.read_ahead import read_gpu_ops_ahead

    if name not in NAME_COLUMNS:
        return
    columns = command_columns(by, name, by_launch_config, ranges, drop_last_step)
    try:
        if columns is not None:
            read_gpu_ops_ahead(trace_file(trace), columns)
    except TracekitError:
        return  # the command itself says what is wrong with the input


@click.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path())
@click.option("--top", type=click.IntRange(min=1), default=None, help="only the N range names with the most time")
@click.option("--tree", is_flag=True, help="one instance of the outermost range as an indented tree")
@click.option(
    "--root",
    default=None,
    metavar="NAME",
    help="with --tree: the range to draw (default: the outermost range with the most time)",
)
@click.option(
    "--instance",
    type=click.IntRange(min=0),
    default=None,
    help="with --tree: which instance, 0-based in time order (default: the one of median duration)",
)
@click.option("--max-depth", type=click.IntRange(min=0), default=None, help="with --tree: levels below the root")
@click.option(
    "--within",
    "within",
    default=None,
    metavar="SPEC",
    callback=not_blank,
    help="the children of these ranges, with their share of the parents' CPU and GPU time",
)
@click.option(
    "--raw-names",
    is_flag=True,
    help="one row per distinct name, as nsys's nvtxsum (default: emit_nvtx ranges 'aten::mm, seq = 3, op_id = 7' "
    "grouped by op; a --tree always shows each range's own name)",
)
@domain_option
@same_thread_option
@unit_option()
@nsys_option
@many_options
@output_options
def ranges(
    traces, top, tree, root, instance, max_depth, within, raw_names, domain, same_thread, unit, nsys, fmt, output,
    **kwargs,
):  # fmt: skip
    """NVTX ranges of TRACES: nsys's range summary (nvtxsum) plus the GPU work launched inside each.

    Several traces: each one's table with a Rank or Run column, and the summary over all of them."""
    from tracekit.analysis.ranges import range_summary
    from tracekit.sources import open_trace

    many = split_many(kwargs)
    if is_many(traces):
        if tree or within or root or instance is not None or max_depth is not None:
            raise click.UsageError("--tree, --root, --instance, --max-depth and --within take one trace")
        options = dict(top=top, raw_names=raw_names, domain=domain, same_thread=same_thread, nsys=nsys)
        emit(run_many("ranges", traces, options, many, "range summary"), fmt, output, unit)
        return
    trace_ = open_trace(traces[0], nsys)
    result = range_summary(trace_, top, tree, root, instance, max_depth, within, same_thread, raw_names, domain)
    emit(result, fmt, output, unit)


@click.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path())
@phases_option("the phases: comma-separated range specs (names, paths, globs)")
@domain_option
@ops_option
@same_thread_option
@drop_last_step_option
@unit_option()
@nsys_option
@many_options
@output_options
def breakdown(traces, phases, domain, ops, same_thread, drop_last_step, unit, nsys, fmt, output, **kwargs):
    """Kernel time by category (matmul, elementwise, softmax, ...) per phase, copies beside it, and each
    GPU's busy and idle time. Several traces: each one's tables and the sums over all of them."""
    from tracekit.analysis.breakdown import phase_breakdown
    from tracekit.sources import open_trace

    many = split_many(kwargs)
    if is_many(traces):
        options = dict(phases=phases, domain=domain, ops=ops, same_thread=same_thread, nsys=nsys,
                       drop_last_step=drop_last_step)  # fmt: skip
        emit(run_many("breakdown", traces, options, many, "breakdown"), fmt, output, unit)
        return
    result = phase_breakdown(open_trace(traces[0], nsys), phases, same_thread, ops, domain, drop_last_step)
    emit(result, fmt, output, unit)


@click.command()
@click.argument("trace", type=click.Path())
@top_option
@click.option(
    "--name",
    type=click.Choice(["demangled", "short"]),
    default="demangled",
    show_default=True,
    help="group by the full templated name or the base name",
)
@drop_last_step_option
@unit_option()
@nsys_option
@output_options
def launches(trace, top, name, drop_last_step, unit, nsys, fmt, output):
    """Launch delays of TRACE's kernels, as nsys's kernexecsum: per launching thread, device, API and
    kernel, the launch call's time (API), the wait from the call's end to the kernel's start (queue),
    the kernel's time, and the total."""
    from tracekit.analysis.launch_delays import launch_delays
    from tracekit.sources import open_trace

    emit(launch_delays(open_trace(trace, nsys), name=name, top=top, drop_last_step=drop_last_step), fmt, output, unit)


@click.command()
@click.argument("trace", type=click.Path())
@click.option("--step-range", default=None, metavar="NAME",
              help="the range that is one training step (default: ProfilerStep#N, else 'step')")  # fmt: skip
@click.option("--phases", default="forward,backward,optimizer", show_default=True, metavar="NAME,...",
              help="range names whose time per step gets a column")  # fmt: skip
@click.option("--picture", type=click.Path(dir_okay=False), default=None,
              help="also draw the steps and each GPU's busy time on one time axis (PNG)")  # fmt: skip
@unit_option("ms")
@nsys_option
@output_options
def steps(trace, step_range, phases, picture, unit, nsys, fmt, output):
    """One row per training step of TRACE: wall time, kernels, each GPU's busy and idle time, the time of
    each phase, outliers flagged."""
    from tracekit.analysis.steps import step_table
    from tracekit.sources import open_trace

    names = [name.strip() for name in phases.split(",") if name.strip()]
    result = step_table(open_trace(trace, nsys), step_range, names)
    if picture:
        from tracekit.render.plots import save

        if "timeline" not in result.charts:
            raise click.ClickException("nothing to draw: no GPU work with its launching call in the trace")
        click.echo(f"picture: {save(result.charts['timeline'], picture)}", err=True)
    emit(result, fmt, output, unit)


@click.command()
@click.argument("trace", type=click.Path())
@click.option("--per-step", is_flag=True, help="also one row per step and GPU")
@click.option("--step-range", default=None, metavar="NAME",
              help="with --per-step: the range that is one step (default: ProfilerStep#N, else 'step')")  # fmt: skip
@drop_last_step_option
@unit_option("ms")
@nsys_option
@output_options
def overlap(trace, per_step, step_range, drop_last_step, unit, nsys, fmt, output):
    """Per GPU: communication (NCCL) time, the part computation hid, and the exposed rest."""
    from tracekit.analysis.overlap import overlap_table
    from tracekit.sources import open_trace

    emit(overlap_table(open_trace(trace, nsys), per_step, step_range, drop_last_step), fmt, output, unit)


@click.command()
@click.argument("trace", type=click.Path())
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True, help="longest calls listed")
@unit_option("ms")
@nsys_option
@output_options
def syncs(trace, top, unit, nsys, fmt, output):
    """Blocking host calls of TRACE (synchronize, synchronous memcpy): where they sat, how long the CPU
    waited, and the GPU idle that followed."""
    from tracekit.analysis.syncs import sync_summary
    from tracekit.sources import open_trace

    emit(sync_summary(open_trace(trace, nsys), top), fmt, output, unit)


@click.command()
@click.argument("trace", type=click.Path())
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True, help="longest gaps listed")
@click.option("--per-stream", is_flag=True, help="each stream's gaps (as HolisticTraceAnalysis counts them)")
@click.option(
    "--overhead-max",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    metavar="US",
    help="a gap before a queued op shorter than this is launch overhead (us); longer ones waited on something",
)
@drop_last_step_option
@unit_option("ms")
@nsys_option
@output_options
def idle(trace, top, per_stream, overhead_max, drop_last_step, unit, nsys, fmt, output):
    """Why each GPU of TRACE sat idle: every gap between its busy intervals gets one cause (sync, host not
    launching, launch overhead, other stream or device, dependency not in trace, other)."""
    from tracekit.analysis.idle import idle_by_cause
    from tracekit.sources import open_trace

    result = idle_by_cause(open_trace(trace, nsys), top, per_stream, round(overhead_max * 1000), drop_last_step)
    emit(result, fmt, output, unit)


@click.command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@phases_option("range specs compared besides the whole trace")
@click.option(
    "--by",
    "by",
    type=click.Choice(["category", "kernel", "step"]),
    default=None,
    help="only one table: per phase and category, the kernels that changed most, or step by step",
)
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True, help="kernels listed")
@ops_option
@same_thread_option
@unit_option("ms")
@nsys_option
@output_options
def diff(a, b, phases, by, top, ops, same_thread, unit, nsys, fmt, output):
    """Where GPU time moved from A to B (runs or traces): per phase and category, the kernels that
    changed most, and the memory peak when both runs have a snapshot."""
    from tracekit.analysis.diff import trace_diff
    from tracekit.sources import open_trace, run_snapshots

    first, second = open_trace(a, nsys), open_trace(b, nsys)
    snapshots, notes = run_snapshots([a, b]) if by is None else (None, [])
    result = trace_diff(first, second, phases, by, top, ops, same_thread, snapshots, labels=(a, b))
    result.notes += notes
    emit(result, fmt, output, unit)


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
