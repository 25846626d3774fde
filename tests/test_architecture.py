"""The structure the code promises: imports point down the layers, modules stay small, the CLI starts
without the heavy libraries."""

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
# signals: Ctrl-C and SIGTERM as an exception, for cleanups; session: what is process-wide
UTILITIES = {"errors", "files", "signals", "session"}
ALLOWED = {
    "files": {"errors", "session"},
    "signals": set(),
    "session": set(),
    "dask_client": UTILITIES,
    "annotate": set(),  # imported by users' training scripts: the standard library only
    "model": UTILITIES,
    "runs": UTILITIES,
    "nsys_tool": UTILITIES,
    "sources": UTILITIES | {"model", "runs", "nsys_tool"},
    "analysis": UTILITIES | {"model"},
    "render": UTILITIES | {"model"},
    "export": UTILITIES | {"model", "analysis"},
    "capture": UTILITIES | {"runs", "nsys_tool", "annotate"},
    "parallel": UTILITIES | {"model", "sources", "analysis", "runs", "dask_client"},
    "commands": UTILITIES | {"model", "sources", "analysis", "runs", "parallel"},
    "api": UTILITIES | {"model", "analysis", "commands", "sources", "render"},
    "report": UTILITIES | {"model", "sources", "analysis", "render", "runs", "commands"},
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
        "parallel",
        "commands",
    },
}


def part_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


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


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_imports_point_down_the_layers(path):
    part = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    if part not in ALLOWED:
        return  # __init__.py and errors.py at the top import nothing of tracekit's
    for module in tracekit_imports(path):
        target = part_of(module)
        if target in ("", part) or target == "__version__":
            continue
        assert target in ALLOWED[part], f"{path.relative_to(ROOT)} ({part}) imports {module} ({target})"


def test_the_layering_rule_sees_a_wrong_import(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def f():\n    from tracekit.analysis.kernels import kernel_summary\n")
    assert part_of(next(iter(tracekit_imports(wrong)))) == "analysis" not in ALLOWED["sources"]


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_modules_stay_small(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


def test_cli_imports_no_heavy_library():
    probe = (
        "import sys, tracekit.cli; "
        "print(','.join(m for m in ('pandas', 'numpy', 'pyarrow', 'matplotlib', 'torch') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""


def test_every_cli_command_is_reachable(cli):
    text = cli("--help").output
    for command in ("kernels", "ranges", "breakdown", "diff", "memory", "report", "export", "bench", "capture"):
        assert f"  {command}" in text
