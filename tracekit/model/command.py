"""How an analysis command is declared: ``Command`` (its name, help, options dataclass, inputs, the
functions that run it, its picture, its place in the report, its Python function's docstring).

Each command is declared once, as ``COMMAND`` in a module of its own beside its analysis
(``analysis/waits/idle_command.py``); the registry (``tracekit.commands.registry``) lists those modules
and finds other packages' through an entry point. Functions are named "module:attribute" and imported
on first use, so declaring a command (reading every one: the command line's start) loads neither pandas
nor the analyses. Texts name options by parameter ("{length}"), filled in by each reader: the command
line with its flags. The standard library only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracekit.model.options import Options, flag_name

# What a command takes: one trace or many ("traces"), exactly one ("trace"), two ("pair"), one or more
# always merged ("many": even one input is a comparison of one), one or two memory snapshots ("snapshots").
INPUT_KINDS = ("traces", "trace", "pair", "many", "snapshots")


def import_attribute(name: str) -> Any:
    """The attribute a "module:attribute" name points at (imported now)."""
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module), attribute)


class _Names(dict):
    def __init__(self, option_name: Callable[[str], str]):
        super().__init__()
        self.option_name = option_name

    def __missing__(self, key: str) -> str:
        return self.option_name(key)


def with_names(text: str, option_name: Callable[[str], str] = flag_name) -> str:
    """``text`` with each option it names as "{name}" named by ``option_name`` (default: the flag)."""
    return text.format_map(_Names(option_name))


@dataclass(frozen=True)
class Picture:
    """A chart of the result that the command line draws to a file: ``--<option> FILE``.

    ``option``: the parameter's name ("picture": ``--picture``); ``charts``: the chart names to draw,
    the first present; ``needs``: an option set to True when a picture is asked (the analysis then
    computes the chart); ``missing``: why there is nothing to draw. ``help`` names options as "{name}".
    """

    option: str
    help: str
    charts: tuple[str, ...]
    missing: str
    needs: str | None = None

    @property
    def flag(self) -> str:
        return flag_name(self.option)

    def described(self, option_name: Callable[[str], str] = flag_name) -> str:
        """The help, options named by ``option_name`` (default: the command line's flags)."""
        return with_names(self.help, option_name)


@dataclass(frozen=True)
class Command:
    """One command.

    ``help``: what the command line says of it (options named "{name}"). ``inputs``: one of
    ``INPUT_KINDS``. ``run``: "module:function" of (input, options) -> Result (a pair: (a, b, options,
    snapshots, labels); snapshots: (snapshots, options)). ``part`` and ``merger`` (many inputs):
    "module:function" of (trace, Part, options, limit) -> Part and "module:Class" of (options, limit).
    ``title``: what the aggregate over many inputs is (options' values as "{name}"). ``unit``: the time
    unit the command line prints by default. ``prepare``: "module:function" of (path, options) started
    before the input opens (a read ahead). ``report``: the heading of a section of its own in
    ``tracekit report`` (each trace's Result, default options), or None where ``report`` composes the
    command's tables into its own sections or leaves it out. ``doc`` and ``examples``: the Python
    function's docstring and the calls shown in it (``tracekit.`` added). ``argument``: the Python
    function's name for the input (default by ``inputs``: trace, traces, a and b, snapshot).
    """

    name: str
    help: str
    options: type[Options]
    inputs: str
    run: str | None = None
    part: str | None = None
    merger: str | None = None
    title: str = ""
    unit: str = "ns"
    picture: Picture | None = None
    prepare: str | None = None
    report: str | None = None
    doc: str = ""
    examples: tuple[str, ...] = ()
    argument: str | None = None
    on_snapshot: str | None = None

    def __post_init__(self) -> None:
        assert self.inputs in INPUT_KINDS, self.inputs
        assert (self.part is None) == (self.merger is None), f"{self.name}: part and merger come together"
        assert self.run is not None or self.part is not None, f"{self.name}: a run, or a part and merger"
        assert self.takes_many == (self.inputs in ("traces", "many")), f"{self.name}: many inputs need a part"

    def described(self, option_name: Callable[[str], str] = flag_name) -> str:
        """The help, options named by ``option_name`` (default: the command line's flags)."""
        return with_names(self.help, option_name)

    @property
    def summary(self) -> str:
        """The first line of the help, as the command line says it."""
        return self.described().split("\n", 1)[0]

    @property
    def api_name(self) -> str:
        """The Python API's function: the command's name as an identifier ("critical-path" -> critical_path)."""
        return self.name.replace("-", "_")

    @property
    def takes_many(self) -> bool:
        return self.part is not None

    def function(self, which: str) -> Callable[..., Any]:
        """The command's ``run``, ``part``, ``merger`` or ``prepare``, imported."""
        name = getattr(self, which)
        if name is None:
            raise LookupError(f"{self.name} has no {which}")
        return import_attribute(name)
