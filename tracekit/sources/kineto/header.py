"""The text of a torch.profiler trace around its events: the devices, the distributed job, the time base
(``deviceProperties``, ``distributedInfo``, ``baseTimeNanoseconds``), in ``TraceMeta``'s terms."""

from __future__ import annotations

from pathlib import Path

import msgspec

from tracekit.model.schema import TORCH_DEVICE_FIELDS
from tracekit.sources.kineto.json_stream import JsonTraceError, Skeleton, find_events, open_binary, read_block


class DeviceProperties(msgspec.Struct):
    id: int = -1
    name: str | None = None
    totalGlobalMem: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None
    numSms: int | None = None
    maxThreadsPerBlock: int | None = None
    maxThreadsPerMultiprocessor: int | None = None
    regsPerBlock: int | None = None
    regsPerMultiprocessor: int | None = None
    warpSize: int | None = None
    sharedMemPerBlock: int | None = None
    sharedMemPerMultiprocessor: int | None = None
    sharedMemPerBlockOptin: int | None = None


class DistributedInfo(msgspec.Struct):
    rank: int | None = None
    world_size: int | None = None


class Header(msgspec.Struct):
    """The document's fields before its events that tracekit reads."""

    schemaVersion: int | str | None = None
    deviceProperties: list[DeviceProperties] = []
    distributedInfo: DistributedInfo | None = None
    baseTimeNanoseconds: int | None = None


def read_header(path: Path) -> Header:
    with open_binary(path) as handle:
        head = bytearray(read_block(handle, path, 2**20))
        while (found := find_events(head, path)) is None:
            more = read_block(handle, path, 2**20)
            if not more or len(head) > 64 * 2**20:
                raise JsonTraceError(f'{path}: no "traceEvents" array found; not a torch.profiler trace')
            head += more
    start, array_document = found
    if array_document:
        return Header()
    try:  # the text before the events, closed: {"a": ..., "traceEvents": []}
        return msgspec.json.decode(bytes(head[:start]) + b"]}", type=Header)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return Header()  # fields of unexpected types: the trace reads without its device descriptions


def facts(header: Header) -> dict:
    """The header in ``TraceMeta.as_dict``'s terms."""
    distributed = header.distributedInfo or DistributedInfo()
    return {
        "schema_version": None if header.schemaVersion is None else str(header.schemaVersion),
        "session_start_utc_ns": header.baseTimeNanoseconds,
        "rank": distributed.rank,
        "world_size": distributed.world_size,
        "gpus": [
            {
                "id": device.id,
                "name": device.name,
                "sm_count": device.numSms,
                "memory_bytes": device.totalGlobalMem,
                "compute_capability": None
                if device.computeMajor is None
                else f"{device.computeMajor}.{device.computeMinor or 0}",
                **{column: getattr(device, field) for column, field in TORCH_DEVICE_FIELDS.items()},
            }
            for device in header.deviceProperties
        ],
    }


def whole_header(skeleton: Skeleton) -> Header:
    """The document's fields before and after its events."""
    if skeleton.array_document:
        return Header()
    try:
        return msgspec.json.decode(skeleton.document(), type=Header)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return Header()
