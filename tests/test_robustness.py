"""Hostile and careless use: nothing an input names is overwritten, nothing outside the output folder
is touched, and every failure is one line with a non-zero exit, never a traceback."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from nsys_builder import ExportBuilder
from snapshot_builder import SnapshotBuilder

GEMM = "ampere_sgemm_128x64_tn"
MIB = 2**20


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line_error(result, *fragments: str) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def export(tmp_path) -> Path:
    b = ExportBuilder("2026.2")
    b.push_pop(0, 1_000, "step")
    b.kernel(100, 200, GEMM, launch_at=10)
    return b.write(tmp_path / "in.sqlite")


@pytest.mark.parametrize(
    "args",
    [
        ("kernels", "{export}", "-o", "{export}"),
        ("kernels", "{export}", "--format", "parquet", "-o", "{export}"),
        ("ranges", "{export}", "--format", "csv", "-o", "{link}"),  # through a link to it
        ("memory", "{snapshot}", "--plot", "{snapshot}"),
        ("memory", "{snapshot}", "--format", "json", "-o", "{snapshot}"),
    ],
)
def test_output_never_overwrites_an_input(cli, export, tmp_path, args):
    b = SnapshotBuilder()
    b.alloc(0x2000, 4 * MIB, 100)
    snapshot = b.dump(tmp_path / "snapshot.png")  # read by content: a .png name is still a snapshot
    link = tmp_path / "link.sqlite"
    link.symlink_to(export)
    before = {path: digest(path) for path in (export, snapshot)}
    filled = [arg.format(export=export, snapshot=snapshot, link=link) for arg in args]
    one_line_error(cli(*filled), "is an input of this command")
    assert {path: digest(path) for path in (export, snapshot)} == before
