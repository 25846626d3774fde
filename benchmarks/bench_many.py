"""Many traces at once: `tracekit kernels FOLDER` over N replicated 1M-kernel exports, on the process
pool with 1 and 2 workers and on a Dask LocalCluster, with the client's peak memory apart from the
workers'.

    python benchmarks/bench_many.py benchmarks/data/kernels_1m.sqlite --copies 64

The copies are files of their own in benchmarks/data/many/ (a hard link is the same input, read once since
issue 39's distinct inputs; 64 copies of the 1M-kernel export take 7 GB of disk). Each configuration runs in a fresh Python
process that calls the CLI in-process, so its own peak RSS (getrusage) is the client's; the workers'
(pool workers live under the fork server, Dask's under nannies) are sampled every 50 ms with psutil
over the process tree: the largest single worker and the whole tree's sum. TRACEKIT_CACHE=0 measures
reading the exports; "cached" reads the caches a first run wrote.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
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
    print(f"RESULT {wall:.2f} {client:.0f}", file=sys.stderr)
"""


def replicate(source: Path, copies: int) -> Path:
    folder = source.parent / "many"
    if folder.exists() and len(list(folder.glob("rank*.sqlite"))) == copies:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for rank in range(copies):
        shutil.copyfile(source, folder / f"rank{rank}.sqlite")
    return folder


def measure(
    folder: Path, options: list[str], cache: bool, command: str = "kernels"
) -> tuple[float, float, float, float]:
    """(wall s, client peak MB, largest worker peak MB, peak MB of the whole process tree)."""
    import psutil  # pyright: ignore[reportMissingModuleSource]  (benchmarks only)

    env = {**os.environ, "TRACEKIT_CACHE": "1" if cache else "0"}
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-c", PROBE, command, str(folder), "--format", "csv", "-o", f"{out}/k.csv", *options]
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        root = psutil.Process(process.pid)
        worker = tree = 0.0
        while process.poll() is None:
            try:
                sizes = [child.memory_info().rss for child in root.children(recursive=True)]
                tree = max(tree, (sum(sizes) + root.memory_info().rss) / 2**20)
                worker = max(worker, max(sizes, default=0) / 2**20)
            except psutil.Error:
                pass
            time.sleep(0.05)
        stderr = process.stderr.read() if process.stderr else ""
    lines = [line for line in stderr.splitlines() if line.startswith("RESULT")]
    if process.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(argv)} failed: {stderr[-800:]}")
    wall, client = lines[-1].split()[1:]
    return float(wall), float(client), worker, tree


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
    print("| configuration | wall (s) | per file (s) | client peak RSS (MB) | largest worker (MB) | whole tree (MB) |")
    print("|---|---|---|---|---|---|")
    for label, options, cache in configurations:
        runs = [measure(folder, options, cache) for _ in range(1 if cache else args.repeat)]
        wall = min(run[0] for run in runs)
        client, worker, tree = (max(run[index] for run in runs) for index in (1, 2, 3))
        print(
            f"| {label} | {wall:.1f} | {wall / args.copies:.2f} | {client:.0f} | {worker:.0f} | {tree:.0f} |",
            flush=True,
        )
    started = time.perf_counter()
    single = measure(args.export.parent / "many" / "rank0.sqlite", [], False)
    print(
        f"\none file alone (`tracekit kernels rank0.sqlite`, in-process): {single[0]:.2f} s, "
        f"{single[1]:.0f} MB ({time.perf_counter() - started:.1f} s with interpreter start)"
    )
    for cache in folder.glob("*.tracekit-cache"):
        shutil.rmtree(cache)


if __name__ == "__main__":
    main()
