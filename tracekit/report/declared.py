"""Sections of their own for the commands that ask for one (``Command.report``: a heading), a command of
another installed package included: each trace's Result with the command's default options, every
table under the command line that prints it, its charts as pictures, then its notes. A command whose Result cannot be had for
an input says why, in one line, and the report goes on; one whose kind of work the trace does not hold
(collectives on one GPU) has no section.

The built-in commands declare none: ``traces`` and ``why`` compose their tables into sections of the
report's own (several commands to a section, a few rows each).
"""

from __future__ import annotations

from tracekit.commands import run_command
from tracekit.commands.command_line import command_line
from tracekit.commands.registry import Command, all_commands
from tracekit.errors import NothingToAnalyseError, TracekitError
from tracekit.model.trace import Trace
from tracekit.render.markup import md_prose, md_text
from tracekit.report.document import Document


def declared_sections(section: Document, source: str, trace: Trace) -> None:
    """Append the section of each command over traces that declares one, in the registry's order."""
    for command in all_commands().values():
        if command.report is not None and command.inputs in ("trace", "traces"):
            _command_section(section, source, trace, command)


def _command_section(section: Document, source: str, trace: Trace, command: Command) -> None:
    heading = command.report or command.name
    options = command.options()
    try:
        result = run_command(command, trace, options)
    except NothingToAnalyseError:
        return  # nothing of the kind in this trace (collectives on one GPU): no section to read past
    except TracekitError as error:
        section.text(f"### {md_text(heading)}", md_prose(f"No {command.name} table: {error}"))
        return
    section.text(f"### {md_text(heading)}")
    for table in result.tables:
        section.table(table.frame, command_line(command.name, [source], options, "ms"))
    for name, chart in result.charts.items():
        section.picture(chart, f"{command.api_name}_{name}", chart.title)
    for note in result.notes:
        if note not in trace.warnings:  # the trace's own warnings come once, under the input
            section.note(note)
