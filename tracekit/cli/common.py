"""What every command shares: library errors as one-line messages, the options several commands take
(each defined once, as a decorator), and ``emit``, which hands a Result to the one renderer."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import click

from tracekit.commands.command_line import flag_name
from tracekit.errors import TracekitError, UsageError
from tracekit.model.options import OptionError
from tracekit.render import FILE_FORMATS, FORMATS, SUFFIX_FORMATS, TIME_UNITS
from tracekit.render.safe_text import printable
from tracekit.signals import Interrupted, raising_interrupted

if TYPE_CHECKING:
    from tracekit.model.result import Result


class TracekitGroup(click.Group):
    """Turns library errors and unreadable files into one-line messages instead of tracebacks, and
    SIGTERM into what Ctrl-C does: every command cleans up (files being written removed, the previous
    output kept) and exits with one line."""

    def invoke(self, ctx: click.Context):
        from tracekit.session import Session, Settings

        try:
            # One session per command: its inputs, reading threads and reads ahead end with it; tables are
            # cached while the command goes on, all written before it returns. SIGTERM would otherwise end
            # the process at once, leaving a file or folder being written behind.
            with raising_interrupted(), Session(Settings.from_environment(), write_behind=True, option_name=flag_name):
                return super().invoke(ctx)
        except OptionError as error:  # options that do not fit together: a usage error, as click's own
            raise click.UsageError(printable(str(error))) from None
        except TracekitError as error:  # messages quote names from the input: shown, never obeyed
            raise click.ClickException(printable(str(error))) from None
        except Interrupted as interruption:  # Ctrl-C or SIGTERM: the command cleaned up after itself
            raise click.ClickException(
                f"interrupted ({interruption.name}): nothing half-written is left, and earlier output is as it was"
            ) from None
        except OSError as error:
            where = f": {error.filename}" if error.filename else ""
            raise click.ClickException(f"{error.strerror or error}{where}") from None


def output_options(function):
    """--format and --output, shared by every command that prints tables; the command gets the format
    resolved (``output_format``)."""

    @click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default=None,
        help="table and md for people; csv, json, parquet (needs --output) for programs, with the values "
        "unrounded  [default: the --output file's suffix (.csv .json .parquet .md), else table]",
    )
    @click.option(
        "--output",
        "-o",
        type=click.Path(),
        default=None,
        help="write to this file instead of standard output, in the format its suffix names (csv/parquet of "
        "several tables: one file each, FILE's name + the table's name)",
    )
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        kwargs["fmt"] = output_format(kwargs["fmt"], kwargs["output"])
        return function(*args, **kwargs)

    return wrapper


def output_format(fmt: str | None, output: str | None) -> str:
    """The format to write: ``--format``, else the one ``--output``'s suffix names, else table; a suffix
    that names another format than ``--format`` is a usage error (``-o k.csv --format json``)."""
    implied = SUFFIX_FORMATS.get(os.path.splitext(output)[1].lower()) if output else None
    if fmt is not None and implied is not None and fmt != implied:
        raise click.UsageError(
            f"--output {output} names {implied}, --format says {fmt}: give one of them, or a "
            f"file name that ends in .{fmt}"
        )
    return fmt or implied or "table"


nsys_option = click.option(
    "--nsys",
    "nsys",
    default=None,
    metavar="PATH",
    help="nsys executable, to export an .nsys-rep (default: PATH, then usual install places)",
)


def not_blank(ctx, param, value: str | None) -> str | None:
    """An option given as "" or spaces is a mistake (it would silently mean "not given")."""
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: give a name, or leave the option out")
    return value


def unit_option(default: str = "ns"):
    return click.option(
        "--unit",
        type=click.Choice(TIME_UNITS),
        default=default,
        show_default=True,
        help="unit of the time columns (nsys prints ns)",
    )


def emit(result: Result, fmt: str, output: str | None, unit: str = "ns") -> None:
    """Render a result to standard output, or write it to --output; notes that the chosen format does
    not carry (csv, json, parquet) go to standard error."""
    from tracekit.render.tables import render_text, write

    if output is not None:
        written = write(result, fmt, output, unit)
        if len(written) > 1:
            click.echo(f"wrote {', '.join(str(path) for path in written)}", err=True)
    elif fmt in FILE_FORMATS:
        raise UsageError(f"--format {fmt} writes a file: give it with --output PATH")
    else:
        click.echo(render_text(result, fmt, unit))
    if fmt not in ("table", "md"):
        for note in result.notes:
            click.echo(f"note: {printable(note)}", err=True)
