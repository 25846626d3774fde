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
@click.option("--html", is_flag=True, help="also report.html: one self-contained page (no network) with each "
              "trace's interactive timeline and sortable tables")  # fmt: skip
@nsys_option
def report(inputs, out, bench_db, html, nsys):
    """Write reports/<name>/report.md with pictures for run folders or traces (several: a comparison too)."""
    if bench_db:
        if inputs:
            raise click.UsageError("--bench reports a results database; give no runs with it")
        from tracekit.report.bench import write_bench_report

        path = write_bench_report(bench_db, out)
    elif not inputs:
        raise click.UsageError("give one or more run folders or traces (or --bench results.db)")
    else:
        from tracekit.report.traces import write_report

        path = write_report(list(inputs), out, nsys, html=html)
    count = len(list(path.parent.glob("*.png")))
    click.echo(f"report: {path}" + (f" ({count} picture{'s' if count != 1 else ''})" if count else ""))
    if html and (path.parent / "report.html").exists():
        click.echo(f"report: {path.parent / 'report.html'}")
