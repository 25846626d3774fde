"""The normalized trace model: the one contract between readers and analyses.

Every reader fills the same columns, so every analysis works on every source. All times are int64
nanoseconds from the start of the capture session.

``kernels`` (GPU operations: kernels, and memcpy/memset as ops of their own kind)
    start, end, duration        int64 ns
    kind                        category: "kernel" | "memcpy" | "memset"
    name                        category: demangled kernel name; "[CUDA memcpy HtoD]", "[CUDA memset]"
    short_name                  category: base kernel name (same as name for memcpy/memset)
    device, stream              int32
    correlation_id              int64: joins the launching CUDA API call (-1 when unknown)
    pid                         int64: process id of the launching process
    grid_x/y/z, block_x/y/z     int32 launch configuration (0 for memcpy/memset)
    bytes                       int64 bytes moved or set (0 for kernels)

``launches`` (CUDA runtime API calls)
    start, end, duration        int64 ns
    name                        category: API function, e.g. "cudaLaunchKernel_v7000"
    correlation_id              int64
    pid, tid                    int64

``ranges`` (NVTX ranges)
    range_id                    int64: stable id of the range within its source (nsys: NVTX_EVENTS rowid)
    start, end, duration        int64 ns (an unclosed range ends at the last NVTX timestamp, as in nsys)
    name                        str: "domain:text" for a non-default domain, else text (nsys's naming)
    domain                      str: domain name, "" for the default domain
    style                       category: "pushpop" | "startend"
    pid, tid                    int64: thread that opened the range
    end_tid                     int64: thread that closed it (equals tid unless a start/end range crossed threads)
    depth                       int32: 0 for an outermost range on its thread
    parent                      int64: range_id of the tightest enclosing range on the same thread, -1 if none
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Callable, Collection

import numpy as np
import pandas as pd

KERNEL_COLUMNS = [
    "start",
    "end",
    "duration",
    "kind",
    "name",
    "short_name",
    "device",
    "stream",
    "correlation_id",
    "pid",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "bytes",
]
LAUNCH_COLUMNS = ["start", "end", "duration", "name", "correlation_id", "pid", "tid"]
RANGE_COLUMNS = [
    "range_id",
    "start",
    "end",
    "duration",
    "name",
    "domain",
    "style",
    "pid",
    "tid",
    "end_tid",
    "depth",
    "parent",
]

GPU_OP_KINDS = ["kernel", "memcpy", "memset"]
RANGE_STYLES = ["pushpop", "startend"]


@dataclass
class TraceMeta:
    """What a trace says about itself.

    ``gpus`` has columns id, name, sm_count, memory_bytes, compute_capability (may be empty: some
    exports carry no GPU description). ``session_start_utc_ns`` anchors the trace's time zero.
    """

    source: str
    tool: str = "nsys"
    tool_version: str | None = None
    schema_version: str | None = None
    session_start_utc_ns: int | None = None
    gpus: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["id", "name", "sm_count", "memory_bytes", "compute_capability"])
    )
    tables: frozenset[str] = frozenset()

    def as_dict(self) -> dict:
        """Plain JSON-friendly form (for run manifests and reports)."""
        return {
            "source": self.source,
            "tool": self.tool,
            "tool_version": self.tool_version,
            "schema_version": self.schema_version,
            "session_start_utc_ns": self.session_start_utc_ns,
            "gpus": self.gpus.to_dict(orient="records"),
        }


class Trace:
    """A profile as three normalized tables plus metadata.

    Tables load on first use, so a command that needs only GPU kernels never reads NVTX events.
    ``loaders`` maps "kernels" / "launches" / "ranges" to zero-argument functions returning the table.
    """

    def __init__(self, meta: TraceMeta, loaders: dict[str, Callable[[], pd.DataFrame]]):
        self.meta = meta
        self._loaders = loaders
        self._derived: dict[str, object] = {}

    def derived(self, key: str, compute: Callable[[], object]):
        """Something analyses compute from the tables (the GPU-op-to-launch join, say), computed once
        per trace however many analyses of one command or report ask for it."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    @cached_property
    def kernels(self) -> pd.DataFrame:
        return self._loaders["kernels"]()

    @cached_property
    def launches(self) -> pd.DataFrame:
        return self._loaders["launches"]()

    @cached_property
    def ranges(self) -> pd.DataFrame:
        return self._loaders["ranges"]()

    def ranges_named(self, patterns: Collection[str]) -> pd.DataFrame:
        """Only the ranges whose names match these names or glob patterns (``aten::mm*``), nested among
        themselves (depth/parent within the selection).

        Readers that can filter at the source (nsys: in SQL) read just these rows: a phase breakdown
        of a trace with millions of NVTX ranges never loads the millions.
        """
        patterns = set(patterns)
        if "ranges" not in self.__dict__ and "ranges_named" in self._loaders:
            return self._loaders["ranges_named"](patterns)
        return select_named(self.ranges, patterns)

    def load_together(self, tables: Collection[str], patterns: Collection[str] | None = None) -> pd.DataFrame | None:
        """Load several tables (and ``ranges_named(patterns)``) at once, on threads.

        Readers spend most of their time inside SQLite, which runs without the GIL, so reading the
        GPU ops, the API calls and the ranges side by side overlaps their Python parts. Returns the
        named ranges, or None without ``patterns``.
        """
        with ThreadPoolExecutor(max_workers=len(tables) + 1) as pool:
            loads = [pool.submit(getattr, self, table) for table in tables]
            selection = pool.submit(self.ranges_named, patterns) if patterns is not None else None
            for load in loads:
                load.result()
            return selection.result() if selection is not None else None

    @property
    def name(self) -> str:
        return self.meta.source

    @classmethod
    def from_frames(
        cls,
        meta: TraceMeta,
        kernels: pd.DataFrame | None = None,
        launches: pd.DataFrame | None = None,
        ranges: pd.DataFrame | None = None,
    ) -> "Trace":
        """A trace over tables already in memory (tests, caches, other readers)."""
        frames = {
            "kernels": kernels if kernels is not None else empty_kernels(),
            "launches": launches if launches is not None else empty_launches(),
            "ranges": ranges if ranges is not None else empty_ranges(),
        }
        return cls(meta, {key: (lambda frame=frame: frame) for key, frame in frames.items()})


def is_pattern(name: str) -> bool:
    """Whether a range name given by a user is a glob pattern (``*``, ``?`` or ``[...]``)."""
    return any(char in name for char in "*?[")


def names_matching(names: pd.Series, patterns: Collection[str]) -> np.ndarray:
    """Mask of a categorical name column matching any name or glob pattern (tested once per distinct name)."""
    names = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    categories = [str(name) for name in names.cat.categories]
    hit = np.array(
        [
            any(fnmatchcase(name, pattern) if is_pattern(pattern) else name == pattern for pattern in patterns)
            for name in categories
        ],
        dtype=bool,
    )
    codes = names.cat.codes.to_numpy()
    return np.where(codes >= 0, hit[np.maximum(codes, 0)] if len(hit) else False, False)


def select_named(ranges: pd.DataFrame, patterns: Collection[str]) -> pd.DataFrame:
    """The ranges whose names match ``patterns``, nested among themselves."""
    return renest(ranges[names_matching(ranges["name"], patterns)].reset_index(drop=True))


def renest(ranges: pd.DataFrame) -> pd.DataFrame:
    """Recompute depth and parent of a selection of ranges, among the selection only."""
    from tracekit.sources.nesting import nest_ranges

    if ranges.empty:
        return ranges
    same_thread = (ranges["end_tid"] == ranges["tid"]).to_numpy()
    thread = (ranges["pid"].to_numpy(np.int64) << 24) | ranges["tid"].to_numpy(np.int64)
    parent_row, depth = nest_ranges(thread, ranges["start"].to_numpy(), ranges["end"].to_numpy(), same_thread)
    ids = ranges["range_id"].to_numpy()
    ranges = ranges.copy()
    ranges["depth"] = depth
    ranges["parent"] = np.where(parent_row >= 0, ids[np.maximum(parent_row, 0)], -1)
    return ranges


def empty_kernels() -> pd.DataFrame:
    frame = pd.DataFrame({column: pd.Series(dtype="int64") for column in KERNEL_COLUMNS})
    for column in ("kind", "name", "short_name"):
        frame[column] = pd.Categorical([], categories=GPU_OP_KINDS if column == "kind" else [])
    return frame


def empty_launches() -> pd.DataFrame:
    frame = pd.DataFrame({column: pd.Series(dtype="int64") for column in LAUNCH_COLUMNS})
    frame["name"] = pd.Categorical([])
    return frame


def empty_ranges() -> pd.DataFrame:
    frame = pd.DataFrame({column: pd.Series(dtype="int64") for column in RANGE_COLUMNS})
    frame["name"] = pd.Series([], dtype=object)
    frame["domain"] = pd.Series([], dtype=object)
    frame["style"] = pd.Categorical([], categories=RANGE_STYLES)
    frame["depth"] = frame["depth"].astype("int32")
    return frame
