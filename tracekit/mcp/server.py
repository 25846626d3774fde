"""``tracekit mcp``: the Model Context Protocol server (the official ``mcp`` SDK's low-level server, over
stdio). Its tools: one per registry command (``tools``), ``list_traces`` (``catalog``), ``report``, and,
with ``--allow-run`` only, ``capture`` and ``bench`` (``programs``).

Every call is checked here, where nothing heavy is loaded: its arguments against the command's declaration,
its paths against the roots and ``--out`` (``confine``); then it runs in a process of its own (``child``),
stopped whole past ``--timeout``, at most ``calls_at_once`` at a time. A refusal or a failure is a tool
result with ``isError`` and one line, never a traceback. Calls share nothing but the fork server, so calls
made at once (one client's or several's) answer as they would one at a time.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from tracekit.commands.registry import all_commands
from tracekit.errors import TracekitError
from tracekit.mcp import child, programs
from tracekit.mcp.confine import Confinement
from tracekit.mcp.tools import command_call, input_schema, tool_description
from tracekit.mcp.work import Reply, command_job, listing_job, report_job
from tracekit.render.safe_text import printable
from tracekit.session import Settings
from tracekit.version import __version__

LIST_TRACES = "list_traces"
REPORT = "report"
INSTRUCTIONS = (
    "tracekit: where a PyTorch program's GPU time and memory go, from Nsight Systems exports, torch.profiler traces "
    "and CUDA memory snapshots. Start with list_traces, then advise (what to fix first) or kernels; every number "
    "comes from the trace, the tables carry raw values (times in ns) and each column's unit."
)
LIST_SCHEMA = {
    "type": "object",
    "properties": {
        "under": {"type": ["string", "null"], "default": None, "description": "a folder under a root (default: all)"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 500, "description": "most entries"},
    },
    "additionalProperties": False,
}
REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "traces": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "description": "run folders or traces under the server's roots (several: a comparison too)",
        },
        "output": {
            "type": ["string", "null"],
            "default": None,
            "description": "the report's folder under --out (default: reports/<the inputs' names>)",
        },
        "html": {"type": "boolean", "default": False, "description": "also report.html, one offline page"},
        "phases": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "default": None,
            "description": "the phases: range specs (default: forward, backward, optimizer by name)",
        },
        "step_range": {
            "type": ["string", "null"],
            "default": None,
            "description": "the range that is one training step (default: ProfilerStep#N, else 'step')",
        },
    },
    "required": ["traces"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ServerConfig:
    """What the server may do: read under ``confinement.roots``, write under ``confinement.out``, run
    programs (``allow_run``), take ``timeout_s`` per call, return ``max_rows`` rows per table."""

    confinement: Confinement
    allow_run: bool = False
    timeout_s: float = 120.0
    max_rows: int = 200
    calls_at_once: int = 4

    def settings(self) -> Settings:
        """The calls' settings: the environment's, with caches and report exports under --out, never beside
        the inputs (no --out: no cache)."""
        out = self.confinement.out
        settings = Settings.from_environment().replace(beside_inputs=False)
        if out is None:
            return settings.replace(cache=False)
        return settings.replace(cache_home=str(out / ".cache"))


def tools(config: ServerConfig) -> list[types.Tool]:
    """Every tool: the registry's commands, then listing traces, reports, and the programs if allowed."""
    found = [
        types.Tool(
            name=command.name,
            description=tool_description(command),
            input_schema=input_schema(command),
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        for command in all_commands().values()
    ]
    found.append(types.Tool(name=LIST_TRACES, description=_LIST_HELP, input_schema=LIST_SCHEMA))
    found.append(types.Tool(name=REPORT, description=_REPORT_HELP, input_schema=REPORT_SCHEMA))
    if config.allow_run:
        found += [
            types.Tool(name=name, description=text, input_schema=programs.program_schema(name))
            for name, text in programs.PROGRAMS.items()
        ]
    names = [tool.name for tool in found]
    assert len(set(names)) == len(names), f"two tools of one name: {names}"
    return found


_LIST_HELP = (
    "The traces under the server's folders and what each is (nsys SQLite export or report, torch.profiler trace, "
    "CUDA memory snapshot, tracekit run folder), with sizes in bytes."
)
_REPORT_HELP = (
    "Write `tracekit report` of run folders or traces under --out (report.md with pictures; html: report.html "
    "too) and return report.md's text."
)


class Calls:
    """The server's calls: each checked, then run in its own process, at most ``calls_at_once`` at a time."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.limiter = anyio.CapacityLimiter(config.calls_at_once)

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        try:
            reply = await self._reply(name, dict(arguments or {}))
        except TracekitError as error:
            return _error(printable(str(error)))
        return _result(reply)

    async def _reply(self, name: str, arguments: dict[str, Any]) -> Reply:
        config, confinement = self.config, self.config.confinement
        commands = all_commands()
        if name in commands:
            call = command_call(commands[name], arguments)
            inputs = confinement.inputs(call.inputs)
            output = str(confinement.writable(call.output)) if call.output else None
            return await self._in_child(command_job, (call, inputs, output, config.max_rows, config.settings()))
        if name == LIST_TRACES:
            _only(name, arguments, LIST_SCHEMA)
            under, limit = arguments.get("under"), arguments.get("limit", 500)
            if under is not None and (not isinstance(under, str) or not under.strip()):
                raise TracekitError(f"under is a folder (a non-empty text), not {under!r}")
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 5000:
                raise TracekitError(f"limit is a whole number from 1 to 5000, not {limit!r}")
            return await self._in_child(listing_job, (confinement, under, limit))
        if name == REPORT:
            return await self._report(arguments)
        if name in programs.PROGRAMS and config.allow_run:
            _only(name, arguments, programs.program_schema(name))
            words = programs.program_words(name, arguments.get("arguments"), confinement.out)
            out = confinement.out
            assert out is not None
            code, text = await anyio.to_thread.run_sync(programs.run_program, words, out, config.timeout_s)
            if code != 0:
                last = (text.strip().splitlines() or ["no output"])[-1]
                raise TracekitError(f"tracekit {name} exited with status {code}: {last}")
            return Reply({"exit_status": code, "output": text}, text)
        if name in programs.PROGRAMS:
            raise TracekitError(f"{name} runs programs: this server offers it only when started with --allow-run")
        raise TracekitError(f"no tool {name!r}; the tools are {', '.join(tool.name for tool in tools(config))}")

    async def _report(self, arguments: dict[str, Any]) -> Reply:
        from tracekit.analysis.ranges.breakdown_command import BreakdownOptions
        from tracekit.model.option_fields import DEFAULT_PHASES

        _only(REPORT, arguments, REPORT_SCHEMA)
        given = arguments.get("traces")
        if not isinstance(given, list) or not given:
            raise TracekitError("report needs traces: a list of run folders or traces")
        phases = arguments.get("phases")
        chosen = BreakdownOptions(phases=phases).phases if phases is not None else DEFAULT_PHASES
        step_range, html, output = (arguments.get(name) for name in ("step_range", "html", "output"))
        if step_range is not None and (not isinstance(step_range, str) or not step_range.strip()):
            raise TracekitError(f"step_range is a range name (a non-empty text), not {step_range!r}")
        if html is not None and not isinstance(html, bool):
            raise TracekitError(f"html is true or false, not {html!r}")
        confinement = self.config.confinement
        inputs = confinement.inputs(given)
        folder = str(confinement.writable(output)) if output is not None else None
        if confinement.out is None:
            confinement.writable("report")  # refused: one line saying the server writes nothing
        job = (inputs, confinement, folder, bool(html), chosen, step_range, self.config.settings())
        return await self._in_child(report_job, job)

    async def _in_child(self, job: Callable[..., Any], arguments: tuple) -> Any:
        """``job(*arguments)`` in a process of its own, within the time limit; stopped whole otherwise."""
        async with self.limiter:
            process, receiving = await anyio.to_thread.run_sync(child.start, job, arguments)
            try:
                answer = await anyio.to_thread.run_sync(
                    child.wait, process, receiving, self.config.timeout_s, abandon_on_cancel=True
                )
            finally:  # also when the client cancels the call: its processes end with it
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(child.stop, process)
        if answer.error is not None:
            raise TracekitError(answer.error)
        return answer.value


def _only(name: str, arguments: dict[str, Any], schema: dict) -> None:
    unknown = sorted(set(arguments) - set(schema["properties"]))
    if unknown:
        raise TracekitError(
            f"{name} has no parameter {unknown[0]!r}; its parameters: {', '.join(schema['properties'])}"
        )


def _result(reply: Reply) -> types.CallToolResult:
    content: list[Any] = [types.TextContent(type="text", text=reply.text)]
    content += [
        types.ImageContent(type="image", data=base64.b64encode(image).decode("ascii"), mime_type="image/png")
        for image in reply.images
    ]
    return types.CallToolResult(content=content, structured_content=reply.structured, is_error=False)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def build_server(config: ServerConfig) -> Server:
    """The low-level server with the tools of ``config``."""
    calls = Calls(config)

    async def list_tools(context: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools(config))

    async def call_tool(context: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await calls.call(params.name, params.arguments)

    return Server(
        "tracekit",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve(config: ServerConfig) -> None:
    """Serve ``config``'s tools over standard input and output until the client closes them."""
    server = build_server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(anyio.to_thread.run_sync, child.warm_up)  # the fork server imports while the client starts
        async with stdio_server() as (reading, writing):
            await server.run(reading, writing, server.create_initialization_options())
        group.cancel_scope.cancel()
