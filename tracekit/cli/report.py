"""``tracekit report``: runs or traces (or a benchmark database) as a Markdown report with pictures."""

from __future__ import annotations

import click

from tracekit.cli.common import nsys_option


@click.command()
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
@click.option(
    "--html",
    is_flag=True,
    help="also report.html: one self-contained page (no network) with each "
    "trace's interactive timeline and sortable tables",
)
@click.option(
    "--phases",
    default=None,
    metavar="SPECS",
    help="the phases: comma-separated range specs (default: forward, backward and optimizer, found by "
    "their range names)",
)
@click.option(
    "--step-range",
    default=None,
    metavar="NAME",
    help="the range that is one training step (default: ProfilerStep#N, else 'step')",
)
@nsys_option
def report(inputs, out, bench_db, html, phases, step_range, nsys):
    """Write reports/<name>/report.md with pictures for run folders or traces (several: a comparison too)."""
    if bench_db:
        if inputs:
            raise click.UsageError("--bench reports a results database; give no runs with it")
        from tracekit.report.bench import write_bench_report

        path = write_bench_report(bench_db, out)
    elif not inputs:
        raise click.UsageError("give one or more run folders or traces (or --bench results.db)")
    else:
        from tracekit.analysis.ranges.breakdown_command import BreakdownOptions
        from tracekit.model.option_fields import DEFAULT_PHASES
        from tracekit.model.options import OptionError
        from tracekit.render.safe_text import printable
        from tracekit.report.traces import write_report

        try:  # the specs checked before any input is read
            chosen = BreakdownOptions(phases=phases).phases if phases is not None else DEFAULT_PHASES
        except OptionError as error:
            raise click.UsageError(str(error)) from None
        notes: list[str] = []
        path = write_report(list(inputs), out, nsys, html=html, phases=chosen, step_range=step_range, notes=notes)
        for note in notes:
            click.echo(f"note: {printable(note)}", err=True)
    count = len(list(path.parent.glob("*.png")))
    click.echo(f"report: {path}" + (f" ({count} picture{'s' if count != 1 else ''})" if count else ""))
    if html and (path.parent / "report.html").exists():
        click.echo(f"report: {path.parent / 'report.html'}")
