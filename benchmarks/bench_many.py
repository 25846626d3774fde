"""Many traces at once: `tracekit kernels FOLDER` over N replicated 1M-kernel exports, on the process
pool with 1 and 2 workers and on a Dask LocalCluster, with the client's peak memory apart from the
workers'.

    python benchmarks/bench_many.py benchmarks/data/kernels_1m.sqlite --copies 64

The copies are hard links in benchmarks/data/many/ (no extra disk; the page cache holds the file once,
so this measures reading and computing, not the disk). Each configuration runs in a fresh Python
process that calls the CLI in-process, so its own peak RSS is the client's; RUSAGE_CHILDREN gives the
largest worker (pool workers and Dask's nannies wait for their children). TRACEKIT_CACHE=0 measures
reading the exports; "cached" reads the caches a first run wrote.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBE = """
import resource, sys, time
from tracekit.cli import main
started = time.perf_counter()
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    wall = time.perf_counter() - started
    client = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"RESULT {wall:.2f} {client:.0f} {worker:.0f}", file=sys.stderr)
"""


def replicate(source: Path, copies: int) -> Path:
    folder = source.parent / "many"
    if folder.exists() and len(list(folder.glob("rank*.sqlite"))) == copies:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for rank in range(copies):
        os.link(source, folder / f"rank{rank}.sqlite")
    return folder


def measure(folder: Path, options: list[str], cache: bool) -> tuple[float, float, float]:
    env = {**os.environ, "TRACEKIT_CACHE": "1" if cache else "0"}
    command = [sys.executable, "-c", PROBE, "kernels", str(folder), "--format", "csv", "-o", os.devnull, *options]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in done.stderr.splitlines() if line.startswith("RESULT")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-800:]}")
    wall, client, worker = lines[-1].split()[1:]
    return float(wall), float(client), float(worker)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", type=Path)
    parser.add_argument("--copies", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    folder = replicate(args.export, args.copies)
    for cache in folder.glob("*.tracekit-cache"):
        shutil.rmtree(cache)
    configurations = [
        ("pool, 1 worker", ["--workers", "1"], False),
        ("pool, 2 workers", ["--workers", "2"], False),
        ("Dask LocalCluster, 2 workers", ["--dask", "--workers", "2"], False),
        ("pool, 2 workers, first run with cache (writes it)", ["--workers", "2"], True),
        ("pool, 2 workers, cached", ["--workers", "2"], True),
    ]
    print(f"{args.copies} exports x {args.export.name} ({args.export.stat().st_size / 2**20:.0f} MB each)")
    print("| configuration | wall (s) | per file (s) | client peak RSS (MB) | largest worker peak RSS (MB) |")
    print("|---|---|---|---|---|")
    for label, options, cache in configurations:
        runs = [measure(folder, options, cache) for _ in range(1 if cache else args.repeat)]
        wall = min(run[0] for run in runs)
        client, worker = max(run[1] for run in runs), max(run[2] for run in runs)
        print(f"| {label} | {wall:.1f} | {wall / args.copies:.2f} | {client:.0f} | {worker:.0f} |", flush=True)
    started = time.perf_counter()
    single = measure(args.export.parent / "many" / "rank0.sqlite", [], False)
    print(f"\none file alone (`tracekit kernels rank0.sqlite`, in-process): {single[0]:.2f} s, "
          f"{single[1]:.0f} MB ({time.perf_counter() - started:.1f} s with interpreter start)")  # fmt: skip
    for cache in folder.glob("*.tracekit-cache"):
        shutil.rmtree(cache)


if __name__ == "__main__":
    main()
