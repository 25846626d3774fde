"""The GPU side of synchronizations in an nsys export (``schema.GPU_SYNCS``), for the critical path.

``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` holds one row per synchronization the GPU saw (a stream or
context synchronized, an event synchronized, a stream made to wait for an event), joined to its host
call by correlation id. An event's recording stream and cudaEventRecord call come from
``CUPTI_ACTIVITY_KIND_CUDA_EVENT`` (exports made with CUDA event tracing): by ``eventSyncId`` where the
export has it (nsys 2024.5+), else the latest record of the same event id in the process issued
before the synchronizing call (correlation ids grow with every call of a process). Without that table
an event's stream stays unknown (-1). Small tables (a row per synchronization), read with plain SQL.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.model.schema import GPU_SYNCS, SYNC_KINDS
from tracekit.sources.nsys.sqlite_columns import connect_readonly

SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
EVENT_TABLE = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
# ENUM_CUPTI_SYNC_TYPE ids (the same in every nsys version that writes the table)
KIND_BY_TYPE = {1: "event_sync", 2: "stream_wait_event", 3: "stream_sync", 4: "context_sync"}
INT32 = np.iinfo(np.int32)


def read_gpu_syncs(path: Path, tables: frozenset[str]) -> pd.DataFrame:
    """Every synchronization the export recorded, with its event's recording stream where known."""
    if SYNC_TABLE not in tables:
        return GPU_SYNCS.empty()
    with closing(connect_readonly(path)) as connection:
        have = {row[1] for row in connection.execute(f"PRAGMA table_info({SYNC_TABLE})")}
        sync_id = "ifnull(eventSyncId, -1)" if "eventSyncId" in have else "-1"
        syncs = _frame(
            connection.execute(
                "SELECT start, end, deviceId, streamId, ifnull(correlationId, -1), "
                f"(ifnull(globalPid, 0) / 16777216) % 16777216, syncType, eventId, {sync_id} FROM {SYNC_TABLE} "
                "WHERE typeof(start) = 'integer' AND typeof(end) = 'integer' AND end >= start"
            ).fetchall(),
            ["start", "end", "device", "stream", "correlation_id", "pid", "type", "event", "sync_id"],
        )
        records = _records(connection, tables)
    kind = np.asarray(
        [SYNC_KINDS.index(KIND_BY_TYPE.get(value, "unknown")) for value in syncs["type"].tolist()], dtype=np.int8
    )
    event_stream, event_correlation = _recorded(syncs, records)
    stream = syncs["stream"].to_numpy()
    usable_stream = (stream >= INT32.min) & (stream <= INT32.max) & (kind != SYNC_KINDS.index("context_sync"))
    return pd.DataFrame(
        {
            "kind": pd.Categorical.from_codes(kind, categories=list(SYNC_KINDS)),
            "start": syncs["start"].to_numpy(),
            "end": syncs["end"].to_numpy(),
            "duration": (syncs["end"] - syncs["start"]).to_numpy(),
            "device": syncs["device"].clip(-1, 2**15 - 1).to_numpy().astype(np.int16),
            "stream": np.where(usable_stream, stream, -1).astype(np.int32),
            "correlation_id": syncs["correlation_id"].to_numpy(),
            "pid": syncs["pid"].to_numpy(),
            "event_stream": event_stream,
            "event_correlation_id": event_correlation,
        }
    )


def _frame(rows: list[tuple], columns: list[str]) -> pd.DataFrame:
    values = np.asarray(rows, dtype=np.int64).reshape(len(rows), len(columns))
    return pd.DataFrame(values, columns=columns)


def _records(connection, tables: frozenset[str]) -> pd.DataFrame:
    """The export's cudaEventRecord records: event, recording stream, correlation id, process, sync id."""
    columns = ["event", "stream", "correlation_id", "pid", "sync_id"]
    if EVENT_TABLE not in tables:
        return _frame([], columns)
    have = {row[1] for row in connection.execute(f"PRAGMA table_info({EVENT_TABLE})")}
    sync_id = "ifnull(eventSyncId, -1)" if "eventSyncId" in have else "-1"
    rows = connection.execute(
        f"SELECT eventId, streamId, correlationId, (ifnull(globalPid, 0) / 16777216) % 16777216, {sync_id} "
        f"FROM {EVENT_TABLE} WHERE typeof(eventId) = 'integer' AND typeof(streamId) = 'integer' "
        "AND typeof(correlationId) = 'integer'"
    ).fetchall()
    return _frame(rows, columns)


def _recorded(syncs: pd.DataFrame, records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per synchronization, the stream and cudaEventRecord correlation id of the event record it waited
    for (-1 unknown): by eventSyncId where both sides have it, else the process's latest record of the
    same event before the synchronizing call."""
    stream = np.full(len(syncs), -1, dtype=np.int64)
    correlation = np.full(len(syncs), -1, dtype=np.int64)
    if records.empty or syncs.empty:
        return stream.astype(np.int32), correlation
    by_id = records.loc[records["sync_id"] >= 0].drop_duplicates(["pid", "sync_id"], keep="last")
    joined = syncs[["pid", "sync_id"]].reset_index().merge(by_id, on=["pid", "sync_id"], how="inner")
    joined = joined.loc[joined["sync_id"] >= 0]
    stream[joined["index"].to_numpy()] = joined["stream"].to_numpy()
    correlation[joined["index"].to_numpy()] = joined["correlation_id"].to_numpy()
    left = np.flatnonzero(correlation < 0)
    if len(left):
        asked = syncs.iloc[left][["pid", "event", "correlation_id"]].assign(row=left)
        asked = asked.sort_values("correlation_id", kind="stable")
        recorded = records.rename(columns={"correlation_id": "record_correlation"})
        recorded = recorded.sort_values("record_correlation", kind="stable")
        found = pd.merge_asof(
            asked,
            recorded[["pid", "event", "stream", "record_correlation"]],
            left_on="correlation_id",
            right_on="record_correlation",
            by=["pid", "event"],
            allow_exact_matches=False,
        ).dropna(subset=["record_correlation"])
        rows = found["row"].to_numpy()
        stream[rows] = found["stream"].to_numpy(np.int64)
        correlation[rows] = found["record_correlation"].to_numpy(np.int64)
    stream = np.where((stream >= INT32.min) & (stream <= INT32.max), stream, -1)
    return stream.astype(np.int32), correlation
