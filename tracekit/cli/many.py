"""Many inputs: the options that choose where files are read (process pool or Dask), the shared runner
of ``kernels``, ``ranges`` and ``breakdown`` over many files, and the ``ranks`` and ``compare`` commands."""

from __future__ import annotations

import functools
import sys
from typing import Any

import click

from tracekit.cli.common import (
    domain_option,
    drop_last_step_option,
    emit,
    nsys_option,
    ops_option,
    output_options,
    phases_option,
    same_thread_option,
    top_option,
    unit_option,
)

DEFAULT_EXACT_LIMIT = 10_000  # as merge_stats.DEFAULT_EXACT_LIMIT; not imported here: numpy stays unloaded


def many_options(function):
    """--workers, --dask, --scheduler, --strict, --exact-median-limit: for commands that take many inputs."""

    @click.option("--workers", type=click.IntRange(min=1), default=None,
                  help="processes reading files at once (default and at most: one per CPU this process may use; "
                       "with --dask, the LocalCluster's)")  # fmt: skip
    @click.option("--dask", "use_dask", is_flag=True, help="read the files on Dask (a LocalCluster for this command)")
    @click.option("--scheduler", default=None, metavar="ADDRESS",
                  help="read the files on this running Dask scheduler (tcp://host:8786); workers must see the same "
                       "paths; the connection and handshake must complete within 20 s")  # fmt: skip
    @click.option(
        "--strict", is_flag=True, help="stop at the first input that cannot be read (default: report it, go on)"
    )
    @click.option("--exact-median-limit", type=click.IntRange(min=0), default=DEFAULT_EXACT_LIMIT, show_default=True,
                  help="across inputs, a group's median is exact up to this many instances, else from a sketch")  # fmt: skip
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


def is_many(inputs: tuple[str, ...]) -> bool:
    """Several inputs, a glob, or a folder that is not a run folder: the many-inputs path."""
    from tracekit.parallel import names_many

    return len(inputs) != 1 or names_many(inputs[0])


def run_many(command: str, inputs: tuple[str, ...], options: dict[str, Any], many: dict[str, Any], title: str):
    """``command`` over every input on a pool or Dask, with a progress bar on a terminal."""
    from tracekit.analysis.compare import CompareMerger, with_chart
    from tracekit.analysis.many_tables import MERGERS
    from tracekit.analysis.ranks import RanksMerger
    from tracekit.parallel import read_many

    mergers = {**MERGERS, "ranks": RanksMerger, "compare": CompareMerger}
    limit = many["exact_median_limit"]
    merger = mergers[command](options, limit)
    bar = None
    if sys.stderr.isatty():
        bar = click.progressbar(length=0, label="reading", file=sys.stderr)

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.length = total
            bar.update(1)
            if done == total:
                bar.render_finish()

    result = read_many(list(inputs), command, options, merger, title, limit, many["workers"], many["use_dask"],
                       many["scheduler"], many["strict"], progress)  # fmt: skip
    return with_chart(result, merger) if command == "compare" else result


def split_many(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The many-input options taken out of a command's keyword arguments."""
    return {key: kwargs.pop(key) for key in ("workers", "use_dask", "scheduler", "strict", "exact_median_limit")}


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("--step-range", default=None, metavar="NAME",
              help="the range that is one training step (default: ProfilerStep#N, else 'step')")  # fmt: skip
@drop_last_step_option
@top_option
@unit_option()
@nsys_option
@many_options
@output_options
def ranks(inputs, step_range, drop_last_step, top, unit, nsys, fmt, output, **kwargs):
    """Per rank of a distributed job (or per run): step time, GPU busy/idle, compute vs communication,
    NCCL collectives; the slowest and fastest rank, and the kernels that differ most between ranks.

    INPUTS: the ranks' traces (files, globs, or a folder of them)."""
    many = split_many(kwargs)
    options = {"step_range": step_range, "drop_last_step": drop_last_step, "top": top, "nsys": nsys}
    emit(run_many("ranks", inputs, options, many, "ranks compared"), fmt, output, unit)


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@phases_option("the phases: comma-separated range specs (names, paths, globs)")
@click.option("--order-by", default=None, metavar="FIELD",
              help="order runs by this run.json config field (ctx, dtype, compile, model, batch, ...)")  # fmt: skip
@click.option("--picture", type=click.Path(dir_okay=False), default=None, help="also draw the grouped bars to this PNG")
@domain_option
@ops_option
@same_thread_option
@unit_option("ms")
@nsys_option
@many_options
@output_options
def compare(inputs, phases, order_by, picture, domain, ops, same_thread, unit, nsys, fmt, output, **kwargs):
    """Many runs side by side: per run and phase, kernel time (total and per instance) and its split by
    category, ordered by a configuration field; optionally as grouped bars.

    INPUTS: run folders or traces (files, globs, or a folder of runs such as traces/)."""
    many = split_many(kwargs)
    options = {"phases": phases, "order_by": order_by, "domain": domain, "ops": ops, "same_thread": same_thread,
               "nsys": nsys}  # fmt: skip
    result = run_many("compare", inputs, options, many, "runs compared")
    if picture:
        from tracekit.render.plots import save

        if "compare" not in result.charts:
            raise click.ClickException("nothing to draw: no run has kernel time")
        click.echo(f"picture: {save(result.charts['compare'], picture)}", err=True)
    emit(result, fmt, output, unit)
