"""``tracekit memory``: the peak of a CUDA memory snapshot, what was live at it, who allocated it."""

from __future__ import annotations

import click

from tracekit.cli.common import emit, output_options


@click.command()
@click.argument("snapshots", nargs=-1, required=True, type=click.Path())
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True, help="rows of the table")
@click.option(
    "--by",
    "by",
    type=click.Choice(["allocation", "frame", "role"]),
    default="allocation",
    show_default=True,
    help="largest live allocations at the peak, their total per allocating frame, or per role (parameters, "
    "optimizer state, gradients, activations, temporaries)",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="write the active-memory timeline picture here (.png or .svg); with --by role, live memory by role over time",
)
@click.option("--compare", is_flag=True, help="two snapshots: peak delta and the frames that grew or shrank")
@click.option("--device", type=click.IntRange(min=0), default=None, help="CUDA device (default: highest peak)")
@output_options
def memory(snapshots, top, by, plot, compare, device, fmt, output):
    """Peak memory of a CUDA memory snapshot (torch.cuda.memory._dump_snapshot pickle, or a run
    folder's memory.pickle): when it happened, what was live, which code allocated it."""
    from tracekit.analysis.memory_tables import compare_snapshots, memory_summary
    from tracekit.sources import open_snapshot

    if compare or len(snapshots) == 2:
        if len(snapshots) != 2:
            raise click.UsageError("--compare takes two snapshots: A B")
        if plot:
            raise click.UsageError("--plot draws one snapshot's timeline: give one snapshot, without --compare")
        emit(compare_snapshots(open_snapshot(snapshots[0]), open_snapshot(snapshots[1]), device, top), fmt, output)
        return
    if len(snapshots) > 1:
        raise click.UsageError("give one snapshot, or two with --compare")
    snapshot = open_snapshot(snapshots[0])
    if plot:
        from tracekit.render.plots import check_picture_path

        check_picture_path(plot)  # before any output, and once the snapshot is known as an input
    result = memory_summary(snapshot, top, by, device, timeline=plot is not None)
    if by == "role":
        from tracekit.runs import Run

        run = Run.at(snapshots[0])
        if run is not None and run.config:
            from workloads.activations import formula_note

            note = formula_note(run.config)
            if note:
                result.notes.append(note)
    emit(result, fmt, output)
    if plot:
        from tracekit.render.plots import save

        save(result.charts["roles" if by == "role" else "timeline"], plot)
        click.echo(f"timeline: {plot}", err=True)
