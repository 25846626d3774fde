"""``tracekit mcp``: tracekit's commands as tools for coding agents, over the Model Context Protocol (stdio),
confined to the folders it is given (``tracekit.mcp``; the ``mcp`` extra)."""

from __future__ import annotations

import click

MCP_EXTRA = "tracekit[mcp]"  # pyproject's optional dependency: the MCP SDK


@click.command("mcp")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False),
    help="a folder whose traces the tools may read, symbolic links resolved (repeatable; default: the current folder)",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="the only folder the tools write: output files, reports, caches (default: none, nothing is written)",
)
@click.option("--allow-run", is_flag=True, help="also offer capture and bench, which run programs")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="seconds a call may take; past them it is stopped, with every process it started",
)
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="rows of each table a call returns (a note says when a table is cut; output=FILE writes every row)",
)
@click.option(
    "--max-input-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=2048.0,
    show_default=True,
    help="MiB of input files one call may read",
)
def mcp(roots, out, allow_run, timeout, max_rows, max_input_mb):
    """Serve tracekit's commands to a coding agent over MCP (stdio): one tool per analysis command, reading only
    under --root, writing only under --out."""
    try:
        import anyio

        from tracekit.mcp.server import ServerConfig, serve
    except ImportError as error:
        raise click.ClickException(
            f"tracekit mcp needs the MCP SDK ({error.name}): pip install '{MCP_EXTRA}'"
        ) from None
    from tracekit.mcp.confine import Confinement
    from tracekit.session import Session

    confinement = Confinement.of(roots, out, max_input_mb)
    config = ServerConfig(confinement, allow_run, timeout, max_rows)
    with Session(config.settings()):  # a tool's messages name options as its parameters (top), not flags (--top)
        anyio.run(serve, config)
