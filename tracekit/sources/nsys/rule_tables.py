"""The two tables nsys's expert rules read beyond the GPU ops and API calls: copies and sets with their
memory kinds (``schema.COPIES``), and the profiler's own overhead (``schema.PROFILER_OVERHEAD``).

Both are small next to the kernels (a copy or set per tensor moved; a few dozen overhead records), so
the copies come through the columnar reader and the overhead with plain SQL; a column an export
lacks reads as unknown.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.model.schema import COPIES, MEMORY_KINDS, PROFILER_OVERHEAD
from tracekit.sources.nsys.sqlite_columns import DROPPED, MISSING, connect_readonly, read_int_columns

# Short copy directions nsys prints ("[CUDA memcpy HtoD]"), by ENUM_CUDA_MEMCPY_OPER id.
MEMCPY_DIRECTIONS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "Unified HtoD",
    12: "Unified DtoH",
    13: "Unified DtoD",
}

MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
# The overhead nsys 2022.4's rules count as GPU use (gpustats.GPUOperation): the profiler's flushes,
# which stall the GPU and which the user cannot address.
GPU_OVERHEAD_NAMES = ("CUDA profiling data flush overhead", "CUDA profiling stop overhead", "CUDA profiling overhead")


def read_copies(path: Path, tables: frozenset[str]) -> pd.DataFrame:
    """Every memcpy and memset of the export, with memory kinds, direction and context (columnar reads)."""
    parts = []
    for kind, table in (("memcpy", MEMCPY_TABLE), ("memset", MEMSET_TABLE)):
        if table not in tables:
            continue
        kinds = (
            {
                "copy_kind": "ifnull(copyKind, -1)",
                "src": "ifnull(srcKind, 7)",
                "dst": "ifnull(dstKind, 7)",
                "same": "ifnull(srcDeviceId == dstDeviceId, 0)",
            }
            if kind == "memcpy"
            else {"copy_kind": "-1", "src": "7", "dst": "ifnull(memKind, 7)", "same": "0"}
        )
        columns = read_int_columns(
            path,
            table,
            {
                "start": "start",
                "end": "end",
                "bytes": "ifnull(bytes, 0)",
                "pid": "(ifnull(globalPid, 0) >> 24) & 16777215",
                "device": "ifnull(deviceId, -1)",
                "context": "ifnull(contextId, -1)",
                "stream": "ifnull(streamId, -1)",
                "correlation_id": "ifnull(correlationId, -1)",
                **kinds,
            },
            where="start IS NOT NULL AND end IS NOT NULL AND end >= start",
            optional=dict.fromkeys(
                (
                    "bytes",
                    "globalPid",
                    "deviceId",
                    "contextId",
                    "streamId",
                    "correlationId",
                    "copyKind",
                    "srcKind",
                    "dstKind",
                    "srcDeviceId",
                    "dstDeviceId",
                    "memKind",
                ),
                "NULL",
            ),
        )
        for bookkeeping in (DROPPED, MISSING):  # rows are kept or left out by the where clause alone
            columns.pop(bookkeeping)
        parts.append((kind, columns))
    count = sum(len(columns["start"]) for _, columns in parts)
    if not count:
        return COPIES.empty()

    def joined(name: str) -> np.ndarray:
        return np.concatenate([columns[name] for _, columns in parts]).astype(np.int64)

    kinds = np.concatenate([np.full(len(columns["start"]), kind, dtype=object) for kind, columns in parts])
    directions = np.array(
        [*(MEMCPY_DIRECTIONS.get(code, "Unknown") for code in range(max(MEMCPY_DIRECTIONS) + 1)), "Unknown"],
        dtype=object,
    )
    copy_kind = joined("copy_kind")
    copy_kind = np.where((copy_kind >= 0) & (copy_kind < len(directions) - 1), copy_kind, len(directions) - 1)

    def memory(ids: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(
            np.where((ids >= 0) & (ids < len(MEMORY_KINDS)), ids, len(MEMORY_KINDS) - 1), categories=list(MEMORY_KINDS)
        )

    start, end = joined("start"), joined("end")
    return pd.DataFrame(
        {
            "kind": pd.Categorical(kinds, categories=["memcpy", "memset"]),
            "start": start,
            "end": end,
            "duration": end - start,
            "bytes": joined("bytes"),
            "pid": joined("pid"),
            "device": joined("device").astype(np.int16),
            "context": joined("context"),
            "stream": joined("stream").astype(np.int32),
            "correlation_id": joined("correlation_id"),
            # categorical: a few values over every copy, and the table cache keeps it (text it does not)
            "direction": pd.Categorical(np.where(kinds == "memset", "", directions[copy_kind])),
            "src_kind": memory(joined("src")),
            "dst_kind": memory(joined("dst")),
            "same_device": joined("same") != 0,
        }
    )


def read_profiler_overhead(path: Path, tables: frozenset[str]) -> pd.DataFrame:
    """The profiler's GPU-stalling overhead records (``GPU_OVERHEAD_NAMES``), per process."""
    if "PROFILER_OVERHEAD" not in tables:
        return PROFILER_OVERHEAD.empty()
    marks = ", ".join("?" for _ in GPU_OVERHEAD_NAMES)
    with closing(connect_readonly(path)) as connection:
        rows = connection.execute(
            "SELECT po.start, po.end, (ifnull(po.globalTid, 0) >> 24) & 0xFFFFFF, s.value FROM PROFILER_OVERHEAD AS po "
            f"JOIN StringIds AS s ON s.id == po.nameId WHERE s.value IN ({marks}) "
            "AND po.start IS NOT NULL AND po.end >= po.start",
            GPU_OVERHEAD_NAMES,
        ).fetchall()
    if not rows:
        return PROFILER_OVERHEAD.empty()
    times = np.array([row[:3] for row in rows], dtype=np.int64)
    return pd.DataFrame(
        {
            "start": times[:, 0],
            "end": times[:, 1],
            "duration": times[:, 1] - times[:, 0],
            "pid": times[:, 2],
            "name": pd.Series([row[3] for row in rows], dtype=object),
        }
    )
