"""``tracekit export``: the normalized tables of a trace (and of its memory snapshot) as Parquet files,
for notebooks: ``pd.read_parquet("out/gpu_ops.parquet")``. Columns are those of the column contract
(``tracekit.model.schema``); memory allocations are those of ``analysis.memory.replay.DeviceMemory``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tracekit.files import foreign_entries, replace_folder, write_text, write_whole
from tracekit.model.result import Result
from tracekit.model.trace import TABLES, Trace

if TYPE_CHECKING:
    from tracekit.model.memory import MemoryTrace

ROWS_PER_SLICE = 1_000_000
META = "meta.json"
# What an export writes: a folder holding nothing else is a previous export, replaced whole.
EXPORT_FILES = {f"{table}.parquet" for table in (*TABLES, "memory_events", "memory_allocations")} | {META}


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """One row group per slice (converting a 10M-row frame to Arrow at once would double its memory),
    written whole."""

    def write_to(temporary: Path) -> None:
        writer = None
        try:
            for start in range(0, max(len(frame), 1), ROWS_PER_SLICE):
                table = pa.Table.from_pandas(frame.iloc[start : start + ROWS_PER_SLICE], preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(temporary, table.schema, compression="zstd")
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()

    write_whole(path, write_to)


def export_parquet(trace: Trace, folder: Path, snapshot: MemoryTrace | None = None) -> Result:
    """Write gpu_ops, launches, ranges (+ memory events and allocations) and meta.json to ``folder``, whole:
    a previous export there is replaced at once, never mixed with this one (``files.replace_folder``); a
    folder holding other files is refused. Returns what was written: File, Rows, Size (MiB)."""
    tables = {table: getattr(trace, table) for table in TABLES}
    if snapshot is not None:
        from tracekit.analysis.memory.replay import replay

        tables["memory_events"] = snapshot.events
        tables["memory_allocations"] = replay(snapshot).allocations

    def write_into(staging: Path) -> list[tuple[str, int, float]]:
        rows = []
        for name, frame in tables.items():
            path = staging / f"{name}.parquet"
            write_parquet(frame, path)
            rows.append((path.name, len(frame), path.stat().st_size / 2**20))
        meta = write_text(staging / META, json.dumps(trace.meta.as_dict(), indent=2, default=str) + "\n")
        return [*rows, (meta.name, 1, meta.stat().st_size / 2**20)]

    rows = replace_folder(folder, write_into, _not_an_export, "an export's")
    return Result.of("written", pd.DataFrame(rows, columns=["File", "Rows", "Size (MiB)"]), f"Wrote {folder}")


def _not_an_export(folder: Path) -> list[str]:
    return foreign_entries(folder, lambda name: name in EXPORT_FILES)
