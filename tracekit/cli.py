"""The ``tracekit`` command. Each command parses options, calls one library function, and renders.

Library errors (``TracekitError``) become one line on standard error and exit status 1; nothing here
computes, queries or plots.
"""

from __future__ import annotations

import functools

import click

from tracekit import __version__, render
from tracekit.errors import TracekitError


class TracekitGroup(click.Group):
    """Turns library errors and unreadable files into one-line messages instead of tracebacks."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TracekitError as error:
            raise click.ClickException(str(error)) from None
        except OSError as error:
            where = f": {error.filename}" if error.filename else ""
            raise click.ClickException(f"{error.strerror or error}{where}") from None


def output_options(function):
    """--format and --output, shared by every command that prints a table."""
    @click.option("--format", "fmt", type=click.Choice(render.FORMATS), default="table", show_default=True,
                  help="table and md for people; csv, json, parquet (needs --output) for programs")
    @click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
                  help="write to this file instead of standard output")
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)
    return wrapper


def emit(frame, fmt: str, output: str | None, title: str | None = None) -> None:
    text = render.write(frame, fmt, output, title)
    if text is not None:
        click.echo(text)


nsys_option = click.option("--nsys", "nsys", default=None, metavar="PATH",
                           help="nsys executable, to export an .nsys-rep (default: PATH, then usual install places)")


@click.group(cls=TracekitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def main():
    """Where a PyTorch training step's GPU time and memory go, from Nsight Systems traces."""


@main.command()
@click.argument("trace", type=click.Path())
@click.option("--top", type=click.IntRange(min=1), default=None, help="only the N rows with the most total time")
@click.option("--name", type=click.Choice(["demangled", "short"]), default="demangled", show_default=True,
              help="group by the full templated name or the base name")
@click.option("--by-launch-config", is_flag=True, help="also split by grid and block dimensions (as nsys 2022.4)")
@click.option("--by", "by", type=click.Choice(["kernel", "category"]), default="kernel", show_default=True,
              help="one row per kernel, or per category (matmul, elementwise, ...)")
@click.option("--ops", type=click.Choice(["kernels", "all"]), default="kernels", show_default=True,
              help="kernels only (nsys gpukernsum), or memcpy/memset too")
@nsys_option
@output_options
def kernels(trace, top, name, by_launch_config, by, ops, nsys, fmt, output):
    """Top GPU kernels of TRACE: nsys's kernel summary (gpukernsum), or time per category.

    TRACE is an nsys .sqlite export, an .nsys-rep report (exported with nsys, the export kept beside
    it), or a tracekit run folder.
    """
    from tracekit.analysis.kernels import category_table, kernel_table
    from tracekit.sources import open_trace

    opened = open_trace(trace, nsys)
    if by == "category":
        emit(category_table(opened, ops=ops), fmt, output, f"GPU time by category: {opened.name}")
    else:
        table = kernel_table(opened, top=top, name=name, by_launch_config=by_launch_config, ops=ops)
        emit(table, fmt, output, f"GPU kernels: {opened.name}")


if __name__ == "__main__":
    main()
