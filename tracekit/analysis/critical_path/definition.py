"""tracekit's definition of the critical path, the default: HolisticTraceAnalysis 0.5's graph (``graph``) with
two of its artifacts corrected before the longest path is found (``definition="hta"`` keeps HTA's exactly).

1. A long gap on a stream is a wait, not overhead. HTA weighs the gap between a stream's op and the next op
   queued behind it as Kernel-Kernel Overhead, however long. A queued op starts within a few µs of the one
   before it (the traces at hand: 10 µs at the 99th percentile, 23 µs at most on a single-stream ResNet); one
   that starts more than ``QUEUE_GAP`` later waited for something else: most often work on another stream
   that the trace records no dependency on (a side stream's tiny copy waiting for the backward pass on the
   main stream; a compute stream waiting for an all-to-all), else the host. HTA's path then jumps the gap on
   the idle stream and calls it overhead, which nothing a user does can shorten. Here such a gap weighs 0
   (a WAIT edge, as the CPU's idle between operators does), and where an op of another stream of the same
   GPU ended within ``QUEUE_GAP`` before the waiting op started (the most recent such op: what it most likely
   waited for), an edge from that op's end to the waiting op's start weighs the time between (the part of
   the gap that is a queue's overhead: Kernel-Kernel Overhead). The longest path then runs through the work
   that actually ran meanwhile (the backward's kernels, the collective), which is what can be made shorter.
   Not a weighted "Idle (waiting)" edge instead: weighing the wait would keep the path on the idle stream
   (the wait is as long as the work it waited for), and the path would still say what it waited, not what
   decided the time.
2. The path stops at its step's end. HTA's window holds the GPU work its CPU events launched, wherever it ran;
   when the GPU runs behind the host, that work runs on through the next step, and the path can be longer
   than its step (a 100 ms step's path of 118 ms). Here the window also holds the GPU ops that ran in it,
   whoever launched them (``graph.window_rows``, ``running``: the previous step's queued work, with no
   launch edge from outside the window), and every edge weighs only its part inside [start, end] (an op
   that runs past the end counts up to it, one that began before the start from it); ``uncounted`` keeps
   what an edge lost. So the path is the longest chain of the work that ran within the step; its edges
   weigh the time between their nodes (or 0), so it is no longer than the step, bar ops on one stream that
   overlap (a clock's error). Why the queued work too: counting only the step's own work up to its end,
   a GPU-bound steady state (the GPU busy throughout, each step's work starting when the previous step's is
   done) would read as CPU-bound, the CPU's chain being longer than the part of the step's own GPU work
   that fits in the step (ResNet on a V100: 52 ms of CPU against 95.7 ms of a GPU busy all the step).

Neither changes HTA's rules for which edges exist between the window's nodes: they reweigh edges, add the
few dependency edges between streams, and mark waits; everything else (``longest``) is HTA's, ties included.
The added edges run forward in time (an op's end to a later op's start), so they close no cycle in a graph
whose other edges do not run back in time (ops of one stream that do not overlap, syncs that end after the
ops they wait for), as HTA's graph on a sound trace.
"""

from __future__ import annotations

import numpy as np

from tracekit.analysis.critical_path.events import KERNEL_KERNEL, WAIT, Events
from tracekit.analysis.critical_path.graph import Graph

QUEUE_GAP = 50_000  # ns: the longest gap between a stream's queued ops that is counted as a queue's overhead


def corrected(events: Events, graph: Graph, start: int, end: int) -> Graph:
    """``graph`` (the window [start, end], ns) under tracekit's definition (see the module docstring); its
    arrays are changed in place."""
    uncounted = np.zeros(len(graph), dtype=np.int64)
    waits = graph.cpu_count + np.flatnonzero(
        (graph.kind[graph.cpu_count :] == KERNEL_KERNEL) & (graph.weight[graph.cpu_count :] > QUEUE_GAP)
    )
    uncounted[waits] = graph.weight[waits]
    graph.weight[waits], graph.kind[waits], graph.attributed[waits] = 0, WAIT, -1
    _add_waited_for(events, graph, waits)
    cross_uncounted = np.zeros(len(graph.cross_source), dtype=np.int64)
    _clip(events, graph, start, end, uncounted, cross_uncounted)
    graph.uncounted, graph.cross_uncounted = uncounted, cross_uncounted
    return graph


def _add_waited_for(events: Events, graph: Graph, waits: np.ndarray) -> None:
    """Per waiting op (``waits``: the positions of their starts), an edge from the end of the op of another
    stream of its GPU that ended last before its start, when that was at most ``QUEUE_GAP`` before."""
    if not len(waits):
        return
    first = graph.cpu_count
    ops = graph.node[first::2] // 2  # the GPU ops in layout order: op i's start at first + 2i, its end after
    waiting = (waits - first) // 2
    op_start = events.start[ops[waiting]]
    device = events.device[ops].astype(np.int64)
    source = np.full(len(waits), -1, dtype=np.int64)
    for one in np.unique(device[waiting]).tolist():  # a GPU at a time: a few
        on_device = np.flatnonzero(device == one)
        by_end = on_device[np.argsort(events.end[ops[on_device]], kind="stable")]
        mine = np.flatnonzero(device[waiting] == one)
        at = np.searchsorted(events.end[ops[by_end]], op_start[mine], side="left") - 1  # ended before it began
        source[mine] = np.where(at >= 0, by_end[np.maximum(at, 0)], -1)
    found = source >= 0
    safe = np.maximum(source, 0)
    found &= op_start - events.end[ops[safe]] <= QUEUE_GAP
    found &= events.stream[ops[safe]] != events.stream[ops[waiting]]
    if not found.any():
        return
    source_position = first + 2 * source[found] + 1
    target = waits[found]
    key = graph.cross_source * len(graph) + graph.cross_target
    new = ~np.isin(source_position * len(graph) + target, key)  # an edge HTA's graph has already stays as it is
    source_position, target = source_position[new], target[new]
    weight = events.start[graph.node[target] // 2] - events.end[graph.node[source_position] // 2]
    place = graph.gpu_place[target - first] + 1  # right after the waiting op's own edges
    fields = ("cross_source", "cross_target", "cross_weight", "cross_kind", "cross_place")
    added = (source_position, target, weight, np.full(len(target), KERNEL_KERNEL, dtype=np.int8), place)
    joined = [np.concatenate([getattr(graph, name), part]) for name, part in zip(fields, added, strict=True)]
    order = np.argsort(joined[-1], kind="stable")  # cross edges are kept in place order
    for name, values in zip(fields, joined, strict=True):
        setattr(graph, name, values[order].astype(getattr(graph, name).dtype, copy=False))


def _clip(
    events: Events, graph: Graph, start: int, end: int, uncounted: np.ndarray, cross_uncounted: np.ndarray
) -> None:
    """Every edge weighs only its part inside [start, end]; what it loses is added to ``uncounted`` (chain
    edges) or ``cross_uncounted``. Only edges into or out of an event that reaches out of the window change
    (the few ops that run past the step's end or began before its start)."""
    rows = graph.rows
    outside = rows[(events.end[rows] > end) | (events.start[rows] < start)]
    if not len(outside):
        return
    touched = np.flatnonzero(np.isin(graph.node >> 1, outside))
    chain = np.union1d(touched, touched + 1)
    chain = chain[chain < len(graph)]
    chain = chain[(graph.kind[chain] >= 0) & (graph.weight[chain] > 0)]
    kept = _inside(events, graph.node[chain - 1], graph.weight[chain], start, end)
    uncounted[chain] += graph.weight[chain] - kept
    graph.weight[chain] = kept
    cross = np.flatnonzero(graph.cross_weight > 0)
    kept = _inside(events, graph.node[graph.cross_source[cross]], graph.cross_weight[cross], start, end)
    cross_uncounted[cross] += graph.cross_weight[cross] - kept
    graph.cross_weight[cross] = kept


def _inside(events: Events, source: np.ndarray, weight: np.ndarray, start: int, end: int) -> np.ndarray:
    """The part inside [start, end] of edges from nodes ``source`` that weigh ``weight`` (> 0): the time
    from the source node's on."""
    row = source >> 1
    at = np.where(source & 1, events.end[row], events.start[row])
    return np.clip(np.minimum(at + weight, end) - np.maximum(at, start), 0, weight)
