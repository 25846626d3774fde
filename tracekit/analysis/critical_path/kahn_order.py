"""Which of several path ends comes first in networkx's topological order, without replaying it.

networkx's ``dag_longest_path`` ends at the first node of the largest distance in
``topological_sort``'s order: Kahn's generations (generation 0: the nodes with no edge in, in the order
they first appear among the edges; generation g + 1: for each node of generation g in order, its
successors in the order their edges were added, each as its last edge in is taken). ``longest`` settles
most ties by distance and generation; this module orders path ends left equal in both (equal-length
paths in unrelated chains: whole-µs traces have them now and then).

Within generation g + 1, a node comes where its trigger does in generation g (the predecessor of
generation g that comes last there: the one whose edge releases it), and among the successors of one
trigger, in the order of their edges. So two nodes of one generation compare as their triggers do, one
generation back, until the triggers meet (then the edges' order decides) or reach generation 0 (then
first appearance does). Along a stretch of a chain that no launch or sync edge enters, a node's only
predecessor (its trigger) is the node before it, so both walks step back over such stretches at once:
the Python work is per launch or sync edge on the two ends' trails back, never per node, and only the
edges into the nodes visited are looked up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tracekit.analysis.critical_path.graph import Graph

if TYPE_CHECKING:
    from tracekit.analysis.critical_path.longest import _Distances


def first_in_kahn_order(graph: Graph, tied: np.ndarray, generations: _Distances) -> int:
    """Of ``tied`` (positions of one Kahn generation), the one networkx's topological sort puts first;
    ``generations``: each position's Kahn generation (distances of 1 per edge)."""
    order = _KahnOrder(graph, generations)
    first = int(tied[0])
    for other in tied[1:].tolist():
        if order.before(other, first):
            first = other
    return first


class _KahnOrder:
    """networkx's topological order between nodes of one generation, found on their trails back."""

    def __init__(self, graph: Graph, generations: _Distances):
        self.graph, self.generations = graph, generations
        self.by_target = np.argsort(graph.cross_target, kind="stable")  # the launch and sync edges into each position
        self.targets = graph.cross_target[self.by_target]
        self.cross_places = graph.cross_places()
        self.triggers: dict[int, int] = {}

    def generation(self, position: int) -> int:
        return int(self.generations(np.asarray([position]))[0])

    def before(self, first: int, second: int) -> bool:
        """Whether ``first`` comes before ``second`` (two positions of one generation)."""
        inputs, last_input = self.generations.inputs, self.generations.last_input
        while True:
            if self.generation(first) == 0:
                return self._appearance(first) < self._appearance(second)
            # back over the stretches no edge enters (each node's trigger: the node before it) at once
            stretch = min(first - int(inputs[last_input[first]]), second - int(inputs[last_input[second]]))
            if stretch > 0:
                first, second = first - stretch, second - stretch
                continue
            first_trigger, second_trigger = self._trigger(first), self._trigger(second)
            if first_trigger == second_trigger:
                return self._edge_place(first_trigger, first) < self._edge_place(first_trigger, second)
            first, second = first_trigger, second_trigger

    def _trigger(self, position: int) -> int:
        """The predecessor of ``position`` one generation back that comes last in that generation."""
        if position not in self.triggers:
            low, high = np.searchsorted(self.targets, [position, position + 1])
            before = self.graph.cross_source[self.by_target[low:high]].tolist()
            if self.graph.kind[position] >= 0:
                before.append(position - 1)
            generation = self.generation(position) - 1
            before = [node for node in before if self.generation(node) == generation]
            last = before[0]
            for node in before[1:]:
                if self.before(last, node):
                    last = node
            self.triggers[position] = last
        return self.triggers[position]

    def _edge_place(self, source: int, target: int) -> int:
        """The place (``Graph.place``'s scale) of the edge from ``source`` to ``target``."""
        if self.graph.kind[target] >= 0 and target - 1 == source:
            return int(self.graph.place(np.asarray([target]))[0])
        low, high = np.searchsorted(self.targets, [target, target + 1])
        edges = self.by_target[low:high]
        edge = edges[self.graph.cross_source[edges] == source].min()
        return int(self.cross_places[edge])

    def _appearance(self, position: int) -> int:
        """Where a node with no edge in first appears among the edges: its first edge out's place."""
        places = self.cross_places[np.flatnonzero(self.graph.cross_source == position)].tolist()
        following = position + 1
        if following < len(self.graph) and self.graph.kind[following] >= 0:
            places.append(int(self.graph.place(np.asarray([following]))[0]))
        return min(places)
