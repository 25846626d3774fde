"""Shared fixtures: the real data beside the project, nsys when installed, the CLI runner."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SHARED_TRACES = SHARED / "traces"
SHARED_MEMORY = SHARED / "memory"


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real exports not available: {SHARED_TRACES} is absent")
    return SHARED_TRACES


@pytest.fixture
def shared_memory() -> Path:
    if not SHARED_MEMORY.is_dir():
        pytest.skip(f"real memory snapshots not available: {SHARED_MEMORY} is absent")
    return SHARED_MEMORY


@pytest.fixture(scope="session")
def nsys() -> str:
    path = shutil.which("nsys")
    if path is None:
        pytest.skip("Nsight Systems (nsys) is not installed")
    return path


def shared_export_paths() -> list[Path]:
    return sorted(SHARED_TRACES.glob("*.sqlite")) if SHARED_TRACES.is_dir() else []


@pytest.fixture
def cli():
    """Run `tracekit ARGS...` in-process; returns click's Result (exit_code, output, stderr)."""
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(main, [str(arg) for arg in args], catch_exceptions=False)

    return invoke


NVTX_PROGRAM = """
import time
import nvtx
for step in range(3):
    with nvtx.annotate("step"):
        with nvtx.annotate("forward"):
            time.sleep(0.002)
        with nvtx.annotate("backward"):
            time.sleep(0.003)
"""


@pytest.fixture(scope="session")
def real_report(nsys, tmp_path_factory) -> Path:
    """A real .nsys-rep of a CPU-only Python program with 3 NVTX `step` ranges, made by the installed nsys."""
    import sys

    from nsys_stats import profile_under_nsys

    folder = tmp_path_factory.mktemp("report")
    program = folder / "program.py"
    program.write_text(NVTX_PROGRAM)
    report = profile_under_nsys(nsys, [sys.executable, str(program)], folder / "capture")
    return report
