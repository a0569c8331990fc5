"""Pure parts of the graph: extraction from real tree-sitter parses, and the deterministic analyses."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from codeloupe.graph import analysis, semantic
from codeloupe.graph.analysis import (
    Replay,
    Weights,
    god_nodes,
    hub_tolls,
    propagate,
    renumber_by_size,
    shortest_path,
)
from codeloupe.graph.facts import FileFacts
from codeloupe.graph.langs import extract_facts
from codeloupe.graph.langs.javascript import _strip_jsonc
from codeloupe.graph.resolve import nearest
from codeloupe.graph.semantic import (
    EDGE_COSINE,
    NEIGHBOURS_PER_FILE,
    SURPRISE_COSINE,
    capped_edges,
    similar_pairs,
)


def test_facts_round_trip_through_json() -> None:
    facts = extract_facts("python", "from .a import b as c\nimport x.y\n\ndef f():\n    c()\n    x.y.z()\n")
    assert facts is not None
    assert FileFacts.from_json(facts.to_json()) == facts
    assert [(i.kind, i.written, i.names) for i in facts.imports] == [
        ("from", ".a", (("b", "c"),)), ("import", "x.y", (("", "x.y"),))]
    assert {(u.receiver, u.name) for u in facts.uses} == {("", "c"), ("x.y", "z")}
    # A part read alone from the stored text is what decoding the whole gives (a name spelt like a key too).
    tricky = extract_facts("python", "from imports import uses\n\ndef definitions():\n    uses()\n")
    for stored in (facts, tricky):
        assert stored is not None
        assert FileFacts.stored_imports(stored.to_json()) == stored.imports
        assert FileFacts.definition_rows(stored.to_json()) == [list(d) for d in stored.definitions]


def test_unknown_language_has_no_facts() -> None:
    assert extract_facts("markdown", "# title\n") is None


def test_commonjs_bindings_and_definitions() -> None:
    facts = extract_facts("javascript", (
        "var Layer = require('./layer');\n"
        "const {a, b: c} = require('./ab');\n"
        "var flat = require('./f').flatten;\n"
        "exports.run = function run() {};\n"
        "Router.prototype.handle = function () {};\n"))
    assert facts is not None
    assert [(i.spec, i.names) for i in facts.imports] == [
        ("./layer", (("", "Layer"),)), ("./ab", (("a", "a"), ("b", "c"))), ("./f", (("flatten", "flat"),))]
    # A variable bound to another module is a binding, not a definition of this file.
    assert {(d.name, d.parent) for d in facts.definitions} == {("run", ""), ("handle", "Router")}


def test_ruby_nesting_anchors_scoped_class_names() -> None:
    facts = extract_facts("ruby", "module Sinatra\n  class Sinatra::Application < Base\n    def run; end\n"
                                  "  end\nend\n")
    assert facts is not None
    assert [(d.name, d.parent) for d in facts.definitions] == [
        ("Sinatra", ""), ("Application", "Sinatra"), ("run", "Sinatra::Application")]
    assert [(u.name, u.scope) for u in facts.uses] == [("Base", "Sinatra")]


def test_go_selector_uses_carry_their_receiver() -> None:
    facts = extract_facts("go", 'package m\n\nimport j "example.com/x/json"\n\n'
                                "func F() { j.Marshal(1); helper(); v.run() }\n")
    assert facts is not None
    assert facts.package == "m"
    assert {(u.receiver, u.name) for u in facts.uses} == {("j", "Marshal"), ("", "helper"), ("v", "run")}


def test_jsonc_comments_and_trailing_commas() -> None:
    raw = '{\n // c\n "paths": {"@/*": ["./src/*"]}, /* block */\n "x": "a//b",\n}\n'
    assert json.loads(_strip_jsonc(raw)) == {"paths": {"@/*": ["./src/*"]}, "x": "a//b"}


def test_nearest_candidates_share_the_most_leading_components() -> None:
    held = ["json/decoder.py", "copy-1/json/decoder.py", "copy-12/json/decoder.py"]
    assert nearest(held, "copy-1/test/t.py") == ["copy-1/json/decoder.py"]  # not copy-12's: components, not text
    assert nearest(held, "copy-2/test/t.py") == held  # none shares a component: a tie
    assert nearest(held, "json/x.py") == ["json/decoder.py"]
    # The file itself outranks a sibling tree (a module importing its own name)...
    assert nearest(["a/b.py", "a/b/c.py"], "a/b.py") == ["a/b.py"]
    # ...and two candidates sharing all of the directory tie.
    assert nearest(["a/x.py", "a/y/z.py"], "a/b.py") == ["a/x.py", "a/y/z.py"]
    assert nearest([], "a/b.py") == []


def test_label_propagation_is_deterministic_and_splits_at_a_bridge() -> None:
    # Two triangles joined by one edge.
    edges = [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (2, 3)]
    weights: list[dict[int, float]] = [{} for _ in range(6)]
    for a, b in edges:
        weights[a][b] = weights[b][a] = 1.0
    labels = renumber_by_size(propagate(6, as_weights(weights)).labels)
    assert labels == renumber_by_size(propagate(6, as_weights(weights)).labels)
    assert labels[0] == labels[1] == labels[2] != labels[3] == labels[4] == labels[5]
    assert labels[0] == 0  # equal sizes: the community holding the smallest index is numbered first


def _plain_label_propagation(n: int, weights: list[dict[int, float]]) -> list[int]:
    """The rule as `propagate` states it, every node visited every round."""
    votes = [{j: w / max(1, len(weights[j])) for j, w in around.items()} for around in weights]
    labels = list(range(n))
    for _ in range(100):
        changed = False
        for node in range(n):
            if not votes[node]:
                continue
            score: dict[int, float] = {}
            for j, vote in votes[node].items():
                score[labels[j]] = score.get(labels[j], 0.0) + vote
            best = max(score.values())
            label = min(lab for lab, s in score.items() if s >= best - 1e-9)
            changed |= label != labels[node]
            labels[node] = label
        if not changed:
            return labels
    return labels


def as_weights(weights: list[dict[int, float]]) -> Weights:
    """Symmetric weights given as each node's neighbours -> weight, as label propagation takes them."""
    rows = np.array([(i, j, w) for i, around in enumerate(weights) for j, w in around.items() if i < j],
                    np.float64).reshape(-1, 3)
    return Weights.of_pairs(len(weights), rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2])


def _random_weights(rng: random.Random, n: int, hubs: int) -> list[dict[int, float]]:
    """Isolated nodes, leaves with one neighbour and hubs (every edge's second end among the first n / hubs)."""
    weights: list[dict[int, float]] = [{} for _ in range(n)]
    for _ in range(rng.randint(n // 2, 3 * n)):
        a, b = rng.randrange(n), rng.randrange(max(1, n // hubs))
        if a != b:
            weights[a][b] = weights[b][a] = weights[a].get(b, 0.0) + rng.choice([1.0, 2.0, 0.5 * rng.random()])
    return weights


@pytest.mark.parametrize("seed", range(8))
def test_label_propagation_is_the_plain_rule_on_random_graphs(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(20, 300)
    weights = _random_weights(rng, n, 1 + seed % 3)
    assert propagate(n, as_weights(weights)).labels == _plain_label_propagation(n, weights)


def _edited(rng: random.Random, weights: list[dict[int, float]]) -> tuple[list[dict[int, float]], np.ndarray]:
    """`weights` after a few files were deleted and created (the others keep their order) and a few pairs
    gained, lost or changed an edge; and each node's index now (-1: deleted)."""
    n = len(weights)
    gone = set(rng.sample(range(n), rng.randint(0, 2)))
    order = [k for k in range(n) if k not in gone]
    for _ in range(rng.randint(0, 2)):
        order.insert(rng.randint(0, len(order)), -1)  # a new node
    renumber = np.full(n, -1, np.int64)
    for now, k in enumerate(order):
        if k >= 0:
            renumber[k] = now
    after: list[dict[int, float]] = [{} for _ in order]
    for now, k in enumerate(order):
        if k >= 0:
            after[now] = {int(renumber[j]): w for j, w in weights[k].items() if renumber[j] >= 0}
    for _ in range(rng.randint(1, 4)):
        a, b = rng.sample(range(len(order)), 2)
        if b in after[a] and rng.random() < 0.4:
            del after[a][b], after[b][a]
        else:
            after[a][b] = after[b][a] = after[a].get(b, 0.0) + rng.choice([1.0, 0.5 * rng.random()])
    return after, renumber


def moved_votes(weights: Weights, after: Weights, renumber: np.ndarray) -> set[int]:
    """The nodes whose votes differ (`Replay.moved`), found by comparing every node's."""
    def votes(graph: Weights, node: int, to_now: np.ndarray) -> dict[int, float]:
        neighbours, node_votes = graph.votes(node)
        return dict(zip(to_now[neighbours].tolist(), node_votes))

    n = len(after.starts) - 1
    last = np.full(n, -1, np.int64)
    last[renumber[renumber >= 0]] = np.flatnonzero(renumber >= 0)
    return {node for node in range(n) if last[node] < 0
            or votes(weights, int(last[node]), renumber) != votes(after, node, np.arange(n))}


@pytest.mark.parametrize("seed", range(40))
def test_a_replayed_propagation_is_the_one_from_scratch(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """After files are created or deleted and edges change, propagation replays the last course where the
    votes and labels are as they were (`propagate` with a `Replay`): the same labels, and the same course for
    the next replay, as a propagation from scratch over the new weights."""
    rng = random.Random(seed)
    n = rng.randint(30, 400)
    weights = _random_weights(rng, n, 1 + seed % 3)
    last = propagate(n, as_weights(weights))
    monkeypatch.setattr(analysis, "REPLAY_LIMIT", 1.0)  # replayed however far the change reaches
    for _ in range(10):  # saves one after the other, each replaying the last
        after, renumber = _edited(rng, weights)
        scratch = propagate(len(after), as_weights(after))
        moved = moved_votes(as_weights(weights), as_weights(after), renumber)
        replayed = propagate(len(after), as_weights(after), Replay(last, renumber, moved))
        assert replayed.labels == scratch.labels
        assert len(replayed.rounds) == len(scratch.rounds)
        for (nodes, labels), (scratch_nodes, scratch_labels) in zip(replayed.rounds, scratch.rounds):
            assert nodes.tolist() == scratch_nodes.tolist() and labels.tolist() == scratch_labels.tolist()
        weights, last = after, replayed


def test_a_node_the_replay_leaves_where_the_last_course_moved_it_departs_from_the_course(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A counted node that no round visits again, at a step of the last course that relabelled it, departs from
    the course: its neighbours, which followed it there, are counted. Five files: the last propagation moved
    file 1 to label 4 in its first round and to label 2 in its second, and file 4 (file 1's only neighbour)
    after it. File 0 is deleted and a new file takes its place beside files 1 and 2; file 3 loses its edges. Now
    file 1 takes label 4 and keeps it (nothing around it changes again), so at the course's second-round step
    it departs, and file 4, whose own votes did not move, must keep label 4 rather than follow the course to 2.
    (The random-graph test above reaches this step on one seed of forty.)"""
    before = [{1: 2.3, 2: 2.0, 3: 2.0}, {0: 2.3, 3: 0.66, 4: 1.0}, {0: 2.0}, {1: 0.66, 0: 2.0}, {1: 1.0}]
    after = [{2: 1.0, 1: 1.0}, {4: 1.0, 0: 1.0, 2: 0.05}, {0: 1.0, 1: 0.05}, {}, {1: 1.0}]
    renumber = np.array([-1, 1, 2, 3, 4])
    last = propagate(5, as_weights(before))
    assert [(nodes.tolist(), labels.tolist()) for nodes, labels in last.rounds] == [([0, 1, 3], [2, 4, 2]),
                                                                                     ([1, 4], [2, 2])]
    moved = moved_votes(as_weights(before), as_weights(after), renumber)
    assert moved == {0, 1, 2, 3}  # file 4's votes did not move
    monkeypatch.setattr(analysis, "REPLAY_LIMIT", 1.0)  # four of five nodes counted: replayed all the same
    replayed = analysis._replayed(5, as_weights(after), Replay(last, renumber, moved))
    assert replayed is not None and replayed.labels == propagate(5, as_weights(after)).labels == [2, 4, 2, 3, 4]


def test_a_replay_that_reaches_too_far_propagates_from_scratch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `REPLAY_LIMIT` of the nodes counted, the replay gives up and the propagation runs from scratch:
    the same labels either way."""
    rng = random.Random(3)
    weights = _random_weights(rng, 200, 2)
    last = propagate(200, as_weights(weights))
    after, renumber = _edited(rng, weights)
    replay = Replay(last, renumber, moved_votes(as_weights(weights), as_weights(after), renumber))
    assert analysis._replayed(len(after), as_weights(after), replay) is not None  # within the limit
    monkeypatch.setattr(analysis, "REPLAY_LIMIT", 0.0)
    assert analysis._replayed(len(after), as_weights(after), replay) is None
    assert propagate(len(after), as_weights(after), replay).labels == propagate(len(after), as_weights(after)).labels


def test_tolls_hubs_and_routes() -> None:
    # A star: node 0 is linked to everything; 1-5-6-2 is a detour around it.
    n = 10
    adjacency: list[dict[int, float]] = [{} for _ in range(n)]
    for a, b in [(0, k) for k in range(1, 10)] + [(1, 5), (5, 6), (6, 2)]:
        adjacency[a][b] = adjacency[b][a] = 1.0
    degrees = [len(a) for a in adjacency]
    assert god_nodes(degrees) == [0]
    tolls = hub_tolls(degrees)
    assert tolls[0] > 0 and all(t == 0 for t in tolls[1:])
    assert shortest_path(adjacency, [0.0] * n, 1, 2) == [1, 0, 2]
    assert shortest_path(adjacency, tolls, 1, 2) == [1, 5, 6, 2]
    assert shortest_path(adjacency, tolls, 1, 1) == [1]
    adjacency[3], adjacency[0] = {}, {k: 1.0 for k in adjacency[0] if k != 3}
    assert shortest_path(adjacency, tolls, 3, 2) is None


def test_similarity_edges_never_outnumber_real_ones() -> None:
    candidates = [(0, 1, 0.95), (0, 2, 0.9), (1, 2, 0.85), (2, 3, 0.99)]
    kept = capped_edges(candidates, structural_degree=[1, 3, 3, 0])
    assert kept == [(0, 1, 0.95), (1, 2, 0.85)]  # 0 has room for one; 3 has no real edge at all


def _clustered(rng: np.random.Generator, n: int, dtype: type = np.float32) -> np.ndarray:
    """Unit rows in clusters of near and exact copies (so rows have ties and many close pairs)."""
    bases = rng.standard_normal((12, 32))
    rows = [bases[k % 12] + rng.choice([0.0, 0.0, 0.3, 0.45, 0.6]) * rng.standard_normal(32) for k in range(n)]
    return (np.array(rows) / np.linalg.norm(rows, axis=1, keepdims=True)).astype(dtype)


def _pairs_by_definition(vectors: np.ndarray) -> tuple[list, list]:
    """similar_pairs' answer read off the whole product, row by row: each row's NEIGHBOURS_PER_FILE best at or
    above EDGE_COSINE (ties by the smaller index), and every pair at or above SURPRISE_COSINE."""
    cosine = np.round(vectors @ vectors.T, 6)
    n = len(vectors)
    neighbours: dict[tuple[int, int], float] = {}
    for i in range(n):
        ranked = sorted((-cosine[i, j], j) for j in range(n) if j != i and cosine[i, j] >= EDGE_COSINE)
        for negative, j in ranked[:NEIGHBOURS_PER_FILE]:
            neighbours[(min(i, j), max(i, j))] = -negative
    close = [(i, j, cosine[i, j]) for i in range(n) for j in range(i + 1, n) if cosine[i, j] >= SURPRISE_COSINE]
    return [(i, j, c) for (i, j), c in sorted(neighbours.items())], close


@pytest.mark.parametrize("block_rows", [1, 7, 64, 1000])
def test_similar_pairs_are_each_rows_best_over_the_whole_product(monkeypatch: pytest.MonkeyPatch,
                                                                   block_rows: int) -> None:
    """Blocks multiplied by the rows from their own first one on (half the product) give every row the same
    neighbours as the whole product: clusters of near and exact copies (ties), across block boundaries."""
    vectors = _clustered(np.random.default_rng(3), 150, np.float64)
    monkeypatch.setattr(semantic, "BLOCK_ROWS", block_rows)
    neighbours, close = similar_pairs(vectors)
    expected_neighbours, expected_close = _pairs_by_definition(vectors)
    assert [(i, j) for i, j, _ in neighbours] == [(i, j) for i, j, _ in expected_neighbours]
    assert np.allclose([c for *_, c in neighbours], [c for *_, c in expected_neighbours], rtol=0, atol=1e-9)
    assert [(i, j) for i, j, _ in close] == [(i, j) for i, j, _ in expected_close]
    assert len(close) > 20 and len(neighbours) > 100  # the clusters made both kinds of pairs
    assert similar_pairs(vectors[:1]) == ([], []) and similar_pairs(np.eye(4)) == ([], [])


def _as_sets(pairs: semantic.LanePairs) -> tuple:
    triples = sorted(zip(pairs.first.tolist(), pairs.second.tolist(), pairs.cosine.tolist(), strict=True))
    return pairs.ids.tolist(), pairs.prints.tolist(), triples, pairs.chosen()


@pytest.mark.parametrize("block_rows", [1, 64])
def test_lane_pairs_after_changed_vectors_are_the_full_products(monkeypatch: pytest.MonkeyPatch,
                                                                 block_rows: int) -> None:
    """The pairs kept from the last vectors plus the changed rows' product equal the whole product of the new
    vectors: files gone, files added (new ids), one file's vector changed in place, across block boundaries."""
    monkeypatch.setattr(semantic, "BLOCK_ROWS", block_rows)
    rng = np.random.default_rng(5)
    vectors = _clustered(rng, 160)
    ids = np.arange(10, 170, dtype=np.int64)
    last = semantic.lane_pairs("m", ids, vectors)
    assert len(last.first) > 200, "the clusters made close pairs"

    gone = np.isin(np.arange(160), [0, 5, 77, 159])
    added = _clustered(rng, 6)
    new_ids = np.r_[ids[~gone], np.arange(500, 506)]
    new_vectors = np.concatenate([vectors[~gone], added])
    new_vectors[40] = new_vectors[41]  # a vector changed under the same id: a copy of its neighbour's
    expected = _as_sets(semantic.lane_pairs("m", new_ids, new_vectors))

    def never(*_args: object) -> None:
        raise AssertionError("the whole product was computed again")

    with monkeypatch.context() as patched:
        patched.setattr(semantic, "close_pairs", never)
        assert _as_sets(semantic.lane_pairs("m", new_ids, new_vectors, last)) == expected
    # another model's vectors share nothing with the last ones: the whole product
    assert _as_sets(semantic.lane_pairs("other", new_ids, new_vectors, last)) == expected
    assert semantic.lane_pairs("m", ids[:1], vectors[:1], last).first.tolist() == []


def test_lane_pairs_read_back_as_saved_and_refused_when_they_do_not_fit() -> None:
    vectors = _clustered(np.random.default_rng(9), 40)
    pairs = semantic.lane_pairs("m", np.arange(100, 140, dtype=np.int64), vectors)
    saved = pairs.arrays("lane_")
    assert _as_sets(semantic.LanePairs.from_arrays(saved, "lane_")) == _as_sets(pairs)
    assert semantic.LanePairs.from_arrays(saved, "lane_").model == "m"
    for damage in ({"lane_ids": saved["lane_ids"][::-1]}, {"lane_first": saved["lane_first"] + 1000},
                   {"lane_prints": saved["lane_prints"][1:]}, {"lane_cosine": saved["lane_cosine"][1:]}):
        with pytest.raises(ValueError):
            semantic.LanePairs.from_arrays({**saved, **damage}, "lane_")


def _bounded_by_definition(vectors: np.ndarray, per_row: int) -> list[tuple[int, int]]:
    """The close pairs read off the whole product: every pair at or above EDGE_COSINE that is among the
    `per_row` best (ties by the smaller other row) of either of its rows."""
    cosine = np.round(vectors.astype(np.float64) @ vectors.astype(np.float64).T, 6)
    n = len(vectors)
    kept: set[tuple[int, int]] = set()
    for i in range(n):
        ranked = sorted((-cosine[i, j], j) for j in range(n) if j != i and cosine[i, j] >= EDGE_COSINE)
        kept.update((min(i, j), max(i, j)) for _, j in ranked[:per_row])
    return sorted(kept)


@pytest.mark.parametrize("block_rows", [1, 7, 64])
def test_close_pairs_keep_each_rows_best_when_rows_crowd(monkeypatch: pytest.MonkeyPatch, block_rows: int) -> None:
    """Rows in clusters of about a dozen near copies, each row allowed 3 pairs and the bound applied after every
    block: the pairs kept are those among either row's 3 best of the whole product."""
    monkeypatch.setattr(semantic, "BLOCK_ROWS", block_rows)
    monkeypatch.setattr(semantic, "PAIRS_PER_FILE", 3)
    monkeypatch.setattr(semantic, "_PRUNE_SLACK", 0)
    vectors = _clustered(np.random.default_rng(3), 150, np.float64)
    first, second, cosine = semantic.close_pairs(vectors)
    expected = _bounded_by_definition(vectors, 3)
    assert list(zip(first.tolist(), second.tolist(), strict=True)) == expected
    assert len(expected) < len(_bounded_by_definition(vectors, 150)), "the bound left pairs out"
    # each row's top neighbours are the ones the unbounded product gives
    monkeypatch.setattr(semantic, "PAIRS_PER_FILE", 1000)
    assert similar_pairs(vectors)[0] == semantic.chosen(first, second, cosine)[0]


def test_lane_pairs_after_changed_vectors_in_crowded_rows_are_the_full_products(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With each row allowed 3 pairs, a kept row that lost one of them to a changed row is multiplied again
    (its 4th best was never kept): the incremental pairs still equal the whole product's."""
    monkeypatch.setattr(semantic, "PAIRS_PER_FILE", 3)
    rng = np.random.default_rng(11)
    vectors = _clustered(rng, 120)
    ids = np.arange(120, dtype=np.int64)
    last = semantic.lane_pairs("m", ids, vectors)
    changed = vectors.copy()
    changed[[3, 50]] = _clustered(rng, 2)  # two rows move away from their clusters
    expected = _as_sets(semantic.lane_pairs("m", ids, changed))
    assert _as_sets(semantic.lane_pairs("m", ids, changed, last)) == expected


@pytest.mark.parametrize("colliding", [False, True])
def test_rows_are_mapped_to_their_first_identical_copy_even_when_hashes_collide(
        monkeypatch: pytest.MonkeyPatch, colliding: bool) -> None:
    """A pair's cosine is computed once per pair of distinct vectors: each row stands for its first copy with
    the same bytes (a zero of the other sign is another row), whatever rows share a hash."""
    if colliding:  # every row hashes alike: only the byte comparison tells them apart
        monkeypatch.setattr(semantic, "_row_hashes", lambda words: np.zeros(len(words), np.uint64))
    vectors = _clustered(np.random.default_rng(8), 60)
    vectors[[3, 9]] = np.float32(0.0)
    vectors[9, 5] = np.float32(-0.0)
    expected, seen = [], {}
    for i, row in enumerate(vectors):
        expected.append(seen.setdefault(row.tobytes(), i))
    assert semantic._first_copies(vectors).tolist() == expected
    assert len(set(expected)) < len(vectors) and expected[9] == 9  # copies were found; -0.0 kept apart
    monkeypatch.setattr(semantic, "PAIRS_PER_FILE", 3)
    first, second, _ = semantic.close_pairs(vectors)
    assert list(zip(first.tolist(), second.tolist(), strict=True)) == _bounded_by_definition(vectors, 3)


def test_a_crowd_of_identical_files_keeps_a_bounded_number_of_pairs() -> None:
    row = np.random.default_rng(2).standard_normal(384).astype(np.float32)
    vectors = np.tile(row / np.linalg.norm(row), (600, 1))
    pairs = semantic.lane_pairs("m", np.arange(600, dtype=np.int64), vectors)
    assert len(pairs.first) <= 600 * semantic.PAIRS_PER_FILE < 600 * 599 // 2
    neighbours, close = pairs.chosen()
    assert {i for pair in neighbours for i in pair[:2]} == set(range(600))  # every file still has neighbours
    assert len(close) == len(pairs.first)


def test_pythons_module_table_after_files_come_and_go_is_the_one_built_from_scratch() -> None:
    """A file created or deleted (no package made or unmade) updates the module table in place: only the
    modules the files that came or went can name are looked up again, under every root. Whatever came or went,
    the table equals a build over the new paths: a `.pyi` beside its `.py`, a module held by two roots, a
    package's `__init__` under its two names, a directory with a dot (named by no import)."""
    import random

    from codeloupe.graph.compact import PackedFacts
    from codeloupe.graph.langs import RESOLVERS
    from codeloupe.graph.resolve import ResolveContext

    python = RESOLVERS["python"]
    packages = ["app/__init__.py", "app/core/__init__.py", "src/lib/__init__.py", "vendor/lib/__init__.py",
                "tests/__init__.py"]
    pool = ["app/core/io.py", "app/core/io.pyi", "app/main.py", "app/util.py", "src/lib/util.py",
            "vendor/lib/util.py", "src/lib/util.pyi", "tests/test_io.py", "scripts/run.py", "scripts/v1.2/old.py",
            "setup.py", "app/core/io/__init__.py", "conftest.py", "src/lib/io.py", "util.py"]
    rng = random.Random(3)
    for _ in range(60):
        before = set(packages) | {p for p in pool if rng.random() < 0.5}
        after = set(packages) | {p for p in pool if rng.random() < 0.5}
        then = ResolveContext(Path("."), PackedFacts(), before, RESOLVERS)
        python.layout(then)
        tables = {key: then.cache[key] for key in python.path_tables}
        kept = {key: (dict(value) if isinstance(value, dict) else list(value)) for key, value in tables.items()}
        now = ResolveContext(Path("."), PackedFacts(), after, RESOLVERS)
        now.cache.update(python.tables_after(tables, now, before ^ after))
        fresh = ResolveContext(Path("."), PackedFacts(), after, RESOLVERS)
        python.layout(fresh)
        assert now.cache["python.modules"] == fresh.cache["python.modules"]
        assert now.cache["python.roots"] == fresh.cache["python.roots"]
        assert tables == kept  # the earlier table is left as it was
