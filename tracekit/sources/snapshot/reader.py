"""CUDA memory snapshot (``torch.cuda.memory._dump_snapshot`` pickle) -> ``MemoryTrace``.

A snapshot is plain data (dicts, lists, tuples, strings, numbers), so it is unpickled with an
unpickler that refuses every global: a pickle that names any Python object (``os.system``, a class)
fails before anything is called. Formats handled: with or without ``time_us`` (torch <= 2.1 lacks
it: event order stands in for time), ``external_annotations`` (2.5+), ``compile_context`` /
``user_metadata`` (2.8+), block states ``active_allocated``, ``active_pending_free`` /
``active_awaiting_free`` and ``inactive``, several devices, a trace that is empty (state only), and
a ring buffer that dropped its earliest events.

Tables and their columns: ``tracekit.model.memory`` and ``tracekit.model.schema``.
"""

from __future__ import annotations

import gc
import gzip
import io
import operator
import pickle
import sys
import zlib
from contextlib import contextmanager, redirect_stderr
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.errors import SnapshotError
from tracekit.model.memory import MemoryTrace
from tracekit.model.memory_schema import MEMORY_ACTIONS, MEMORY_ANNOTATIONS, MEMORY_EVENTS
from tracekit.session import current

ACTION_CODES = {action: code for code, action in enumerate(MEMORY_ACTIONS)}
# Bounds checked before memory is spent (a snapshot needs several times its file size once unpickled);
# the session's settings raise them (``tracekit.session``: TRACEKIT_SNAPSHOT_LIMIT_MB and
# TRACEKIT_SNAPSHOT_MAX_FRAMES). Defaults are far above real snapshots (torch keeps 100k trace entries by
# default, stacks of a few hundred frames).
SIZE_LIMIT_VARIABLE, FRAMES_LIMIT_VARIABLE = "TRACEKIT_SNAPSHOT_LIMIT_MB", "TRACEKIT_SNAPSHOT_MAX_FRAMES"
# Every trace entry and block of a real snapshot is a dict of its own with its own address, size and
# time: at least ~40 bytes of pickle (real files: 50-60). Pickle can repeat one object by reference in 2
# bytes, so a small file could name 10M entries (3 GB to analyse): fewer bytes than this per entry is
# refused as such a file.
MIN_BYTES_PER_ENTRY = 16
# A gzip-compressed snapshot (``.pickle.gz``) is known by these first bytes; its size against the limit is
# what it decompresses to, counted this many bytes at a time.
GZIP_MAGIC = b"\x1f\x8b"
GUNZIP_BLOCK = 2**20


class TooLarge(ValueError):
    """Part of a snapshot is beyond a bound (see the limits above)."""


class RefusingUnpickler(pickle.Unpickler):
    """Unpickles data only: any reference to a Python global (function, class) is refused."""

    source: str  # the file being read, for the error messages; set by _unpickle before load()

    def find_class(self, module: str, name: str):
        raise SnapshotError(
            f"{self.source} asks to load the Python object {module}.{name}: a memory snapshot holds "
            "only dicts, lists, strings and numbers, so this file is not one (refused without "
            "running anything)"
        )

    def persistent_load(self, pid):
        raise SnapshotError(f"{self.source} uses persistent references: not a memory snapshot")


def load_snapshot(path: str | Path) -> MemoryTrace:
    """Read a snapshot pickle, plain or gzip-compressed, without executing anything from it."""
    # Python's cycle collector would walk the millions of dicts a snapshot unpickles into, again and again
    # while they are made: 2.2 s of a 1M-entry snapshot's 2.5 s unpickling, 0.6-0.9 s without it. A
    # snapshot is plain data, freed by reference counting once its columns are built; the collector is
    # back on when this returns.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(Path(path))
    finally:
        if enabled:
            gc.enable()


def _load(file: Path) -> MemoryTrace:
    compressed = _is_gzip(file)
    limit_mb = current().settings.snapshot_limit_mb
    size = _gunzipped_size(file, limit_mb * 2**20) if compressed else file.stat().st_size  # pickle bytes
    size_mb = size / 2**20
    if size_mb > limit_mb:
        # a compressed one was measured only to just past the limit: how far past is not known
        held, setting = (
            (f"holds more than {limit_mb:,} MiB once decompressed", f" above {limit_mb:,}")
            if compressed
            else (f"is {size_mb:,.0f} MiB", f"={int(size_mb) + 1}")
        )
        raise SnapshotError(
            f"{file} {held}, above the {limit_mb:,} MiB limit for a memory snapshot (reading one takes several "
            f"times its size in memory); set {SIZE_LIMIT_VARIABLE}{setting} to read it"
        )
    data = _unpickle(file, compressed)
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
    _check_entry_count(file, data, traces, size)
    stacks = _Stacks()
    try:
        events, has_time = _events(traces, stacks)
        blocks, segments = _state(data["segments"], stacks)
        annotations = _annotations(data.get("external_annotations") or [])
    except TooLarge as error:
        raise SnapshotError(f"{file} {error}") from None
    except (TypeError, ValueError, OverflowError, AttributeError) as error:  # a field of the wrong type
        raise SnapshotError(f"{file} has a field of an unexpected type ({error}): not a memory snapshot") from None
    settings = data.get("allocator_settings")
    return MemoryTrace(
        str(file),
        events,
        blocks,
        segments,
        annotations,
        stacks.lists,
        has_time,
        settings if isinstance(settings, dict) else {},
    )


def _check_entry_count(file: Path, data: dict, traces: list, size: int) -> None:
    """SnapshotError for a file naming more entries and blocks than its size can hold (see above)."""
    segments = data["segments"] if isinstance(data["segments"], list) else []
    blocks = sum(len(s["blocks"]) for s in segments if isinstance(s, dict) and isinstance(s.get("blocks"), list))
    entries = sum(len(trace) for trace in traces) + blocks
    if entries * MIN_BYTES_PER_ENTRY > size:
        raise SnapshotError(
            f"{file} names {entries:,} trace entries and blocks in {size:,} bytes: entries repeated by reference, "
            "not a memory snapshot (each real entry is a record of its own)"
        )


def _is_gzip(file: Path) -> bool:
    """Whether ``file`` is gzip-compressed (by its first bytes, whatever its name)."""
    with open(file, "rb") as handle:
        return handle.read(len(GZIP_MAGIC)) == GZIP_MAGIC


def _gunzipped_size(file: Path, limit: int) -> int:
    """The bytes ``file`` decompresses to, counted in blocks and thrown away (nothing kept in memory), the
    count stopping once it passes ``limit``: a small file that inflates without end (a gzip bomb) is
    measured to just past the limit, never inflated. SnapshotError for a damaged or cut stream."""
    count = 0
    try:
        with gzip.open(file, "rb") as stream:
            while count <= limit and (block := stream.read(GUNZIP_BLOCK)):
                count += len(block)
    except EOFError:
        raise SnapshotError(f"{file} ends too early: the compressed snapshot is truncated (copy it again)") from None
    except (OSError, zlib.error) as error:  # gzip.BadGzipFile is an OSError
        raise SnapshotError(f"{file} is not valid gzip ({error}): not a memory snapshot") from None
    return count


@contextmanager
def _no_unraisable_noise():
    """While a damaged pickle is read, CPython may print "SystemError: deallocated bytearray object has
    exported buffers" (a bytearray freed with a view on it still open, reported by ``PyErr_Print`` through
    ``sys.excepthook``, or as an unraisable error); the load's own error already says what is wrong, in one
    line, so that noise goes nowhere: the hooks and standard error are put back after."""
    hooks = sys.unraisablehook, sys.excepthook
    sys.unraisablehook = lambda unraisable: None
    sys.excepthook = lambda kind, value, traceback: None
    try:
        with redirect_stderr(io.StringIO()):  # the bytearray is freed inside the load, as its error unwinds
            yield
    finally:
        sys.unraisablehook, sys.excepthook = hooks


def _unpickle(file: Path, compressed: bool = False):
    with gzip.open(file, "rb") if compressed else open(file, "rb") as handle, _no_unraisable_noise():
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
            OverflowError,  # a length field past what this machine can address
            RecursionError,  # nesting deeper than Python's stack
            UnicodeDecodeError,
        ) as error:
            text = str(error)
            if "truncated" in text or "ran out of input" in text.lower():
                raise SnapshotError(f"{file} ends too early: the snapshot is truncated (copy it again)") from None
            raise SnapshotError(
                f"{file} is not a readable pickle ({text or type(error).__name__}): not a memory snapshot"
            ) from None


UNKNOWN_FRAME = {"filename": "?", "line": 0, "name": "?"}


class _Stacks:
    """Distinct stacks, numbered. Snapshots share one list object among entries with the same stack
    (pickle keeps shared objects shared), so identity is a cheap first key."""

    def __init__(self):
        self.lists: list[list[dict]] = [[]]  # 0: no stack recorded
        self._by_id: dict[int, int] = {}
        self.max_frames = current().settings.snapshot_max_frames

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
                if not isinstance(frames, list):
                    raise TypeError("a stack that is not a list of frames")
                if len(frames) > self.max_frames:
                    raise TooLarge(
                        f"holds a stack of {len(frames):,} frames, above the limit of {self.max_frames:,}; set "
                        f"{FRAMES_LIMIT_VARIABLE}={len(frames)} to read it"
                    )
                index = by_id[key] = len(lists)
                # a frame is a dict; a damaged one (a flipped bit can make it a string) reads as unknown
                if not all(type(frame) is dict for frame in frames):
                    frames = [frame if type(frame) is dict else dict(UNKNOWN_FRAME) for frame in frames]
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
        times = _field(trace, "time_us")
        has_time = has_time or any(t is not None for t in times[:1000])
        time_us = np.array([t if t is not None else np.nan for t in times], dtype=np.float64)
        del times
        # Codes through a dict: a Categorical built from a million strings costs a second.
        other = ACTION_CODES["other"]
        frame = pd.DataFrame(
            {
                "device": np.full(len(trace), device, dtype=np.int16),
                "index": np.arange(len(trace), dtype=np.int64),
                "action": pd.Categorical.from_codes(
                    np.array([ACTION_CODES.get(action, other) for action in _field(trace, "action")], dtype=np.int8),
                    categories=list(MEMORY_ACTIONS),
                ),
                "addr": _integers(_field(trace, "addr")),
                "size": _integers(_field(trace, "size")),
                "stream": _integers(_field(trace, "stream")),
                "time_us": time_us,
                "stack": stacks.ids(_field(trace, "frames")),
            },
            copy=False,
        )
        if np.isinf(frame["time_us"]).any() or (has_time and frame["time_us"].isna().any()):
            raise ValueError("time_us holds NaN or infinity, not a time")
        frames.append(frame)
    if not frames:
        return MEMORY_EVENTS.empty(), False
    return pd.concat(frames, ignore_index=True), has_time


def _field(trace: list, name: str) -> list:
    """One field of every entry (None where an entry lacks it): one pass in C (itemgetter) when every entry
    has it, 3x faster than ``entry.get`` in a comprehension; fields one at a time, so that the lists
    made on the way are one entry-count long at most."""
    try:
        return list(map(operator.itemgetter(name), trace))
    except (KeyError, TypeError):  # an entry without it (torch <= 2.1 has no time_us), or not a dict
        return [entry.get(name) for entry in trace]


def _integers(values) -> np.ndarray:
    """int64 array of the values, a missing one (None, or an empty string) as 0."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError):  # None or "" among them (anything else fails again, as it should)
        return np.array([value or 0 for value in values], dtype=np.int64)


def _history_frames(history) -> list:
    """The stack of a block's latest history record (torch < 2.1 kept frames there), or []."""
    latest = history[-1] if isinstance(history, list) and history else None
    return (latest.get("frames") or []) if isinstance(latest, dict) else []


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
            block_frames.append(block.get("frames") or _history_frames(block.get("history")))
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
    frame = pd.DataFrame(rows, columns=MEMORY_ANNOTATIONS.names)
    return frame.astype({"device": "int64", "name": object, "stage": object, "time_us": "float64"})
