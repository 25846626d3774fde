"""Which of several path ends comes first in networkx's topological order, without replaying it.

networkx's ``dag_longest_path`` ends at the first node of the largest distance in
``topological_sort``'s order: Kahn's generations (generation 0: the nodes with no edge in, in the order
they first appear among the edges; generation g + 1: for each node of generation g in order, its
successors in the order their edges were added, each as its last edge in is taken). ``longest`` settles
most ties by distance and generation; this module orders path ends left equal in both (equal-length
paths in unrelated chains: whole-µs traces have them now and then).

Within generation g + 1, a node comes where its trigger does in generation g (its predecessor of
generation g that comes last there: the one whose edge releases it), and among one trigger's
successors, in the order of their edges. So two nodes of one generation compare as their triggers do,
one generation back, and so on: along their trails back, until the trails meet (the order of the edges
out of the meeting node decides) or reach generation 0 (first appearance decides). Along a stretch of
a chain that no launch or sync edge enters, each node's trigger is the node before it, so a trail is a
series of stretches, each entered from the trigger of the input (chain first or edge target) below the
last. The triggers of every input are found at once, in arrays (a pass over the inputs and the launch
and sync edges); the trails are then followed stretch by stretch in plain Python, a few list look-ups a
stretch, until they share one. No node is visited one by one: a trail along a thread's operators crosses
one stretch, one through a sync at every step one or two a step.
"""

from __future__ import annotations

import numpy as np

from tracekit.analysis.critical_path.distances import Distances
from tracekit.analysis.critical_path.graph import Graph

NO_TRIGGER, SEVERAL = -1, -2  # an input of generation 0; one whose predecessors tie for its trigger


def first_in_kahn_order(graph: Graph, tied: np.ndarray, generations: Distances) -> int:
    """Of ``tied`` (positions of one Kahn generation), the one networkx's topological sort puts first;
    ``generations``: each position's Kahn generation (distances of 1 per edge)."""
    order = _KahnOrder(graph, generations)
    first = int(tied[0])
    for other in tied[1:].tolist():
        if order.before(other, first):
            first = other
    return first


class _KahnOrder:
    """networkx's topological order between nodes of one generation, found on their trails back. Per
    input (``generations.inputs``, by index): its generation, its trigger (position; ``NO_TRIGGER``,
    ``SEVERAL`` until settled), the place of the trigger's edge into it, and the input below the trigger
    on its chain (index); as lists, for look-ups in plain Python."""

    def __init__(self, graph: Graph, generations: Distances):
        self.graph, self.generations = graph, generations
        inputs = generations.inputs
        self.input = inputs.tolist()
        generation = generations(inputs)
        self.generation = generation.tolist()
        # every input's predecessors (the position before it in its chain, its edges' sources) and places
        chained = np.flatnonzero(graph.kind[inputs] >= 0)
        into = np.concatenate([chained, generations.last_input[graph.cross_target]])
        before = np.concatenate([inputs[chained] - 1, graph.cross_source])
        place = np.concatenate([graph.place(inputs[chained]), graph.cross_places()])
        releasing = generations(before) == generation[into] - 1  # of the generation just before its own
        into, before, place = into[releasing], before[releasing], place[releasing]
        counts = np.bincount(into, minlength=len(inputs))
        trigger = np.full(len(inputs), NO_TRIGGER, dtype=np.int64)
        trigger_place = np.zeros(len(inputs), dtype=np.int64)
        trigger[into], trigger_place[into] = before, place  # right where an input has one
        trigger[counts > 1] = SEVERAL
        tied = np.flatnonzero(counts[into] > 1)
        self.several: dict[int, list[tuple[int, int]]] = {}  # per input whose trigger ties: (node, place)s
        for index, node, node_place in zip(
            into[tied].tolist(), before[tied].tolist(), place[tied].tolist(), strict=True
        ):
            self.several.setdefault(index, []).append((node, node_place))
        self.trigger, self.trigger_place = trigger.tolist(), trigger_place.tolist()
        self.trigger_input = np.where(trigger >= 0, generations.last_input[np.maximum(trigger, 0)], -1).tolist()

    def before(self, first: int, second: int) -> bool:
        """Whether ``first`` comes before ``second`` (two positions of one generation)."""
        return self._before(first, second, settle=True)

    def _before(self, first: int, second: int, settle: bool = False) -> bool:
        """``before``; where a trail reaches an input whose trigger is not settled yet, settles it (``settle``)
        or raises _Unsettled (a comparison that settles one: its trails are short, and start again)."""
        last_input = self.generations.last_input
        # each trail: its current stretch (the input below it, by index), where it entered the stretch,
        # and the input it came from (index; -1: the trail starts in this stretch)
        trails = [[int(last_input[first]), first, -1], [int(last_input[second]), second, -1]]
        while True:
            (low, entry, came), (other_low, other_entry, other_came) = trails
            if low == other_low:  # one stretch: the trails meet where the later of them enters it
                meeting = min(entry, other_entry)
                return self._place_after(meeting, entry, came) < self._place_after(meeting, other_entry, other_came)
            height, other_height = self.generation[low], self.generation[other_low]
            if height == other_height == 0:  # both back at generation 0, apart
                return self._appearance(self.input[low]) < self._appearance(self.input[other_low])
            # the trail whose stretch ends first (going back) leaves it: for its input's trigger
            for trail in trails if height == other_height else trails[:1] if height > other_height else trails[1:]:
                index = trail[0]
                if self.trigger[index] == SEVERAL:
                    if not settle:
                        raise _Unsettled(index)
                    self._settle(index)
                trail[:] = [self.trigger_input[index], self.trigger[index], index]

    def _place_after(self, meeting: int, entry: int, came: int) -> int:
        """The place of the edge a trail took out of ``meeting``: into the input it came from, when it
        entered its stretch there, else along the chain."""
        if entry == meeting and came >= 0:
            return self.trigger_place[came]
        return self._chain_place(meeting + 1)

    def _chain_place(self, position: int) -> int:
        """The place of the chain edge into ``position`` (``Graph.place``, for one position)."""
        graph = self.graph
        return position if position < graph.cpu_count else 2**62 + int(graph.gpu_place[position - graph.cpu_count])

    def _settle(self, index: int) -> None:
        """The trigger of an input whose predecessors of the generation before tie: the last of them.
        Settling it can need others, of lower generations, settled first: they are, in turn."""
        pending = [index]
        while pending:
            current = pending[-1]
            try:
                (last, place), *rest = self.several[current]
                for node, node_place in rest:
                    if self._before(last, node):
                        last, place = node, node_place
            except _Unsettled as unsettled:
                pending.append(unsettled.index)
                continue
            self.trigger[current], self.trigger_place[current] = last, place
            self.trigger_input[current] = int(self.generations.last_input[last])
            pending.pop()

    def _appearance(self, position: int) -> int:
        """Where a node with no edge in first appears among the edges: its first edge out's place."""
        places = self.graph.cross_places()[np.flatnonzero(self.graph.cross_source == position)].tolist()
        following = position + 1
        if following < len(self.graph) and self.graph.kind[following] >= 0:
            places.append(self._chain_place(following))
        return min(places)


class _Unsettled(Exception):
    """A trail reached an input whose trigger is still to be settled (``_KahnOrder._settle``)."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index
