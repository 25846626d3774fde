"""The ``tracekit`` command. Each command parses options, calls one library function, and renders.

Library errors (``TracekitError``) become one line on standard error and exit status 1; nothing here
computes, queries or plots.
"""

from __future__ import annotations

import click

from tracekit import __version__
from tracekit.cli_bench import bench
from tracekit.cli_capture import capture
from tracekit.cli_common import TracekitGroup, emit, output_options


nsys_option = click.option(
    "--nsys",
    "nsys",
    default=None,
    metavar="PATH",
    help="nsys executable, to export an .nsys-rep (default: PATH, then usual install places)",
)


@click.group(cls=TracekitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def main():
    """Where a PyTorch training step's GPU time and memory go, from Nsight Systems traces."""


range_option = click.option(
    "--range",
    "ranges",
    multiple=True,
    metavar="SPEC",
    help="only GPU ops launched inside these NVTX ranges: a name (forward), a path "
    "(step/backward) or a glob (layer.*); repeatable",
)
unit_option = click.option(
    "--unit",
    type=click.Choice(["ns", "us", "ms", "s"]),
    default="ns",
    show_default=True,
    help="unit of the time columns (nsys prints ns)",
)
same_thread_option = click.option(
    "--same-thread",
    is_flag=True,
    help="count only ops launched on the range's own thread (nsys nvtx_gpu_proj); "
    "default: any thread of the process, so backward gets autograd's kernels",
)


@main.command()
@click.argument("trace", type=click.Path())
@click.option("--top", type=click.IntRange(min=1), default=None, help="only the N rows with the most total time")
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
    type=click.Choice(["kernel", "category"]),
    default="kernel",
    show_default=True,
    help="one row per kernel, or per category (matmul, elementwise, ...)",
)
@click.option(
    "--ops",
    type=click.Choice(["kernels", "all"]),
    default="kernels",
    show_default=True,
    help="kernels only (nsys gpukernsum), or memcpy/memset too",
)
@range_option
@click.option("--per-instance", is_flag=True, help="divide totals and counts by the number of --range instances")
@same_thread_option
@unit_option
@nsys_option
@output_options
def kernels(trace, top, name, by_launch_config, by, ops, ranges, per_instance, same_thread, unit, nsys, fmt, output):
    """Top GPU kernels of TRACE: nsys's kernel summary (gpukernsum), or time per category.

    TRACE is an nsys .sqlite export, an .nsys-rep report (exported with nsys, the export kept beside
    it), or a tracekit run folder.
    """
    from tracekit.analysis.kernels import category_table, kernel_table
    from tracekit.analysis.stats import in_unit
    from tracekit.sources import open_trace

    if per_instance and not ranges:
        raise click.UsageError("--per-instance divides by the instances of --range: give --range too")
    opened = open_trace(trace, nsys)
    where = f" inside {', '.join(ranges)}" + (" (per instance)" if per_instance else "") if ranges else ""
    if by == "category":
        table = category_table(opened, ops=ops, ranges=list(ranges), per_instance=per_instance, same_thread=same_thread)
        emit(in_unit(table, unit), fmt, output, f"GPU time by category{where}: {opened.name}")
    else:
        table = kernel_table(
            opened,
            top=top,
            name=name,
            by_launch_config=by_launch_config,
            ops=ops,
            ranges=list(ranges),
            per_instance=per_instance,
            same_thread=same_thread,
        )
        emit(in_unit(table, unit), fmt, output, f"GPU kernels{where}: {opened.name}")


@main.command()
@click.argument("trace", type=click.Path())
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
    help="the children of these ranges, with their share of the parents' CPU and GPU time",
)
@same_thread_option
@unit_option
@nsys_option
@output_options
def ranges(trace, top, tree, root, instance, max_depth, within, same_thread, unit, nsys, fmt, output):
    """NVTX ranges of TRACE: nsys's range summary (nvtxsum) plus the GPU work launched inside each."""
    from tracekit.analysis.ranges import range_table, range_tree, range_within
    from tracekit.analysis.stats import in_unit
    from tracekit.sources import open_trace

    opened = open_trace(trace, nsys)
    if tree:
        table, title = range_tree(opened, root, instance, max_depth, same_thread), f"Range tree: {opened.name}"
    elif within:
        table, title = range_within(opened, within, same_thread), f"Inside {within}: {opened.name}"
    else:
        table, title = range_table(opened, same_thread, top), f"NVTX ranges: {opened.name}"
    emit(in_unit(table, unit), fmt, output, title)


@main.command()
@click.argument("trace", type=click.Path())
@click.option(
    "--phases",
    default=",".join(("forward", "backward", "optimizer")),
    show_default=True,
    metavar="SPEC,...",
    help="comma-separated range specs (names, paths, globs)",
)
@same_thread_option
@unit_option
@nsys_option
@output_options
def breakdown(trace, phases, same_thread, unit, nsys, fmt, output):
    """Share of GPU time by category (matmul, elementwise, softmax, ...) per phase, and GPU idle time."""
    from tracekit.analysis.breakdown import breakdown_table
    from tracekit.analysis.stats import in_unit
    from tracekit.sources import open_trace

    opened = open_trace(trace, nsys)
    specs = [spec.strip() for spec in phases.split(",") if spec.strip()]
    emit(
        in_unit(breakdown_table(opened, specs, same_thread), unit),
        fmt,
        output,
        f"GPU time by phase and category: {opened.name}",
    )


@main.command()
@click.argument("snapshots", nargs=-1, required=True, type=click.Path())
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True, help="rows of the table")
@click.option(
    "--by",
    "by",
    type=click.Choice(["allocation", "frame"]),
    default="allocation",
    show_default=True,
    help="largest live allocations at the peak, or their total per allocating frame",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="write the active-memory timeline picture here (.png or .svg)",
)
@click.option("--compare", is_flag=True, help="two snapshots: peak delta and the frames that grew or shrank")
@click.option("--device", type=click.IntRange(min=0), default=None, help="CUDA device (default: highest peak)")
@output_options
def memory(snapshots, top, by, plot, compare, device, fmt, output):
    """Peak memory of a CUDA memory snapshot (torch.cuda.memory._dump_snapshot pickle, or a run
    folder's memory.pickle): when it happened, what was live, which code allocated it."""
    from tracekit.analysis.memory import compare as compare_snapshots, memory_tables
    from tracekit.sources.snapshot import load_snapshot

    if compare or len(snapshots) == 2:
        if len(snapshots) != 2:
            raise click.UsageError("--compare takes two snapshots: A B")
        first, second = (load_snapshot(path) for path in snapshots)
        emit(
            compare_snapshots(first, second, device),
            fmt,
            output,
            f"Memory at the peak: A={snapshots[0]}  B={snapshots[1]}",
        )
        return
    if len(snapshots) > 1:
        raise click.UsageError("give one snapshot, or two with --compare")
    trace = load_snapshot(snapshots[0])
    summary, table, replayed = memory_tables(trace, top, by, device)
    if fmt in ("table", "md"):
        emit(summary, fmt, None, f"Memory snapshot: {trace.source}")
        click.echo()
    heading = "Largest allocations live at the peak" if by == "allocation" else "What holds the memory at the peak"
    emit(table, fmt, output, heading)
    if plot:
        from tracekit.plots import memory_timeline, save

        save(memory_timeline(trace, replayed, min(top, 12)), plot)
        click.echo(f"timeline: {plot}", err=True)


@main.command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@click.option(
    "--phases",
    default="forward,backward,optimizer",
    show_default=True,
    metavar="SPEC,...",
    help="range specs compared besides the whole trace",
)
@click.option(
    "--by",
    "by",
    type=click.Choice(["category", "kernel"]),
    default=None,
    help="only one table (for csv/json): per phase and category, or the kernels that changed most",
)
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True, help="kernels listed")
@click.option(
    "--ops",
    type=click.Choice(["kernels", "all"]),
    default="kernels",
    show_default=True,
    help="kernels only, or memcpy/memset too",
)
@same_thread_option
@nsys_option
@output_options
def diff(a, b, phases, by, top, ops, same_thread, nsys, fmt, output):
    """Where GPU time moved from A to B (runs or traces): per phase and category, the kernels that
    changed most, and the memory peak when both runs have a snapshot."""
    from tracekit.analysis.diff import diff_categories, diff_kernels, diff_memory
    from tracekit.sources import open_trace

    first, second = open_trace(a, nsys), open_trace(b, nsys)
    specs = [spec.strip() for spec in phases.split(",") if spec.strip()]
    if by is None and fmt not in ("table", "md"):
        by = "category"  # machine formats get one table
    if by in (None, "category"):
        emit(
            diff_categories(first, second, specs, ops, same_thread),
            fmt,
            output if by else None,
            f"GPU time by phase and category: A={a}  B={b}",
        )
    if by is None:
        click.echo()
    if by in (None, "kernel"):
        emit(diff_kernels(first, second, top, ops=ops), fmt, output if by else None, "Kernels that changed most")
    memory = diff_memory(a, b) if by is None else None
    if memory is not None:
        click.echo()
        emit(memory, fmt, None, "Memory at the peak")


@main.command()
@click.argument("inputs", nargs=-1, type=click.Path())
@click.option(
    "--output",
    "-o",
    "out",
    type=click.Path(file_okay=False),
    default=None,
    help="report folder (default: reports/<name>)",
)
@click.option(
    "--bench",
    "bench_db",
    type=click.Path(dir_okay=False),
    default=None,
    help="report a `tracekit bench --db` results database instead",
)
@nsys_option
def report(inputs, out, bench_db, nsys):
    """Write reports/<name>/report.md with pictures for run folders or traces (two: a comparison too)."""
    from tracekit.report import write_bench_report, write_report

    if bench_db:
        if inputs:
            raise click.UsageError("--bench reports a results database; give no runs with it")
        path = write_bench_report(bench_db, out)
    elif not inputs:
        raise click.UsageError("give one or more run folders or traces (or --bench results.db)")
    else:
        path = write_report(list(inputs), out, nsys)
    pictures = sorted(picture.name for picture in path.parent.glob("*.png"))
    count = len(pictures)
    click.echo(f"report: {path}" + (f" ({count} picture{'s' if count != 1 else ''})" if count else ""))


@main.command("export")
@click.argument("trace", type=click.Path())
@click.option(
    "--parquet",
    "folder",
    required=True,
    type=click.Path(file_okay=False),
    help="folder for kernels.parquet, launches.parquet, ranges.parquet, meta.json",
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

    from tracekit.export import export_parquet, run_snapshot
    from tracekit.sources import open_trace

    snapshot = Path(snapshot) if snapshot else run_snapshot(trace)
    written = export_parquet(open_trace(trace, nsys), Path(folder), snapshot)
    emit(written, "table", None, f"Wrote {Path(folder)}")


main.add_command(bench)
main.add_command(capture)

if __name__ == "__main__":
    main()
