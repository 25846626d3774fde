"""The analysis commands of the command line, derived from the registry (``tracekit.commands``): each
command's arguments from what it takes, its options from its options dataclass (a field becomes a
flag: ``same_thread`` -> ``--same-thread``), then ``--unit``, ``--nsys``, the many-input options, a
picture where it draws one, and ``--format``/``--output``. The command itself: click -> options ->
registry -> renderer; nothing else happens here.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import Field
from typing import Any

import click

from tracekit.cli.common import (
    TracekitGroup,
    emit,
    flag_name,
    not_blank,
    nsys_option,
    output_format,
    output_options,
    unit_option,
)
from tracekit.commands.registry import COMMANDS, Command, installed_commands
from tracekit.errors import TracekitError, UsageError
from tracekit.model.option_fields import ManyOptions
from tracekit.model.options import Declared, OptionError, declared_fields, default_of, help_text

# What each kind of input is called on the command line (the argument's name and how many).
ARGUMENTS = {
    "traces": [("traces", -1)],
    "trace": [("trace", 1)],
    "pair": [("a", 1), ("b", 1)],
    "many": [("inputs", -1)],
    "snapshots": [("snapshots", -1)],
}
MANY_FIELDS = [item.name for item, _ in declared_fields(ManyOptions)]


def click_option(item: Field, declared: Declared) -> click.Option:
    """The click option of one declared field, under the field's own name."""
    name, default = item.name, default_of(item)
    settings: dict[str, Any] = {"help": help_text(declared, flag_name)}
    if declared.kind == "flag":
        settings.update(is_flag=True, default=False)
    elif declared.kind == "choice":
        settings.update(
            type=click.Choice([str(choice) for choice in declared.choices if choice is not None]),
            default=default,
            show_default=default is not None,
        )
    elif declared.kind in ("int", "float"):
        minimum = declared.minimum
        kind = (
            click.IntRange(min=int(minimum))
            if declared.kind == "int" and minimum is not None
            else (click.FloatRange(min=minimum) if minimum is not None else (int if declared.kind == "int" else float))
        )
        settings.update(type=kind, default=default, show_default=default is not None)
    elif declared.kind == "text":
        settings.update(default=None, callback=not_blank)
    elif declared.kind == "any text":
        settings.update(default=None)
    elif declared.kind == "specs" and declared.repeat:
        settings.update(multiple=True, callback=_each_not_blank)
    elif declared.kind == "specs":
        settings.update(default=",".join(default), show_default=True, callback=_spec_list)
    if declared.metavar:
        settings["metavar"] = declared.metavar
    return click.Option([flag_name(name), name], **settings)


def _each_not_blank(ctx, param, values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(not_blank(ctx, param, value) or "" for value in values)


def _spec_list(ctx, param, value: str) -> list[str]:
    """A comma-separated list of specs, split once here (an empty list is an error, not the default)."""
    from tracekit.model.range_specs import split_specs

    try:
        return split_specs(value)
    except UsageError as error:
        raise click.BadParameter(str(error)) from None


def analysis_command(command: Command) -> click.Command:
    """The click command of a registry command."""
    params: list[click.Parameter] = [
        click.Argument([name], nargs=count, required=True, type=click.Path())
        for name, count in ARGUMENTS[command.inputs]
    ]
    params += [click_option(item, declared) for item, declared in declared_fields(command.options) if declared.cli]
    if command.picture is not None:
        params.append(
            click.Option(
                [command.picture.flag, "picture"],
                type=click.Path(dir_okay=False),
                default=None,
                help=command.picture.described(),
            )
        )
    if command.inputs != "snapshots":
        params += _params_of(unit_option(command.unit), nsys_option)
    if command.takes_many:
        params += [click_option(item, declared) for item, declared in declared_fields(ManyOptions)]
    params += _params_of(output_options)

    def callback(**values: Any) -> None:
        _run(command, values)

    return click.Command(command.name, params=params, callback=callback, help=command.described())


def _params_of(*decorators) -> list[click.Parameter]:
    """The click parameters that option decorators (``common``'s shared ones) add, in order."""

    def holder() -> None: ...

    for decorate in reversed(decorators):
        holder = decorate(holder)
    return list(reversed(getattr(holder, "__click_params__", [])))


def _run(command: Command, values: dict[str, Any]) -> None:
    """click's values -> options -> the registry's command -> the renderer (and the picture)."""
    from tracekit.commands.execute import run_command
    from tracekit.session import overriding

    inputs = [values.pop(name) for name, _ in ARGUMENTS[command.inputs]]
    inputs = list(inputs[0]) if len(inputs) == 1 and isinstance(inputs[0], tuple) else inputs
    output, unit = values.pop("output"), values.pop("unit", "ns")
    fmt = output_format(values.pop("fmt"), output)
    nsys, picture = values.pop("nsys", None), values.pop("picture", None)
    many = ManyOptions(**{name: values.pop(name) for name in MANY_FIELDS if name in values})
    if picture and command.picture is not None and command.picture.needs:
        values[command.picture.needs] = True
    try:
        options = command.options(**values)
    except OptionError as error:
        raise click.UsageError(str(error)) from None
    if picture:
        _check_picture(command, inputs, picture)
    with overriding(**({"nsys": nsys} if nsys else {})):
        result = run_command(command, inputs, options, many, _progress_bar())
    chart = None
    if picture and command.picture is not None:
        chart = next((result.charts[name] for name in command.picture.charts if name in result.charts), None)
        if chart is None:
            raise click.ClickException(command.picture.missing)
    emit(result, fmt, output, unit)
    if chart is not None:
        from tracekit.render.plots import save

        click.echo(f"picture: {save(chart, picture)}", err=True)


def _check_picture(command: Command, inputs: list[str], picture: str) -> None:
    """Before any input is read: the picture's file can be written, and is none of the inputs."""
    from tracekit.files import protect
    from tracekit.render.plots import check_picture_path

    if command.inputs == "snapshots" and len(inputs) != 1:
        raise click.UsageError(
            f"{command.picture.flag if command.picture else ''} draws one snapshot's timeline: "
            "give one snapshot, without --compare"
        )
    protect(*(path for path in inputs if os.path.isfile(path)))
    check_picture_path(picture)


def _progress_bar():
    """A progress bar on standard error (a terminal only) for commands over many inputs."""
    if not sys.stderr.isatty():
        return None
    bar = click.progressbar(length=0, label="reading", file=sys.stderr)

    def progress(done: int, total: int) -> None:
        bar.length = total
        bar.update(1)
        if done == total:
            bar.render_finish()

    return progress


ANALYSES = [analysis_command(command) for command in COMMANDS.values()]


class CommandsGroup(TracekitGroup):
    """The ``tracekit`` group: its own commands, and the analysis commands other installed packages declare
    (``registry.installed_commands``), looked up only when a name is none of its own or every command is
    listed, so that running a built-in command never reads the installed packages' entry points."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            return found
        declaration = _installed().get(cmd_name)
        return _installed_command(declaration) if declaration is not None else None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_installed()})


def _installed() -> dict[str, Command]:
    """Other packages' commands; one that cannot be declared is one line (this runs before ``invoke``)."""
    try:
        return installed_commands()
    except TracekitError as error:
        raise click.ClickException(str(error)) from None


@functools.cache
def _installed_command(declaration: Command) -> click.Command:
    return analysis_command(declaration)
