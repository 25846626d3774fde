"""Shared fixtures: the real data beside the project, nsys when installed, the CLI runner."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.nsys_builder import ExportBuilder
from helpers.paths import SHARED_MEMORY, SHARED_TRACES

from tracekit.cli import main

FAKE_NSYS = Path(__file__).with_name("helpers") / "fake_nsys.py"


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


@pytest.fixture(scope="session")
def browser():
    """Chromium, driven by Playwright; skips when either is missing."""
    from helpers.browser import CHROMIUM

    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
    if CHROMIUM is None:
        pytest.skip("no Chromium: as root on Debian, scripts/install-chromium.sh installs it")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


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

    from helpers.nsys_stats import profile_under_nsys

    folder = tmp_path_factory.mktemp("report")
    program = folder / "program.py"
    program.write_text(NVTX_PROGRAM)
    report = profile_under_nsys(nsys, [sys.executable, str(program)], folder / "capture")
    return report


@pytest.fixture
def fake_nsys(tmp_path, monkeypatch, real_report):
    """A fake `nsys` on PATH; the report and export it hands out are real ones."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "nsys"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_NSYS} "$@"\n')
    shim.chmod(0o755)
    b = ExportBuilder("2022.4")
    for step in range(3):
        b.push_pop(step * 100, step * 100 + 90, "step")
    monkeypatch.setenv("FAKE_NSYS_REPORT", str(real_report))
    monkeypatch.setenv("FAKE_NSYS_EXPORT", str(b.write(tmp_path / "fake-export.sqlite")))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return shim
