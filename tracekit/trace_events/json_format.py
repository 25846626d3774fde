"""The columns of ``events`` as Chrome trace-event JSON text, a chunk at a time (``text``'s Arrow string
kernels: no Python loop over events). A slice is an "X" event with its arguments; an arrow is a flow start
("s") on the slice it leaves and a flow end ("f", binding to the enclosing slice) on the one it reaches; a
counter is a "C" event; processes and tracks are "M" events (names and sort indices).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc  # pyright: ignore[reportMissingModuleSource]

from tracekit.model.schema import TORCH_DEVICE_FIELDS, compute_capability
from tracekit.model.trace import Trace
from tracekit.sources.kineto.ours import LANE_OF
from tracekit.trace_events.events import Arg, Counters, Labels, Metadata, Slices
from tracekit.trace_events.text import SEPARATOR, integers, join, microseconds, write_array


def quoted(labels: Labels) -> pa.Array:
    """Each row's text as a JSON string literal."""
    literals = labels.table.__dict__.get("_json_arrow")
    if literals is None:  # each table's literals are made once, for every chunk that uses it
        literals = pa.array(labels.table.json, type=pa.string())
        labels.table.__dict__["_json_arrow"] = literals
    return pc.take(literals, pa.array(labels.codes))


def slice_events(chunk: Slices) -> Iterator[pa.Array]:
    """The chunk's slices ("X"), then its arrows' ends ("s", "f"). Rows with different arguments present
    are written apart, each group with its own template."""
    if not len(chunk):
        return
    signatures = np.zeros(len(chunk), dtype=np.int64)
    for bit, arg in enumerate(chunk.args):
        if arg.present is not None:
            signatures |= np.asarray(arg.present, dtype=np.int64) << bit
    for signature in np.unique(signatures):
        rows = np.flatnonzero(signatures == signature) if len(np.unique(signatures)) > 1 else slice(None)
        args = [arg[rows] for bit, arg in enumerate(chunk.args) if arg.present is None or signature >> bit & 1]
        yield _slice_text(chunk, rows, args)
    yield from flow_events(chunk)


def _slice_text(chunk: Slices, rows: slice | np.ndarray, args: list[Arg]) -> pa.Array:
    pieces: list = [
        '{"ph":"X","cat":',
        quoted(chunk.category[rows]),
        ',"name":',
        quoted(chunk.name[rows]),
        *_where_and_when(chunk, rows),
        ',"dur":',
        microseconds(chunk.duration[rows]),
    ]
    if chunk.colour is not None:
        pieces += [',"cname":', quoted(chunk.colour[rows])]
    for index, arg in enumerate(args):
        pieces += [(',"args":{' if index == 0 else ",") + json.dumps(arg.name, ensure_ascii=False) + ":"]
        pieces += _value_text(arg)
    pieces.append("}}" if args else "}")
    return join(*pieces)


def _value_text(arg: Arg) -> list:
    values = arg.values
    if isinstance(values, Labels):
        return [quoted(values)]
    if isinstance(values, tuple):
        parts: list = ["["]
        for index, value in enumerate(values):
            parts += [integers(value), "," if index < len(values) - 1 else "]"]
        return parts
    return [microseconds(values) if arg.decimals == 3 else integers(values)]


def flow_events(chunk: Slices) -> Iterator[pa.Array]:
    """torch.profiler's "ac2g" arrows: a start at each slice an arrow leaves, an end ("bp":"e": bound to
    the enclosing slice) at each slice one reaches, both at the slice's start."""
    if chunk.flow_out is not None and len(chunk.flow_out[1]):
        counts, ids = chunk.flow_out
        rows = np.repeat(np.arange(len(chunk)), counts)
        yield _flow_text('{"ph":"s","cat":"ac2g","name":"launch","id":', chunk, rows, ids)
    if chunk.flow_in is not None:
        rows = np.flatnonzero(chunk.flow_in >= 0)
        if len(rows):
            head = '{"ph":"f","bp":"e","cat":"ac2g","name":"launch","id":'
            yield _flow_text(head, chunk, rows, chunk.flow_in[rows])


def _flow_text(head: str, chunk: Slices, rows: np.ndarray, ids: np.ndarray) -> pa.Array:
    return join(head, integers(ids), *_where_and_when(chunk, rows), "}")


def _where_and_when(chunk: Slices, rows: slice | np.ndarray) -> list:
    """The "pid", "tid" and "ts" fields of the events at ``rows`` (ts in exact decimal microseconds)."""
    return [
        ',"pid":',
        integers(chunk.pid[rows]),
        ',"tid":',
        integers(chunk.tid[rows]),
        ',"ts":',
        microseconds(chunk.start[rows]),
    ]


def counter_events(counters: Counters) -> pa.Array:
    """A "C" event per time, its series as arguments."""
    pieces: list = [f'{{"ph":"C","name":{json.dumps(counters.name)},"pid":{counters.pid},"ts":']
    pieces.append(microseconds(counters.times))
    for index, (name, values) in enumerate(counters.series.items()):
        pieces.append((',"args":{' if index == 0 else ",") + json.dumps(name) + ":")
        pieces.append(microseconds(values) if counters.decimals == 3 else integers(values))
    pieces.append("}}")
    return join(*pieces)


def metadata_events(metadata: Metadata) -> list[str]:
    """Chrome's metadata events: each process's and track's name and sort index."""
    events: list[dict] = []
    for track in metadata.tracks:
        what = "process" if track.tid is None else "thread"
        where = {"pid": track.pid} if track.tid is None else {"pid": track.pid, "tid": track.tid}
        # a lane says whose it is ("lane of": the tid or stream beside it): tracekit reads its slices back there
        lane = {} if track.lane_of is None else {LANE_OF: track.lane_of}
        events.append({"ph": "M", "name": f"{what}_name", **where, "args": {"name": track.name, **lane}})
        events.append({"ph": "M", "name": f"{what}_sort_index", **where, "args": {"sort_index": track.order}})
    return [json.dumps(event, ensure_ascii=False) for event in events]


def header_fields(trace: Trace | None) -> dict:
    """The fields before the events: torch.profiler's, for one input whose GPUs or rank are known."""
    fields: dict = {"schemaVersion": 1, "displayTimeUnit": "ns"}
    if trace is not None:
        if len(trace.meta.gpus):
            fields["deviceProperties"] = _device_properties(trace.meta.gpus)
        if trace.meta.rank is not None:
            fields["distributedInfo"] = {"rank": int(trace.meta.rank), "world_size": int(trace.meta.world_size or 1)}
    fields["otherData"] = {"writer": "tracekit timeline"}
    return fields


def _device_properties(gpus: pd.DataFrame) -> list[dict]:
    """torch.profiler's ``deviceProperties`` of ``gpus`` (``schema.GPUS``) with the fields that are known:
    an export may record a GPU's id and name alone, and an unknown field is left out, never invented."""
    described = []
    for gpu in gpus.to_dict("records"):  # one row per GPU
        fields: dict[str, Any] = {"id": int(gpu["id"])}
        if isinstance(gpu["name"], str):
            fields["name"] = gpu["name"]
        if pd.notna(gpu["memory_bytes"]):
            fields["totalGlobalMem"] = int(gpu["memory_bytes"])
        capability = compute_capability(gpu["compute_capability"])
        if capability is not None:
            fields["computeMajor"], fields["computeMinor"] = capability
        if pd.notna(gpu["sm_count"]):
            fields["numSms"] = int(gpu["sm_count"])
        fields.update(
            {field: int(gpu[column]) for column, field in TORCH_DEVICE_FIELDS.items() if pd.notna(gpu[column])}
        )
        described.append(fields)
    return described


class JsonSink:
    """The Chrome trace-event file: the header's fields, then every event, separated as the text is."""

    def __init__(self, handle: IO[bytes]):
        self.handle, self.size, self.first = handle, 0, True

    def header(self, fields: dict) -> None:
        self.size += self.handle.write((json.dumps(fields, ensure_ascii=False)[:-1] + ',"traceEvents":[\n').encode())

    def encode(self, item: Slices | Counters | Metadata) -> list[pa.Array | str]:
        if isinstance(item, Metadata):
            return metadata_events(item)
        if isinstance(item, Counters):
            return [counter_events(item)] if len(item) else []
        return list(slice_events(item))

    def put(self, encoded: list[pa.Array | str]) -> None:
        texts = [piece for piece in encoded if isinstance(piece, str)]
        if texts:  # metadata: a few dicts' text
            text = ("" if self.first else SEPARATOR) + SEPARATOR.join(texts)
            self.size += self.handle.write(text.encode())
            self.first = False
        for events in (piece for piece in encoded if not isinstance(piece, str)):
            self.size += write_array(self.handle, events, self.first)
            self.first = self.first and not len(events)

    def close(self) -> int:
        return self.size + self.handle.write(b"\n]}\n")

    def release(self) -> None:
        pass  # (no threads: the text is made by the writer's own)
