"""An nsys export's metadata: the tool and schema versions, when the session started, and its GPUs."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import cast

import pandas as pd

from tracekit.model.schema import GPU_LIMIT_COLUMNS, GPUS
from tracekit.model.trace import TraceMeta
from tracekit.sources.nsys.sqlite_columns import connect_readonly, table_columns


def read_meta(path: Path, tables: frozenset[str]) -> TraceMeta:
    """The trace's metadata (``TraceMeta``) from the export's metadata and target-info tables."""
    with closing(connect_readonly(path)) as connection:
        export = {}
        for table in ("EXPORT_META_DATA", "META_DATA_EXPORT"):  # 2022.4 name, 2024+ name
            if table in tables:
                export.update(connection.execute(f"SELECT name, value FROM {table}").fetchall())
        start = None
        if "TARGET_INFO_SESSION_START_TIME" in tables:
            row = connection.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            start = row[0] if row else None
        gpus = _read_gpus(connection, tables)
    return TraceMeta(
        source=str(path),
        tool="nsys",
        tool_version=export.get("EXPORT_PRODUCT_VERSION"),
        schema_version=export.get("EXPORT_SCHEMA_VERSION"),
        session_start_utc_ns=start,
        gpus=gpus,
    )


# TARGET_INFO_GPU's columns by the GPUS column they fill (``schema.GPU_LIMIT_COLUMNS``)
_TARGET_INFO_LIMITS = {
    "clock_hz": "clockRate",
    "memory_bandwidth": "memoryBandwidth",
    "max_threads_per_sm": None,  # maxWarpsPerSm * threadsPerWarp: see _read_gpus
    "max_threads_per_block": "maxThreadsPerBlock",
    "max_blocks_per_sm": "maxBlocksPerSm",
    "registers_per_sm": "maxRegistersPerSm",
    "registers_per_block": "maxRegistersPerBlock",
    "warp_size": "threadsPerWarp",
    "shared_memory_per_sm": "maxShmemPerSm",
    "shared_memory_per_block": "maxShmemPerBlock",
    "shared_memory_per_block_optin": "maxShmemPerBlockOptin",
}


def _read_gpus(connection: sqlite3.Connection, tables: frozenset[str]) -> pd.DataFrame:
    """GPU descriptions (``schema.GPUS``): TARGET_INFO_GPU (2021.3+), else TARGET_INFO_CUDA_DEVICE (2026) or
    TARGET_INFO_CUDA_GPU (older). A GPU's id is TARGET_INFO_GPU's ``id``, or ``deviceId`` where an export
    of about 2021 has that instead, else its row's position."""
    if "TARGET_INFO_GPU" in tables:
        have = set(table_columns(connection, "TARGET_INFO_GPU"))
        identifier = next((column for column in ("id", "deviceId") if column in have), "rowid - 1")
        pick = {
            "id": identifier,
            "name": "name",
            "sm_count": "smCount",
            "memory_bytes": "totalMemory",
            "major": "computeMajor",
            "minor": "computeMinor",
            **_TARGET_INFO_LIMITS,
        }
        select = ", ".join(
            f"{_typed(source, alias) if source in have or source == identifier else 'NULL'} AS {alias}"
            for alias, source in pick.items()
            if source is not None
        )
        warps = ("maxWarpsPerSm", "threadsPerWarp")
        threads = (
            f"CASE WHEN {' AND '.join(f'typeof({column}) = {chr(39)}integer{chr(39)}' for column in warps)} "
            f"THEN {' * '.join(warps)} END"
            if set(warps) <= have
            else "NULL"
        )
        select += f", {threads} AS max_threads_per_sm"
        frame = pd.read_sql_query(
            f"SELECT DISTINCT {select} FROM TARGET_INFO_GPU WHERE {_is_integer(identifier, have)} ORDER BY id",
            connection,
        )
        frame["compute_capability"] = [
            f"{int(major)}.{int(minor)}" if pd.notna(major) and pd.notna(minor) else None
            for major, minor in zip(frame["major"], frame["minor"])
        ]
        return _as_gpus(frame)
    for table, id_column, sm_column in (
        ("TARGET_INFO_CUDA_DEVICE", "cudaId", "numMultiprocessors"),
        ("TARGET_INFO_CUDA_GPU", "cudaId", "smCount"),
    ):
        if table in tables:
            have = set(table_columns(connection, table))
            ids = id_column if id_column in have else "rowid"
            sms = _typed(sm_column, "sm_count") if sm_column in have else "NULL"
            names = _typed("name", "name") if "name" in have else "NULL"
            frame = pd.read_sql_query(
                f"SELECT DISTINCT {ids} AS id, {names} AS name, {sms} AS sm_count FROM {table} "
                f"WHERE {_is_integer(ids, have)} ORDER BY 1",
                connection,
            )
            frame["memory_bytes"] = None
            frame["compute_capability"] = None
            for column in GPU_LIMIT_COLUMNS:
                frame[column] = None
            return _as_gpus(frame)
    return GPUS.empty()


def _typed(column: str, alias: str) -> str:
    """SQL reading ``column`` as the contract's type: text for the name, else an integer or NULL. A damaged
    export may hold TEXT, REAL or BLOB anywhere: such a value reads as unknown rather than failing the load."""
    if alias == "name":
        return f"CAST({column} AS TEXT)"
    return f"CASE WHEN typeof({column}) = 'integer' THEN {column} END"


def _is_integer(column: str, have: set[str]) -> str:
    """SQL keeping rows whose GPU id is an integer (a GPU without a usable id is left out)."""
    return f"typeof({column}) = 'integer'" if column in have else "1"


def _as_gpus(frame: pd.DataFrame) -> pd.DataFrame:
    """The contract's dtypes: counts that may be unknown as nullable integers, text as objects; a GPU
    without a usable id is left out."""
    frame = frame.loc[frame["id"].notna()]
    result = pd.DataFrame(
        {
            "id": frame["id"].astype("int64"),
            "name": frame["name"].astype(object).where(frame["name"].notna(), None),
            "sm_count": _nullable_int(frame["sm_count"]),
            "memory_bytes": _nullable_int(frame["memory_bytes"]),
            "compute_capability": frame["compute_capability"].astype(object),
            **{column: _nullable_int(frame[column]) for column in GPU_LIMIT_COLUMNS},
        }
    )
    return result.loc[:, GPUS.names]


def _nullable_int(column: pd.Series) -> pd.Series:
    """Numbers as pandas' nullable Int64 (missing values stay missing)."""
    # to_numeric of a Series is a Series; pandas annotates it with the result of every input kind.
    return cast(pd.Series, pd.to_numeric(column)).astype("Int64")
