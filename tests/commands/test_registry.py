"""Each command is declared once, in tracekit.commands.registry: the command line's analysis commands,
their flags, the many-input commands, the API's functions and the report's sections are derived from
it, and no other module keeps a list of command names."""

from __future__ import annotations

import ast
import re

from helpers.paths import ROOT

import tracekit
from tracekit.cli import main
from tracekit.commands.command_line import flag_name
from tracekit.commands.registry import COMMANDS
from tracekit.model.option_fields import ManyOptions
from tracekit.model.options import declared_fields

# commands that record, measure or write files, and the MCP server that serves the registry's commands
NOT_ANALYSES = {"bench", "capture", "export", "report", "timeline", "mcp"}


def test_the_command_line_has_exactly_the_registry_s_analyses():
    assert set(main.commands) - NOT_ANALYSES == set(COMMANDS)  # type: ignore[attr-defined]


def test_each_command_s_flags_are_its_options():
    for name, command in COMMANDS.items():
        click_command = main.commands[name]  # type: ignore[attr-defined]
        flags = {option for param in click_command.params for option in getattr(param, "opts", [])}
        for field, declared in declared_fields(command.options):
            assert (flag_name(field.name) in flags) == declared.cli, (name, field.name)
        many_flags = {flag_name(field) for field in ("workers", "use_dask", "scheduler", "strict")}
        assert many_flags <= flags if command.takes_many else not (many_flags & flags), name
        assert click_command.help and click_command.help.startswith(command.summary), name


def test_the_api_has_one_function_per_command():
    for name in COMMANDS:
        assert callable(getattr(tracekit, COMMANDS[name].api_name)) and COMMANDS[name].api_name in tracekit.__all__
    assert {field for field in ManyOptions.__dataclass_fields__} >= {"workers", "use_dask", "scheduler", "strict"}


def test_the_report_runs_registry_commands_only():
    called = set()
    for path in (ROOT / "tracekit" / "report").glob("*.py"):
        called |= set(re.findall(r"run_command\(\s*\"([a-z-]+)\"", path.read_text()))
    assert called and called <= set(COMMANDS)
    assert {"kernels", "ranges", "breakdown", "idle", "syncs", "overlap"} <= called


def test_no_module_but_the_registry_lists_command_names():
    """A list, tuple, set or dict of three or more command names (and mostly those) anywhere in tracekit/
    outside the registry is a second declaration that would drift. (``__all__`` must be a literal for type checkers;
    test_api ties it to the registry.)"""
    names = set(COMMANDS)
    offenders = []
    for path in (ROOT / "tracekit").rglob("*.py"):
        if path.name == "registry.py":
            continue
        tree = ast.parse(path.read_text())
        exported = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets)
        }
        for node in ast.walk(tree):
            if id(node) in exported:
                continue
            items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if not isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)) or items is None:
                continue
            strings = [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]
            named = sum(value in names for value in strings)
            # mostly command names: a second list of commands (a dict of data fields may hold a few: "ops", "steps")
            if named >= 3 and named * 2 >= len(strings):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
