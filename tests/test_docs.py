"""The README and the docs site: the README stays short with its two commands true to CI, and the pages
generated from the code (CLI reference, column contract, layout, tutorial cells) hold what they must."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from helpers.paths import ROOT
from helpers.references import stale_references

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
    commands = re.search(r"## Two commands\n\n(?:<!-- .*? -->\n)?```bash\n(.*?)```", readme, re.S)
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


def test_a_cell_marker_inside_a_line_is_text():
    """Only a line that starts with ``# %%`` opens a cell: the tutorial's intro names the marker in
    backticks, and its page stopped at "Its `", the rest shown as a code block of comments."""
    module = hooks()
    cells = module._cells("# %% [markdown]\n# Its `# %%` cells open as a notebook.\n# More.\n\n# %%\nx = 1\n")
    assert cells == [("markdown", "Its `# %%` cells open as a notebook.\nMore."), ("code", "x = 1")]
    intro = module._cells((ROOT / "docs" / "tutorial.py").read_text())[0]
    assert intro[0] == "markdown" and "notebook (Jupyter with Jupytext, VS Code)" in intro[1]


def test_docstring_examples_are_examples_sections():
    """Google style's ``Examples:`` section renders ``>>>`` lines as code; ``Example:`` is an admonition
    whose ``>>>`` lines Markdown reads as nested quotes run into one paragraph."""
    singular = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "tracekit").rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.strip() == "Example:"
    ]
    assert singular == []


# nsys 2023.1 renamed its `nsys stats` reports; nsys 2022.4 (Debian's) knows only the old names, and
# prints an error for a new one (then exits 0). A section of a page naming one names the other too.
NSYS_REPORTS = {
    "gpukernsum": "cuda_gpu_kern_sum",
    "nvtxsum": "nvtx_sum",
    "kernexecsum": "cuda_kern_exec_sum",
    "cudaapisum": "cuda_api_sum",
    "gpumemtimesum": "cuda_gpu_mem_time_sum",
    "gpumemsizesum": "cuda_gpu_mem_size_sum",
    "gputrace": "cuda_gpu_trace",
    "nvtxkernsum": "nvtx_kern_sum",
    "nvtxgpuproj": "nvtx_gpu_proj_trace",
}


def doc_pages() -> list:
    pages = [ROOT / "README.md", ROOT / "docs" / "tutorial.py"]
    return pages + [path for path in (ROOT / "docs").rglob("*.md") if "design" not in path.parts]


def test_nsys_report_names_are_given_for_old_and_new_nsys():
    missing = []
    for path in doc_pages():
        text = path.read_text()
        if path.suffix == ".py":  # the tutorial: its Markdown cells without their "# "
            text = re.sub(r"^# ", "", text, flags=re.M)
        text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # tracekit's printed output aside
        for section in re.split(r"^#+ ", text, flags=re.M):
            for old, new in NSYS_REPORTS.items():
                named = {name for name in (old, new) if re.search(rf"(?<![\w-]){name}(?![\w-])", section)}
                if len(named) == 1:
                    missing.append(
                        f"{path.relative_to(ROOT)}: {' without '.join(sorted(named) + sorted({old, new} - named))}"
                    )
    assert missing == []


@pytest.mark.nsys
def test_the_old_report_names_are_nsys_2022_4_s(nsys):
    import subprocess

    listed = subprocess.run([nsys, "stats", "--help-reports"], capture_output=True, text=True, timeout=60).stdout
    version = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60).stdout
    if "2022.4" not in version:
        pytest.skip(f"the installed nsys is not 2022.4: {version.strip()}")
    assert [name for name in NSYS_REPORTS if not re.search(rf"^\s*{name}\b", listed, re.M)] == []


def test_getting_started_is_made_of_the_readme_s_sections():
    """Getting started includes the README's "Two commands" and "After make demo" (with the tour) at
    each build (pymdownx.snippets sections), so the two say the same."""
    readme = (ROOT / "README.md").read_text()
    page = (ROOT / "docs" / "getting-started.md").read_text()
    for name in ("two-commands", "after-demo"):
        assert f'--8<-- "README.md:{name}"' in page
        start, end = f"<!-- --8<-- [start:{name}] -->", f"<!-- --8<-- [end:{name}] -->"
        assert readme.count(start) == readme.count(end) == 1 and readme.index(start) < readme.index(end)
    included = readme[readme.index("[start:after-demo]") : readme.index("[end:after-demo]")]
    assert "source .venv/bin/activate" in included and "## A tour in six commands" in included


def test_the_home_page_opens_as_the_readme_does():
    def intro(text: str) -> str:
        return text.split("\n\n")[1]

    assert intro((ROOT / "docs" / "index.md").read_text()) == intro((ROOT / "README.md").read_text())


def guide_pages() -> dict[str, str]:
    """The nav's Guide section: each page's label, by its path."""
    nav = (ROOT / "mkdocs.yml").read_text()
    section = re.search(r"^  - Guide:\n((?:      - .*\n)+)", nav, re.M)
    assert section is not None
    return dict((path, label) for label, path in re.findall(r"- (.+): (guide/[\w-]+\.md)", section.group(1)))


def test_the_home_page_and_the_readme_name_every_guide_page():
    """The home page's "guide, by question" links every guide page, and the README's Documentation
    section names each by its label (both had left out "what to fix first", the tour's first command)."""
    pages = guide_pages()
    assert len(pages) >= 10 and "guide/advise.md" in pages
    index = (ROOT / "docs" / "index.md").read_text()
    listed = re.search(r"^- The guide, by question: (.*?)(?=^- )", index, re.M | re.S)
    assert listed is not None
    assert re.findall(r"\]\((guide/[\w-]+\.md)\)", listed.group(1)) == list(pages)
    readme = (ROOT / "README.md").read_text()
    documentation = " ".join(readme[readme.index("## Documentation") :].split())
    assert [label for label in pages.values() if label.lower() not in documentation.lower()] == []


def test_the_tutorial_is_a_notebook_not_a_script():
    """No cell that only a script runs (``if __name__ == "__main__"``): the page would show it."""
    cells = hooks()._cells((ROOT / "docs" / "tutorial.py").read_text())
    assert not [source for kind, source in cells if kind == "code" and "__name__" in source]


def prose_files() -> list[Path]:
    """tracekit's modules, the tests and the docs pages that describe the code (not design history)."""
    pages = [page for page in (ROOT / "docs").rglob("*.md") if "design" not in page.relative_to(ROOT).parts]
    return sorted([*(ROOT / "tracekit").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *pages, ROOT / "README.md"])


def test_prose_names_only_modules_that_exist():
    """A docstring, comment or page that names a tracekit module or name (``analysis.memory.tables``,
    tracekit.cli.main) names one that exists: moved modules leave no stale pointers behind."""
    stale = {str(path.relative_to(ROOT)): found for path in prose_files() if (found := stale_references(path))}
    assert stale == {}


def test_the_reference_rule_sees_stale_names(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "See ``analysis.memory.tables.timeline_chart`` and ``tracekit.model.schema.GPU_OPS``; tracekit.kernels(...).\n"
        "Stale: ``analysis.memory_tables.timeline_chart``, tracekit.cli.options, ``model.trace.Trace.nothing``,\n"
        "``tracekit.session()``. Not references: ``np.where``, ``trace.gpu_ops``, ``launch.py``.\n"
    )
    assert stale_references(page) == [
        "2: analysis.memory_tables.timeline_chart",
        "2: tracekit.cli.options",
        "2: model.trace.Trace.nothing",
        "3: tracekit.session(",
    ]
