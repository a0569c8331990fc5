"""Deterministic analyses of the combined graph: communities, god nodes, the degree toll for routes.

Everything here is a pure function of its inputs, iterates in a fixed order and breaks ties by the smallest
index, so two builds of the same index produce byte-identical output.
"""

from __future__ import annotations

import heapq
import math
import posixpath
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

MAX_PROPAGATION_ROUNDS = 100


@dataclass(frozen=True)
class Weights:
    """What label propagation weighs, held as arrays: each node's neighbours, ascending, from
    `neighbours[starts[node]:starts[node + 1]]`, and the weight of each pair in `weights` beside them."""

    starts: np.ndarray
    neighbours: np.ndarray
    weights: np.ndarray

    @classmethod
    def of_pairs(cls, n: int, first: np.ndarray, second: np.ndarray, weight: np.ndarray) -> Weights:
        """The weights of `n` nodes where each (first, second, weight) row adds its weight to the pair, both
        ways; summed in row order."""
        keys = np.concatenate([first * n + second, second * n + first]).astype(np.int64)
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], np.concatenate([weight, weight]).astype(np.float64)[order]
        heads = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]])) if len(keys) else keys
        pairs = keys[heads]
        return cls(np.searchsorted(pairs // max(n, 1), np.arange(n + 1)), pairs % max(n, 1),
                   np.add.reduceat(values, heads) if len(keys) else values)

    def around(self, node: int) -> list[int]:
        return self.neighbours[self.starts[node]:self.starts[node + 1]].tolist()

    def votes(self, node: int) -> tuple[list[int], list[float]]:
        """`node`'s neighbours and each one's vote: the pair's weight over the neighbour's number of neighbours
        (`propagate`)."""
        at = slice(self.starts[node], self.starts[node + 1])
        neighbours = self.neighbours[at]
        return neighbours.tolist(), (self.weights[at] / self.fan[neighbours]).tolist()

    @cached_property
    def fan(self) -> np.ndarray:
        """Each node's number of neighbours, at least one."""
        return np.maximum(np.diff(self.starts), 1)


@dataclass(frozen=True)
class Propagation:
    """A label propagation's labels and its course, which a later one over slightly different weights replays
    (`propagate`): per round, the nodes it relabelled, ascending, and their new labels."""

    labels: list[int]
    rounds: list[tuple[np.ndarray, np.ndarray]] = field(repr=False)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The propagation as arrays to save (`from_arrays` reads them back)."""
        def joined(part: int) -> np.ndarray:
            return np.concatenate([r[part] for r in self.rounds]).astype(np.int32) if self.rounds \
                else np.zeros(0, np.int32)

        return {f"{prefix}labels": np.array(self.labels, np.int32), f"{prefix}nodes": joined(0),
                f"{prefix}steps": joined(1),
                f"{prefix}ends": np.cumsum([len(nodes) for nodes, _ in self.rounds], dtype=np.int64)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str, n: int) -> Propagation:
        """The propagation `arrays` saved for `n` nodes; a ValueError when its course does not lead to its labels
        (a replay trusts the course as the labels' making)."""
        labels, nodes, steps, ends = (arrays[f"{prefix}{part}"].astype(np.int64)
                                      for part in ("labels", "nodes", "steps", "ends"))
        if labels.shape != (n,) or nodes.shape != steps.shape or nodes.ndim != 1 or ends.ndim != 1 \
                or (len(ends) and (int(ends[0]) <= 0 or int(ends[-1]) != len(nodes) or np.any(np.diff(ends) <= 0))) \
                or (not len(ends) and len(nodes)):
            raise ValueError("a saved label propagation whose parts do not fit")
        if any(len(a) and (int(a.min()) < 0 or int(a.max()) >= n) for a in (labels, nodes, steps)):
            raise ValueError("a saved label propagation out of range")
        rounds = [(nodes[a:b], steps[a:b]) for a, b in zip([0, *ends.tolist()], ends.tolist())]
        course = np.arange(n, dtype=np.int64)
        for relabelled, values in rounds:
            if np.any(relabelled[1:] <= relabelled[:-1]):
                raise ValueError("a saved label propagation round out of order")
            course[relabelled] = values
        if not np.array_equal(course, labels):
            raise ValueError("a saved label propagation whose course does not lead to its labels")
        return cls(labels.tolist(), rounds)


@dataclass(frozen=True)
class Replay:
    """What a propagation over new weights may take from `last`, one over the weights before: `renumber`, each
    last node's index now (-1: gone), which keeps the nodes' order; `moved`, the nodes (indices now) whose votes
    may differ, that is, whose neighbours, weights or neighbours' neighbour counts changed, and the new nodes."""

    last: Propagation
    renumber: np.ndarray
    moved: set[int]


def propagate(n: int, weights: Weights, replay: Replay | None = None) -> Propagation:
    """Community label per node: each node, visited in index order, takes the label its neighbours vote
    for most (ties -> the smallest label), until a full round changes nothing.

    A neighbour's vote is its edge weight divided by the neighbour's own number of neighbours. Plain votes
    let one label flood a connected code base (every file touches a hub, the hub's label wins everywhere);
    scaled votes keep a logger or a package `__init__` from speaking for the files it connects.

    With `replay`, the last propagation's course is followed wherever the new one cannot differ from it, and
    votes are counted only where it can (`_replayed`): after a save the same labels as from scratch, without
    visiting every node every round.
    """
    if replay is not None:
        replayed = _replayed(n, weights, replay)
        if replayed is not None:
            return replayed
    starts, neighbours = weights.starts.tolist(), weights.neighbours.tolist()
    every_vote = (weights.weights / weights.fan[weights.neighbours]).tolist()
    around = [neighbours[a:b] for a, b in zip(starts, starts[1:])]
    votes = [every_vote[a:b] for a, b in zip(starts, starts[1:])]
    labels = list(range(n))
    rounds: list[tuple[np.ndarray, np.ndarray]] = []
    # A node's choice depends only on its neighbours' labels: after the first round, only nodes with a
    # neighbour relabelled since their last visit can change, and only they are visited (same result).
    dirty = [bool(a) for a in around]
    for _ in range(MAX_PROPAGATION_ROUNDS):
        relabelled: list[int] = []
        for node in range(n):
            if not dirty[node]:
                continue
            dirty[node] = False
            label = _vote(around[node], votes[node], labels)
            if label != labels[node]:
                labels[node] = label
                relabelled.append(node)
                for neighbour in around[node]:
                    dirty[neighbour] = True
        if not relabelled:
            break
        rounds.append((np.array(relabelled, np.int64), np.array([labels[node] for node in relabelled], np.int64)))
    return Propagation(labels, rounds)


def _vote(neighbours: Sequence[int], votes: Sequence[float], labels: list[int]) -> int:
    """The label `neighbours` vote for (`propagate`)."""
    if len(neighbours) == 1:  # a quarter of a code base's files: one neighbour's label is the vote
        return labels[neighbours[0]]
    score: dict[int, float] = {}
    for neighbour, vote in zip(neighbours, votes):
        voted = labels[neighbour]
        score[voted] = score.get(voted, 0.0) + vote
    if len(score) == 1:
        return next(iter(score))
    # Float sums differ in the last bits with the order of addition: compare with a tolerance.
    best = max(score.values()) - 1e-9
    return min(lab for lab, s in score.items() if s >= best)


# Past this share of the nodes counted again, a replay gives way to a propagation from scratch.
REPLAY_LIMIT = 0.25


def _replayed(n: int, weights: Weights, replay: Replay) -> Propagation | None:
    """`propagate` over `weights` taking the last course where it holds: None when the votes counted again
    reach `REPLAY_LIMIT` of the nodes.

    A node's choice is a function of its votes and its neighbours' labels at its visit. Visiting in the same
    order, a node whose votes did not move and whose neighbours carry the labels the last course gave them at
    that point chooses what the last course chose (labels renumbered like the nodes: the order, so the ties,
    stay). So the last course is followed step by step, and votes are counted only for the "counted" nodes: the
    moved ones, and every neighbour of a node whose label departs from the last course's (`shadow`, the last
    course renumbered, step for step; a label of a node gone departs for good; a counted node departs at its
    visit or when the course relabels it and it keeps its label). A counted node is visited, as in `propagate`,
    in the first round and whenever a neighbour was relabelled since its last visit (this round if that
    neighbour comes before it, else the next), and once when it is first counted: a visit to a node none of
    whose neighbours changed chooses its label again, so visiting more often changes nothing.
    """
    renumber, last_rounds = replay.renumber, replay.last.rounds
    kept = renumber >= 0
    shadow_array = np.full(n, -1, np.int64)  # a new node has no course to follow
    shadow_array[renumber[kept]] = renumber[kept]
    # Lists, not arrays: the course is merged with the counted nodes one step at a time.
    labels, shadow = list(range(n)), shadow_array.tolist()
    limit = max(1, int(REPLAY_LIMIT * n))
    departed = {node for node in range(n) if shadow[node] < 0}
    counted: dict[int, tuple[list[int], list[float]]] = {}  # each counted node's votes, read once
    watchers: dict[int, list[int]] = {}  # node -> the counted nodes it votes in
    visit: list[int] = []  # the counted nodes to visit this round, a heap
    queued: set[int] = set()  # in `visit`
    later: set[int] = set()  # to visit next round

    def count(node: int) -> None:
        counted[node] = weights.votes(node)
        for neighbour in counted[node][0]:
            watchers.setdefault(neighbour, []).append(node)

    def enqueue(node: int, position: int) -> None:
        """Visit counted `node` this round if it is still ahead of `position`, else next round."""
        if node <= position:
            later.add(node)
        elif node not in queued:
            queued.add(node)
            heapq.heappush(visit, node)

    def relabelled_at(node: int) -> None:  # the counted nodes `node` votes in see another label
        for watcher in watchers.get(node, ()):
            enqueue(watcher, node)

    def departs(node: int) -> None:  # `node`'s label departs from the course: its neighbours are counted
        departed.add(node)
        for neighbour in counted[node][0]:
            if neighbour not in counted:
                count(neighbour)
                enqueue(neighbour, node)

    for node in sorted(replay.moved | departed):
        if node not in counted:
            count(node)
        if node in departed:
            departs(node)
    later.update(counted)  # the first round visits every node with a neighbour
    rounds: list[tuple[np.ndarray, np.ndarray]] = []
    for number in range(MAX_PROPAGATION_ROUNDS):
        if number < len(last_rounds):
            steps, values = last_rounds[number]
            now, then = renumber[steps], renumber[values]
            last_nodes = now[now >= 0].tolist()
            # a gone node's label: one that no node has now
            last_labels = np.where(then >= 0, then, -2 - values)[now >= 0].tolist()
        else:
            last_nodes, last_labels = [], []
        if len(counted) > limit:
            return None
        visit[:] = sorted(later)  # ascending: a heap already
        queued.clear()
        queued.update(visit)
        later.clear()
        relabelled: list[int] = []
        at, end = 0, len(last_nodes)
        while True:
            upcoming = visit[0] if visit else n
            if at < end and last_nodes[at] <= upcoming:  # the last course's next step comes first
                step, value = last_nodes[at], last_labels[at]
                at += 1
                shadow[step] = value
                if step not in counted:
                    labels[step] = value
                    relabelled.append(step)
                    relabelled_at(step)
                elif step != upcoming:  # a counted node not visited this round: does it depart now?
                    if labels[step] == shadow[step]:
                        departed.discard(step)
                    elif step not in departed:
                        departs(step)
                continue
            if upcoming == n:
                break
            node = heapq.heappop(visit)
            around, votes = counted[node]
            if around:
                label = _vote(around, votes, labels)
                if label != labels[node]:
                    labels[node] = label
                    relabelled.append(node)
                    relabelled_at(node)
            if labels[node] == shadow[node]:
                departed.discard(node)
            elif node not in departed:
                departs(node)
        if not relabelled:
            break
        relabelled.sort()
        rounds.append((np.array(relabelled, np.int64), np.array([labels[node] for node in relabelled], np.int64)))
    return Propagation(labels, rounds)


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
