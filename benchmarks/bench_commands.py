"""Time tracekit commands against nsys's own reports on the same file, in one run.

Each command runs as a fresh process (what a user waits for: interpreter start, imports, reading,
computing, printing), ``--repeat`` times; the table gives the median wall time and the peak resident
memory (max RSS of the child process).

    python benchmarks/bench_commands.py benchmarks/data/kernels_1m.sqlite \
        --tracekit "kernels --by-launch-config --format csv" --nsys gpukernsum
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def wall_seconds(command: list[str]) -> float:
    """Wall time of one run of ``command`` in a child process."""
    started = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed: {result.stderr.decode()[-500:]}")
    return elapsed


def peak_rss_mib(command: list[str]) -> float:
    """Peak resident memory of one run. RUSAGE_CHILDREN keeps the largest child ever seen, so each
    measurement runs from a fresh Python process that has no other children."""
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
            ),
            *command,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(probe.stdout.strip()) / 1024  # Linux reports KiB


def measure(label: str, command: list[str], repeat: int) -> dict:
    times = [wall_seconds(command) for _ in range(repeat)]
    return {
        "label": label,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "peak_mib": peak_rss_mib(command),
        "runs": repeat,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", type=Path)
    parser.add_argument(
        "--tracekit",
        action="append",
        default=[],
        help="tracekit arguments after the command name, the export is inserted after the first word (repeatable)",
    )
    parser.add_argument("--nsys", action="append", default=[], help="nsys stats report name (repeatable)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sibling = Path(sys.executable).parent / "tracekit"  # the tracekit of this environment first
    tracekit = str(sibling) if sibling.exists() else shutil.which("tracekit")
    rows = []
    for spec in args.tracekit:
        if tracekit is None:
            raise SystemExit("tracekit is not installed here: no tracekit next to this Python or on PATH")
        words = shlex.split(spec)
        rows.append(measure(f"tracekit {spec}", [tracekit, words[0], str(args.export), *words[1:]], args.repeat))
    nsys = shutil.which("nsys")
    for report in args.nsys:
        if nsys is None:
            print(f"nsys not installed: skipping nsys stats -r {report}")
            continue
        rows.append(
            measure(
                f"nsys stats -r {report}",
                [nsys, "stats", "-q", "-r", report, "-f", "csv", str(args.export)],
                args.repeat,
            )
        )
    size = args.export.stat().st_size / 1e6
    print(f"{args.export} ({size:.0f} MB), median of {args.repeat} runs each, peak RSS of one run")
    print(f"{'command':70} {'median s':>9} {'min s':>7} {'max s':>7} {'peak MiB':>9}")
    for row in rows:
        print(
            f"{row['label']:70} {row['median_s']:9.2f} {row['min_s']:7.2f} {row['max_s']:7.2f} {row['peak_mib']:9.0f}"
        )
    if len(rows) >= 2:
        print(f"ratio {rows[0]['label']} / {rows[-1]['label']}: {rows[0]['median_s'] / rows[-1]['median_s']:.2f}")


if __name__ == "__main__":
    main()
