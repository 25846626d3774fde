"""The two tables nsys's expert rules read beyond the GPU ops and API calls: copies and sets with their
memory kinds (``schema.COPIES``), and the profiler's own overhead (``schema.PROFILER_OVERHEAD``).

Both are small next to the kernels (a copy or set per tensor moved; a few dozen overhead records), so
they are read with plain SQL, each column by name: a column an export lacks reads as unknown.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.model.schema import COPIES, MEMORY_KINDS, PROFILER_OVERHEAD
from tracekit.sources.nsys.sqlite_columns import connect_readonly

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
    """Every memcpy and memset of the export, with memory kinds, direction and context."""
    parts = []
    with closing(connect_readonly(path)) as connection:
        for kind, table in (("memcpy", MEMCPY_TABLE), ("memset", MEMSET_TABLE)):
            if table not in tables:
                continue
            have = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}

            def column(name: str, default: str = "-1", have: set = have) -> str:
                return f"ifnull({name}, {default})" if name in have else default

            if kind == "memcpy":
                kinds = f"{column('copyKind')}, {column('srcKind', '7')}, {column('dstKind', '7')}"
                same = "ifnull(srcDeviceId == dstDeviceId, 0)" if {"srcDeviceId", "dstDeviceId"} <= have else "0"
            else:
                kinds, same = f"-1, 7, {column('memKind', '7')}", "0"
            rows = connection.execute(
                f"SELECT start, end, {column('bytes', '0')}, {column('globalPid', '0')}, {column('deviceId')}, "
                f"{column('contextId')}, {column('streamId')}, {column('correlationId')}, {kinds}, {same} "
                f"FROM {table} WHERE start IS NOT NULL AND end IS NOT NULL AND end >= start"
            ).fetchall()
            values = np.array(rows, dtype=np.int64).reshape(-1, 12)
            parts.append((kind, values))
    if not parts or not sum(len(values) for _, values in parts):
        return COPIES.empty()
    kinds = np.concatenate([np.full(len(values), kind, dtype=object) for kind, values in parts])
    values = np.concatenate([values for _, values in parts])

    def memory(ids: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(np.where((ids >= 0) & (ids < len(MEMORY_KINDS)), ids, len(MEMORY_KINDS) - 1),
                                         categories=list(MEMORY_KINDS))  # fmt: skip

    directions = np.array([*(MEMCPY_DIRECTIONS.get(code, "Unknown") for code in range(max(MEMCPY_DIRECTIONS) + 1)),
                           "Unknown"], dtype=object)  # fmt: skip
    copy_kind = values[:, 8]
    copy_kind = np.where((copy_kind >= 0) & (copy_kind < len(directions) - 1), copy_kind, len(directions) - 1)
    return pd.DataFrame({
        "kind": pd.Categorical(kinds, categories=["memcpy", "memset"]),
        "start": values[:, 0], "end": values[:, 1], "duration": values[:, 1] - values[:, 0],
        "bytes": values[:, 2], "pid": (values[:, 3] >> 24) & 0xFFFFFF, "device": values[:, 4].astype(np.int16),
        "context": values[:, 5], "stream": values[:, 6].astype(np.int32), "correlation_id": values[:, 7],
        "direction": np.where(kinds == "memset", "", directions[copy_kind]),
        "src_kind": memory(values[:, 9]), "dst_kind": memory(values[:, 10]), "same_device": values[:, 11] != 0,
    })  # fmt: skip


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
    return pd.DataFrame({"start": times[:, 0], "end": times[:, 1], "duration": times[:, 1] - times[:, 0],
                         "pid": times[:, 2], "name": pd.Series([row[3] for row in rows], dtype=object)})  # fmt: skip
