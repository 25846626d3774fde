"""The longest path through a window's graph, as networkx's ``dag_longest_path`` finds it (HTA calls it).

networkx's rules: negative weights count as 0; each node's distance is the best of its predecessors'
plus the edge's weight (the first best, in the order the edges were added), and the path ends at the
first node of the largest distance in the order of Kahn's generations (nodes with no edge in, in the
order they first appear among the edges; then each node's successors, in edge order, as their last
predecessor is taken). Ties between equal-length paths are decided as networkx decides them: by
distance, then generation, then (``kahn_order``) the order of the ends' trails back.

Distances come from ``distances.Distances``, computed on the graph's chains, never node by node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit.analysis.critical_path.distances import Distances
from tracekit.analysis.critical_path.graph import Graph
from tracekit.analysis.critical_path.kahn_order import first_in_kahn_order


@dataclass
class Path:
    """A path's edges in order, each: its source node (2 x row, + 1 for an end), weight (ns, as found),
    kind, attributed event (-1: none), whether it is a GPU stream's chain edge (an op's own time or
    the gap before it) and the ns of its time its weight leaves out (``Graph.uncounted``); and its length
    (ns)."""

    source: np.ndarray
    weight: np.ndarray
    kind: np.ndarray
    attributed: np.ndarray
    on_gpu: np.ndarray
    length: int
    uncounted: np.ndarray


def longest_path(graph: Graph) -> Path:
    """The path networkx's ``dag_longest_path`` takes through ``graph`` (see the module docstring)."""
    if not len(graph):
        empty = np.zeros(0, dtype=np.int64)
        return Path(empty, empty, np.zeros(0, dtype=np.int8), empty, np.zeros(0, dtype=bool), 0, empty)
    distances = Distances(graph, np.maximum(graph.weight, 0), np.maximum(graph.cross_weight, 0))
    end = _end(graph, distances)
    return _walk_back(graph, distances, end)


def _end(graph: Graph, distances: Distances) -> int:
    """The path's last position: the first node of the largest distance in Kahn's order."""
    firsts = distances.firsts
    lasts = np.append(firsts[1:], len(graph)) - 1
    at_last = distances(lasts)
    largest = int(at_last.max())
    best = np.flatnonzero(at_last == largest)
    candidates = distances.first_at_least(firsts[best], lasts[best], largest)
    if len(candidates) == 1:
        return int(candidates[0])
    # a candidate entered from another by an edge of weight 0 comes after it: only the others can be first
    source_best = distances(graph.cross_source) == largest
    entered = graph.cross_target[source_best & (np.maximum(graph.cross_weight, 0) == 0)]
    roots = candidates[~np.isin(candidates, entered)]
    if len(roots) == 1:
        return int(roots[0])
    # unrelated candidates: the earlier Kahn generation (the most edges from a node with no edge in) first
    unit = np.ones(len(graph.cross_source), dtype=np.int64)
    generations = Distances(graph, (graph.kind >= 0).astype(np.int64), unit, distances.last_input)
    levels = generations(roots)
    roots = roots[levels == levels.min()]
    return int(roots[0]) if len(roots) == 1 else first_in_kahn_order(graph, roots, generations)


def _walk_back(graph: Graph, distances: Distances, end: int) -> Path:
    """The path into ``end``: from each node the edge the best distance came by (the first best, in
    the order edges were added), followed back. Along a chain that is the chain edge except where a
    launch or sync edge enters, so the walk jumps from one such entry to the next."""
    target = graph.cross_target
    achieved = distances(graph.cross_source) + np.maximum(graph.cross_weight, 0) == distances(target)
    # per entered position, its first achieving cross edge (in place order: they are stored so)
    achieving = np.flatnonzero(achieved)
    entered, first = np.unique(target[achieving], return_index=True)
    by_cross = achieving[first]
    chain_reaches = np.zeros(len(entered), dtype=bool)
    has_chain = graph.kind[entered] >= 0
    at = np.flatnonzero(has_chain)
    chain_reaches[at] = distances(entered[at] - 1) + np.maximum(graph.weight[entered[at]], 0) == distances(entered[at])
    cross_first = graph.cross_places()[by_cross] < graph.place(entered)
    jumps = ~chain_reaches | cross_first
    breaks = np.union1d(distances.firsts, entered[jumps])
    jump_at = dict(zip(entered[jumps].tolist(), by_cross[jumps].tolist(), strict=True))
    pieces: list[tuple[int, int, int]] = []  # (cross edge or -1, first chain position, last), from the end
    position = end
    while True:
        low = int(breaks[np.searchsorted(breaks, position, side="right") - 1])
        cross = jump_at.get(low, -1)
        pieces.append((cross, low + 1, position))
        if cross < 0:
            break
        position = int(graph.cross_source[cross])
    return _path_of(graph, pieces[::-1], int(distances(np.asarray([end]))[0]))


def _path_of(graph: Graph, pieces: list[tuple[int, int, int]], length: int) -> Path:
    """The path's edges from its pieces (in order): each a cross edge (or none) then a chain stretch, as
    slices of the graph's arrays (a stretch lies in one chain)."""
    cross = np.asarray([piece[0] for piece in pieces if piece[0] >= 0], dtype=np.int64)
    crossing = {
        "node": graph.node[graph.cross_source[cross]],
        "weight": graph.cross_weight[cross],
        "kind": graph.cross_kind[cross],
        "attributed": np.full(len(cross), -1, dtype=graph.attributed.dtype),
        "uncounted": np.zeros(len(cross), dtype=np.int64)
        if graph.cross_uncounted is None
        else graph.cross_uncounted[cross],
    }
    parts: dict[str, list[np.ndarray]] = {field: [] for field in crossing}
    sizes, on_gpu = [], []
    taken = 0
    for into, low, high in pieces:
        if into >= 0:
            for field, values in crossing.items():
                parts[field].append(values[taken : taken + 1])
            taken += 1
            sizes.append(1)
            on_gpu.append(False)
        high = max(high, low - 1)
        parts["node"].append(graph.node[low - 1 : high])  # a chain edge's source: the position before
        for field in ("weight", "kind", "attributed"):
            parts[field].append(getattr(graph, field)[low : high + 1])
        uncounted = graph.uncounted[low : high + 1] if graph.uncounted is not None else None
        parts["uncounted"].append(np.zeros(max(high + 1 - low, 0), np.int64) if uncounted is None else uncounted)
        sizes.append(high + 1 - low)
        on_gpu.append(low >= graph.cpu_count)
    joined = {field: np.concatenate(arrays) for field, arrays in parts.items()}
    return Path(
        source=joined["node"],
        weight=joined["weight"],
        kind=joined["kind"],
        attributed=joined["attributed"],
        on_gpu=np.repeat(np.asarray(on_gpu, dtype=bool), sizes),
        length=length,
        uncounted=joined["uncounted"],
    )
