"""The MCP server's tools derived from the registry: one per command, valid JSON Schema from the options
dataclasses, and a call's arguments checked against the same declaration (in-process, no server)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from tracekit.commands import registry
from tracekit.errors import UsageError
from tracekit.mcp.tools import command_call, input_schema
from tracekit.model.command import Command
from tracekit.model.options import Options, whole

jsonschema = pytest.importorskip("jsonschema")
server = pytest.importorskip("tracekit.mcp.server", reason="the mcp extra is not installed")


def config(tmp_path, allow_run=False):
    from tracekit.mcp.confine import Confinement

    return server.ServerConfig(Confinement.of([tmp_path], None, 100), allow_run=allow_run)


def test_one_tool_per_registry_command_and_the_server_s_own(tmp_path):
    names = [tool.name for tool in server.tools(config(tmp_path))]
    assert names == [*registry.all_commands(), "list_traces", "report"]
    allowed = [tool.name for tool in server.tools(config(tmp_path, allow_run=True))]
    assert allowed == [*names, "capture", "bench"]


def test_a_command_added_to_the_registry_is_a_tool(tmp_path, monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class ToyOptions(Options):
        depth: int = whole(3, "how deep")

    toy = Command("toy", "A toy {depth}.", ToyOptions, "trace", run="builtins:print")
    monkeypatch.setattr(registry, "installed_commands", lambda: {"toy": toy})
    tools = {tool.name: tool for tool in server.tools(config(tmp_path))}
    assert tools["toy"].description == "A toy depth."
    assert tools["toy"].input_schema["properties"]["depth"] == {
        "description": "how deep",
        "type": "integer",
        "minimum": 1,
        "default": 3,
    }


@pytest.mark.parametrize("name", list(registry.COMMANDS))
def test_each_schema_is_valid_json_schema_and_its_defaults_fit_it(name):
    command = registry.command(name)
    schema = input_schema(command)
    jsonschema.Draft202012Validator.check_schema(schema)
    for parameter, property_schema in schema["properties"].items():
        if "default" in property_schema:
            jsonschema.validate(property_schema["default"], property_schema)
        assert property_schema.get("description"), parameter
    assert "nsys" not in schema["properties"] and "scheduler" not in schema["properties"]  # nothing to run or reach
    assert set(re.findall(r"--[a-z-]+", str(schema))) <= {"--out"}  # options named by parameter, never by flag


def test_the_kernels_schema_says_types_bounds_and_choices():
    properties = input_schema(registry.command("kernels"))["properties"]
    assert properties["top"]["type"] == ["integer", "null"] and properties["top"]["minimum"] == 1
    assert properties["by"]["enum"] == ["kernel", "category", "type"] and properties["by"]["default"] == "kernel"
    assert properties["same_thread"] == {**properties["same_thread"], "type": "boolean", "default": False}
    assert properties["ranges"]["type"] == "array"
    assert properties["workers"]["type"] == ["integer", "null"]
    assert properties["unit"]["enum"] == ["ns", "us", "ms", "s"]


def test_a_call_s_arguments_become_the_command_s_options():
    call = command_call(registry.command("kernels"), {"traces": "a.sqlite", "top": 3, "by": "category", "workers": 2})
    assert call.inputs == ["a.sqlite"]
    assert call.options.changed() == {"top": 3, "by": "category"}
    assert call.many is not None and call.many.workers == 2


def test_a_picture_asks_for_what_it_needs():
    call = command_call(registry.command("memory"), {"snapshots": ["m.pickle"], "picture": True})
    assert call.options.changed() == {"timeline": True}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"traces": ["a"], "colour": "red"}, "kernels has no parameter 'colour'; its parameters: traces, top,"),
        ({"traces": ["a"], "top": "5"}, "top is a whole number, not '5'"),
        ({"traces": ["a"], "top": 0}, "top is at least 1, not 0"),
        ({"traces": ["a"], "by": "colour"}, "by 'colour' is not one of kernel, category, type"),
        ({"traces": ["a"], "same_thread": "yes"}, "same_thread is True or False, not 'yes'"),
        ({"top": 5}, "kernels needs traces"),
        ({"traces": [3]}, "traces is a list of paths, not [3]"),
        ({"traces": ["a"], "output": "k.xlsx"}, "output 'k.xlsx': its suffix names the format"),
        ({"traces": ["a"], "unit": "h"}, "unit 'h' is not one of ns, us, ms, s"),
    ],
)
def test_a_bad_argument_is_one_line_naming_it(arguments, message):
    with pytest.raises(UsageError) as raised:
        command_call(registry.command("kernels"), arguments)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)
