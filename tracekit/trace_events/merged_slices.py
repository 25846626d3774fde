"""Slices of several kinds that share tracks (a host thread's ranges, CUDA API calls and Python calls; a
stream's ops and GPU-side annotations) as one stream of chunks in order of start, so that each chunk's
slices of a track are one packet sequence in the .pftrace.

Perfetto's trace processor takes every event of a file by timestamp, ties in the order it read them. Kinds
written one after another (a packet sequence each) would meet at one timestamp in file order, not in the
order a track needs: an operator ending at the very ns a CUDA API call begins would end after the call
began, and a viewer ends the latest open slice at an end (the call, not the operator). In one stream by
start (the longer first at one start), a slice never begins in an earlier chunk at a time another ends in
a later one; within a chunk the encoder orders a track's begins and ends itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np

from tracekit.trace_events.events import Arg, Labels, Slices, Texts
from tracekit.trace_events.track_lanes import stable_order
from tracekit.trace_events.tracks import slices


def merged_by_start(parts: Sequence[tuple[str, Iterator[Slices]]]) -> Iterator[tuple[str | Counter, Slices]]:
    """(rows of each kind, chunk) of every (kind, chunks) in ``parts``, in one order of start (ns)."""
    kinds, chunks = [], []
    for kind, part in parts:
        for chunk in part:
            if len(chunk):
                kinds.append(kind)
                chunks.append(chunk)
    if not chunks:
        return
    whole = _concatenated(chunks)
    kind_of = np.repeat(np.arange(len(chunks)), [len(chunk) for chunk in chunks])
    order = stable_order(whole.start, lambda rows: -whole.duration[rows])  # the longer first at one start
    for chunk in slices(len(order)):
        rows = order[chunk]
        counts = np.bincount(kind_of[rows], minlength=len(chunks))
        counted = Counter()
        for index, count in enumerate(counts.tolist()):
            counted[kinds[index]] += count
        yield counted, _taken(whole, rows)


def _concatenated(chunks: list[Slices]) -> Slices:
    """The chunks as one Slices: labels over the tables they use (each table once), every argument any of
    them has (absent in the rows of the others), arrows as they were."""
    names = list(dict.fromkeys(arg.name for chunk in chunks for arg in chunk.args))
    args = tuple(_arg(name, chunks) for name in names)
    flow_in = None
    if any(chunk.flow_in is not None for chunk in chunks):
        flow_in = np.concatenate([_or_full(chunk.flow_in, len(chunk), -1) for chunk in chunks])
    flow_out = None
    if any(chunk.flow_out is not None for chunk in chunks):
        counts = [chunk.flow_out[0] if chunk.flow_out else np.zeros(len(chunk), np.int64) for chunk in chunks]
        ids = [chunk.flow_out[1] if chunk.flow_out else np.zeros(0, np.int64) for chunk in chunks]
        flow_out = (np.concatenate(counts).astype(np.int64), np.concatenate(ids).astype(np.int64))
    colour = None
    if any(chunk.colour is not None for chunk in chunks):
        colour = _labels([chunk.colour or Labels.constant("", len(chunk)) for chunk in chunks])
    column = lambda name: np.concatenate([getattr(chunk, name) for chunk in chunks])
    return Slices(
        _labels([chunk.category for chunk in chunks]),
        _labels([chunk.name for chunk in chunks]),
        column("pid"),
        column("tid"),
        column("start"),
        column("duration"),
        args,
        flow_in,
        flow_out,
        colour,
    )


def _labels(parts: list[Labels], kind: type[Texts] | None = None) -> Labels:
    """One Labels of several: each table once (the chunks of one kind share theirs), a part's missing text
    (its table's last) missing in the whole; ``kind``: the table's class (JSON values stay JSON values)."""
    offsets: dict[int, int] = {}
    texts: list[str] = []
    for part in parts:
        if id(part.table) not in offsets:
            offsets[id(part.table)] = len(texts)
            texts += part.table.texts[:-1]
    codes = [
        np.where(part.codes == len(part.table.texts) - 1, len(texts), part.codes + offsets[id(part.table)])
        for part in parts
    ]
    return Labels(np.concatenate(codes), (kind or type(parts[0].table))(texts))


def _arg(name: str, chunks: list[Slices]) -> Arg:
    """Argument ``name`` over every chunk, absent in the rows of chunks without it."""
    found = [next((arg for arg in chunk.args if arg.name == name), None) for chunk in chunks]
    model = next(arg for arg in found if arg is not None)
    present = np.concatenate(
        [
            np.zeros(len(chunk), bool) if arg is None else _or_full(arg.present, len(chunk), True)
            for arg, chunk in zip(found, chunks)
        ]
    )
    pairs = list(zip(found, chunks))
    values: np.ndarray | Labels | tuple[np.ndarray, ...]
    if isinstance(model.values, Labels):
        absent = lambda chunk: Labels.of_codes(np.full(len(chunk), -1), [])
        parts = [arg.values if arg is not None else absent(chunk) for arg, chunk in pairs]
        values = _labels(parts, type(model.values.table))  # type: ignore[arg-type]
    elif isinstance(model.values, tuple):
        values = tuple(
            np.concatenate([_axis(arg, axis, len(chunk)) for arg, chunk in pairs]) for axis in range(len(model.values))
        )
    else:
        values = np.concatenate([_axis(arg, None, len(chunk)) for arg, chunk in pairs])
    return Arg(name, values, present, model.decimals, model.per_row)


def _axis(arg: Arg | None, axis: int | None, count: int) -> np.ndarray:
    """An argument's integers in one chunk (one axis of a triple), zeros where the chunk has none."""
    if arg is None:
        return np.zeros(count, np.int64)
    values = arg.values[axis] if axis is not None else arg.values  # type: ignore[index]
    return np.asarray(values)


def _or_full(values: np.ndarray | None, count: int, fill) -> np.ndarray:
    return np.full(count, fill) if values is None else np.asarray(values)


def _taken(whole: Slices, rows: np.ndarray) -> Slices:
    """The slices at ``rows`` (in that order), their arrows with them."""
    flow_out = None
    if whole.flow_out is not None:
        counts, ids = whole.flow_out
        first = np.cumsum(counts) - counts
        mine = counts[rows]
        within = np.arange(int(mine.sum())) - np.repeat(np.cumsum(mine) - mine, mine)
        flow_out = (mine, ids[np.repeat(first[rows], mine) + within])
    return Slices(
        whole.category[rows],
        whole.name[rows],
        whole.pid[rows],
        whole.tid[rows],
        whole.start[rows],
        whole.duration[rows],
        tuple(arg[rows] for arg in whole.args),
        None if whole.flow_in is None else whole.flow_in[rows],
        flow_out,
        None if whole.colour is None else whole.colour[rows],
    )
