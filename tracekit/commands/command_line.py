"""How an option is written on the command line, and the command line that reproduces a Result: the
report names, under each table, the ``tracekit`` command that prints it, derived from the same options."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from tracekit.commands.registry import command
from tracekit.model.options import Options, declared_fields, default_of, flag_name

__all__ = ["command_line", "flag_name"]


def command_line(name: str, sources: Sequence[str], options: Options, unit: str | None = None) -> str:
    """``tracekit NAME SOURCES... --flag value ...`` for the options that differ from their defaults
    (and ``--unit`` when ``unit`` is not the command's default), each word quoted for a shell."""
    spec = command(name)
    words = ["tracekit", name, *(shlex.quote(str(source)) for source in sources)]
    for item, declared in declared_fields(options):
        value = getattr(options, item.name)
        if not declared.cli or value == default_of(item):
            continue
        flag = flag_name(item.name)
        if declared.kind == "flag":
            words.append(flag)
        elif declared.kind == "specs" and declared.repeat:
            words += [word for spec in value for word in (flag, shlex.quote(spec))]
        elif declared.kind == "specs":
            # a comma inside a spec is escaped; a literal ("=...") spec runs to the end: it goes last
            ordered = sorted(value, key=lambda spec: spec.startswith("="))
            words += [
                flag,
                shlex.quote(",".join(spec if spec.startswith("=") else spec.replace(",", "\\,") for spec in ordered)),
            ]
        else:
            words += [flag, shlex.quote(str(value))]
    if unit is not None and unit != spec.unit:
        words += ["--unit", unit]
    return " ".join(words)
