"""Commands other packages add to ``tracekit``: entry points in the group ``tracekit.cli`` (``workloads``
adds ``bench``, which needs torch), each loaded when named, or when ``--help`` lists it. tracekit imports
none of them: with one absent, its name says what to install.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import click

from tracekit.cli.analyses import CommandsGroup
from tracekit.run_config import WORKLOADS_EXTRA

GROUP = "tracekit.cli"
# Commands tracekit's own extras add: listed, and explained when run, even where they are not installed.
OF_EXTRAS = {"bench": "Time models and kernels (needs the workloads extra: torch)."}


class ExtensibleGroup(CommandsGroup):
    """``tracekit``'s group: its own commands and other packages' analysis commands (``CommandsGroup``),
    then the commands ``tracekit.cli`` entry points add (loaded on first use)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *OF_EXTRAS, *(entry.name for entry in entry_points(group=GROUP))})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None:
            found = _added(cmd_name)
            if found is not None:
                self.add_command(found, cmd_name)  # loaded once
        return found


def _added(name: str) -> click.Command | None:
    """The command entry point ``name`` adds; one that explains what to install when it cannot be loaded."""
    for entry in entry_points(group=GROUP, name=name):
        try:
            command = entry.load()
        except ImportError:  # its package is absent, or what it needs at import
            return _not_installed(name)
        if isinstance(command, click.Command):
            return command
    return _not_installed(name) if name in OF_EXTRAS else None


def _not_installed(name: str) -> click.Command:
    """A stand-in for ``name`` whose package is not installed: any arguments, one line, exit status 1."""

    def explain(arguments: tuple[str, ...]) -> None:
        raise click.ClickException(f"tracekit {name} is not installed: pip install '{WORKLOADS_EXTRA}'")

    return click.Command(
        name,
        callback=explain,
        params=[click.Argument(["arguments"], nargs=-1, type=click.UNPROCESSED)],
        help=OF_EXTRAS.get(name, ""),
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
