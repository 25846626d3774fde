"""The longest path through a window's graph, as networkx's ``dag_longest_path`` finds it (HTA calls it).

networkx's rules: negative weights count as 0; each node's distance is the best of its predecessors'
plus the edge's weight (the first best, in the order the edges were added), and the path ends at the
first node of the largest distance in the order of Kahn's generations (nodes with no edge in, in the
order they first appear among the edges; then each node's successors, in edge order, as their last
predecessor is taken). Ties between equal-length paths are decided as networkx decides them: by
distance, then generation, then (``kahn_order``) the order of the ends' trails back.

Computed on the graph's chains (``graph.Graph``), never node by node. Along a chain the distance is a
prefix sum P of the chain's weights plus the running maximum of what enters it: at position i,
d(i) = P(i) + max over the chain's inputs j <= i of (x(j) - P(j)), where an input is the chain's first
position (x = 0) or the target of a launch or sync edge (x = the source's distance plus the edge's
weight). So only inputs need values: the sync edges' (which lead back from the GPU, and can chain
through every step) are found in one topological pass over just the positions they touch, the launch
edges' (into GPU chains no sync leaves) afterwards, all at once. Memory: a few arrays of one int64 per
node; time: a few passes over them and a sort of the inputs, with Python work per sync edge only.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.events import LAUNCH
from tracekit.analysis.critical_path.graph import Graph
from tracekit.analysis.critical_path.kahn_order import first_in_kahn_order
from tracekit.errors import InvalidTraceError

NONE = np.iinfo(np.int64).min // 4  # no input yet (below any distance less any prefix sum)
CYCLE = ("the trace's events make a cycle in the dependency graph (events on one thread that overlap without "
         "nesting?): no critical path")  # fmt: skip


@dataclass
class Path:
    """A path's edges in order, each: its source node (2 x row, + 1 for an end), weight (ns, as found),
    kind, attributed event (-1: none) and whether it is a GPU stream's chain edge (an op's own time or
    the gap before it); and its length (ns)."""

    source: np.ndarray
    weight: np.ndarray
    kind: np.ndarray
    attributed: np.ndarray
    on_gpu: np.ndarray
    length: int


def longest_path(graph: Graph) -> Path:
    """The path networkx's ``dag_longest_path`` takes through ``graph`` (see the module docstring)."""
    if not len(graph):
        empty = np.zeros(0, dtype=np.int64)
        return Path(empty, empty, np.zeros(0, dtype=np.int8), empty, np.zeros(0, dtype=bool), 0)
    distances = _Distances(graph, np.maximum(graph.weight, 0), np.maximum(graph.cross_weight, 0))
    end = _end(graph, distances)
    return _walk_back(graph, distances, end)


class _Distances:
    """Each node's longest distance from a node with no edge in, for chain weights ``weight`` (per
    position, at least 0; the array becomes the prefix sums) and cross-edge weights ``cross_weight`` (at
    least 0)."""

    def __init__(
        self, graph: Graph, weight: np.ndarray, cross_weight: np.ndarray, last_input: np.ndarray | None = None
    ):
        self.firsts = np.flatnonzero(graph.kind < 0)  # each chain's first position
        weight[self.firsts] = 0  # no edge into it
        self.prefix = np.cumsum(weight, out=weight)
        self.source, self.target, self.cross_weight = graph.cross_source, graph.cross_target, cross_weight
        self.inputs = np.union1d(self.firsts, self.target)
        if last_input is None:  # per position, the index of the last input at or before it (its chain's)
            is_input = np.zeros(len(weight), dtype=bool)
            is_input[self.inputs] = True
            last_input = np.cumsum(is_input, dtype=np.int32)
            last_input -= 1
        self.last_input = last_input
        self.input_chain = np.searchsorted(self.firsts, self.inputs, side="right") - 1
        self.at_first = np.isin(self.inputs, self.firsts, assume_unique=True)
        self.target_input = self.last_input[self.target]
        known = np.zeros(len(self.source), dtype=bool)
        values = np.zeros(len(self.source), dtype=np.int64)
        loop, loop_values = self._through_syncs(graph)
        known[loop], values[loop] = True, loop_values
        self.running = self._running(known, values)
        while True:  # the launch edges into chains no sync leaves: their sources are final by now
            found = self(self.source)
            if known.all() and np.array_equal(found, values):
                break
            known[:], values = True, found
            self.running = self._running(known, values)

    def chain_of(self, positions: np.ndarray) -> np.ndarray:
        return self.input_chain[self.last_input[positions]]

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The distances of ``positions``."""
        return self.prefix[positions] + self.running[self.last_input[positions]]

    def _running(self, known: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Per input, the running maximum of x - P over its chain's inputs so far, with the cross edges
        whose sources' distances are ``known`` (``values``)."""
        entered = np.where(self.at_first, -self.prefix[self.inputs], NONE)
        np.maximum.at(entered, self.target_input[known],
                      values[known] + self.cross_weight[known] - self.prefix[self.target[known]])  # fmt: skip
        return pd.Series(entered).groupby(self.input_chain, sort=False).cummax().to_numpy(np.int64)

    def _through_syncs(self, graph: Graph) -> tuple[np.ndarray, np.ndarray]:
        """The cross edges a sync edge's source can depend on (those into a chain holding a sync edge's
        source or, in turn, such an edge's source: "live" chains) and their sources' distances, found in
        one topological pass over only the positions these edges touch."""
        source_chain, target_chain = self.chain_of(self.source), self.chain_of(self.target)
        live = np.zeros(len(self.firsts), dtype=bool)
        live[source_chain[graph.cross_kind != LAUNCH]] = True
        while True:
            into_live = live[target_chain]
            grown = live.copy()
            grown[source_chain[into_live]] = True
            if np.array_equal(grown, live):
                break
            live = grown
        loop = np.flatnonzero(into_live)
        if not len(loop):
            return loop, np.zeros(0, dtype=np.int64)
        source, target, weight = self.source[loop], self.target[loop], self.cross_weight[loop]
        keys = np.union1d(source, target)
        key_chain = self.chain_of(keys)
        follows = np.concatenate([[False], key_chain[1:] == key_chain[:-1]])  # the key before is on its chain
        source_key, target_key = np.searchsorted(keys, source), np.searchsorted(keys, target)
        by_target = np.argsort(target_key, kind="stable")
        in_bounds = np.searchsorted(target_key[by_target], np.arange(len(keys) + 1))
        by_source = np.argsort(source_key, kind="stable")
        out_bounds = np.searchsorted(source_key[by_source], np.arange(len(keys) + 1))
        waiting = (follows + np.diff(in_bounds)).tolist()
        prefix = self.prefix[keys].tolist()
        base = (-self.prefix[self.firsts[key_chain]]).tolist()
        follows_list, by_target_list, by_source_list = follows.tolist(), by_target.tolist(), by_source.tolist()
        source_key_list, target_key_list, weight_list = source_key.tolist(), target_key.tolist(), weight.tolist()
        in_list, out_list = in_bounds.tolist(), out_bounds.tolist()
        best = [0] * len(keys)  # per key, the running maximum of x - P on its chain
        ready = deque(key for key, count in enumerate(waiting) if count == 0)
        done = 0
        while ready:
            key = ready.popleft()
            done += 1
            value = best[key - 1] if follows_list[key] else base[key]
            for edge in by_target_list[in_list[key] : in_list[key + 1]]:
                source_of = source_key_list[edge]
                value = max(value, prefix[source_of] + best[source_of] + weight_list[edge] - prefix[key])
            best[key] = value
            after = [target_key_list[edge] for edge in by_source_list[out_list[key] : out_list[key + 1]]]
            if key + 1 < len(keys) and follows_list[key + 1]:
                after.append(key + 1)
            for following in after:
                waiting[following] -= 1
                if not waiting[following]:
                    ready.append(following)
        if done < len(keys):
            raise InvalidTraceError(CYCLE)
        best_array = np.asarray(best, dtype=np.int64)
        return loop, self.prefix[source] + best_array[source_key]

    def first_at_least(self, low: np.ndarray, high: np.ndarray, value: int) -> np.ndarray:
        """Per chain stretch [low, high] whose distance at ``high`` is ``value`` (the largest: distances
        never fall along a chain), its first position of that distance (a binary search for all at once)."""
        low, high = low.copy(), high.copy()
        while (low < high).any():
            middle = (low + high) // 2
            reached = self(middle) >= value
            high = np.where(reached, middle, high)
            low = np.where(reached, low, middle + 1)
        return low


def _end(graph: Graph, distances: _Distances) -> int:
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
    generations = _Distances(graph, (graph.kind >= 0).astype(np.int64), unit, distances.last_input)
    levels = generations(roots)
    roots = roots[levels == levels.min()]
    return int(roots[0]) if len(roots) == 1 else first_in_kahn_order(graph, roots, generations)


def _walk_back(graph: Graph, distances: _Distances, end: int) -> Path:
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
    chain_reaches[at] = (distances(entered[at] - 1) + np.maximum(graph.weight[entered[at]], 0)
                         == distances(entered[at]))  # fmt: skip
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
    crossing = {"node": graph.node[graph.cross_source[cross]], "weight": graph.cross_weight[cross],
                "kind": graph.cross_kind[cross], "attributed": np.full(len(cross), -1, dtype=graph.attributed.dtype)}  # fmt: skip
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
        sizes.append(high + 1 - low)
        on_gpu.append(low >= graph.cpu_count)
    joined = {field: np.concatenate(arrays) for field, arrays in parts.items()}
    return Path(source=joined["node"], weight=joined["weight"], kind=joined["kind"], attributed=joined["attributed"],
                on_gpu=np.repeat(np.asarray(on_gpu, dtype=bool), sizes), length=length)  # fmt: skip
