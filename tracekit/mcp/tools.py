"""The server's tools for the registry's commands: one per command (``registry.all_commands``), its input
schema (JSON Schema) generated from the command's options dataclass as the command line's flags are, and
the arguments of a call checked against the same declaration (``CommandCall``).

A tool takes the command's inputs (``trace``, ``traces``, ``a`` and ``b``, or ``snapshots``: paths under
the server's roots), every option the command line offers under its parameter name (``same_thread``),
the many-input options that stay on this machine (``workers``, ``strict``, ``exact_median_limit``; not
Dask, which reaches other machines), and ``unit``, ``picture`` (the command's chart as a PNG image) and
``output`` (the whole tables as a file under ``--out``). ``nsys`` (an executable to run) is not offered.
Only the standard library: listing the tools loads no pandas.
"""

from __future__ import annotations

import os
from dataclasses import Field, dataclass
from typing import Any

from tracekit.errors import UsageError
from tracekit.model.command import Command
from tracekit.model.option_fields import ManyOptions
from tracekit.model.options import Declared, Options, declared_fields, default_of, help_text
from tracekit.render import FORMATS, SUFFIX_FORMATS, TIME_UNITS

# Each kind of input: the tool's parameters for it, one path or a list of them.
INPUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "traces": (("traces", "list"),),
    "trace": (("trace", "path"),),
    "pair": (("a", "path"), ("b", "path")),
    "many": (("traces", "list"),),
    "snapshots": (("snapshots", "list"),),
}
INPUT_HELP = {
    "traces": "trace files (nsys SQLite export or report, torch.profiler JSON), run folders, folders of them or "
    "globs, under the server's roots; several: the command over all of them",
    "trace": "one trace file or run folder under the server's roots",
    "a": "trace A (the baseline) under the server's roots",
    "b": "trace B under the server's roots",
    "snapshots": "one CUDA memory snapshot (pickle) or run folder under the server's roots; two to compare",
}
# The many-input options a tool offers: not use_dask nor scheduler (a cluster, another machine).
MANY_OFFERED = ("workers", "strict", "exact_median_limit")
OUTPUT_SUFFIXES = ", ".join(sorted(suffix for suffix, fmt in SUFFIX_FORMATS.items() if fmt in FORMATS))


def option_schema(item: Field, declared: Declared) -> dict[str, Any]:
    """The JSON Schema of one declared option: its type, default, bounds and choices, and its help."""
    default = default_of(item)
    unit = f" ({declared.unit})" if declared.unit and f"({declared.unit}" not in declared.help else ""
    schema: dict[str, Any] = {"description": help_text(declared) + unit}
    if declared.kind == "flag":
        schema.update(type="boolean", default=False)
        return schema
    if declared.kind == "choice":
        schema["enum"] = list(declared.choices)
    elif declared.kind in ("int", "float"):
        schema["type"] = "integer" if declared.kind == "int" else "number"
        if declared.minimum is not None:
            schema["minimum"] = declared.minimum
    elif declared.kind in ("text", "any text"):
        schema["type"] = "string"
        if declared.kind == "text":
            schema["minLength"] = 1
    elif declared.kind == "specs":
        schema.update(type="array", items={"type": "string", "minLength": 1})
        default = list(default)
    if default is None and "type" in schema:
        schema["type"] = [schema["type"], "null"]
    schema["default"] = default
    return schema


def offered_options(command: Command) -> list[tuple[Field, Declared]]:
    """The options a tool offers: the command line's (``Declared.cli``), then the many-input ones."""
    fields = [(item, declared) for item, declared in declared_fields(command.options) if declared.cli]
    if command.takes_many:
        fields += [(item, declared) for item, declared in declared_fields(ManyOptions) if item.name in MANY_OFFERED]
    return fields


def extra_schemas(command: Command) -> dict[str, dict[str, Any]]:
    """The parameters every command's tool has besides its options: unit, picture, output."""
    extra: dict[str, dict[str, Any]] = {}
    if command.inputs != "snapshots":
        extra["unit"] = {
            "enum": list(TIME_UNITS),
            "default": command.unit,
            "description": "the time unit of the text and of an output file (the tables' values stay raw)",
        }
    if command.picture is not None:
        extra["picture"] = {
            "type": "boolean",
            "default": False,
            "description": "return the picture as a PNG image: " + command.picture.described(lambda name: name),
        }
    extra["output"] = {
        "type": ["string", "null"],
        "default": None,
        "description": "also write every row of the tables to this file under the server's --out folder, in the "
        f"format its suffix names ({OUTPUT_SUFFIXES})",
    }
    return extra


def input_schema(command: Command) -> dict[str, Any]:
    """The tool's input schema: the inputs (required), the options, then the shared parameters."""
    properties: dict[str, dict[str, Any]] = {}
    for name, shape in INPUTS[command.inputs]:
        path = {"type": "string", "minLength": 1}
        properties[name] = (
            {"type": "array", "items": path, "minItems": 1, "description": INPUT_HELP[name]}
            if shape == "list"
            else {**path, "description": INPUT_HELP[name]}
        )
    for item, declared in offered_options(command):
        properties[item.name] = option_schema(item, declared)
    for name, schema in extra_schemas(command).items():
        assert name not in properties, f"{command.name}: option {name} is also a parameter of every tool"
        properties[name] = schema
    return {
        "type": "object",
        "properties": properties,
        "required": [name for name, _ in INPUTS[command.inputs]],
        "additionalProperties": False,
    }


def tool_description(command: Command) -> str:
    """What a tool's caller reads: the command's help, options named by their parameters."""
    return command.described(lambda name: name)


@dataclass(frozen=True)
class CommandCall:
    """A tool call checked against its command's declaration: the inputs as given (not yet resolved),
    the options, how many inputs are read, and what comes back besides the tables."""

    command: Command
    inputs: list[str]
    options: Options
    many: ManyOptions | None
    unit: str
    picture: bool
    output: str | None


def command_call(command: Command, arguments: dict[str, Any] | None) -> CommandCall:
    """``arguments`` as a ``CommandCall``; UsageError (OptionError) naming the parameter that is unknown,
    missing or of the wrong type. The options are checked by their dataclass, as the API's are."""
    arguments = dict(arguments or {})
    properties = input_schema(command)["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise UsageError(f"{command.name} has no parameter {unknown[0]!r}; its parameters: {', '.join(properties)}")
    inputs: list[str] = []
    for name, shape in INPUTS[command.inputs]:
        if name not in arguments:
            raise UsageError(f"{command.name} needs {name}: {INPUT_HELP[name]}")
        inputs += _paths(name, arguments.pop(name), shape)
    unit = arguments.pop("unit", command.unit)
    if unit not in TIME_UNITS:
        raise UsageError(f"unit {unit!r} is not one of {', '.join(TIME_UNITS)}")
    picture = arguments.pop("picture", False)
    if not isinstance(picture, bool):
        raise UsageError(f"picture is true or false, not {picture!r}")
    output = arguments.pop("output", None)
    if output is not None and (not isinstance(output, str) or not output.strip()):
        raise UsageError(f"output is a file name (a non-empty text), not {output!r}")
    if output is not None and os.path.splitext(output)[1].lower() not in SUFFIX_FORMATS:
        raise UsageError(f"output {output!r}: its suffix names the format, one of {OUTPUT_SUFFIXES}")
    many_values = {name: arguments.pop(name) for name in MANY_OFFERED if name in arguments}
    if picture and command.picture is not None and command.picture.needs:
        arguments[command.picture.needs] = True
    options = command.options(**arguments)
    many = ManyOptions(**many_values) if command.takes_many else None
    return CommandCall(command, inputs, options, many, unit, picture, output)


def _paths(name: str, value: Any, shape: str) -> list[str]:
    """The paths of one input parameter: a text, or (a list parameter) a list of texts (one text taken too)."""
    if isinstance(value, str) and value.strip():
        return [value]
    if shape == "list" and isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return list(value)
    what = "a path" if shape == "path" else "a list of paths"
    raise UsageError(f"{name} is {what}, not {value!r}")
