"""A timeline file, either format, as the same plain tables: slices, arrows, counters and track names.

The protobuf file is decoded with Perfetto's own published protos (the ``perfetto`` package): packet
sequences with their interned names, default tracks and incremental clocks, begin/end pairs matched per
track, compressed packets inflated. The JSON file is read with exact decimals (µs with three decimals -> integer ns)."""

from __future__ import annotations

import gzip
import json
import zlib
from collections import defaultdict
from decimal import Decimal

import pytest


def _ns(value) -> int:
    return int(Decimal(value) * 1000)


def _number(value):
    return float(value) if isinstance(value, Decimal) else value


def from_json(path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as handle:
        events = json.load(handle, parse_float=Decimal)["traceEvents"]
    slices, starts, ends, counters, names = [], {}, {}, [], {}
    for event in events:
        phase = event["ph"]
        if phase == "X":
            args = {key: _plain(value) for key, value in event.get("args", {}).items()}
            where = (event["pid"], event["tid"])
            slices.append((*where, _ns(event["ts"]), _ns(event["dur"]), event["cat"], event["name"], _key(args)))
        elif phase in "sf":
            (starts if phase == "s" else ends)[event["id"]] = (event["pid"], event["tid"], _ns(event["ts"]))
        elif phase == "C":
            for series, value in event["args"].items():
                counters.append((event["pid"], f"{event['name']} {series}", _ns(event["ts"]), float(value)))
        elif phase == "M" and event["name"] in ("process_name", "thread_name"):
            names[(event["pid"], event.get("tid"))] = event["args"]["name"]
    flows = sorted((starts[key], ends[key]) for key in starts if key in ends)
    return {"slices": sorted(slices), "flows": flows, "counters": sorted(counters), "names": names}


def _plain(value):
    """An arg's value: a list of numbers (a kernel's grid) as its items; any other list (an operator's "Input
    Dims", nested or of texts, which the .pftrace holds as its JSON text) as its one-line JSON text."""
    if not isinstance(value, list):
        return _number(value)
    items = [_json(item) for item in value]
    numbers = items and all(isinstance(item, (int, float)) for item in items)
    return items if numbers else json.dumps(items, ensure_ascii=False)


def _json(value):
    return [_json(item) for item in value] if isinstance(value, list) else _number(value)


def _key(args: dict) -> tuple:
    return tuple(sorted((key, tuple(value) if isinstance(value, list) else value) for key, value in args.items()))


def from_protobuf(path, sorted_by_time: bool = True) -> dict:
    """The slices, arrows, counters and track names of a .pftrace. Each end closes the latest open slice of
    its track, the events taken as Perfetto's trace processor takes them: every track event of the file by
    timestamp, ties in file order (its sorter's key is the timestamp, then where the event was read); in
    file order alone without ``sorted_by_time``."""
    pb = pytest.importorskip(
        "perfetto.protos.perfetto.trace.perfetto_trace_pb2", reason="the perfetto package is not installed"
    )
    trace = pb.Trace()
    with open(path, "rb") as handle:
        trace.ParseFromString(handle.read())
    where, names, counter_tracks = {}, {}, {}
    state: dict[int, dict] = {}
    open_slices: dict[int, list] = defaultdict(list)
    slices, counters, flow_from, flow_to = [], [], {}, {}
    read: list[tuple] = []  # (time, track, (the begun slice, whether an instant), or None for an end)
    for packet in _packets(trace, pb):
        if packet.HasField("track_descriptor"):
            descriptor = packet.track_descriptor
            if descriptor.HasField("process"):
                where[descriptor.uuid] = (descriptor.process.pid, None)
                names[(descriptor.process.pid, None)] = descriptor.process.process_name
            elif descriptor.HasField("thread"):
                key = (descriptor.thread.pid, descriptor.thread.tid)
                where[descriptor.uuid] = key
                if descriptor.thread.thread_name:
                    names[key] = descriptor.thread.thread_name
            elif descriptor.HasField("counter"):
                counter_tracks[descriptor.uuid] = (where[descriptor.parent_uuid][0], descriptor.name)
            continue
        sequence = packet.trusted_packet_sequence_id
        if packet.sequence_flags & 1:
            state[sequence] = {"names": {}, "categories": {}, "args": {}, "strings": {}, "time": None}
        mine = state[sequence]
        if packet.HasField("trace_packet_defaults"):
            mine["track"] = packet.trace_packet_defaults.track_event_defaults.track_uuid
            assert packet.trace_packet_defaults.timestamp_clock_id == 64
        if packet.HasField("clock_snapshot"):
            clocks = {clock.clock_id: clock for clock in packet.clock_snapshot.clocks}
            assert clocks[64].is_incremental and clocks[64].timestamp == clocks[6].timestamp
            mine["time"] = clocks[64].timestamp
        interned = packet.interned_data
        mine["names"].update({entry.iid: entry.name for entry in interned.event_names})
        mine["categories"].update({entry.iid: entry.name for entry in interned.event_categories})
        mine["args"].update({entry.iid: entry.name for entry in interned.debug_annotation_names})
        mine["strings"].update({entry.iid: entry.str.decode() for entry in interned.debug_annotation_string_values})
        if not packet.HasField("track_event"):
            continue
        mine["time"] += packet.timestamp
        event, time = packet.track_event, mine["time"]
        track = event.track_uuid or mine["track"]
        if event.type == event.TYPE_COUNTER:
            counters.append((*counter_tracks[track], time, event.double_counter_value))
            continue
        if event.type == event.TYPE_SLICE_END:
            read.append((time, track, None))
            continue
        args = {mine["args"][annotation.name_iid]: _value(annotation, mine) for annotation in event.debug_annotations}
        category = "".join(mine["categories"][iid] for iid in event.category_iids)
        begun = (*where[track], time, category, mine["names"][event.name_iid], _key(args))
        for flow in event.flow_ids:
            flow_from.setdefault(flow, []).append(begun[:3])
        for flow in event.terminating_flow_ids:
            flow_to[flow] = begun[:3]
        read.append((time, track, (begun, event.type == event.TYPE_INSTANT)))
    for time, track, begin in sorted(read, key=lambda item: item[0]) if sorted_by_time else read:
        if begin is None:
            begun = open_slices[track].pop()
            slices.append((*begun[:2], begun[2], time - begun[2], *begun[3:]))
        elif begin[1]:
            slices.append((*begin[0][:3], 0, *begin[0][3:]))
        else:
            open_slices[track].append(begin[0])
    assert not any(open_slices.values()), "a slice began and never ended"
    flows = sorted((source, flow_to[key]) for key, sources in flow_from.items() for source in sources)
    return {"slices": sorted(slices), "flows": flows, "counters": sorted(counters), "names": names}


def _packets(trace, pb):
    """The trace's packets, those in a ``compressed_packets`` packet (zlib) inflated in its place, as
    Perfetto's trace processor reads them."""
    for packet in trace.packet:
        if packet.HasField("compressed_packets"):
            inner = pb.Trace()
            inner.ParseFromString(zlib.decompress(packet.compressed_packets))
            yield from _packets(inner, pb)
        else:
            yield packet


def _value(annotation, state):
    if annotation.HasField("string_value_iid"):
        return state["strings"][annotation.string_value_iid]
    if annotation.HasField("double_value"):
        return annotation.double_value
    if annotation.array_values:
        return [item.int_value for item in annotation.array_values]
    return annotation.int_value
