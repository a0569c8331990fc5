"""Deterministic analyses of the combined graph: communities, god nodes, the degree toll for routes.

Everything here is a pure function of its inputs, iterates in a fixed order and breaks ties by the smallest
index, so two builds of the same index produce byte-identical output.
"""

from __future__ import annotations

import heapq
import math
import posixpath
from collections import Counter

import numpy as np

MAX_PROPAGATION_ROUNDS = 100


def label_propagation(n: int, weights: list[dict[int, float]]) -> list[int]:
    """Community label per node: each node, visited in index order, takes the label its neighbours vote
    for most (ties -> the smallest label), until a full round changes nothing.

    A neighbour's vote is its edge weight divided by the neighbour's own number of neighbours. Plain votes
    let one label flood a connected code base (every file touches a hub, the hub's label wins everywhere);
    scaled votes keep a logger or a package `__init__` from speaking for the files it connects.
    """
    fan = [max(1, len(w)) for w in weights]
    around = [tuple(w) for w in weights]
    votes = [tuple(weight / fan[neighbour] for neighbour, weight in w.items()) for w in weights]
    labels = list(range(n))
    # A node's choice depends only on its neighbours' labels: after the first round, only nodes with a
    # neighbour relabelled since their last visit can change, and only they are visited (same result).
    dirty = [bool(a) for a in around]
    for _ in range(MAX_PROPAGATION_ROUNDS):
        changed = False
        for node in range(n):
            if not dirty[node]:
                continue
            dirty[node] = False
            neighbours = around[node]
            if len(neighbours) == 1:  # a quarter of a code base's files: one neighbour's label is the vote
                label = labels[neighbours[0]]
            else:
                score: dict[int, float] = {}
                for neighbour, vote in zip(neighbours, votes[node]):
                    voted = labels[neighbour]
                    score[voted] = score.get(voted, 0.0) + vote
                if len(score) == 1:
                    label = next(iter(score))
                else:
                    # Float sums differ in the last bits with the order of addition: compare with a tolerance.
                    best = max(score.values()) - 1e-9
                    label = min(lab for lab, s in score.items() if s >= best)
            if label != labels[node]:
                labels[node] = label
                changed = True
                for neighbour in neighbours:
                    dirty[neighbour] = True
        if not changed:
            break
    return labels


def renumber_by_size(labels: list[int]) -> list[int]:
    """Community ids 0.. ordered by size (largest first), ties by the smallest member index."""
    sizes = Counter(labels)
    first: dict[int, int] = {}
    for index, label in enumerate(labels):
        first.setdefault(label, index)
    order = sorted(sizes, key=lambda lab: (-sizes[lab], first[lab]))
    new_id = {label: i for i, label in enumerate(order)}
    return [new_id[label] for label in labels]


def common_directory(members: list[str]) -> str:
    """The deepest directory holding every member ("" when there is none, or only one member)."""
    if len(members) < 2 or not all("/" in m for m in members):
        return ""
    common = posixpath.commonpath(members)
    return "" if common in members else common


def community_name(directory: str, central: str, top_symbol: str) -> str:
    """A community's name: its own directory when no other community shares it, else its most connected
    file and the symbol other communities use most from that file."""
    if directory:
        return directory
    name = posixpath.basename(central)
    return f"{name} · {top_symbol}" if top_symbol else name


def percentile_degree(degrees: list[int], q: float = 90.0) -> float:
    return float(np.percentile(np.array(degrees, dtype=np.float64), q)) if degrees else 0.0


def god_nodes(degrees: list[int]) -> list[int]:
    """Indices of the hubs: the few highest-degree nodes (about 2% of the graph, at most 15) whose degree is
    at least three and at least twice the repository's p90."""
    if not degrees:
        return []
    p90 = percentile_degree(degrees)
    threshold = max(3.0, 2.0 * p90)
    count = min(15, max(1, math.ceil(len(degrees) * 0.02)))
    ranked = sorted(range(len(degrees)), key=lambda i: (-degrees[i], i))
    return sorted(i for i in ranked[:count] if degrees[i] >= threshold)


def hub_tolls(degrees: list[int]) -> list[float]:
    """Extra cost of passing through each node: zero up to the repository's p90 degree, then proportional to
    the degree (a logger imported by everything costs as much as its fan-in suggests)."""
    p90 = max(percentile_degree(degrees), 1.0)
    return [(d / p90) if d > p90 else 0.0 for d in degrees]


def shortest_path(adjacency: list[dict[int, float]], tolls: list[float], source: int, target: int
                  ) -> list[int] | None:
    """Dijkstra from `source` to `target` where entering an intermediate node adds its toll; ties go to the
    route through smaller indices."""
    best = {source: 0.0}
    previous: dict[int, int] = {}
    heap: list[tuple[float, int]] = [(0.0, source)]
    done: set[int] = set()
    while heap:
        cost, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        if node == target:
            break
        for neighbour in sorted(adjacency[node]):
            step = adjacency[node][neighbour] + (tolls[neighbour] if neighbour != target else 0.0)
            candidate = cost + step
            if candidate < best.get(neighbour, math.inf) - 1e-12:
                best[neighbour] = candidate
                previous[neighbour] = node
                heapq.heappush(heap, (candidate, neighbour))
    if target not in done:
        return None
    route = [target]
    while route[-1] != source:
        route.append(previous[route[-1]])
    return list(reversed(route))
