"""``tracekit mcp`` driven by the MCP SDK's own client over stdio: the tools the registry declares, tables
equal to the Python API's on the real files in ../shared, a picture as a PNG image, refusals as one line,
a call past its time stopped with every process it started, and calls made at once answering as one at
a time."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path

import pytest
from helpers.nsys_builder import ExportBuilder
from helpers.paths import ROOT, SHARED, SHARED_KINETO, SHARED_TRACES

import tracekit
from tracekit.commands.registry import all_commands
from tracekit.render.tables import json_records

pytest.importorskip("mcp", reason="the mcp extra is not installed")
anyio = pytest.importorskip("anyio")
jsonschema = pytest.importorskip("jsonschema")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

pytestmark = pytest.mark.slow
EXPORT = SHARED_TRACES / "a100_small_lm_trainstep_nsys2026.3.sqlite"
KINETO_STEPS = SHARED_KINETO / "mi250_rocm6.2_toy.json.gz"
MAX_ROWS = 7


def serve(*arguments: str, calls):
    """Start ``tracekit mcp ARGUMENTS`` over stdio, run ``calls(session)`` (async) and return what it returns."""

    async def main():
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["-m", "tracekit.cli", "mcp", *arguments],
            env={"PYTHONPATH": str(ROOT), "TRACEKIT_CACHE": "0"},
            cwd=str(ROOT),
        )
        async with stdio_client(parameters) as (reading, writing):
            async with ClientSession(reading, writing) as session:
                await session.initialize()
                return await calls(session)

    return anyio.run(main)


def expected_tables(result, max_rows: int = MAX_ROWS) -> list[dict]:
    """The API's tables as the server sends them: raw values, the first ``max_rows`` rows, JSON."""
    tables = [
        {
            "name": table.name,
            "title": table.title,
            "units": table.units,
            "columns": [str(column) for column in table.frame.columns],
            "rows": json_records(table.frame.head(max_rows)),
            "total_rows": len(table.frame),
        }
        for table in result.tables
    ]
    return json.loads(json.dumps(tables, default=str))


def text_of(result) -> str:
    return result.content[0].text


@pytest.fixture
def shared():
    if not SHARED_TRACES.is_dir() or not SHARED_KINETO.is_dir():
        pytest.skip(f"real traces not available: {SHARED} is absent")
    return SHARED


def test_tools_are_the_registry_s_and_call_results_equal_the_api_s(shared, tmp_path):
    async def calls(session):
        tools = (await session.list_tools()).tools
        kernels = await session.call_tool("kernels", {"traces": [str(EXPORT)], "top": 10})
        advise = await session.call_tool("advise", {"traces": [str(EXPORT)]})
        idle = await session.call_tool("idle", {"trace": str(EXPORT), "per_stream": True})
        return tools, kernels, advise, idle

    tools, kernels, advise, idle = serve(
        "--root", str(shared), "--out", str(tmp_path), "--max-rows", str(MAX_ROWS), calls=calls
    )
    assert [tool.name for tool in tools] == [*all_commands(), "list_traces", "report"]
    for tool in tools:
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
    for reply, result in (
        (kernels, tracekit.kernels(EXPORT, top=10)),
        (advise, tracekit.advise(EXPORT)),
        (idle, tracekit.idle(EXPORT, per_stream=True)),
    ):
        assert not reply.is_error, text_of(reply)
        assert reply.structured_content["tables"] == expected_tables(result)
        assert reply.structured_content["notes"][: len(result.notes)] == result.notes
    kernel_rows = kernels.structured_content["tables"][0]
    assert kernel_rows["units"]["Total Time (ns)"] == "ns" and kernel_rows["total_rows"] == 10
    assert kernels.structured_content["notes"][-1].startswith(
        "kernels: the first 7 of 10 rows (the server's --max-rows)"
    )
    assert "Total Time (ns)" in text_of(kernels)  # the text rendering for the model


def test_a_picture_comes_back_as_a_png_image_and_outputs_land_in_out(shared, tmp_path):
    tiny = SHARED_TRACES / "tiny_cuda_nsys2026.1.sqlite"

    async def calls(session):
        steps = await session.call_tool("steps", {"trace": str(KINETO_STEPS), "picture": True, "output": "s/steps.csv"})
        listing = await session.call_tool("list_traces", {"under": str(shared / "kineto")})
        report = await session.call_tool("report", {"traces": [str(tiny)]})
        tools = [tool.name for tool in (await session.list_tools()).tools]
        capture = await session.call_tool("capture", {"arguments": ["--help"]})
        wrong = await session.call_tool("capture", {"arguments": ["--no-such-option"]})
        elsewhere = await session.call_tool("capture", {"arguments": ["tiny", "--out", "/tmp"]})
        return steps, listing, report, tools, (capture, wrong, elsewhere)

    steps, listing, report, tools, (capture, wrong, elsewhere) = serve(
        "--root", str(shared), "--out", str(tmp_path), "--allow-run", calls=calls
    )
    assert not steps.is_error, text_of(steps)
    image = steps.content[1]
    assert image.type == "image" and image.mime_type == "image/png"
    assert base64.b64decode(image.data)[:8] == b"\x89PNG\r\n\x1a\n"
    written = tmp_path / "s" / "steps.csv"
    assert steps.structured_content["files"] == [str(written)]
    assert written.read_text().splitlines()[0].startswith("Step")
    kinds = {Path(entry["path"]).name: entry["kind"] for entry in listing.structured_content["traces"]}
    assert kinds[KINETO_STEPS.name] == "kineto" and kinds["rank0.pt.trace.json"] == "kineto"
    assert "README.md" not in kinds
    assert not report.is_error, text_of(report)
    folder = tmp_path / "reports" / "tiny_cuda_nsys2026.1"
    assert report.structured_content["report"] == str(folder / "report.md")
    assert text_of(report) == (folder / "report.md").read_text()
    assert tools[-2:] == ["capture", "bench"]
    assert not capture.is_error and "--out DIRECTORY" in text_of(capture)
    assert wrong.is_error and text_of(wrong) == (
        "tracekit capture exited with status 2: Error: No such option '--no-such-option'."
    )
    assert elsewhere.is_error and "leave --out out" in text_of(elsewhere)
    assert not list(shared.rglob("*.tracekit-cache"))  # nothing written beside the inputs


@pytest.fixture
def folders(tmp_path):
    """root/ (a trace, a link to a trace outside, a folder holding such a link), outside/ and out/."""
    root, outside, out = tmp_path / "root", tmp_path / "outside", tmp_path / "out"
    for folder in (root / "sub", outside, out):
        folder.mkdir(parents=True)
    builder = ExportBuilder("2026.2")
    builder.kernel(0, 1_000, "gemm")
    builder.write(root / "inside.sqlite")
    builder.write(outside / "secret.sqlite")
    (root / "sub" / "link.sqlite").symlink_to(outside / "secret.sqlite")
    return root, outside, out


def test_refusals_are_one_line_and_nothing_is_read_or_written_outside(folders):
    root, outside, out = folders
    secret, inside = outside / "secret.sqlite", str(root / "inside.sqlite")
    arguments = {
        "outside a root": ("kernels", {"traces": [str(secret)]}),
        "through ..": ("kernels", {"traces": [f"{root}/../outside/secret.sqlite"]}),
        "through a link": ("kernels", {"traces": [str(root / "sub" / "link.sqlite")]}),
        "a folder holding a link out": ("kernels", {"traces": [str(root / "sub")]}),
        "a glob reaching out": ("kernels", {"traces": [f"{root}/../outside/*.sqlite"]}),
        "an output outside --out": ("kernels", {"traces": [inside], "output": "../k.csv"}),
        "an absolute output elsewhere": ("kernels", {"traces": [inside], "output": str(outside / "k.csv")}),
        "capture without --allow-run": ("capture", {"arguments": ["tiny"]}),
        "an unknown option": ("kernels", {"traces": [inside], "colour": "red"}),
        "a wrong type": ("kernels", {"traces": [inside], "top": "five"}),
        "an unknown tool": ("nvidia-smi", {}),
    }

    async def calls(session):
        replies = {case: await session.call_tool(name, given) for case, (name, given) in arguments.items()}
        good = await session.call_tool("kernels", {"traces": [inside]})
        return replies, good

    replies, good = serve("--root", str(root), "--out", str(out), calls=calls)
    messages = {case: text_of(reply) for case, reply in replies.items()}
    assert all(reply.is_error for reply in replies.values()), messages
    assert all("\n" not in message and "Traceback" not in message for message in messages.values()), messages
    for case in (
        "outside a root",
        "through ..",
        "through a link",
        "a folder holding a link out",
        "a glob reaching out",
    ):
        assert "is outside the folders this server may read" in messages[case], case
    assert "outside the folder this server writes" in messages["an output outside --out"]
    assert "outside the folder this server writes" in messages["an absolute output elsewhere"]
    assert "only when started with --allow-run" in messages["capture without --allow-run"]
    assert messages["an unknown option"].startswith("kernels has no parameter 'colour'")
    assert messages["a wrong type"] == "top is a whole number, not 'five'"
    assert not good.is_error and good.structured_content["tables"][0]["rows"][0]["Name"] == "gemm"
    assert list(outside.iterdir()) == [secret] and list(out.iterdir()) == []  # no cache, no file beside the inputs


def descendants(pid: int) -> dict[int, str]:
    """The live processes below ``pid`` (Linux's /proc), each with its command line."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        try:
            text = Path(f"/proc/{entry}/stat").read_text() if entry.isdigit() else ""
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split() if text else []
        if fields and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, queue = {}, [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            try:
                found[child] = Path(f"/proc/{child}/cmdline").read_text().replace("\0", " ")
            except OSError:
                continue
            queue.append(child)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_call_past_its_timeout_is_stopped_with_its_pool(tmp_path):
    builder = ExportBuilder("2026.2")
    builder.kernel(0, 1_000, "gemm")
    for index in range(12):
        builder.write(tmp_path / f"rank{index}.sqlite")

    async def calls(session):
        await session.call_tool("list_traces", {})  # the fork server is up
        before = set(descendants(os.getpid()))
        started = time.monotonic()
        slow = await session.call_tool("kernels", {"traces": [str(tmp_path)], "workers": 2})
        took = time.monotonic() - started
        deadline = time.monotonic() + 5
        while set(descendants(os.getpid())) - before and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        return slow, took, set(descendants(os.getpid())) - before

    slow, took, left = serve("--root", str(tmp_path), "--timeout", "0.5", calls=calls)
    assert slow.is_error and text_of(slow) == (
        "the call ran past this server's time limit of 0.5 s (--timeout) and was stopped"
    )
    assert took < 5
    assert left == set()


def test_calls_at_once_answer_as_one_at_a_time(shared):
    traces = [str(path) for path in sorted(SHARED_TRACES.glob("*.sqlite"))[:3]]
    asked = [("kernels", {"traces": [path], "top": 5}) for path in traces] + [
        ("idle", {"trace": traces[0]}),
        ("advise", {"traces": [traces[1]]}),
    ]

    async def one_at_a_time(session):
        return [(await session.call_tool(name, given)).structured_content for name, given in asked]

    async def at_once(session):
        answers: list = [None] * len(asked)

        async def call(index, name, given):
            answers[index] = (await session.call_tool(name, given)).structured_content

        async with anyio.create_task_group() as group:
            for index, (name, given) in enumerate(asked):
                group.start_soon(call, index, name, given)
        return answers

    alone = serve("--root", str(shared), calls=one_at_a_time)
    together = serve("--root", str(shared), calls=at_once)
    assert together == alone
    assert all(answer is not None and answer["tables"] for answer in alone)


def test_two_clients_of_one_server_at_once_answer_as_one_at_a_time(shared):
    """Two clients connected to the same server (one ``Server`` object, a connection each) call at once."""
    from mcp.shared.memory import create_client_server_memory_streams

    from tracekit.mcp.confine import Confinement
    from tracekit.mcp.server import ServerConfig, build_server

    server = build_server(ServerConfig(Confinement.of([shared], None, 100)))
    asked = {
        "kernels": {"traces": [str(EXPORT)], "top": 5},
        "idle": {"trace": str(EXPORT)},
        "advise": {"traces": [str(EXPORT)]},
    }
    plans = [["kernels", "idle", "advise"], ["advise", "kernels", "idle"]]

    async def client(plan: list[str], answers: dict) -> None:
        async with create_client_server_memory_streams() as (client_streams, server_streams):
            async with anyio.create_task_group() as group:
                group.start_soon(server.run, *server_streams, server.create_initialization_options())
                async with ClientSession(*client_streams) as session:
                    await session.initialize()
                    for name in plan:
                        answers[name] = (await session.call_tool(name, asked[name])).structured_content
                group.cancel_scope.cancel()

    async def main():
        alone: list[dict] = [{}, {}]
        for plan, answers in zip(plans, alone):
            await client(plan, answers)
        together: list[dict] = [{}, {}]
        async with anyio.create_task_group() as group:
            for plan, answers in zip(plans, together):
                group.start_soon(client, plan, answers)
        return alone, together

    alone, together = anyio.run(main)
    assert together == alone and alone[0] == alone[1]
    assert alone[0]["kernels"]["tables"] == expected_tables(tracekit.kernels(EXPORT, top=5), 200)
