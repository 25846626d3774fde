"""CUDA memory snapshot (``torch.cuda.memory._dump_snapshot`` pickle) -> ``MemoryTrace``.

A snapshot is plain data (dicts, lists, tuples, strings, numbers), so it is unpickled with an
unpickler that refuses every global: a pickle that names any Python object (``os.system``, a class)
fails before anything is called. Formats handled: with or without ``time_us`` (torch <= 2.1 lacks
it: event order stands in for time), ``external_annotations`` (2.5+), ``compile_context`` /
``user_metadata`` (2.8+), block states ``active_allocated``, ``active_pending_free`` /
``active_awaiting_free`` and ``inactive``, several devices, a trace that is empty (state only), and
a ring buffer that dropped its earliest events.

``MemoryTrace`` tables (one row per item, all devices):
    events      device, index (position in its device's trace), action (category), addr, size (bytes),
                stream, time_us (float, NaN without timestamps), stack (id into ``stacks``)
    blocks      device, address, size, requested_size (bytes), state, stack
    segments    device, address, total_size, allocated_size, active_size (bytes), stream
    annotations device, name, stage (START/END), time_us
``stacks[i]`` is one captured stack: a list of {filename, line, name} frames, innermost first.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.errors import InputNotFoundError, SnapshotError

SNAPSHOT_FILE = "memory.pickle"
ACTIONS = [
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
    "snapshot",
    "other",
]
ACTION_CODES = {action: code for code, action in enumerate(ACTIONS)}
ACTIVE_STATES = ("active_allocated", "active_pending_free", "active_awaiting_free")


class RefusingUnpickler(pickle.Unpickler):
    """Unpickles data only: any reference to a Python global (function, class) is refused."""

    def find_class(self, module: str, name: str):
        raise SnapshotError(
            f"{self.source} asks to load the Python object {module}.{name}: a memory snapshot holds "
            "only dicts, lists, strings and numbers, so this file is not one (refused without "
            "running anything)"
        )

    def persistent_load(self, pid):
        raise SnapshotError(f"{self.source} uses persistent references: not a memory snapshot")


@dataclass
class MemoryTrace:
    """A memory snapshot as tables (see the module docstring for the columns)."""

    source: str
    events: pd.DataFrame
    blocks: pd.DataFrame
    segments: pd.DataFrame
    annotations: pd.DataFrame
    stacks: list[list[dict]]
    has_time: bool
    settings: dict = field(default_factory=dict)

    @property
    def devices(self) -> list[int]:
        seen = set(self.events["device"].unique()) | set(self.blocks["device"].unique())
        return sorted(int(device) for device in seen)


def resolve_snapshot(path: str | Path) -> Path:
    """A snapshot file, or the memory.pickle of a run folder."""
    path = Path(path)
    if not path.exists():
        raise InputNotFoundError(f"{path}: no such file or folder")
    if path.is_dir():
        if (path / SNAPSHOT_FILE).is_file():
            return path / SNAPSHOT_FILE
        raise InputNotFoundError(
            f"{path} has no {SNAPSHOT_FILE}: capture with `tracekit capture MODEL --memory` "
            "on a CUDA GPU (snapshots need CUDA)"
        )
    return path


def load_snapshot(path: str | Path) -> MemoryTrace:
    """Read a snapshot pickle (or a run folder's) without executing anything from it."""
    file = resolve_snapshot(path)
    data = _unpickle(file)
    if isinstance(data, list):  # torch < 2.0 dumped the segment list alone
        raise SnapshotError(
            f"{file} is a pickle of a list, not a memory snapshot: expected the dict written by "
            "torch.cuda.memory._dump_snapshot() (with segments and device_traces)"
        )
    if not isinstance(data, dict) or "segments" not in data:
        kind = type(data).__name__
        raise SnapshotError(f"{file} holds a {kind} without 'segments': not a torch.cuda.memory._dump_snapshot() file")
    traces = data.get("device_traces")
    if traces is None:
        raise SnapshotError(
            f"{file} has no allocation history (no device_traces): record it with "
            "torch.cuda.memory._record_memory_history() before dumping the snapshot"
        )
    if not isinstance(traces, list) or not all(isinstance(trace, list) for trace in traces):
        raise SnapshotError(f"{file}: device_traces is not a list of per-device event lists")
    stacks = _Stacks()
    events, has_time = _events(traces, stacks)
    blocks, segments = _state(data["segments"], stacks)
    return MemoryTrace(
        str(file),
        events,
        blocks,
        segments,
        _annotations(data.get("external_annotations") or []),
        stacks.lists,
        has_time,
        data.get("allocator_settings") or {},
    )


def _unpickle(file: Path):
    with open(file, "rb") as handle:
        unpickler = RefusingUnpickler(handle)
        unpickler.source = str(file)
        try:
            return unpickler.load()
        except SnapshotError:
            raise
        except EOFError:
            raise SnapshotError(f"{file} ends too early: the snapshot is truncated (copy it again)") from None
        except (
            pickle.UnpicklingError,
            ValueError,
            TypeError,
            IndexError,
            KeyError,
            AttributeError,
            MemoryError,
            UnicodeDecodeError,
        ) as error:
            text = str(error)
            if "truncated" in text or "ran out of input" in text.lower():
                raise SnapshotError(f"{file} ends too early: the snapshot is truncated (copy it again)") from None
            raise SnapshotError(
                f"{file} is not a readable pickle ({text or type(error).__name__}): not a memory snapshot"
            ) from None


class _Stacks:
    """Distinct stacks, numbered. Snapshots share one list object among entries with the same stack
    (pickle keeps shared objects shared), so identity is a cheap first key."""

    def __init__(self):
        self.lists: list[list[dict]] = [[]]  # 0: no stack recorded
        self._by_id: dict[int, int] = {}

    def ids(self, frame_lists: list) -> np.ndarray:
        result = np.empty(len(frame_lists), dtype=np.int64)
        by_id, lists = self._by_id, self.lists
        for position, frames in enumerate(frame_lists):
            if not frames:
                result[position] = 0
                continue
            key = id(frames)
            index = by_id.get(key)
            if index is None:
                index = by_id[key] = len(lists)
                lists.append(frames)
            result[position] = index
        return result


def _events(traces: list[list], stacks: _Stacks) -> tuple[pd.DataFrame, bool]:
    frames, has_time = [], False
    for device, trace in enumerate(traces):
        if not trace:
            continue
        if not all(isinstance(entry, dict) for entry in trace[:100]):
            raise SnapshotError("device_traces holds something other than event dicts: not a memory snapshot")
        times = [entry.get("time_us") for entry in trace]
        has_time = has_time or any(t is not None for t in times[:1000])
        # Codes through a dict: a Categorical built from a million strings costs a second.
        other = ACTION_CODES["other"]
        frame = pd.DataFrame(
            {
                "device": np.full(len(trace), device, dtype=np.int16),
                "index": np.arange(len(trace), dtype=np.int64),
                "action": pd.Categorical.from_codes(
                    np.array([ACTION_CODES.get(entry.get("action"), other) for entry in trace], dtype=np.int8),
                    categories=ACTIONS,
                ),
                "addr": np.array([entry.get("addr") or 0 for entry in trace], dtype=np.int64),
                "size": np.array([entry.get("size") or 0 for entry in trace], dtype=np.int64),
                "stream": np.array([entry.get("stream") or 0 for entry in trace], dtype=np.int64),
                "time_us": np.array([t if t is not None else np.nan for t in times], dtype=np.float64),
                "stack": stacks.ids([entry.get("frames") for entry in trace]),
            }
        )
        frames.append(frame)
    if not frames:
        return pd.DataFrame(
            {
                "device": pd.Series(dtype=np.int16),
                "index": pd.Series(dtype=np.int64),
                "action": pd.Categorical([], categories=ACTIONS),
                "addr": pd.Series(dtype=np.int64),
                "size": pd.Series(dtype=np.int64),
                "stream": pd.Series(dtype=np.int64),
                "time_us": pd.Series(dtype=np.float64),
                "stack": pd.Series(dtype=np.int64),
            }
        ), False
    return pd.concat(frames, ignore_index=True), has_time


def _state(segments: list, stacks: _Stacks) -> tuple[pd.DataFrame, pd.DataFrame]:
    if not isinstance(segments, list):
        raise SnapshotError("segments is not a list: not a memory snapshot")
    segment_rows, block_rows, block_frames = [], [], []
    for segment in segments:
        if not isinstance(segment, dict):
            raise SnapshotError("a segment is not a dict: not a memory snapshot")
        device = segment.get("device", 0)
        segment_rows.append(
            (
                device,
                segment.get("address", 0),
                segment.get("total_size", 0),
                segment.get("allocated_size", 0),
                segment.get("active_size", 0),
                segment.get("stream", 0),
            )
        )
        for block in segment.get("blocks", []):
            block_rows.append(
                (
                    device,
                    block.get("address", 0),
                    block.get("size", 0),
                    block.get("requested_size", block.get("size", 0)),
                    block.get("state", "inactive"),
                )
            )
            block_frames.append(block.get("frames") or block.get("history", [{}])[-1].get("frames") or [])
    segments_frame = pd.DataFrame(
        segment_rows, columns=["device", "address", "total_size", "allocated_size", "active_size", "stream"]
    ).astype("int64")
    blocks_frame = pd.DataFrame(block_rows, columns=["device", "address", "size", "requested_size", "state"])
    blocks_frame = blocks_frame.astype(
        {"device": "int64", "address": "int64", "size": "int64", "requested_size": "int64"}
    )
    blocks_frame["stack"] = stacks.ids(block_frames)
    return blocks_frame, segments_frame


def _annotations(entries: list) -> pd.DataFrame:
    rows = [
        (entry.get("device", 0), str(entry.get("name", "")), str(entry.get("stage", "")), entry.get("time_us"))
        for entry in entries
        if isinstance(entry, dict)
    ]
    return pd.DataFrame(rows, columns=["device", "name", "stage", "time_us"])
