"""Bad input gets one line and a non-zero exit, never a traceback."""

import os
import shutil
import sqlite3

import pytest
from helpers.nsys_builder import ExportBuilder

from tracekit import nsys_tool


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_missing_file(cli, tmp_path):
    assert_one_line_error(cli("kernels", tmp_path / "nope.sqlite"), "no such file")


def test_not_sqlite(cli, tmp_path):
    path = tmp_path / "notes.sqlite"
    path.write_text("these are my notes, not a database\n" * 100)
    assert_one_line_error(cli("kernels", path), "not an SQLite database", "nsys export --type sqlite")


@pytest.mark.parametrize("content", ["null", "42", '"a string"', "true"])
def test_json_that_is_no_trace_is_called_json(cli, tmp_path, content):
    """A .json holding JSON but no object: not "an SQLite database" (nor the advice to export one)."""
    path = tmp_path / "trace.json"
    path.write_text(content)
    assert_one_line_error(cli("kernels", path), "is not a torch.profiler (Chrome) trace", '"traceEvents"')
    assert "not an SQLite database" not in cli("kernels", path).output


def test_sqlite_but_not_nsys(cli, tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE people (name TEXT)")
    assert_one_line_error(cli("kernels", path), "not an Nsight Systems export", "no StringIds")


def test_export_without_cuda_tables(cli, tmp_path):
    b = ExportBuilder("2022.4")
    b.push_pop(0, 100, "step")
    path = b.write(tmp_path / "cpu.sqlite")
    assert_one_line_error(cli("kernels", path), "no CUDA kernels", "-t cuda")
    assert_one_line_error(cli("kernels", path, "--by", "category"), "no CUDA kernels")


# Every command that reads GPU work (critical-path aside: its own message, rewritten elsewhere).
GPU_COMMANDS = [
    "kernels",
    "breakdown",
    "idle",
    "advise",
    "launches",
    "overlap",
    "queues",
    "ops",
    "sequences",
    "bandwidth",
]


@pytest.mark.parametrize("command", GPU_COMMANDS)
def test_a_cpu_capture_gets_one_answer_from_every_gpu_command(cli, tmp_path, command):
    """make demo's trace on a CPU: each command says it is a CPU run and how to capture the GPU, where
    queues, ops, sequences and bandwidth said only what they had not found ("no kernels, so no kernel
    sequences")."""
    b = ExportBuilder("2022.4")
    b.push_pop(0, 100, "step")
    path = b.write(tmp_path / "cpu.sqlite")
    assert_one_line_error(cli(command, path), "traced no CUDA activity (a CPU-only run", "Capture on an NVIDIA GPU")


def test_a_trace_of_copies_only_is_not_called_a_cpu_run(cli, tmp_path):
    """GPU work without a kernel: the trace did trace CUDA, so the message says what it holds instead
    (it said "the capture traced no CUDA activity (a CPU-only run ...)")."""
    b = ExportBuilder("2026.2")
    b.memcpy(100, 200)
    b.memset(300, 400)
    path = b.write(tmp_path / "copies.sqlite")
    for command in ("kernels", "launches"):
        assert_one_line_error(cli(command, path), "has no CUDA kernels: its 2 GPU operations are memory copies")
        assert "CPU-only" not in cli(command, path).output


def test_folder_that_is_not_a_run(cli, tmp_path):
    assert_one_line_error(cli("kernels", tmp_path), "not a tracekit run folder")


def test_report_without_nsys(cli, tmp_path, monkeypatch):
    report = tmp_path / "capture.nsys-rep"
    report.write_bytes(nsys_tool.REPORT_MAGIC + b" 1.\n")
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("TRACEKIT_NSYS", raising=False)
    monkeypatch.setattr(nsys_tool, "NSYS_LOCATIONS", [])
    assert_one_line_error(
        cli("kernels", report), "nsys) is not installed", "apt-get install nsight-systems", "--nsys PATH"
    )
    assert_one_line_error(cli("kernels", report, "--nsys", tmp_path / "no-such-nsys"), "no such executable")


@pytest.mark.nsys
def test_report_is_exported_once_and_kept(cli, real_report, tmp_path):
    report = tmp_path / real_report.name
    shutil.copy(real_report, report)
    result = cli("kernels", report)
    # a real CPU-only capture: exported fine, and the export says there are no kernels
    assert_one_line_error(result, "no CUDA kernels")
    export = report.with_suffix(".sqlite")
    assert export.exists()
    first = export.stat().st_mtime_ns
    cli("kernels", report)
    assert export.stat().st_mtime_ns == first  # reused, not exported again


@pytest.mark.nsys
def test_report_from_a_newer_nsys(cli, real_report, tmp_path):
    # The report format's version tag sits in the first line; 2022.4 refuses versions it does not know.
    data = real_report.read_bytes()
    newer = tmp_path / "newer.nsys-rep"
    newer.write_bytes(data.replace(b"Report 1.", b"Report 9.", 1))
    assert_one_line_error(cli("kernels", newer), "newer Nsight Systems", "nsys export --type sqlite")
    assert not any(path.suffix == ".sqlite" for path in tmp_path.iterdir())  # no half-written export left


@pytest.mark.nsys
def test_damaged_report(cli, tmp_path):
    damaged = tmp_path / "damaged.nsys-rep"
    damaged.write_bytes(os.urandom(4096))
    assert_one_line_error(cli("kernels", damaged), "nsys export could not read")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["idle", "--overhead-max-us", "1e308"], "--overhead-max-us is at most 9.22e+15 us (int64 ns), not 1e+308"),
        (["advise", "--gap-ms", "1e300"], "--gap-ms is at most 9.22e+12 ms (int64 ns), not 1e+300"),
        (["timeline", "--start", "1e308", "-o", "t.json"], "--start is at most 9.22e+12 ms (int64 ns), not 1e+308"),
        (["timeline", "--end", "1e13", "-o", "t.json"], "--end is at most 9.22e+12 ms (int64 ns), not 1e+13"),
    ],
    ids=["idle", "advise", "timeline start", "timeline end"],
)
def test_a_time_too_long_for_nanoseconds_is_a_usage_error(cli, tmp_path, monkeypatch, args, message):
    """A finite time whose nanoseconds pass int64 (1e308 ms) raised OverflowError converting it."""
    b = ExportBuilder("2026.2")
    b.kernel(1_000, 2_000, "gemm", launch_at=500)
    b.kernel(5_000, 6_000, "gemm", launch_at=4_500)
    export = b.write(tmp_path / "t.sqlite")
    monkeypatch.chdir(tmp_path)
    result = cli(args[0], export, *args[1:])
    assert result.exit_code == 2 and result.stderr.strip().splitlines()[-1] == f"Error: {message}", result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.sqlite"]
