"""`tracekit collectives` over 64 ranks against `tracekit ranks` over the same files, on the process pool and a
Dask LocalCluster: the issue's bar is collectives within 1.5x of ranks.

    python benchmarks/bench_collectives.py --kernels 20000

Input: the 8 ranks of the real DLRM job (../shared/kineto/v100_dlrm_8ranks), each replicated to about
``--kernels`` kernels with one shift for every rank (so the ranks' copies stay aligned in time and every
collective matches), then copied 8 times each into 64 rank files (distinct files, each naming its own rank) in
benchmarks/data/collectives64/.
Each configuration runs in a fresh Python process (bench_many's probe): wall time and the client's peak RSS,
the largest worker and the whole process tree; TRACEKIT_CACHE=0 (reading the traces every time).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_many import measure  # noqa: E402
from make_kineto_trace import kernel_count, replicate, span_of  # noqa: E402

SOURCE = HERE.parent.parent / "shared" / "kineto" / "v100_dlrm_8ranks"


def build(kernels: int, ranks: int) -> Path:
    folder = HERE / "data" / "collectives64"
    marker = folder / f".built-{kernels}-{ranks}"
    if marker.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    sources = HERE / "data" / "collectives_sources"
    sources.mkdir(parents=True, exist_ok=True)
    originals = sorted(SOURCE.glob("rank*.pt.trace.json"))
    span = max(span_of(path) for path in originals)
    built = []
    copies = -(-kernels // min(kernel_count(path) for path in originals))
    for path in originals:
        target = sources / path.name
        facts = replicate(path, target, copies * kernel_count(path), span)  # as many copies of every rank
        built.append(target)
        print(f"{target.name}: {facts['kernels']:,} kernels, {facts['bytes'] / 1e6:,.0f} MB", flush=True)
    folder.mkdir(parents=True)
    for rank in range(ranks):  # distinct files (a hard link is the same input, read once) naming distinct ranks
        text = built[rank % len(built)].read_text()
        head, _, rest = text.partition('"distributedInfo": ')
        info, _, tail = rest.partition("},")
        info = re.sub(r'"rank": \d+', f'"rank": {rank}', re.sub(r'"world_size": \d+', f'"world_size": {ranks}', info))
        (folder / f"rank{rank}.pt.trace.json").write_text(f'{head}"distributedInfo": {info}}},{tail}')
    marker.touch()
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=20_000)
    parser.add_argument("--ranks", type=int, default=64)
    args = parser.parse_args()
    if not SOURCE.is_dir():
        raise SystemExit(f"{SOURCE} is absent: this benchmark replicates the shared DLRM job")
    folder = build(args.kernels, args.ranks)
    print("| command | configuration | wall (s) | client peak RSS (MB) | largest worker (MB) | whole tree (MB) |")
    print("|---|---|---|---|---|---|")
    walls = {}
    for label, options in (("pool, 2 workers", ["--workers", "2"]), ("Dask, 2 workers", ["--dask", "--workers", "2"])):
        for command in ("ranks", "collectives"):
            wall, client, worker, tree = measure(folder, options, False, command)
            walls[(label, command)] = wall
            print(f"| {command} | {label} | {wall:.1f} | {client:.0f} | {worker:.0f} | {tree:.0f} |", flush=True)
    for label in ("pool, 2 workers", "Dask, 2 workers"):
        ratio = walls[(label, "collectives")] / walls[(label, "ranks")]
        print(f"{label}: collectives / ranks = {ratio:.2f}x")


if __name__ == "__main__":
    main()
