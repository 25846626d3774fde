"""The dependency graph of one window (a step, or the whole trace), as HolisticTraceAnalysis 0.5 builds it.

Nodes: the start and the end of every event that is one (operators, calls, GPU ops; ``events``):
node 2i is row i's start, 2i + 1 its end. Edges, each with a weight in ns:
- CPU (per thread, its events nested by time into a call stack, visited depth first): an operator's
  own time before its first child, between children and after the last (OPERATOR, weight = the time
  between the two nodes; the edge into a blocking call's end weighs 0: that wait is the GPU's, reached
  by a sync edge); consecutive outermost operators and calls are chained by DEPENDENCY edges of weight
  0 (the CPU idle between them is never on the path).
- GPU: each op's own time (OPERATOR); into its start either a launch edge from its call's start
  (KERNEL_LAUNCH_DELAY: only when its stream's queue was empty at the launch and nothing queued
  behind it when it started, and the stream's previous op ended before the launch) or else a
  kernel-kernel edge from the stream's previous op's end (KERNEL_KERNEL_DELAY, negative when they
  overlap); a SYNC_DEPENDENCY (weight 0) from the op another stream waited for (cudaStreamWaitEvent: to
  the next op launched to the waiting stream by the waiting thread) or from the last op of a
  synchronized stream, context or event to the end of the call that waited.
Which events a window holds: CPU events that start inside it (at or after its start, at or before its
end) and last longer than 0, the GPU ops and syncs whose call is among them, and every stream wait;
under tracekit's definition (``running``, ``definition``) also the GPU ops of its process that ran in it,
whoever launched them (their launch edges, from calls outside the window, are left out: ``gpu_edges``).
Where HTA keys streams by number alone, tracekit keys them by (device, stream); otherwise the rules
are HTA's, tie orders included where they decide an edge (launches before ops at one time).

Held as chains (``Graph``): every node but a chain's first has exactly one edge from the node before it
in its chain (a thread's walk, ``cpu_chains``; a stream's ops, ``gpu_edges``), and the few others
(launch and sync edges) are listed apart, so the longest path (``longest``) works on arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analysis.critical_path.cpu_chains import cpu_chains
from tracekit.analysis.critical_path.events import CALL, GPU, SYNC, Events
from tracekit.analysis.critical_path.gpu_edges import STREAM_WAIT, gpu_edges

# a window holding more of the trace's events than this share is selected by a mask over all of them
# (one pass); a smaller one (a step) by binary searches in the CPU events sorted by start
MASK_SHARE = 1 / 64


@dataclass
class Graph:
    """A window's graph as chains of positions: the CPU threads' (positions below ``cpu_count``, thread
    after thread), then the GPU streams'. Per position: its node (2 x row, + 1 for an end) and the chain
    edge into it from the position before: weight (ns, as found: negative for overlapping
    ops), kind (-1: a chain's first position, no edge), attributed event (row of ``Events``, -1: none),
    place (the order HTA adds edges in, which decides between equal paths: CPU edges in position order,
    then GPU edges by ``gpu_place``). ``cross_*``: the launch and sync edges, one per (source, target)
    (positions), in place order. ``rows``: the window's events. ``uncounted``/``cross_uncounted``: per
    chain/cross edge, the ns of its time its weight leaves out (tracekit's definition, ``definition``; None:
    none)."""

    rows: np.ndarray
    node: np.ndarray
    weight: np.ndarray
    kind: np.ndarray
    attributed: np.ndarray
    cpu_count: int
    gpu_place: np.ndarray
    cross_source: np.ndarray
    cross_target: np.ndarray
    cross_weight: np.ndarray
    cross_kind: np.ndarray
    cross_place: np.ndarray
    uncounted: np.ndarray | None = None
    cross_uncounted: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.node)

    def place(self, positions: np.ndarray) -> np.ndarray:
        """The place of the chain edge into each of ``positions``: CPU edges first, then GPU edges."""
        cpu = positions < self.cpu_count
        gpu_place = self.gpu_place[np.maximum(positions - self.cpu_count, 0)] if len(self.gpu_place) else 0
        return np.where(cpu, positions, 2**62 + gpu_place)

    def cross_places(self) -> np.ndarray:
        """The cross edges' places, on ``place``'s scale."""
        return 2**62 + self.cross_place


def window_rows(events: Events, start: int, end: int, pid: int | None = None, running: bool = False) -> np.ndarray:
    """The rows of ``events`` a window [start, end] holds (see the module docstring), ascending; ``pid``:
    one process's events only; ``running``: with the GPU ops that ran in it."""
    cpu = _cpu_rows(events)
    waits = cpu.waits
    if pid is None and len(cpu.rows) and start <= cpu.first_start and end >= cpu.last_start:
        inside = cpu.rows  # the whole trace: every CPU event, no search
    else:
        by_start, starts = cpu.by_start(events)
        inside = by_start[np.searchsorted(starts, start, side="left") : np.searchsorted(starts, end, side="right")]
    if pid is not None:
        inside = inside[events.pid[inside] == pid]
        waits = waits[events.pid[waits] == pid]
    launched = events.partner[inside]
    launched = launched[launched >= 0]
    launched = launched[events.role[launched] >= GPU]
    if running:
        ran = cpu.ran_in(events, start, end)
        launched = np.concatenate([launched, ran if pid is None else ran[events.pid[ran] == pid]])
    if len(inside) > MASK_SHARE * len(events):
        chosen = np.zeros(len(events), dtype=bool)
        for part in (inside, launched, waits):
            chosen[part] = True
        return np.flatnonzero(chosen)
    return np.unique(np.concatenate([inside, launched, waits]))


class _CpuRows:
    """The CPU events that last longer than 0 (ascending), their first and last start, the first row past
    the CPU side, and the stream waits: found once per trace; sorted by start only when a window is
    smaller than the trace."""

    def __init__(self, events: Events):
        self.rows = np.flatnonzero((events.role <= CALL) & (events.end > events.start))
        starts = events.start[self.rows]
        self.first_start = int(starts.min()) if len(starts) else 0
        self.last_start = int(starts.max()) if len(starts) else 0
        self.waits = np.flatnonzero((events.role == SYNC) & (events.sync_kind == STREAM_WAIT))
        gpu_side = events.role > CALL
        first = int(np.argmax(gpu_side)) if gpu_side.any() else len(events)
        # the rows below it are the CPU side when it comes first (as ``trace_events`` lists it)
        self.limit = first if gpu_side[first:].all() else None
        self._by_start: tuple[np.ndarray, np.ndarray] | None = None
        self._ops: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def ran_in(self, events: Events, start: int, end: int) -> np.ndarray:
        """The GPU ops with their launching call in the trace that ran in [start, end] (ns): by their starts,
        those that start before its end, from the first whose end, or an earlier one's, reaches past its start
        (ops on one stream run one after another: a few before the window)."""
        if self._ops is None:
            ops = np.flatnonzero((events.role == GPU) & (events.partner >= 0))
            ops = ops[np.argsort(events.start[ops], kind="stable")]
            self._ops = ops, events.start[ops], np.maximum.accumulate(events.end[ops])
        ops, starts, reach = self._ops
        low = int(np.searchsorted(reach, start, side="right"))
        high = int(np.searchsorted(starts, end, side="left"))
        ran = ops[low:high]
        return ran[events.end[ran] > start]

    def by_start(self, events: Events) -> tuple[np.ndarray, np.ndarray]:
        """The rows by start, and their starts."""
        if self._by_start is None:
            order = np.argsort(events.start[self.rows], kind="stable")
            self._by_start = self.rows[order], events.start[self.rows[order]]
        return self._by_start


def _cpu_rows(events: Events) -> _CpuRows:
    if events.cpu_rows is None:
        events.cpu_rows = _CpuRows(events)
    return events.cpu_rows


def build(events: Events, rows: np.ndarray) -> Graph:
    """The graph of the window holding ``rows`` (ascending)."""
    limit = _cpu_rows(events).limit
    cpu = rows[events.role[rows] <= CALL] if limit is None else rows[: np.searchsorted(rows, limit)]
    gpu = gpu_edges(events, rows)
    chains = cpu_chains(events, cpu, room=len(gpu.node))  # the GPU's chains go after the CPU's
    cpu_count = chains.count
    ops = gpu.node[0::2] // 2  # the GPU ops in layout order
    op_order = np.argsort(ops)

    def positions(nodes: np.ndarray) -> np.ndarray:
        row, end = nodes // 2, nodes % 2
        on_cpu = events.role[row] <= CALL
        local = np.searchsorted(cpu, row[on_cpu])
        found = np.empty(len(nodes), dtype=np.int64)
        found[on_cpu] = np.where(end[on_cpu] == 1, chains.end_at[local], chains.start_at[local])
        index = op_order[np.searchsorted(ops[op_order], row[~on_cpu])]
        found[~on_cpu] = cpu_count + 2 * index + end[~on_cpu]
        return found

    source, target = positions(gpu.cross_source), positions(gpu.cross_target)
    first, last = _pairs(source * (cpu_count + len(gpu.node)) + target)
    for field in ("node", "weight", "kind", "attributed"):
        getattr(chains, field)[cpu_count:] = getattr(gpu, field)
    return Graph(
        rows=rows,
        node=chains.node,
        weight=chains.weight,
        kind=chains.kind,
        attributed=chains.attributed,
        cpu_count=cpu_count,
        gpu_place=gpu.place,
        cross_source=source[first],
        cross_target=target[first],
        cross_weight=gpu.cross_weight[last],
        cross_kind=gpu.cross_kind[last],
        cross_place=gpu.cross_place[first],
    )


def _pairs(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For edges added in this order with these (source, target) keys, one per key in the order of its
    first addition: (the index of its first addition, of its last), as networkx keeps a pair added twice
    (its first place, its last values)."""
    order = np.argsort(key, kind="stable")
    if not len(key):
        return order, order
    ordered = key[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    ends = np.append(starts[1:], len(key)) - 1
    first, last = order[starts], order[ends]
    by_place = np.argsort(first, kind="stable")
    return first[by_place], last[by_place]
