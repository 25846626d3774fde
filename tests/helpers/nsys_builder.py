"""Build small Nsight Systems SQLite exports in code, with exactly known numbers.

The table layouts are those of real exports (column names, order and NOT NULL as nsys 2022.4.2 and
2026.2.1 write them), so the reader is tested against both schema generations: 2026 inserts
``greenContextId`` before ``streamId``, adds columns at the end, and renames the metadata table.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

_KERNEL_2022 = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, "
    "shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, "
    "registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
    "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
    "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, "
    "localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, "
    "sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER"
)
_KERNEL_2026 = (
    _KERNEL_2022.replace("contextId INTEGER NOT NULL, ", "contextId INTEGER NOT NULL, greenContextId INTEGER, ")
    + ", qmdBulkReleaseDone INTEGER, qmdPreexitDone INTEGER, qmdLastCtaDone INTEGER, graphId INTEGER, "
    "clusterX INTEGER, clusterY INTEGER, clusterZ INTEGER, clusterSchedulingPolicy INTEGER, "
    "maxPotentialClusterSize INTEGER, maxActiveClusters INTEGER, sharedMemoryRequestedPercentage INTEGER, "
    "tensorSizeMinusOneElements TEXT NOT NULL"
)
_RUNTIME = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
    "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER"
)
_OVERHEAD = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER"
)
_MEMCPY_2022 = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, "
    "copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, "
    "srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, "
    "migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER"
)
_MEMCPY_2026 = (
    _MEMCPY_2022.replace(
        "contextId INTEGER NOT NULL, streamId", "contextId INTEGER NOT NULL, greenContextId INTEGER, streamId"
    )
    + ", copyCount INTEGER"
)
_MEMSET_2026 = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    "value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"
)
_MEMSET_2022 = _MEMSET_2026.replace("greenContextId INTEGER, ", "")
_NVTX_2022 = (
    "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
    "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
    "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
    "floatValue REAL, jsonTextId INTEGER, jsonText TEXT"
)
_NVTX_2026 = _NVTX_2022 + ", binaryData TEXT"
_SYNC = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, syncType INTEGER NOT NULL, "
    "eventId INTEGER NOT NULL, eventSyncId INTEGER"
)
_CUDA_EVENT = (
    "timestamp INTEGER, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, "
    "correlationId INTEGER, globalPid INTEGER, eventId INTEGER NOT NULL, eventSyncId INTEGER"
)
_GPU = (
    "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER, "
    "l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, "
    "chipName TEXT, computeMajor INTEGER, computeMinor INTEGER"
)
_PROCESSES = "globalPid INTEGER, pid INTEGER, name TEXT"
_THREAD_NAMES = "nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER"
# TARGET_INFO_GPU as some real exports have it: a GPU's id and name, nothing else
GPU_ID_AND_NAME = "id INTEGER NOT NULL, name TEXT"

GENERATIONS = {
    "2022.4": {
        "meta_table": "EXPORT_META_DATA",
        "version": "2022.4.2.1",
        "schema": "3.0.0",
        "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL_2022,
        "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY_2022,
        "CUPTI_ACTIVITY_KIND_MEMSET": _MEMSET_2022,
        "NVTX_EVENTS": _NVTX_2022,
    },
    "2026.2": {
        "meta_table": "META_DATA_EXPORT",
        "version": "2026.2.1.210",
        "schema": "3.25.0",
        "CUPTI_ACTIVITY_KIND_KERNEL": _KERNEL_2026,
        "CUPTI_ACTIVITY_KIND_MEMCPY": _MEMCPY_2026,
        "CUPTI_ACTIVITY_KIND_MEMSET": _MEMSET_2026,
        "NVTX_EVENTS": _NVTX_2026,
    },
}
HIGH_BITS = 1 << 48  # real exports carry a non-zero hardware/VM id above pid and tid


def without_not_null(path: str | Path, table: str | None = None) -> Path:
    """Lift the NOT NULL rules of ``table`` (every table by default) by editing the schema text, as a
    hostile or careless writer could; connections opened afterwards accept NULL anywhere there."""
    which, values = ("name = ?", (table,)) if table else ("type = 'table'", ())
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute(f"UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE {which}", values)
    return Path(path)


def global_tid(pid: int, tid: int) -> int:
    return HIGH_BITS | (pid << 24) | tid


def global_pid(pid: int) -> int:
    return HIGH_BITS | (pid << 24)


@dataclass
class ExportBuilder:
    """Collects rows, then writes an export of the chosen generation ("2022.4" or "2026.2")."""

    generation: str = "2022.4"
    strings: dict[str, int] = field(default_factory=dict)
    rows: dict[str, list[dict]] = field(default_factory=dict)
    gpus: list[dict] = field(default_factory=list)
    next_correlation: int = 1
    gpu_columns: str = _GPU  # TARGET_INFO_GPU's columns (GPU_ID_AND_NAME: the id and name alone)

    def string(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings) + 1)

    def _add(self, table: str, **values) -> None:
        self.rows.setdefault(table, []).append(values)

    def kernel(
        self,
        start: int,
        end: int,
        name: str,
        short: str | None = None,
        grid=(1, 1, 1),
        block=(128, 1, 1),
        device: int = 0,
        stream: int = 7,
        pid: int = 100,
        tid: int | None = None,
        launch_at: int | None = None,
        launch_end: int | None = None,
        resources: dict | None = None,
    ) -> int:
        """A kernel and (unless launch_at is None and tid is None) the runtime call that launched it;
        ``resources``: more of its columns (registersPerThread, staticSharedMemory, dynamicSharedMemory)."""
        correlation = self.next_correlation
        self.next_correlation += 1
        self._add(
            "CUPTI_ACTIVITY_KIND_KERNEL",
            start=start,
            end=end,
            deviceId=device,
            streamId=stream,
            correlationId=correlation,
            globalPid=global_pid(pid),
            demangledName=self.string(name),
            shortName=self.string(short or name.split("<")[0].split("(")[0]),
            gridX=grid[0],
            gridY=grid[1],
            gridZ=grid[2],
            blockX=block[0],
            blockY=block[1],
            blockZ=block[2],
            **(resources or {}),
        )
        if launch_at is not None:
            self.runtime(
                launch_at,
                launch_end if launch_end is not None else launch_at + 5,
                "cudaLaunchKernel_v7000",
                correlation,
                pid,
                tid if tid is not None else pid,
            )
        return correlation

    def memcpy(
        self,
        start: int,
        end: int,
        copy_kind: int = 1,
        size: int = 1024,
        device: int = 0,
        stream: int = 7,
        pid: int = 100,
        tid: int | None = None,
        launch_at: int | None = None,
        src_kind: int | None = None,
        dst_kind: int | None = None,
        api: str = "cudaMemcpyAsync_v3020",
        src_device: int | None = None,
        dst_device: int | None = None,
    ) -> int:
        """A copy (``copy_kind``: 1 HtoD, 2 DtoH, 8 DtoD; kinds: 0 pageable, 1 pinned, 2 device) and, with
        ``launch_at``, the ``api`` call that issued it."""
        correlation = self.next_correlation
        self.next_correlation += 1
        self._add(
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            start=start,
            end=end,
            deviceId=device,
            streamId=stream,
            correlationId=correlation,
            globalPid=global_pid(pid),
            bytes=size,
            copyKind=copy_kind,
            srcKind=src_kind,
            dstKind=dst_kind,
            srcDeviceId=src_device,
            dstDeviceId=dst_device,
        )
        if launch_at is not None:
            self.runtime(launch_at, launch_at + 5, api, correlation, pid, tid if tid is not None else pid)
        return correlation

    def memset(
        self,
        start: int,
        end: int,
        size: int = 1024,
        device: int = 0,
        stream: int = 7,
        pid: int = 100,
        tid: int | None = None,
        launch_at: int | None = None,
        mem_kind: int | None = None,
        api: str = "cudaMemsetAsync_v3020",
    ) -> int:
        """A set (``mem_kind``: 1 pinned, 2 device, 4 managed) and, with ``launch_at``, its ``api`` call."""
        correlation = self.next_correlation
        self.next_correlation += 1
        self._add(
            "CUPTI_ACTIVITY_KIND_MEMSET",
            start=start,
            end=end,
            deviceId=device,
            streamId=stream,
            correlationId=correlation,
            globalPid=global_pid(pid),
            value=0,
            bytes=size,
            memKind=mem_kind,
        )
        if launch_at is not None:
            self.runtime(launch_at, launch_at + 5, api, correlation, pid, tid if tid is not None else pid)
        return correlation

    def overhead(self, start: int, end: int, name: str = "CUDA profiling data flush overhead", pid: int = 100) -> None:
        """A record of the profiler's own overhead (PROFILER_OVERHEAD)."""
        self._add("PROFILER_OVERHEAD", start=start, end=end, globalTid=global_tid(pid, pid), nameId=self.string(name))

    def process(self, pid: int, name: str) -> None:
        """A process's name (PROCESSES, as nsys records every process of the machine)."""
        self._add("PROCESSES", globalPid=global_pid(pid), pid=pid, name=name)

    def thread_name(self, pid: int, tid: int, name: str) -> None:
        """A thread's name (ThreadNames, by string id)."""
        self._add("ThreadNames", nameId=self.string(name), priority=20, globalTid=global_tid(pid, tid))

    def runtime(self, start: int, end: int, name: str, correlation: int, pid: int = 100, tid: int = 100) -> None:
        self._add(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            start=start,
            end=end,
            eventClass=0,
            globalTid=global_tid(pid, tid),
            correlationId=correlation,
            nameId=self.string(name),
            returnValue=0,
        )

    def sync(
        self,
        start: int,
        end: int,
        sync_type: int,
        correlation: int,
        stream: int = 7,
        device: int = 0,
        pid: int = 100,
        event: int = 0,
        event_sync: int | None = None,
    ) -> None:
        """A CUPTI synchronization record (syncType: 1 event sync, 2 stream wait, 3 stream sync, 4 context sync)."""
        self._add(
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            start=start,
            end=end,
            deviceId=device,
            contextId=1,
            streamId=stream,
            correlationId=correlation,
            globalPid=global_pid(pid),
            syncType=sync_type,
            eventId=event,
            eventSyncId=event_sync,
        )

    def event_record(
        self, correlation: int, stream: int, event: int, event_sync: int | None = None, device: int = 0, pid: int = 100
    ) -> None:
        """A CUDA event record (CUPTI_ACTIVITY_KIND_CUDA_EVENT): the stream and call that recorded ``event``."""
        self._add(
            "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
            timestamp=0,
            deviceId=device,
            contextId=1,
            streamId=stream,
            correlationId=correlation,
            globalPid=global_pid(pid),
            eventId=event,
            eventSyncId=event_sync,
        )

    def push_pop(
        self,
        start: int,
        end: int | None,
        text: str | None,
        pid: int = 100,
        tid: int = 100,
        domain_id: int = 0,
        registered: bool = False,
    ) -> None:
        """A push/pop range; ``registered`` names it through StringIds (textId) as the nvtx package does;
        ``text`` None: a range pushed without a message."""
        self._nvtx(59, start, end, text, pid, tid, domain_id, registered)

    def start_end(
        self,
        start: int,
        end: int,
        text: str,
        pid: int = 100,
        tid: int = 100,
        end_tid: int | None = None,
        domain_id: int = 0,
        registered: bool = False,
    ) -> None:
        self._nvtx(
            60,
            start,
            end,
            text,
            pid,
            tid,
            domain_id,
            registered,
            end_global_tid=global_tid(pid, end_tid) if end_tid is not None and end_tid != tid else None,
        )

    def domain(self, domain_id: int, name: str, at: int = 0, pid: int = 100, tid: int = 100) -> None:
        self._add("NVTX_EVENTS", start=at, eventType=75, text=name, globalTid=global_tid(pid, tid), domainId=domain_id)

    def mark(self, at: int, text: str, pid: int = 100, tid: int = 100) -> None:
        self._add("NVTX_EVENTS", start=at, eventType=34, text=text, globalTid=global_tid(pid, tid), domainId=0)

    def _nvtx(self, event_type, start, end, text, pid, tid, domain_id, registered, end_global_tid=None):
        naming = {"textId": self.string(text)} if registered and text is not None else {"text": text}
        self._add(
            "NVTX_EVENTS",
            start=start,
            end=end,
            eventType=event_type,
            globalTid=global_tid(pid, tid),
            endGlobalTid=end_global_tid,
            domainId=domain_id,
            **naming,
        )

    def gpu(self, gpu_id: int, name: str, sm_count: int, memory: int, major: int, minor: int) -> None:
        self.gpus.append(
            {
                "vmId": HIGH_BITS,
                "id": gpu_id,
                "name": name,
                "smCount": sm_count,
                "totalMemory": memory,
                "computeMajor": major,
                "computeMinor": minor,
            }
        )

    def write(self, path: str | Path) -> Path:
        """Write the export; like nsys, only tables with rows are created (plus StringIds and metadata)."""
        path = Path(path)
        path.unlink(missing_ok=True)
        layout = GENERATIONS[self.generation]
        with sqlite3.connect(path) as connection:
            connection.execute("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
            connection.executemany(
                "INSERT INTO StringIds VALUES (?, ?)", [(i, text) for text, i in self.strings.items()]
            )
            meta = layout["meta_table"]
            connection.execute(f"CREATE TABLE {meta} (name TEXT NOT NULL, value TEXT)")
            connection.executemany(
                f"INSERT INTO {meta} VALUES (?, ?)",
                [
                    ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
                    ("EXPORT_PRODUCT_VERSION", layout["version"]),
                    ("EXPORT_SCHEMA_VERSION", layout["schema"]),
                ],
            )
            connection.execute(
                "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)"
            )
            connection.execute(
                "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1763820000000000000, '2025-11-22T14:00:00', '')"
            )
            tables = {name: columns for name, columns in layout.items() if name.isupper() and "_" in name}
            tables["CUPTI_ACTIVITY_KIND_RUNTIME"] = _RUNTIME
            tables["PROFILER_OVERHEAD"] = _OVERHEAD
            tables["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"] = _SYNC
            tables["CUPTI_ACTIVITY_KIND_CUDA_EVENT"] = _CUDA_EVENT
            tables["PROCESSES"] = _PROCESSES
            tables["ThreadNames"] = _THREAD_NAMES
            if self.gpus:
                self.rows["TARGET_INFO_GPU"] = self.gpus
                tables["TARGET_INFO_GPU"] = self.gpu_columns
            for table, rows in self.rows.items():
                if not rows:
                    continue
                columns = tables[table]
                connection.execute(f"CREATE TABLE {table} ({columns})")
                names = [part.split()[0] for part in columns.split(", ")]
                defaults = {
                    part.split()[0]: ("" if "TEXT" in part else 0) if "NOT NULL" in part else None
                    for part in columns.split(", ")
                }
                connection.executemany(
                    f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                    [[row.get(name, defaults[name]) for name in names] for row in rows],
                )
        return path
