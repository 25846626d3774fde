"""What every command shares: library errors as one-line messages, --format/--output, rendering."""

from __future__ import annotations

import functools

import click

from tracekit import render
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

    @click.option(
        "--format",
        "fmt",
        type=click.Choice(render.FORMATS),
        default="table",
        show_default=True,
        help="table and md for people; csv, json, parquet (needs --output) for programs",
    )
    @click.option(
        "--output",
        "-o",
        type=click.Path(dir_okay=False),
        default=None,
        help="write to this file instead of standard output",
    )
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


def emit(frame, fmt: str, output: str | None, title: str | None = None) -> None:
    """Render a table to standard output, or to --output."""
    text = render.write(frame, fmt, output, title)
    if text is not None:
        click.echo(text)
