"""The graph's compact holders answer exactly as the plain structures they replace: per-node edge maps in the
graph's order, distinct neighbour counts, external specifiers, facts decoded from their stored JSON and their
top-level names, mentions kept across forgets and re-learns."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from codeloupe.graph.build import _Resolution
from codeloupe.graph.compact import DECODED_KEPT, Adjacency, EdgeTable, PackedFacts
from codeloupe.graph.facts import Definition, FileFacts, ImportFact, UseFact
from codeloupe.graph.resolve import Edge, mentioned_tokens

PATHS = ["a.py", "b.py", "c.py", "d/e.py"]
ROWS = [  # (source, kind, target, raw, symbols, line)
    (0, "import", 1, "b", (), 1), (0, "call", 1, "f", ("f",), 9), (0, "call", 1, "g", ("g",), 4),
    (0, "external", -1, "os", (), 2), (0, "external", -1, "json", (), 3), (0, "import", 2, "c", ("h", "k"), 1),
    (2, "call", 1, "f", ("f",), 7), (2, "import", 1, "b", (), 1), (3, "import", 0, "..a", (), 1),
    (3, "external", -1, "os", (), 1), (1, "call", 0, "a.run", ("run",), 12), (0, "call", 2, "c.h", ("h",), 9),
]


def _edge(row: tuple) -> Edge:
    source, kind, target, raw, symbols, line = row
    return Edge(PATHS[source], kind, PATHS[target] if target >= 0 else "", raw, symbols, line)


def test_edge_table_orders_and_groups_edges_as_the_plain_graph_did() -> None:
    shuffled = ROWS[:]
    random.Random(7).shuffle(shuffled)
    table = EdgeTable(PATHS, shuffled)
    expected = sorted((_edge(r) for r in ROWS), key=lambda e: (e.source, e.kind, e.target, e.line, e.raw, e.symbols))
    assert list(table) == expected and len(table) == len(ROWS)

    # The plain graph: node -> neighbour -> edges, appended in the sorted order.
    index = {p: i for i, p in enumerate(PATHS)}
    out: list[dict[int, list[Edge]]] = [defaultdict(list) for _ in PATHS]
    into: list[dict[int, list[Edge]]] = [defaultdict(list) for _ in PATHS]
    for edge in expected:
        if edge.kind != "external":
            out[index[edge.source]][index[edge.target]].append(edge)
            into[index[edge.target]][index[edge.source]].append(edge)
    outgoing, incoming = Adjacency(table, incoming=False), Adjacency(table, incoming=True)
    for i in range(len(PATHS)):
        assert outgoing[i] == dict(out[i]) and list(outgoing[i]) == list(out[i])
        assert incoming[i] == dict(into[i]) and list(incoming[i]) == list(into[i])
        assert outgoing.count(i) == len(out[i]) and incoming.count(i) == len(into[i])
        for linked, plain in ((table.linked(i, incoming=False), out[i]), (table.linked(i, incoming=True), into[i])):
            assert linked == {j: any(e.kind == "import" for e in edges) for j, edges in plain.items()}
    assert table.external(0) == ["json", "os"] and table.external(3) == ["os"] and table.external(1) == []
    empty = EdgeTable([], ())
    assert list(empty) == [] and len(Adjacency(empty, incoming=True)) == 0


def _facts(name: str) -> FileFacts:
    return FileFacts("python", "", [Definition(name, "function", 1, 3), Definition("m", "method", 4, 5, name)],
                     [ImportFact("from", "pkg.mod", 1, (("x", "y"),))], [UseFact("call_" + name, 2, "mod")])


def test_edge_counts_for_the_map_are_the_counts_of_the_edges_themselves() -> None:
    """`EdgeTable.counted` (numbers, never `Edge`s) gives the map's edge weights as counting every edge by
    (source, target or specifier, kind) does, in the same order, a specifier that reads as a path included."""
    from collections import Counter

    rows = ROWS + [(1, "external", -1, "c.py", (), 3), (1, "import", 2, "c", (), 2), (1, "import", 2, "c", (), 4)]
    table = EdgeTable(PATHS, rows)
    counted = Counter((e.source, e.target or e.raw, e.kind) for e in table)
    assert table.counted() == [(s, t, k, n) for (s, t, k), n in sorted(counted.items())]
    assert EdgeTable([], ()).counted() == []


@pytest.mark.parametrize("order, stray", [("sorted", False), ("sorted", True), ("shuffled", False)])
def test_a_table_with_some_sources_replaced_equals_one_built_from_all_rows(order: str, stray: bool) -> None:
    """After a save the graph's edge table is the last one with the re-resolved files' edges replaced, over
    the nodes as they are now (one gone, one new): the same table as one built from every edge. The nodes in
    their order (the kept edges merged with the new ones) or shuffled (every edge sorted again), and with a new
    edge from a file whose edges were kept (sorted again too)."""
    rng = random.Random(11)
    before = sorted(f"m{k}.py" for k in range(12))  # as the store lists the nodes
    after = sorted([p for p in before if p != "m3.py"] + ["m10b.py"])
    if order == "shuffled":
        random.Random(5).shuffle(after)

    def rows_of(paths: list[str], source: str, salt: int) -> list[tuple[str, str, str, str, tuple, int]]:
        out = []
        for k in range(rng.randrange(0, 5)):
            kind = rng.choice(["import", "call", "external"])
            target = "" if kind == "external" else rng.choice(paths)
            out.append((source, kind, target, f"r{(k + salt) % 4}", (f"s{salt % 3}",) * (k % 2), k + salt))
        return out

    old_rows = [row for p in before for row in rows_of(before, p, 1)]
    replaced = {"m1.py", "m5.py", "m10b.py"} | {s for s, _, t, *_ in old_rows if t == "m3.py"}
    new_rows = [row for p in sorted(replaced) if p in after for row in rows_of(after, p, 2)]
    if stray:  # the file with the most edges kept gains one more, after them in the graph's order
        kept = [row[0] for row in old_rows if row[0] not in replaced and row[0] in after]
        new_rows.append((max(sorted(set(kept)), key=kept.count), "import", max(after), "r9", ("s9",), 99))
    expected_rows = [row for row in old_rows if row[0] not in replaced and row[0] in after] + new_rows

    def numbered(paths: list[str], rows: list) -> list:
        index = {p: i for i, p in enumerate(paths)}
        return [(index[s], kind, index[t] if t else -1, raw, symbols, line) for s, kind, t, raw, symbols, line in rows]

    table = EdgeTable(before, numbered(before, old_rows)).replaced(after, replaced, numbered(after, new_rows))
    full = EdgeTable(after, numbered(after, expected_rows))
    assert list(table) == list(full) and set(table.raws) == set(full.raws)  # pools keep only what is used
    assert [table.incoming(i) for i in range(len(after))] == [full.incoming(i) for i in range(len(after))]
    assert table.counted() == full.counted()


def test_saved_arrays_read_back_as_the_same_holders() -> None:
    """What the graph file holds of the edge table, the facts and their name indexes reads back equal, and
    numbers out of range are refused."""
    from codeloupe.graph.compact import PathIndex

    table = EdgeTable(PATHS, ROWS)
    again = EdgeTable.from_arrays(PATHS, table.arrays("e_"), "e_")
    assert list(again) == list(table) and [again.external(i) for i in range(4)] == [table.external(i) for i in range(4)]
    assert [again.incoming(i) for i in range(4)] == [table.incoming(i) for i in range(4)]
    bad = table.arrays("e_")
    bad["e_target"] = bad["e_target"].copy()
    bad["e_target"][0] = len(PATHS)
    with pytest.raises(ValueError):
        EdgeTable.from_arrays(PATHS, bad, "e_")

    facts = PackedFacts()
    for path, text in (("a.py", "def run():\n    pass\n"), ("b.py", "from a import run\n")):
        from codeloupe.graph.langs import extract_facts

        extracted = extract_facts("python", text) or FileFacts("python")
        facts.put(path, extracted.to_json(), extracted)
    loaded = PackedFacts.from_arrays(facts.arrays("f_"), "f_")
    assert dict(loaded) == dict(facts) and loaded.defines("a.py", "run") and loaded.may_reexport("b.py", "run")
    mentions = PathIndex()
    mentions.add("b.py", ["run", "x"])
    mentions.add("a.py", ["run", "late"])
    mentions.add("b.py", ["late"])  # the first file numbered, added after a later one: kept in order
    read = PathIndex.from_arrays(mentions.arrays("m_"), "m_")
    assert read.users("run") == {"a.py", "b.py"} and read.has("x", "b.py") and not read.has("x", "a.py")
    assert read.has("late", "a.py") and read.has("late", "b.py")
    falling = mentions.arrays("m_")
    falling["m_numbers"] = falling["m_numbers"].copy()
    falling["m_numbers"][:2] = falling["m_numbers"][1::-1]  # "run": [1, 0] instead of [0, 1]
    with pytest.raises(ValueError):
        PathIndex.from_arrays(falling, "m_")


def test_packed_facts_decode_to_what_was_stored_and_a_frozen_copy_keeps_its_state() -> None:
    packed = PackedFacts()
    for k in range(DECODED_KEPT + 10):
        facts = _facts(f"f{k}")
        packed.put(f"p{k}.py", facts.to_json(), facts)
    frozen = packed.frozen()
    assert packed["p3.py"] == _facts("f3") and "p3.py" in packed and "nope.py" not in packed
    assert len(packed._decoded) <= DECODED_KEPT and len(packed) == DECODED_KEPT + 10
    assert packed.pop_facts("p3.py") == _facts("f3") and "p3.py" not in packed and packed.get("p3.py") is None
    changed = _facts("g")
    packed.put("p4.py", changed.to_json(), changed)
    assert packed["p4.py"] == changed
    assert frozen["p3.py"] == _facts("f3") and frozen["p4.py"] == _facts("f4")
    assert packed.language("p4.py") == "python" and packed.languages() == {"python"}
    # Top-level names answer without decoding, and follow each put and pop; methods are not top level.
    assert packed.defines("p4.py", "g") and not packed.defines("p4.py", "f4") and not packed.defines("p4.py", "m")
    assert not packed.defines("p3.py", "f3") and packed.defines("p5.py", "f5")
    assert packed.may_reexport("p5.py", "y") and not packed.may_reexport("p5.py", "x")  # binds y (from pkg.mod)
    with pytest.raises(TypeError):
        frozen.defines("p5.py", "f5")


def test_mentions_follow_forget_and_learn() -> None:
    resolution = _Resolution(1)
    one, two = _facts("one"), _facts("two")
    resolution.learn("a.py", one.to_json())
    resolution.learn("b.py", two.to_json())
    assert resolution.mentions.users("mod") == {"a.py", "b.py"}
    assert resolution.mentions.users("call_one") == {"a.py"} and "call_one" in mentioned_tokens("a.py", one)
    resolution.forget("a.py")
    assert resolution.mentions.users("mod") == {"b.py"} and resolution.mentions.users("call_one") == set()
    resolution.learn("a.py", two.to_json())
    assert resolution.mentions.users("call_two") == {"a.py", "b.py"}
    resolution.forget("gone.py")  # a path never learned
    resolution.learn("0.py", one.to_json())  # numbered after the others: the arrays stay sorted
    assert resolution.mentions.users("mod") == {"0.py", "a.py", "b.py"}
    assert resolution.mentions.has("mod", "a.py") and not resolution.mentions.has("call_one", "a.py")
    assert resolution.mentions.users("nothing") == set()
