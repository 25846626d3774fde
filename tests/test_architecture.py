"""The structure the code promises: imports point down the layers, modules stay small, the CLI starts
without the heavy libraries. The layers between packages, the independence of the question packages and
the absence of cycles are import-linter's contracts (pyproject.toml, ``make lint``); the rules here are
each part's finer ones."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tracekit"
MAX_LINES = 400

# What each part of tracekit may import from tracekit (besides itself): the layers, lowest first.
# errors and files (writing a file whole) are utilities everything may use; nsys_tool (the nsys
# executable) and runs (a run folder's files) serve the registry, capture and report.
# signals: Ctrl-C and SIGTERM as an exception, for cleanups; session: what is process-wide; version: the
# version string (recorded by capture and report without loading the API)
UTILITIES = {"errors", "files", "signals", "session", "version"}
# A part is a top-level module or package, or a sub-package named apart (analysis.many: the pool and
# Dask workers open the files they are given); a module belongs to the longest part that names it.
ALLOWED = {
    "files": {"errors", "session", "signals"},
    "signals": set(),
    "session": set(),
    "version": set(),
    "annotate": set(),  # imported by users' training scripts: the standard library only
    "run_config": UTILITIES,  # the run vocabulary: what a workload can run, the columns a run produces
    "activation_formula": UTILITIES | {"run_config"},
    "model": UTILITIES,
    "runs": UTILITIES | {"activation_formula"},
    "nsys_tool": UTILITIES,
    "sources": UTILITIES | {"model", "runs", "nsys_tool"},
    "analysis": UTILITIES | {"model"},
    "analysis.many": UTILITIES | {"model", "analysis", "sources", "runs"},
    "render": UTILITIES | {"model"},
    "export": UTILITIES | {"model", "analysis"},
    "trace_events": UTILITIES | {"model", "analysis", "sources", "runs"},
    "capture": UTILITIES | {"runs", "nsys_tool", "annotate", "run_config", "activation_formula"},
    "commands": UTILITIES | {"model", "sources", "analysis", "runs"},
    "api": UTILITIES | {"model", "analysis", "commands", "sources", "render", "trace_events"},
    "report": UTILITIES | {"model", "sources", "analysis", "render", "runs", "commands", "run_config"},
    # the MCP server: the registry's commands as tools, run as the API runs them; reports; the traces it lists
    "mcp": UTILITIES | {"model", "sources", "analysis", "render", "runs", "report", "commands", "version"},
    "cli": UTILITIES
    | {
        "model",
        "sources",
        "analysis",
        "render",
        "runs",
        "report",
        "capture",
        "export",
        "nsys_tool",
        "commands",
        "trace_events",
        "run_config",
        "mcp",
    },
}


def part_of(module: str) -> str:
    """The part of tracekit a dotted module name belongs to ("" for the package itself)."""
    names = module.split(".")[1:]
    for length in range(len(names), 0, -1):
        if ".".join(names[:length]) in ALLOWED:
            return ".".join(names[:length])
    return names[0] if names else ""


def allowed(part: str, target: str) -> bool:
    """Whether ``part`` may import ``target``: one of its own, or a part (or the parent of one) it may use."""
    if target == part or target.startswith(part + ".") or part.startswith(target + "."):
        return target == part or target.startswith(part + ".") or target in ALLOWED[part]
    return target in ALLOWED[part] or target.split(".")[0] in ALLOWED[part]


def tracekit_imports(path: Path) -> set[str]:
    """Every tracekit module a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tracekit"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names if node.module == "tracekit")
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("tracekit"))
    return found


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_imports_point_down_the_layers(path):
    part = part_of(module_name(path))
    if part not in ALLOWED:
        return  # tracekit/__init__.py (the API's names) and errors.py at the top
    for module in tracekit_imports(path):
        target = part_of(module)
        if target in ("", part) or target == "__version__":
            continue
        assert allowed(part, target), f"{path.relative_to(ROOT)} ({part}) imports {module} ({target})"


def test_the_layering_rule_sees_a_wrong_import(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def f():\n    from tracekit.analysis.kernels.summary import kernel_summary\n")
    assert part_of(next(iter(tracekit_imports(wrong)))) == "analysis" not in ALLOWED["sources"]
    assert not allowed("analysis", "sources") and allowed("analysis.many", "sources")


def import_graph() -> dict[str, set[str]]:
    """Each tracekit module and the tracekit modules it imports (at the top or in a function; ``from
    tracekit import annotate`` imports annotate, not the package's own names)."""
    names = {module_name(path): path for path in modules()}
    graph = {}
    for name, path in names.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tracekit"):
                submodules = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in names]
                found.update(submodules)
                if len(submodules) < len(node.names) and node.module in names:
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in names)
        graph[name] = found - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph.get(module, ()):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others():
    assert cycles(import_graph()) == []


def workloads_imports(path: Path) -> list[str]:
    """Every import of ``workloads`` in a file: ``import``/``from`` statements at the top or inside a function,
    and ``importlib.import_module("workloads...")`` or ``__import__`` with the name written out."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names = [str(node.args[0].value)]
        else:
            continue
        found += [f"line {node.lineno}: {name}" for name in names if name.split(".")[0] == "workloads"]
    return found


def test_tracekit_never_imports_workloads():
    """The library stands alone: workloads imports tracekit, never the other way (``bench`` is added by an
    entry point), so no cycle runs through the two packages either."""
    found = {str(path.relative_to(ROOT)): workloads_imports(path) for path in modules()}
    assert {path: lines for path, lines in found.items() if lines} == {}


def test_the_workloads_rule_sees_an_import_in_a_function(tmp_path):
    hidden = tmp_path / "hidden.py"
    hidden.write_text(
        "import importlib\n\ndef f():\n    from workloads.activations import formula_note\n"
        "    return importlib.import_module('workloads.bench')\n"
    )
    assert workloads_imports(hidden) == ["line 4: workloads.activations", "line 5: workloads.bench"]


def test_the_import_contracts_hold(monkeypatch):
    """import-linter's contracts in pyproject.toml (the lint extra installs it; ``make lint`` runs it too)."""
    cli = pytest.importorskip("importlinter.cli")  # configures import-linter as its command does
    monkeypatch.chdir(ROOT)
    assert cli.use_cases.lint_imports(cache_dir=None, no_logo=True)


def test_the_cycle_rule_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("init", sorted(PACKAGE.rglob("__init__.py")), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_package_says_what_lives_there(init):
    """A package's docstring names each of its modules (``name``) and sub-packages (``name/``)."""
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    folder = init.parent
    members = [path.stem for path in folder.glob("*.py") if path.stem != "__init__"]
    members += [path.name for path in folder.iterdir() if (path / "__init__.py").is_file()]
    missing = [name for name in members if f"``{name}``" not in doc and f"``{name}/``" not in doc]
    assert not missing, f"{init.relative_to(ROOT)}'s docstring does not say what {', '.join(missing)} hold"


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "analysis").rglob("*.py")), ids=lambda path: str(path.relative_to(ROOT))
)
def test_analyses_speak_in_parameter_names(path):
    """No "--" in an analysis: options are named by parameter (``named``), the command line maps flags."""
    assert "--" not in path.read_text()


# Written by a program, one function per command (``python -m tracekit.api.generate``): it grows with the
# commands, and nobody edits it (a test regenerates it).
GENERATED = {PACKAGE / "api" / "commands.py"}


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_modules_stay_small(path):
    if path in GENERATED:
        assert "Generated by ``python -m tracekit.api.generate``" in path.read_text()
        return
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_cli_imports_no_heavy_library():
    probe = (
        "import sys, tracekit.cli, tracekit; "
        "print(','.join(m for m in ('pandas', 'numpy', 'pyarrow', 'matplotlib', 'torch') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""


def test_every_cli_command_is_reachable(cli):
    text = cli("--help").output
    for command in ("kernels", "ranges", "breakdown", "diff", "memory", "report", "export", "bench", "capture"):
        assert f"  {command}" in text


# `# fmt: skip` keeps a layout the formatter would undo: only a declared table's, whose rows are read as a
# table (rule tables, column specs, aligned mappings). Anywhere else the formatter's layout is the house's.
ROWS = (ast.Tuple, ast.List, ast.Dict, ast.Call, ast.Lambda)


def declared_table_ends(tree: ast.Module) -> set[int]:
    """Last lines of the module- and class-level assignments that declare a table: a dict, or a list, tuple
    or set of rows (tuples, lists, dicts, calls), one entry starting per line."""
    ends = set()
    for body in [tree.body, *(node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef))]:
        for node in body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            value = node.value
            if isinstance(value, ast.Dict):
                starts = [(key or item).lineno for key, item in zip(value.keys, value.values)]
            elif isinstance(value, (ast.List, ast.Tuple, ast.Set)) and all(isinstance(e, ROWS) for e in value.elts):
                starts = [element.lineno for element in value.elts]
            else:
                continue
            if len(starts) > 1 and len(set(starts)) == len(starts):
                ends.add(node.end_lineno or node.lineno)
    return ends


def formatter_skips_off_tables(path: Path) -> list[int]:
    """Lines of ``path`` whose ``# fmt: skip`` ends no declared table."""
    text = path.read_text(encoding="utf-8")
    tables = declared_table_ends(ast.parse(text))
    marked = [number for number, line in enumerate(text.splitlines(), 1) if line.rstrip().endswith("# fmt: skip")]
    return [number for number in marked if number not in tables]


def test_the_formatter_is_skipped_only_on_declared_tables():
    files = [path for path in ROOT.rglob("*.py") if not any(part.startswith(".") for part in path.parts)]
    found = {str(path.relative_to(ROOT)): lines for path in files if (lines := formatter_skips_off_tables(path))}
    assert found == {}


def test_the_formatter_rule_sees_a_skip_off_a_table(tmp_path):
    path = tmp_path / "module.py"
    path.write_text(
        'RULES = [\n    ("a", r"^a"),\n    ("b", r"^b"),\n]  # fmt: skip\n'
        'NAMES = ("a", "b",\n         "c")  # fmt: skip\n'
        "x = f(1,\n      2)  # fmt: skip\n"
    )
    assert formatter_skips_off_tables(path) == [6, 8]
