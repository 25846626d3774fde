"""``tracekit export``: the normalized tables of a trace (and of its memory snapshot) as Parquet files,
for notebooks: ``pd.read_parquet("out/kernels.parquet")``. Columns are those of ``tracekit.trace``
(and ``tracekit.sources.snapshot`` / ``tracekit.analysis.memory`` for memory)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tracekit.trace import Trace

ROWS_PER_SLICE = 1_000_000


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """One row group per slice: converting a 10M-row frame to Arrow at once would double its memory."""
    writer = None
    try:
        for start in range(0, max(len(frame), 1), ROWS_PER_SLICE):
            table = pa.Table.from_pandas(frame.iloc[start : start + ROWS_PER_SLICE], preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def run_snapshot(path: str | Path) -> Path | None:
    """The memory snapshot of a run folder, if it has one."""
    from tracekit.runs import MEMORY

    candidate = Path(path) / MEMORY
    return candidate if Path(path).is_dir() and candidate.is_file() else None


def export_parquet(trace: Trace, folder: Path, snapshot: Path | None = None) -> pd.DataFrame:
    """Write kernels, launches, ranges (+ memory events and allocations) and meta.json to ``folder``.
    Returns what was written: File, Rows, Size (MiB)."""
    folder.mkdir(parents=True, exist_ok=True)
    tables = {"kernels": trace.kernels, "launches": trace.launches, "ranges": trace.ranges}
    if snapshot is not None:
        from tracekit.analysis.memory import replay
        from tracekit.sources.snapshot import load_snapshot

        memory_trace = load_snapshot(snapshot)
        tables["memory_events"] = memory_trace.events
        tables["memory_allocations"] = replay(memory_trace).allocations
    rows = []
    for name, frame in tables.items():
        path = folder / f"{name}.parquet"
        write_parquet(frame, path)
        rows.append((path.name, len(frame), path.stat().st_size / 2**20))
    meta = folder / "meta.json"
    meta.write_text(json.dumps(trace.meta.as_dict(), indent=2, default=str) + "\n")
    rows.append((meta.name, 1, meta.stat().st_size / 2**20))
    return pd.DataFrame(rows, columns=["File", "Rows", "Size (MiB)"])
