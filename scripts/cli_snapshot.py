"""Every command's output on every file in ../shared, one file per run, for checking that a refactoring
changed nothing: run it before and after, then ``diff -r BEFORE AFTER`` (empty: byte-identical).

Usage: python scripts/cli_snapshot.py OUT_FOLDER [--shared ../shared] [--only SUBSTRING]

Each run's file holds the exit code, stdout and stderr (click's CliRunner, in this process, so the run
takes a few minutes rather than one process start per command). Outputs written to files (timeline,
report, pictures) are recorded by size and SHA-256, except where they hold the time they were made.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import sys
import tempfile
from pathlib import Path

import matplotlib
from click.testing import CliRunner

from tracekit.cli import main

# The every-real-file sweep's commands (one list, kept by the test that checks it covers the registry),
# plus the output formats whose bytes a refactoring must keep too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_every_real_file import TRACE_COMMANDS as SWEPT

TRACE_COMMANDS = SWEPT + [
    ["kernels", "--format", "json"],
    ["kernels", "--name", "short", "--format", "csv"],
    ["ranges", "--format", "json"],
    ["critical-path", "--format", "json"],
    ["advise", "--format", "json"],
]
SNAPSHOT_COMMANDS = [["memory"], ["memory", "--by", "role"], ["memory", "--format", "json"]]
# A report's HTML and Markdown say when they were made; those lines are left out of the hash.
VOLATILE = re.compile(rb"generated (on |at )?\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?( UTC)?", re.IGNORECASE)


def inputs(shared: Path) -> tuple[list[Path], list[Path]]:
    traces = sorted((shared / "traces").glob("*.sqlite")) + sorted((shared / "kineto").glob("*.json.gz"))
    traces += sorted((shared / "kineto" / "v100_dlrm_8ranks").glob("rank[01].pt.trace.json"))
    return traces, sorted((shared / "memory").glob("*.pickle"))


def digest(folder: Path) -> str:
    """Each file under ``folder``: its relative path, size and SHA-256 (volatile lines left out)."""
    lines = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = VOLATILE.sub(b"", path.read_bytes())
        lines.append(f"{path.relative_to(folder)} {len(data)} {hashlib.sha256(data).hexdigest()}")
    return "\n".join(lines)


def run(runner: CliRunner, args: list[str], work: Path | None = None) -> str:
    result = runner.invoke(main, args, catch_exceptions=True)
    text = (
        f"$ tracekit {' '.join(args)}\nexit {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        text += f"--- exception\n{type(result.exception).__name__}: {result.exception}\n"
    if work is not None:
        text += f"--- files\n{digest(work)}\n"
    # temporary paths differ run to run
    return text.replace(str(work), "WORK") if work is not None else text


def main_(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    parser.add_argument("--only", default="", help="only runs whose file name holds this")
    options = parser.parse_args(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    matplotlib.rcParams["svg.hashsalt"] = "cli-snapshot"  # SVG element ids otherwise random per run
    traces, snapshots = inputs(options.shared)
    runner = CliRunner()
    jobs: list[tuple[str, list[str], bool]] = []
    for trace in traces:
        for command in TRACE_COMMANDS:
            jobs.append((f"{trace.name}__{'_'.join(command)}", [*command, str(trace)], False))
        jobs.append((f"{trace.name}__timeline", ["timeline", str(trace), "-o", "{work}/timeline.json"], True))
        jobs.append((f"{trace.name}__report", ["report", str(trace), "-o", "{work}/report", "--html"], True))
    for snapshot in snapshots:
        for command in SNAPSHOT_COMMANDS:
            jobs.append((f"{snapshot.name}__{'_'.join(command)}", [*command, str(snapshot)], False))
    if len(traces) >= 2:
        jobs.append(("diff", ["diff", str(traces[0]), str(traces[1])], False))
    for name, args, writes in jobs:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        if options.only not in name:
            continue
        if writes:
            work = Path(tempfile.mkdtemp(prefix="tk-snap-"))
            text = run(runner, [arg.replace("{work}", str(work)) for arg in args], work)
            shutil.rmtree(work)
        else:
            text = run(runner, args)
        text = text.replace(str(options.shared), "SHARED")
        (options.out / f"{name}.txt").write_text(text)
        print(name, flush=True)


if __name__ == "__main__":
    main_()
