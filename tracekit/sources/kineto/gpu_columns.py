"""The columns of torch.profiler's GPU-side rows, as every table of the reader builds them: times, the
int ranges device and stream must fit, and what a GPU row takes from its launching call by correlation id
(the process; the bytes of copies that record none, on ROCm); and the one small table made of them alone,
the GPU side of synchronizations (``gpu_syncs``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.model.schema import GPU_SYNCS, SYNC_KINDS

UNKNOWN = -1  # a GPU op's launching process when no call has its correlation id


def time_columns(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    start, duration = columns["start"], columns["duration"]
    return {"start": start, "end": start + duration, "duration": duration}


def fits_in(values: np.ndarray, dtype) -> np.ndarray:
    limits = np.iinfo(dtype)
    return (values >= limits.min) & (values <= limits.max)


def launching_pid(correlation: np.ndarray, launches: pd.DataFrame) -> np.ndarray:
    """The process of the launch call with each GPU op's correlation id (UNKNOWN when there is none)."""
    launch_correlation = launches["correlation_id"].to_numpy()
    order = np.argsort(launch_correlation, kind="stable")
    ordered = launch_correlation[order]
    at = np.searchsorted(ordered, correlation)
    found = (at < len(ordered)) & (correlation >= 0)
    found[found] &= ordered[at[found]] == correlation[found]
    pid = np.full(len(correlation), UNKNOWN, dtype=np.int64)
    pid[found] = launches["pid"].to_numpy()[order[at[found]]]
    return pid


SYNC_KINDS_BY_NAME = {
    "Stream Sync": "stream_sync",
    "Context Sync": "context_sync",
    "Event Sync": "event_sync",
    "Stream Wait Event": "stream_wait_event",
}


def gpu_syncs(columns: dict[str, np.ndarray], names: dict[str, int], launches: pd.DataFrame) -> pd.DataFrame:
    """torch.profiler's cuda_sync events as the gpu_syncs table (a context sync's stream, 2^32 - 1 in the
    file, and any stream past int32 read as -1)."""
    if not columns:
        return GPU_SYNCS.empty()
    kinds = [SYNC_KINDS_BY_NAME.get(name, "unknown") for name in names]
    codes = np.asarray([SYNC_KINDS.index(kind) for kind in kinds], dtype=np.int8)[columns["name"]]

    def stream(values: np.ndarray) -> np.ndarray:
        return np.where(fits_in(values, np.int32), values, -1).astype(np.int32)

    return pd.DataFrame(
        {
            "kind": pd.Categorical.from_codes(codes, categories=list(SYNC_KINDS)),
            **time_columns(columns),
            "device": np.where(fits_in(columns["device"], np.int16), columns["device"], -1).astype(np.int16),
            "stream": stream(columns["stream"]),
            "correlation_id": columns["correlation"],
            "pid": launching_pid(columns["correlation"], launches),
            "event_stream": stream(columns["wait_stream"]),
            "event_correlation_id": columns["record_correlation"],
        }
    )


def bytes_from_calls(gpu: dict[str, np.ndarray], calls: dict[str, np.ndarray]) -> np.ndarray:
    """The GPU ops' bytes; a copy or set that records none (ROCm) takes its call's ``size``, by correlation."""
    byte_count = gpu["bytes"]
    missing = (byte_count == 0) & (gpu["kind"] != 0)
    if not missing.any() or not calls or "size" not in calls:
        return byte_count
    sized = calls["size"] > 0
    correlation, size = calls["correlation"][sized], calls["size"][sized]
    if not len(correlation):
        return byte_count
    order = np.argsort(correlation, kind="stable")
    correlation, size = correlation[order], size[order]
    rows = np.flatnonzero(missing)
    wanted = gpu["correlation"][rows]
    at = np.minimum(np.searchsorted(correlation, wanted), len(correlation) - 1)
    found = (wanted >= 0) & (correlation[at] == wanted)
    filled = byte_count.copy()
    filled[rows[found]] = size[at[found]]
    return filled
