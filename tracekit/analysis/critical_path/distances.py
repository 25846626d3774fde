"""Each node's longest distance from a chain's start, found on the graph's chains (``graph.Graph``).

Along a chain the distance is a prefix sum P of the chain's weights plus the running maximum of what
enters it: at position i, d(i) = P(i) + max over the chain's inputs j <= i of (x(j) - P(j)), where an
input is the chain's first position (x = 0) or the target of a launch or sync edge (x = the source's
distance plus the edge's weight). ``longest`` uses it for path lengths and ``kahn_order`` for Kahn's
generations (unit weights); it lives apart so neither imports the other. Only inputs need values: the
sync edges' (which lead back from the GPU, and can chain through every step) are found in one
topological pass over just the positions they touch, the launch edges' (into GPU chains no sync
leaves) afterwards, all at once. Memory: a few arrays of one int64 per node; time: a few passes over
them and a sort of the inputs, with Python work per sync edge only.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.events import LAUNCH
from tracekit.analysis.critical_path.graph import Graph
from tracekit.errors import InvalidTraceError

NONE = np.iinfo(np.int64).min // 4  # no input yet (below any distance less any prefix sum)
CYCLE = (
    "the trace's events make a cycle in the dependency graph (events on one thread that overlap without "
    "nesting?): no critical path"
)


class Distances:
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
        np.maximum.at(
            entered,
            self.target_input[known],
            values[known] + self.cross_weight[known] - self.prefix[self.target[known]],
        )
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
