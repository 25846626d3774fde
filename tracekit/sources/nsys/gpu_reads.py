"""Which SQL reads give which columns of the GPU-op table: the column contract's side in SQLite.

A command declares the ``gpu_ops`` columns it uses (``Trace.columns``); this module turns them into one
columnar read per export table (kernels, memcpys, memsets) that fetches only what they need: the
default kernel summary reads a duration and a name id per kernel (2 values, not 14), a launch
configuration only with ``--by-launch-config``. The times are always read (or checked in SQL when only
the duration is), so a row with impossible times is left out by every command; any other value brings
its own checks (``nsys_checks``) and reads as unknown when unusable, so the rows never depend on the
columns read.

No pandas here: the command line starts these reads on a thread while pandas is still importing
(``read_ahead``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from tracekit.model.schema import UNKNOWN_PID
from tracekit.sources.nsys.checks import (
    CAREFUL_SENTINEL,
    KERNEL_OPTIONAL,
    MEMCPY_OPTIONAL,
    MEMSET_OPTIONAL,
    TIME_LIMIT,
    low_bits,
)
from tracekit.sources.nsys.sqlite_columns import are_integers, between, outside, text_among

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
KIND_TABLES = {"kernel": KERNEL_TABLE, "memcpy": MEMCPY_TABLE, "memset": MEMSET_TABLE}
LAUNCH_CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
KERNEL_RESOURCE_COLUMNS = ("registers_per_thread", "shared_memory")
# The duration alone, with the time checks done in SQL: a row whose times are unusable reads as -1 (the
# subtraction would hide a TEXT time, which arithmetic turns into 0). REAL times give a non-integer and
# send the chunk to the careful read.
CHECKED_DURATION = f"CASE WHEN start >= 0 AND end >= start AND end < {TIME_LIMIT} THEN end - start ELSE -1 END"


@dataclass
class Read:
    """One columnar read (``sqlite_columns.read_columns``'s arguments) of one export table."""

    table: str
    ints: dict[str, str] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    guards: list[str] = field(default_factory=list)  # SQL aggregates: a chunk that needs the careful read
    carefuls: list[str] = field(default_factory=list)  # per-row tests of the careful read (the times)
    careful_ints: dict[str, str] = field(default_factory=dict)  # the careful read's per-row checked values
    optional: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, sql: str, careful: str, guard: str = "", dtype: str = "") -> None:
        """Read ``sql`` as ``name``; the careful read gives CAREFUL_SENTINEL where ``careful`` fails (the
        value is unknown, the row stays)."""
        self.ints[name] = sql
        self.careful_ints[name] = f"CASE WHEN {careful} THEN {sql} ELSE {CAREFUL_SENTINEL} END"
        if guard:
            self.guards.append(guard)
        if dtype:
            self.dtypes[name] = dtype

    def add_time(self, name: str, sql: str, careful: str) -> None:
        """Read ``sql`` as ``name``; the careful read leaves out the rows where ``careful`` fails."""
        self.ints[name] = sql
        self.carefuls.append(careful)

    def arguments(self) -> dict:
        return {
            "table": self.table,
            "ints": self.ints,
            "dtypes": self.dtypes,
            "guard": " OR ".join(f"({guard})" for guard in self.guards),
            "careful": " AND ".join(f"({careful})" for careful in dict.fromkeys(self.carefuls)),
            "careful_ints": self.careful_ints,
            "optional": self.optional,
        }


def gpu_op_reads(tables: Collection[str], columns: Collection[str]) -> dict[str, Read]:
    """Per op kind whose table the export has: the read giving ``columns`` of ``schema.GPU_OPS``."""
    wanted = set(columns)
    reads = {}
    optional = {"kernel": KERNEL_OPTIONAL, "memcpy": MEMCPY_OPTIONAL, "memset": MEMSET_OPTIONAL}
    for kind, table in KIND_TABLES.items():
        if table not in tables:
            continue
        read = Read(table, optional=optional[kind])
        _times(read, wanted)
        if wanted & {"device", "stream"}:
            # device and stream packed in one value: fewer numbers for SQLite to format
            read.add(
                "device_stream",
                "deviceId * 4294967296 + streamId",
                f"{are_integers('deviceId', 'streamId')} AND {between('deviceId', high=2**15)} AND "
                f"{between('streamId', high=2**31)}",
                guard=f"{outside(['deviceId'], 0, 2**16)} OR {outside(['streamId'], 0, 2**31)}",
            )
        if "correlation_id" in wanted:
            read.add("correlation_id", "ifnull(correlationId, -1)", are_integers(nullable=("correlationId",)))
        if "pid" in wanted:
            # a NULL globalPid (allowed by the schema) is an unknown process: matched by correlation alone;
            # arithmetic rather than bit operators: a REAL stays REAL (and fails to parse)
            read.add(
                "pid",
                f"ifnull({low_bits(f'globalPid / {2**24}', 24)}, {UNKNOWN_PID})",
                f"{are_integers(nullable=('globalPid',))} AND ifnull(globalPid, 0) >= 0",
                # a negative globalPid would read as process 0 or -1 (bits of its two's complement): per chunk
                guard=f"{text_among(nullable=('globalPid',))} OR ifnull(min(globalPid), 0) < 0",
            )
        if kind == "kernel":
            _kernel_columns(read, wanted)
        if kind != "kernel" and "bytes" in wanted:
            read.add("bytes", "bytes", f"{are_integers('bytes')} AND bytes >= 0")
        if kind == "memcpy" and wanted & {"name", "short_name"}:
            read.add("copy_kind", "copyKind", f"{are_integers('copyKind')} AND {between('copyKind', high=2**31)}")
        reads[kind] = read
    return reads


def _times(read: Read, wanted: set[str]) -> None:
    """Every read has the times' checks: start and end when asked for, else the checked duration."""
    if wanted & {"start", "end"}:
        read.add_time("start", "start", are_integers("start", "end"))
        read.add_time("end", "end", are_integers("start", "end"))
    else:
        read.add_time("duration", CHECKED_DURATION, are_integers("start", "end"))


def _kernel_columns(read: Read, wanted: set[str]) -> None:
    if wanted & {"name", "short_name"}:  # the short name is the name's (``sources.short_names``), not shortName
        column = "demangledName"
        read.add("name_id", column, f"{are_integers(column)} AND {between(column, high=2**31)}")
    if wanted & set(LAUNCH_CONFIG):
        # a 16-bit field past its half would spill into its neighbour, and TEXT would turn into 0: per chunk
        guard = f"{outside(['gridY', 'gridZ', 'blockY', 'blockZ'], 0, 2**16)} OR "
        guard += outside(["gridX", "blockX"], 0, 2**31)
        for axis in ("grid", "block"):
            x, y, z = (f"{axis}{dim}" for dim in "XYZ")
            dims = f"{are_integers(x, y, z)} AND {between(y, z, high=2**16)} AND {between(x, high=2**31)}"
            read.add(axis, f"{x} * 4294967296 + {y} * 65536 + {z}", dims, guard=guard if axis == "grid" else "")
    if "registers_per_thread" in wanted:
        # -1 (a column the export lacks) stays -1: unknown
        read.add(
            "registers_per_thread",
            "registersPerThread",
            f"{are_integers('registersPerThread')} AND registersPerThread >= -1 AND {between('registersPerThread', high=2**31)}",
        )
    if "shared_memory" in wanted:
        shared = "staticSharedMemory", "dynamicSharedMemory"
        read.add(
            "shared_memory",
            # either part unknown (-1): the sum is unknown
            "CASE WHEN staticSharedMemory < 0 OR dynamicSharedMemory < 0 THEN -1 "
            "ELSE staticSharedMemory + dynamicSharedMemory END",
            f"{are_integers(*shared)} AND {between(*shared, low=-1, high=2**40)}",
        )
