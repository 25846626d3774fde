"""MkDocs hooks: the pages generated from the code at build time, so they cannot drift from it.

- ``reference/cli.md``: every command's ``--help``, as click prints it.
- ``reference/columns.md``: the column contract, from ``tracekit.model.schema``.
- ``layout.md``: how the code is laid out, from each package's docstring (a test keeps every module
  named in its package's docstring).
- ``tutorial.md``: ``docs/tutorial.py`` run cell by cell on the real files in ``../shared``, each cell
  followed by what it printed and, like a notebook, the value of its last expression.

``make docs`` (``mkdocs build --strict``) runs them; a cell that fails fails the build.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import sys
import time
from html import escape
from pathlib import Path

from mkdocs.structure.files import File, Files

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
TUTORIAL = DOCS / "tutorial.py"


def on_files(files: Files, config) -> Files:
    for name, content in (
        ("reference/cli.md", cli_reference()),
        ("reference/columns.md", column_contract()),
        ("layout.md", layout()),
        ("tutorial.md", tutorial()),
    ):
        files.append(File.generated(config, name, content=content))
    return files


# -- the command line ------------------------------------------------------------------------------


def cli_reference() -> str:
    import click

    from tracekit.cli import main

    parts = [
        "# Command-line reference\n",
        "Generated from the command line itself: each section is what `tracekit COMMAND --help` prints.",
        "The analysis commands and their options come from one registry (`tracekit.commands.registry`);",
        "their keywords in the [Python API](api.md) have the same names, with `_` for `-`.\n",
    ]
    with click.Context(main, info_name="tracekit", terminal_width=100) as context:
        parts += ["## tracekit\n", "```text", main.get_help(context), "```\n"]
        for name in sorted(main.commands):  # type: ignore[attr-defined]
            command = main.commands[name]  # type: ignore[attr-defined]
            with click.Context(command, info_name=name, parent=context, terminal_width=100) as sub:
                parts += [f"## tracekit {name}\n", "```text", command.get_help(sub), "```\n"]
    return "\n".join(parts)


# -- the column contract ---------------------------------------------------------------------------


def column_contract() -> str:
    from tracekit.model import schema

    schemas = [value for value in vars(schema).values() if isinstance(value, schema.Schema)]
    lines = [
        "# The column contract\n",
        "Generated from `tracekit/model/schema.py`. " + _markdown(schema.__doc__ or "").replace("\n", " ") + "\n",
        "Every table below is what a `Trace` (`tracekit.open_trace`) or `MemoryTrace`",
        "(`tracekit.open_snapshot`) holds, whatever the source: an nsys export of any version, a",
        "torch.profiler trace, a CUDA memory snapshot.\n",
    ]
    for table in schemas:
        lines += [f"## `{table.table}`\n", _markdown(table.doc) + "\n" if table.doc else ""]
        lines += ["| Column | Type | Unit | What it holds |", "|---|---|---|---|"]
        for column in table.columns:
            doc = _markdown(column.doc)
            if column.categories:
                doc += f" One of: {', '.join(f'`{value}`' for value in column.categories)}."
            doc = doc.replace("|", "\\|")  # a bar inside a table cell
            lines.append(f"| `{column.name}` | {column.dtype} | {column.unit or ''} | {doc} |")
        lines.append("")
    return "\n".join(lines)


def _markdown(text: str) -> str:
    """A docstring's reStructuredText literals as Markdown code."""
    return " ".join(text.split()).replace("``", "`")


# -- the layout -----------------------------------------------------------------------------------

LAYERS = """# How the code is laid out

A table is read in `sources/`, computed in `analysis/`, and rendered in `render/`. Every analysis
command is declared once, in a module of its own beside its analysis (`analysis/waits/idle_command.py`):
its options (a frozen dataclass), the function that runs it on one input, for many inputs the part and
merge, its picture, its place in the report; `commands/registry.py` lists those modules (and finds other
packages' commands through the `tracekit.commands` entry points). The command line (`cli/`), the Python
API (`api/`, its functions generated from the declarations into `api/commands.py`), `report/` and the
process pool and Dask workers all run commands through it (docs/design/adding-a-command.md in the
repository walks through adding one). Imports point down the layers: `model` imports nothing of tracekit's
but `errors`; `sources` and `analysis` import `model`; `commands` imports `analysis`; `cli` imports
everything; never the reverse, and no module imports itself back through others. Inside `analysis/`,
the question packages (`kernels`, `ranges`, `waits`, `critical_path`, `memory`) import the shared
`primitives/` (joins, intervals, the step window, op classes) and never each other; `advice/` and
`many/` sit above them. import-linter checks these layers and that nothing cycles (`make lint`: the
contracts in `pyproject.toml`); `tests/test_architecture.py` checks each part's finer rules and that
each package's docstring names its modules.
Tests mirror the packages (`tests/analysis/test_idle.py`), with the builders of inputs with known
numbers in `tests/helpers/`.

What follows is each package's own docstring.
"""


def layout() -> str:
    parts = [LAYERS]
    for init in sorted((ROOT / "tracekit").rglob("__init__.py")):
        package = init.parent.relative_to(ROOT).as_posix().replace("/", ".")
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        parts += [f"## `{package}`\n", "```text", docstring, "```\n"]
    return "\n".join(parts)


# -- the tutorial ----------------------------------------------------------------------------------


def tutorial() -> str:
    """Run docs/tutorial.py's cells in one namespace, in a fresh working folder, and render them."""
    shared = ROOT.parent / "shared"
    if not (shared / "traces").is_dir():
        raise SystemExit(f"the tutorial runs on the real files in {shared}, which is absent: put them there")
    cells = _cells(TUTORIAL.read_text())
    namespace: dict = {"__name__": "__tutorial__", "__file__": str(TUTORIAL)}
    out = ["---\nhide:\n  - toc\n---"]  # the page's width for the cells' tables, not a table of contents
    started = time.perf_counter()
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        for kind, source in cells:
            if kind == "markdown":
                out.append(source)
                continue
            printed, value = _run_cell(source, namespace)
            out.append(f"```python\n{source}\n```")
            if printed.strip():
                out.append(f'<div class="tutorial-output"><pre>{escape(printed.rstrip())}</pre></div>')
            if value is not None:
                out.append(f'<div class="tutorial-output">{_display(value)}</div>')
    finally:
        os.chdir(cwd)
    seconds = time.perf_counter() - started
    out.append(
        f"<small>Built by running `docs/tutorial.py` ({len(cells)} cells, {seconds:.1f} s) "
        f"with tracekit {_version()} and Python {sys.version.split()[0]}.</small>"
    )
    return "\n\n".join(out) + "\n"


def _cells(text: str) -> list[tuple[str, str]]:
    """``# %%`` code cells and ``# %% [markdown]`` cells (their lines' leading "# " removed). A marker
    opens a cell only at a line's start, as in Jupytext: prose may name it ("Its `# %%` cells")."""
    cells: list[tuple[str, str]] = []
    for chunk in re.split(r"^# %%", text, flags=re.M)[1:]:
        header, _, body = chunk.partition("\n")
        if header.strip() == "[markdown]":
            lines = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.strip().splitlines()]
            cells.append(("markdown", "\n".join(lines)))
        elif body.strip():
            cells.append(("code", body.strip()))
    return cells


def _run_cell(source: str, namespace: dict) -> tuple[str, object]:
    """Run one cell; what it printed and the value of its last line when that is an expression."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None:
        tree.body.pop()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(tree, str(TUTORIAL), "exec"), namespace)
        value = eval(compile(ast.Expression(last.value), str(TUTORIAL), "eval"), namespace) if last else None
    return printed.getvalue(), value


def _display(value: object) -> str:
    html = getattr(value, "_repr_html_", None)
    if html is not None and not hasattr(value, "to_html"):
        return html()
    to_html = getattr(value, "to_html", None)
    if to_html is not None:  # a DataFrame: its first rows and long texts cut, as a notebook shows them
        import pandas as pd

        with pd.option_context("display.max_colwidth", 60):
            return to_html(max_rows=12, border=0)
    return f"<pre>{escape(repr(value))}</pre>"


def _version() -> str:
    import tracekit

    return tracekit.__version__
