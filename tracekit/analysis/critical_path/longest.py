"""The longest path through a window's graph, as networkx's ``dag_longest_path`` finds it (HTA calls it).

Nodes in the order they first appear among the edges; a (source, target) pair added twice keeps its
first place and its last values. Negative weights (ops on one stream that overlap) count as 0. The
order: Kahn's generations (nodes with no incoming edge, in node order; then each node's successors in
edge order as their last predecessor is taken). Each node's distance: the first best of its
predecessors in edge order plus the edge's weight; the path ends at the first node, in that order,
of the largest distance. Ties between equal-length paths are decided as networkx decides them.
"""

from __future__ import annotations

import numpy as np

from tracekit.analysis.critical_path.graph import Graph
from tracekit.errors import InvalidTraceError


def longest_path(graph: Graph) -> tuple[list[int], int]:
    """(the edges of the path in order, as indices into ``graph``'s edge lists; its length in ns)."""
    source = np.asarray(graph.source, dtype=np.int64)
    target = np.asarray(graph.target, dtype=np.int64)
    if not len(source):
        return [], 0
    # a pair re-added: networkx keeps its first place and takes the last values
    pairs, first, inverse = np.unique(source * 2**32 + target, return_index=True, return_inverse=True)
    latest = np.full(len(pairs), -1, dtype=np.int64)
    np.maximum.at(latest, inverse.reshape(-1), np.arange(len(source)))
    by_place = np.argsort(first, kind="stable")
    edge = latest[by_place]  # one per pair, in the order pairs were first added; the values of its last addition
    weight = np.maximum(np.asarray(graph.weight, dtype=np.int64)[edge], 0).tolist()
    # nodes numbered in the order they first appear (source before target), as networkx holds them
    appearance = np.column_stack([source, target]).reshape(-1)
    nodes, seen_at = np.unique(appearance, return_index=True)
    number = np.empty(len(nodes), dtype=np.int64)
    number[np.argsort(seen_at, kind="stable")] = np.arange(len(nodes))
    tail = number[np.searchsorted(nodes, source[edge])]
    head = number[np.searchsorted(nodes, target[edge])]
    count = len(nodes)
    successors = _grouped(tail, head, count)
    incoming = _grouped(head, np.arange(len(edge)), count)  # each node's edges in, in edge order
    waiting = np.bincount(head, minlength=count).tolist()
    generation = [node for node in range(count) if waiting[node] == 0]
    topological: list[int] = []
    while generation:
        topological += generation
        following = []
        for node in generation:
            for successor in successors[node]:
                waiting[successor] -= 1
                if waiting[successor] == 0:
                    following.append(successor)
        generation = following
    if len(topological) != count:
        raise InvalidTraceError(
            "the trace's events make a cycle in the dependency graph (events on one thread that overlap "
            "without nesting?): no critical path"
        )
    tails = tail.tolist()
    distance = [0] * count
    via = [-1] * count  # the edge the best path reached a node by (-1: it starts there)
    for node in topological:
        best, best_edge = 0, -1
        for index in incoming[node]:
            candidate = distance[tails[index]] + weight[index]
            if best_edge < 0 or candidate > best:
                best, best_edge = candidate, index
        distance[node], via[node] = best, best_edge
    end = max(topological, key=distance.__getitem__)  # max keeps the first of equals, as networkx
    path = []
    node = end
    while via[node] >= 0:
        path.append(int(edge[via[node]]))
        node = tails[via[node]]
    path.reverse()
    return path, distance[end]


def _grouped(key: np.ndarray, values: np.ndarray, count: int) -> list[list[int]]:
    """Per key 0..count-1, its values in their order (a stable sort, then one split)."""
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(key[order], np.arange(count + 1))
    flat = values[order].tolist()
    return [flat[low:high] for low, high in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)]
