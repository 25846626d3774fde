"""The README and the docs site: the README stays short with its two commands true to CI, and the pages
generated from the code (CLI reference, column contract, layout, tutorial cells) hold what they must."""

from __future__ import annotations

import importlib.util
import re

import pytest
from helpers.paths import ROOT

from tracekit.cli import main
from tracekit.model import schema


def hooks():
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_and_its_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    commands = re.search(r"## Two commands\n\n```bash\n(.*?)```", readme, re.S)
    assert commands is not None
    lines = [line.split("#")[0].strip() for line in commands.group(1).strip().splitlines()]
    assert lines == ["make demo", "make test"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip()]
    assert ci[-1] == "make test"


def test_every_page_in_the_nav_exists_or_is_generated():
    generated = {"reference/cli.md", "reference/columns.md", "layout.md", "tutorial.md"}
    pages = re.findall(r":\s+([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert len(pages) >= 20 and generated <= set(pages)
    for page in set(pages) - generated:
        assert (ROOT / "docs" / page).is_file(), page


def test_the_cli_reference_has_every_command_and_flag():
    page = hooks().cli_reference()
    for name, command in main.commands.items():  # type: ignore[attr-defined]
        assert f"## tracekit {name}\n" in page
        for param in command.params:
            for option in getattr(param, "opts", []):
                if option.startswith("--"):
                    assert option in page, (name, option)


def test_the_column_contract_has_every_column():
    page = hooks().column_contract()
    tables = [value for value in vars(schema).values() if isinstance(value, schema.Schema)]
    assert len(tables) >= 7
    for table in tables:
        assert f"## `{table.table}`" in page
        for column in table.columns:
            assert f"| `{column.name}` | {column.dtype} |" in page


def test_the_layout_page_has_every_package():
    page = hooks().layout()
    for init in (ROOT / "tracekit").rglob("__init__.py"):
        package = init.parent.relative_to(ROOT).as_posix().replace("/", ".")
        assert f"## `{package}`" in page


def test_the_tutorial_is_cells_of_code_and_prose():
    module = hooks()
    cells = module._cells((ROOT / "docs" / "tutorial.py").read_text())
    kinds = [kind for kind, _ in cells]
    assert kinds.count("code") >= 10 and kinds.count("markdown") >= 8
    printed, value = module._run_cell("x = 40\nprint('hi')\nx + 2", {})
    assert (printed, value) == ("hi\n", 42)
