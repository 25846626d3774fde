"""SQLite -> columns: tracekit's reader against connectorx, ADBC's SQLite driver and sqlite3 (issue #17).

Each reader runs in a fresh process on the kernel table of an nsys export, reading either what the
kernel summary reads (the checked duration and the name id: 2 columns) or the whole GPU-op row tracekit
reads for other commands (8 expressions: times, packed device/stream, correlation, pid, name ids,
packed launch configuration). Wall time (import included) and peak RSS (wait4), best of ``--repeat``.

connectorx and ADBC are not tracekit dependencies: install them in some environment and point
``--python`` at it (it needs numpy and pyarrow too, and tracekit importable for its own reader):

    python -m venv /tmp/bench && /tmp/bench/bin/pip install connectorx adbc-driver-sqlite pyarrow numpy
    /tmp/bench/bin/pip install -e . --no-deps
    python benchmarks/bench_sqlite_arrow.py benchmarks/data/kernels_1m.sqlite --python /tmp/bench/bin/python
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
TWO = {
    "duration": "CASE WHEN start >= 0 AND end >= start AND end < 4611686018427387904 THEN end - start ELSE -1 END",
    "name_id": "demangledName",
}
EIGHT = {
    "start": "start",
    "end": "end",
    "device_stream": "deviceId * 4294967296 + streamId",
    "correlation_id": "ifnull(correlationId, -1)",
    "pid": "ifnull(globalPid / 16777216 - globalPid / 16777216 / 16777216 * 16777216, -1)",
    "names": "demangledName * 4294967296 + shortName",
    "grid": "gridX * 4294967296 + gridY * 65536 + gridZ",
    "block": "blockX * 4294967296 + blockY * 65536 + blockZ",
}

READERS = {
    "tracekit group_concat, 2 threads": (
        "from tracekit.sources.nsys.sqlite_columns import read_columns\n"
        "columns = read_columns(PATH, TABLE, EXPRESSIONS)\n"
        "rows = len(columns[next(iter(EXPRESSIONS))])"
    ),
    "connectorx, 1 partition": (
        "import connectorx as cx\n"
        "table = cx.read_sql('sqlite://' + PATH, QUERY, return_type='arrow')\n"
        "rows = table.num_rows"
    ),
    "connectorx, 2 partitions on rowid": (
        "import connectorx as cx\n"
        "table = cx.read_sql('sqlite://' + PATH, QUERY_ROWID, return_type='arrow', partition_on='rid', "
        "partition_num=2)\n"
        "rows = table.num_rows"
    ),
    "ADBC SQLite (Arrow batches)": (
        "import adbc_driver_sqlite.dbapi as adbc\n"
        "with adbc.connect(PATH) as connection, connection.cursor() as cursor:\n"
        "    cursor.execute(QUERY)\n"
        "    table = cursor.fetch_arrow_table()\n"
        "rows = table.num_rows"
    ),
    "sqlite3 fetchall + numpy": (
        "import sqlite3, numpy as np\n"
        "rows_read = sqlite3.connect(PATH).execute(QUERY).fetchall()\n"
        "arrays = [np.array(column, dtype=np.int64) for column in zip(*rows_read)]\n"
        "rows = len(arrays[0])"
    ),
}


def program(reader: str, path: Path, expressions: dict[str, str]) -> str:
    selects = ", ".join(f"{sql} AS {name}" for name, sql in expressions.items())
    return (
        f"PATH = {str(path)!r}\nTABLE = {TABLE!r}\nEXPRESSIONS = {expressions!r}\n"
        f"QUERY = {f'SELECT {selects} FROM {TABLE}'!r}\n"
        f"QUERY_ROWID = {f'SELECT rowid AS rid, {selects} FROM {TABLE}'!r}\n"
        f"{READERS[reader]}\nprint(rows)"
    )


def run(python: str, source: str) -> tuple[float, float, str]:
    started = time.perf_counter()
    child = subprocess.Popen([python, "-c", source], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    out = (child.stdout.read() if child.stdout else b"").decode().strip()
    err = (child.stderr.read() if child.stderr else b"").decode().strip()
    if os.waitstatus_to_exitcode(status):
        return seconds, usage.ru_maxrss / 1024, "failed: " + (err.splitlines() or ["?"])[-1][:80]
    return seconds, usage.ru_maxrss / 1024, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", type=Path)
    parser.add_argument("--python", default=sys.executable, help="an interpreter with the readers installed")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.export.name}: best of {args.repeat}, fresh process each (imports included)\n")
    print("| reader | columns | rows | time (s) | peak RSS (MB) |\n|---|---|---|---|---|")
    for label, expressions in (("2 (summary)", TWO), ("8 (whole op)", EIGHT)):
        for reader in READERS:
            runs = [run(args.python, program(reader, args.export.resolve(), expressions)) for _ in range(args.repeat)]
            seconds, peak, out = min(runs, key=lambda result: result[0])
            print(f"| {reader} | {label} | {out} | {seconds:.2f} | {peak:.0f} |", flush=True)


if __name__ == "__main__":
    main()
