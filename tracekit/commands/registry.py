"""Every analysis command: the list of the modules that declare them, one module per command beside its
analysis (``COMMAND``, a ``model.command.Command``), plus the commands of other installed packages,
found through the ``tracekit.commands`` entry-point group.

The command line (one input or many), ``tracekit report``, the Python API, the process pool and Dask
workers all find commands here. A command module imports only the standard library and ``model``, so
reading every built-in command (the command line's start) loads neither pandas nor the analyses;
other packages' commands are looked up only when a name is not a built-in one or every command is
listed (importing ``importlib.metadata`` and reading every installed package's entry points costs
~40 ms, a third of the command line's start).

A package adds a command with one module holding its ``COMMAND`` and one entry point naming it::

    [project.entry-points."tracekit.commands"]
    toy = "toy_package.toy_command"

(docs/design/adding-a-command.md walks through one).
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from tracekit.errors import UsageError
from tracekit.model.command import Command

ENTRY_POINTS = "tracekit.commands"

# The built-in commands' modules, in the order their commands are listed.
BUILT_IN = (
    "tracekit.analysis.kernels.kernels_command",
    "tracekit.analysis.ranges.ranges_command",
    "tracekit.analysis.ranges.breakdown_command",
    "tracekit.analysis.ranges.steps_command",
    "tracekit.analysis.waits.launches_command",
    "tracekit.analysis.waits.idle_command",
    "tracekit.analysis.waits.overlap_command",
    "tracekit.analysis.advice.advise_command",
    "tracekit.analysis.waits.queues_command",
    "tracekit.analysis.waits.ops_command",
    "tracekit.analysis.kernels.sequences_command",
    "tracekit.analysis.kernels.bandwidth_command",
    "tracekit.analysis.efficiency.efficiency_command",
    "tracekit.analysis.critical_path.critical_path_command",
    "tracekit.analysis.waits.syncs_command",
    "tracekit.analysis.collectives.collectives_command",
    "tracekit.analysis.many.ranks_command",
    "tracekit.analysis.many.compare_command",
    "tracekit.analysis.many.diff_command",
    "tracekit.analysis.memory.memory_command",
)

__all__ = ["BUILT_IN", "COMMANDS", "Command", "all_commands", "command", "installed_commands"]


def declared(module: ModuleType | str) -> Command:
    """The ``COMMAND`` a command module declares."""
    if isinstance(module, str):
        module = importlib.import_module(module)
    found = getattr(module, "COMMAND", None)
    if not isinstance(found, Command):
        raise UsageError(f"{module.__name__} declares no COMMAND (a tracekit.model.command.Command)")
    return found


COMMANDS: dict[str, Command] = {found.name: found for found in map(declared, BUILT_IN)}


@cache
def installed_commands() -> dict[str, Command]:
    """The commands other installed packages declare (entry points of the ``tracekit.commands`` group:
    a module holding ``COMMAND``, or the ``Command`` itself), by name; read once per process."""
    from importlib.metadata import entry_points

    found: dict[str, Command] = {}
    for entry in entry_points(group=ENTRY_POINTS):
        loaded = entry.load()
        declaration = loaded if isinstance(loaded, Command) else declared(loaded)
        if declaration.name in COMMANDS or declaration.name in found:
            raise UsageError(f"entry point {entry.value}: a command {declaration.name!r} is already declared")
        found[declaration.name] = declaration
    return found


def all_commands() -> dict[str, Command]:
    """Every command: the built-in ones, then those of other installed packages."""
    return {**COMMANDS, **installed_commands()}


def command(name: str) -> Command:
    """The command called ``name``; LookupError listing the commands otherwise."""
    found = COMMANDS.get(name) or installed_commands().get(name)
    if found is None:
        raise LookupError(f"no command {name!r}; the commands are {', '.join(all_commands())}")
    return found
