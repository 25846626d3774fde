"""Build a large nsys export by replicating a real one (benchmark input, not committed).

Each copy of the source's GPU operations (and, with --with-ranges, its CUDA API calls and NVTX
ranges) is shifted in time past the previous copy and gets fresh correlation ids, so the result
is a consistent, longer trace: every analysis gives each copy the answer of the original.

    python benchmarks/make_large_export.py ../shared/traces/h100_videogen_2gpu_a_nsys2026.2.sqlite \
        benchmarks/data/kernels_1m.sqlite --kernels 1000000 [--with-ranges]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import time
from pathlib import Path

GPU_TABLES = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"]
RANGE_TABLES = ["CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"]


def replicate(source: Path, target: Path, kernels: int, with_ranges: bool) -> dict:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    target.chmod(0o644)
    connection = sqlite3.connect(target)
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    base = connection.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    copies = max(1, -(-kernels // base))  # ceil
    # One copy spans from the first to the last timestamp of the source, plus a gap.
    span = connection.execute("SELECT max(end) - min(start) + 1000000 FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    if with_ranges and "NVTX_EVENTS" in tables:
        span = max(
            span,
            connection.execute("SELECT max(coalesce(end, start)) - min(start) + 1000000 FROM NVTX_EVENTS").fetchone()[
                0
            ],
        )
    correlation_step = 1 + max(
        connection.execute(f"SELECT coalesce(max(correlationId), 0) FROM {table}").fetchone()[0]
        for table in GPU_TABLES + ["CUPTI_ACTIVITY_KIND_RUNTIME"]
        if table in tables
    )
    connection.execute("CREATE TEMP TABLE copies (i INTEGER)")
    connection.executemany("INSERT INTO copies VALUES (?)", [(i,) for i in range(1, copies)])
    for table in GPU_TABLES + (RANGE_TABLES if with_ranges else []):
        if table not in tables:
            continue
        columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
        shifted = []
        for column in columns:
            if column in ("start", "end"):
                shifted.append(f"{column} + copies.i * {span}")
            elif column == "correlationId":
                shifted.append(f"correlationId + copies.i * {correlation_step}")
            else:
                shifted.append(column)
        where = "WHERE eventType IN (59, 60, 70, 71)" if table == "NVTX_EVENTS" else ""
        connection.execute(f"CREATE TEMP TABLE original AS SELECT * FROM {table} {where}")
        connection.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) "
            f"SELECT {', '.join(shifted)} FROM original, copies ORDER BY copies.i"
        )
        connection.execute("DROP TABLE original")
        connection.commit()
    counts = {
        table: connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in GPU_TABLES + RANGE_TABLES
        if table in tables
    }
    connection.execute("VACUUM")
    connection.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--kernels", type=int, default=1_000_000, help="at least this many kernel rows")
    parser.add_argument("--with-ranges", action="store_true", help="replicate CUDA API calls and NVTX ranges too")
    args = parser.parse_args()
    started = time.perf_counter()
    counts = replicate(args.source, args.target, args.kernels, args.with_ranges)
    print(f"{args.target}: {counts} ({args.target.stat().st_size / 1e6:.0f} MB, {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
