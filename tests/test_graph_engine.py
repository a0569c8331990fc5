"""The graph over real fixture repositories, indexed by the real indexer into a real SQLite index.

Every fixture under tests/fixtures/graph is a small repository with known edges, one per language, plus a
hub repository whose shortest plain route runs through its logger.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from chat_server import ChatServer
from codeloupe.api import Workspace
from codeloupe.cli import main as cli_main
from codeloupe.graph import (
    GraphError,
    GraphFolder,
    NotInGraph,
    definition_users,
    file_summary,
    graph_map,
    graph_node,
    graph_path,
    neighbours,
    render_html,
    render_text,
    update_edges,
)
from codeloupe.graph import build as graph_build
from codeloupe.graph.analysis import shortest_path
from codeloupe.graph.build import load_graph
from codeloupe.types import split_lines
from line_break_files import write_files

FIXTURES = Path(__file__).parent / "fixtures" / "graph"


def open_fixture(name: str, tmp_path: Path) -> Workspace:
    """A copy of one fixture repository, indexed (a copy, so tests may edit files)."""
    root = tmp_path / name
    shutil.copytree(FIXTURES / name, root)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    ws.index()
    return ws


@pytest.fixture
def fixture_ws(request: pytest.FixtureRequest, tmp_path: Path):
    ws = open_fixture(request.param, tmp_path)
    yield ws
    ws.close()


def edge_set(ws: Workspace) -> set[tuple[str, str, str, tuple[str, ...]]]:
    return {(e.source, e.kind, e.target or e.raw, e.symbols) for e in load_graph(ws).edges}


def links(ws: Workspace) -> set[tuple[str, str, str]]:
    return {(e.source, e.kind, e.target or e.raw) for e in load_graph(ws).edges}


# ------------------------------------------------------------------------------------------ per language

EXPECTED = {
    "python": {
        # absolute import through the package __init__ re-export to the defining file (src layout)
        ("tests/check_shop.py", "import", "src/shop/cart.py", ("Cart",)),
        # ... and through a star re-export
        ("tests/check_shop.py", "import", "src/shop/pricing.py", ("total_price",)),
        ("tests/check_shop.py", "import", "src/shop/payments/card.py", ("charge",)),
        ("tests/check_shop.py", "call", "src/shop/log.py", ("log",)),  # `import shop.log` then shop.log.log()
        # relative imports, one and two levels up, and a submodule imported from a package
        ("src/shop/cart.py", "import", "src/shop/pricing.py", ("total_price",)),
        ("src/shop/payments/card.py", "import", "src/shop/cart.py", ("Cart",)),
        ("src/shop/payments/card.py", "import", "src/shop/log.py", ()),
        ("src/shop/payments/card.py", "call", "src/shop/log.py", ("log",)),
        ("src/shop/cart.py", "call", "src/shop/pricing.py", ("total_price",)),
        # a script outside any package imports its sibling
        ("scripts/report.py", "import", "scripts/helpers.py", ("fmt",)),
        # unresolvable: kept as external with the raw specifier
        ("src/shop/payments/card.py", "external", "requests", ()),
    },
    "js": {
        ("lib/router/index.js", "import", "lib/router/layer.js", ()),  # CommonJS require
        ("lib/router/index.js", "call", "lib/router/layer.js", ("Layer",)),  # new Layer()
        ("lib/router/index.js", "import", "lib/plugins/extra.js", ()),  # dynamic import()
        ("lib/router/index.js", "external", "methods", ()),
        ("lib/router/route.js", "call", "lib/router/layer.js", ("Layer",)),
        ("src/core/index.ts", "import", "src/core/parse.ts", ()),  # export * from
        ("src/app.ts", "import", "src/core/parse.ts", ("parse",)),  # tsconfig paths + export * re-export
        ("src/app.ts", "import", "src/core/format.ts", ("format",)),  # export {format as fmt} from
        ("src/app.ts", "call", "src/core/format.ts", ("format",)),
        ("src/app.ts", "import", "src/polyfill.ts", ()),  # side-effect import
        ("src/app.ts", "import", "src/util/helper.ts", ("helper",)),  # './util/helper.js' names the .ts file
        ("src/app.ts", "external", "react", ()),
        ("src/view.tsx", "import", "src/components/index.tsx", ("Button",)),  # directory index resolution
        ("src/view.tsx", "call", "src/components/index.tsx", ("Button",)),  # <Button />
    },
    "go": {
        ("main.go", "import", "internal/store/store.go", ()),  # module path from go.mod -> package dir
        ("main.go", "call", "internal/store/store.go", ("Open",)),
        ("main.go", "call", "helpers.go", ("run",)),  # same-package sibling
        ("internal/store/save.go", "call", "internal/store/validate.go", ("validate",)),
        ("main.go", "external", "fmt", ()),
    },
    "ruby": {
        ("lib/shop.rb", "import", "lib/shop/cart.rb", ()),  # require against lib/
        ("lib/shop/cart.rb", "import", "lib/shop/pricing.rb", ()),  # require_relative
        ("lib/shop.rb", "call", "lib/shop/cart.rb", ("Cart",)),  # constant through lexical nesting
        ("lib/shop/cart.rb", "call", "lib/shop/pricing.rb", ("Pricing",)),
        ("test/cart_test.rb", "call", "lib/shop/cart.rb", ("Cart",)),
        ("lib/shop.rb", "external", "json", ()),
    },
    "php": {
        ("src/Http/Controller.php", "import", "src/Models/User.php", ("User",)),  # use
        ("src/Http/Controller.php", "import", "src/Support/Str.php", ("Str",)),  # group use
        ("src/Http/Controller.php", "import", "src/Support/Arr.php", ("Arr",)),  # group use with alias
        ("src/Http/Controller.php", "call", "src/Support/Arr.php", ("Arr",)),  # A::class
        ("src/Http/Controller.php", "call", "src/Models/User.php", ("User",)),  # new User()
        ("src/Http/Controller.php", "call", "src/Http/Loggable.php", ("Loggable",)),  # trait use, same namespace
        ("src/Http/Controller.php", "call", "src/Http/BaseController.php", ("BaseController",)),
        ("src/Http/Controller.php", "import", "src/bootstrap.php", ()),  # require_once __DIR__ . '...'
        ("src/Http/Controller.php", "call", "src/bootstrap.php", ("boot",)),  # global function fallback
        ("src/Models/User.php", "call", "src/Support/Greets.php", ("Greets",)),  # fully qualified trait
        ("src/Http/Controller.php", "external", "Psr\\Log\\LoggerInterface", ()),
    },
    "rust": {
        ("src/lib.rs", "import", "src/cart.rs", ()),  # mod cart;
        ("src/lib.rs", "import", "src/util/mod.rs", ()),
        ("src/util/mod.rs", "import", "src/util/pricing.rs", ()),
        ("src/lib.rs", "import", "src/cart.rs", ("Cart",)),  # pub use cart::Cart
        ("src/cart.rs", "import", "src/util/pricing.rs", ("total",)),  # use crate::...
        ("src/cart.rs", "import", "src/util/mod.rs", ()),  # use super::util
        ("src/cart.rs", "call", "src/util/fmt.rs", ("width",)),  # util::fmt::width() through the binding
        ("src/lib.rs", "external", "serde::Serialize", ()),
    },
}


@pytest.mark.parametrize("fixture_ws", sorted(EXPECTED), indirect=True)
def test_known_edges_per_language(fixture_ws: Workspace) -> None:
    name = fixture_ws.root.name
    missing = EXPECTED[name] - edge_set(fixture_ws)
    assert not missing, f"{name}: missing edges {sorted(missing)}"


@pytest.mark.parametrize("fixture_ws", ["go"], indirect=True)
def test_go_selector_is_never_a_bare_use(fixture_ws: Workspace) -> None:
    # save.go calls the method `s.flush()`; the package function `flush` in flush.go must not be linked.
    assert not any(e.target == "internal/store/flush.go" for e in load_graph(fixture_ws).edges)


@pytest.mark.parametrize("fixture_ws", ["python"], indirect=True)
def test_edges_never_name_packages(fixture_ws: Workspace) -> None:
    graph = load_graph(fixture_ws)
    for edge in graph.edges:
        if edge.kind == "external":
            assert edge.target == ""
        else:
            assert edge.target in graph.paths and edge.target != edge.source


# ------------------------------------------------------------------------------------------ freshness


def test_edges_follow_edits_and_deletions(tmp_path: Path) -> None:
    ws = open_fixture("python", tmp_path)
    try:
        assert ("src/shop/cart.py", "import", "src/shop/log.py") in links(ws)
        cart = ws.root / "src/shop/cart.py"
        cart.write_text(cart.read_text().replace("from .log import log\n", "").replace('log("total")', "pass"))
        ws.update_files([cart])
        assert ("src/shop/cart.py", "import", "src/shop/log.py") not in links(ws)  # lazily re-resolved
        (ws.root / "src/shop/pricing.py").unlink()
        ws.update_files([ws.root / "src/shop/pricing.py"])
        # The importer's edge to the deleted module turns external; nothing points at a missing file.
        assert ("src/shop/cart.py", "external", ".pricing") in links(ws)
        assert all(e.target != "src/shop/pricing.py" for e in load_graph(ws).edges)
    finally:
        ws.close()


def test_extractor_upgrade_reextracts_without_reindexing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = open_fixture("python", tmp_path)
    try:
        before = links(ws)
        files_before = ws.store.file_rows()
        generation = ws.store.generation("content")
        monkeypatch.setattr(graph_build, "EXTRACTOR_VERSION", 10_000)
        assert update_edges(ws) == len(files_before)  # every file's facts re-extracted
        assert ws.store.file_rows() == files_before  # no file re-chunked
        assert ws.store.generation("content") == generation
        assert links(ws) == before
        assert update_edges(ws) == 0  # and nothing is stale afterwards
    finally:
        ws.close()


# ------------------------------------------------------------------------------------------ analyses


def test_two_builds_are_byte_identical(tmp_path: Path) -> None:
    first = open_fixture("python", tmp_path / "a")
    second = open_fixture("python", tmp_path / "b")
    try:
        one, two = graph_map(first), graph_map(second)
        assert json.dumps(one.to_dict(), sort_keys=True) == json.dumps(two.to_dict(), sort_keys=True)
        assert render_html(one) == render_html(two)
        assert graph_path(first, "check_shop.py", "pricing.py").to_dict() == \
            graph_path(second, "check_shop.py", "pricing.py").to_dict()
    finally:
        first.close()
        second.close()


def test_route_avoids_the_logger_hub(tmp_path: Path) -> None:
    ws = open_fixture("hub", tmp_path)
    try:
        graph = load_graph(ws)
        a, b, log = (graph.index_of(f"app/{n}.py") for n in ("a", "b", "log"))
        adjacency = [{j: 1.0 for j in graph.neighbours(i)} for i in range(len(graph.paths))]
        plain = shortest_path(adjacency, [0.0] * len(graph.paths), a, b)
        assert plain == [a, log, b]  # breadth-first goes through the hub
        route = graph_path(ws, "app/a.py", "app/b.py")
        assert route.found
        assert [h.target for h in route.hops] == ["app/m1.py", "app/m2.py", "app/b.py"]
        assert "app/log.py" in [g.path for g in graph_map(ws).gods]
        first = route.hops[0]
        assert first.carriers == ["step_one"] and first.direction == "uses" and first.kind == "call"
        assert first.use is not None and first.use.path == "app/a.py" and first.use.start_line == 7
        assert first.definition is not None and (first.definition.start_line, first.definition.end_line) == (4, 5)
    finally:
        ws.close()


def test_route_that_meets_in_a_shared_middle(tmp_path: Path) -> None:
    ws = open_fixture("python", tmp_path)
    try:
        route = graph_path(ws, "src/shop/payments/card.py", "scripts/report.py")
        assert not route.found and route.hops == []
        route = graph_path(ws, "src/shop/cart.py", "card.py")
        assert route.found
        meet = graph_path(ws, "src/shop/pricing.py", "src/shop/log.py")
        assert meet.found and meet.meets_in_middle
        assert "never call each other" in meet.note
        assert {h.direction for h in meet.hops} == {"uses", "used-by"}
        # An end taken as a concept says which file stood in for it: a route was drawn to the closest file with no
        # word of it (a mistyped name led to a confident route to some other file), where `node` says so.
        concept = graph_path(ws, "src/shop/cart.py", "total price")
        assert concept.target == "src/shop/pricing.py" and concept.note.startswith(
            "'total price' names no file or definition: src/shop/pricing.py is the file closest to it by the words "
            "of file names and definitions; "), concept.note
        assert "closest to it" not in route.note
    finally:
        ws.close()


def test_semantic_lane_capped_by_real_edges_and_surprises(tmp_path: Path) -> None:
    ws = open_fixture("hub", tmp_path)
    try:
        rows = ws.store.file_rows()
        ids = [rows[p].id for p in sorted(rows)]
        paths = sorted(rows)
        # Skeleton vectors as the embedder stores them: f3 and f4 read alike (cosine 1.0, both have one real
        # edge); m1 and f5 too (0.9); __init__.py has no real edge, so no similarity edge may reach it.
        vectors = np.zeros((len(ids), 8), np.float32)
        for k in range(len(ids)):
            vectors[k, k % 6] = 1.0  # the rest: spread over six directions, far from the pairs below

        def put(path: str, vec: list[float]) -> None:
            vectors[paths.index(path)] = np.array(vec, np.float32)

        put("app/f3.py", [0, 0, 0, 0, 0, 0, 0, 1])
        put("app/f4.py", [0, 0, 0, 0, 0, 0, 0, 1])
        put("app/__init__.py", [0, 0, 0, 0, 0, 0, 0.999, 0.04])
        put("app/m1.py", [1, 0, 0, 0, 0, 0, 0, 0])
        put("app/f5.py", [0.9, 0.43589, 0, 0, 0, 0, 0, 0])
        ws.store.put_vectors("skeleton", "test-model", ids, vectors)
        gmap = graph_map(ws)
        semantic = {(e.source, e.target): e.weight for e in gmap.edges if e.kind == "semantic"}
        assert semantic[("app/f3.py", "app/f4.py")] == pytest.approx(1.0, abs=0.01)
        assert semantic[("app/f5.py", "app/m1.py")] == pytest.approx(0.9, abs=0.01)
        assert not any("app/__init__.py" in pair for pair in semantic)
        graph = load_graph(ws)
        assert all(len(graph.similar[i]) <= min(3, graph.degree[i]) for i in range(len(graph.paths)))
        summary = file_summary(ws, "app/f3.py")
        assert summary.semantic == [("app/f4.py", pytest.approx(1.0, abs=0.01))]
        surprise_pairs = {(s.a, s.b) for s in gmap.surprises}
        for a, b in surprise_pairs:
            i, j = graph.index_of(a), graph.index_of(b)
            assert j not in graph.neighbours(i) and graph.community[i] != graph.community[j]
        assert ("app/f5.py", "app/m1.py") in surprise_pairs or graph.community[graph.index_of("app/f5.py")] \
            == graph.community[graph.index_of("app/m1.py")]
    finally:
        ws.close()


# ------------------------------------------------------------------------------------------ node & editor


def test_a_file_with_nothing_embedded_is_no_concepts_closest_file(tmp_path: Path) -> None:
    # An empty file's skeleton has the zero vector (`embed.background`): scored 0, it was closer to a concept than
    # every file that reads unlike it.
    root = tmp_path / "hub"
    shutil.copytree(FIXTURES / "hub", root)
    with ChatServer(embedder=lambda _: [-1.0, 0, 0, 0]) as chat:
        ws = Workspace(root, overrides={"embed_provider": "openai", "embed_base_url": chat.base_url,
                                        "embed_model": "scripted"})
        try:
            ws.index()
            rows = ws.store.file_rows()
            paths = sorted(rows)
            vectors = np.tile(np.array([1.0, 0, 0, 0], np.float32), (len(paths), 1))
            vectors[paths.index("app/__init__.py")] = 0.0
            vectors[paths.index("app/f3.py")] = [0.5, 0.866, 0, 0]
            ws.store.put_vectors("skeleton", "test-model", [rows[p].id for p in paths], vectors)
            node = graph_node(ws, "where orders are kept")
            assert (node.path, node.resolved_by) == ("app/f3.py", "embedding")
        finally:
            ws.close()


def test_node_by_path_name_and_concept(tmp_path: Path) -> None:
    ws = open_fixture("python", tmp_path)
    try:
        node = graph_node(ws, "src/shop/cart.py")
        assert node.resolved_by == "path"
        assert {n.path for n in node.imports} == {"src/shop/log.py", "src/shop/pricing.py"}
        users = {n.path: n for n in node.importers}
        assert users["src/shop/payments/card.py"].symbols == ["Cart"]
        assert "".join(text for _, text in node.chunks) == (ws.root / "src/shop/cart.py").read_text()
        assert "Cart" in node.symbols and "Cart.total" in node.symbols
        assert graph_node(ws, "card.py").path == "src/shop/payments/card.py"
        assert graph_node(ws, "card.py").resolved_by == "filename"
        concept = graph_node(ws, "total price")  # no vectors: words of paths and definitions
        assert concept.resolved_by == "lexical" and concept.path == "src/shop/pricing.py"
        data = node.to_dict()
        assert {"path", "community", "god", "imports", "importers", "semantic", "symbols", "chunks"} <= set(data)
        # The text puts an edge's line on the file that holds it: cart.py's own for what it uses (it read
        # "src/shop/pricing.py:3", a line of cart.py), the user's for what uses it.
        text = render_text(node)
        pricing = next(n for n in node.imports if n.path == "src/shop/pricing.py")
        assert "pricing" in _line(ws, "src/shop/cart.py", pricing.line)
        assert f"  src/shop/pricing.py {pricing.kind} (from line {pricing.line})" in text
        card = users["src/shop/payments/card.py"]
        assert "Cart" in _line(ws, "src/shop/payments/card.py", card.line)
        assert f"  src/shop/payments/card.py:{card.line} {card.kind}" in text
        with pytest.raises(GraphError):
            graph_node(ws, "zzzz qqqq")
    finally:
        ws.close()


def test_a_bare_name_is_a_files_stem_or_a_definition_before_a_concept(tmp_path: Path) -> None:
    # `--node dev` meant dev.py and `--node ConsoleRenderer` the file defining it; both went to the closest file by
    # meaning (or by words), some other file; and `Cart.total` read as a file name with the extension ".total".
    ws = open_fixture("python", tmp_path)
    try:
        node = graph_node(ws, "pricing")
        assert (node.path, node.resolved_by) == ("src/shop/pricing.py", "filename")
        node = graph_node(ws, "Cart.total")
        assert (node.path, node.resolved_by) == ("src/shop/cart.py", "definition")
        node = graph_node(ws, "charge")
        assert (node.path, node.resolved_by) == ("src/shop/payments/card.py", "definition")
        with pytest.raises(NotInGraph):  # a file name still names a file, never a definition or a concept
            graph_node(ws, "cart.txt")
    finally:
        ws.close()
    root = tmp_path / "names"
    for rel, text in {
        "tests/test_render.py": "class Renderer:\n    pass\n",  # a test's definition loses to the code's
        "fixtures/books.py": "class Ledger:\n    pass\n",  # a fixture is a test (the graph had its own rule)
        "src/deep/nested/ledger_core.py": "class Ledger:\n    def post(self):\n        pass\n",
        "src/deep/nested/views.py": "class Renderer:\n    def render(self):\n        pass\n",
        "src/console.py": "class Screen:\n    def render(self):\n        pass\n",
        "src/a/b/c/d/output.py": "def render(text):\n    return text\n",  # top level, before the methods
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        ws.index()
        assert graph_node(ws, "Renderer").path == "src/deep/nested/views.py"
        assert graph_node(ws, "Ledger").path == "src/deep/nested/ledger_core.py"
        assert graph_node(ws, "render").path == "src/a/b/c/d/output.py"
        assert graph_node(ws, "Screen.render").path == "src/console.py"
        assert graph_node(ws, "renderer").path == "src/deep/nested/views.py"  # any case, when no exact one
        assert graph_node(ws, "console").resolved_by == "filename"
    finally:
        ws.close()


def test_a_one_shot_graph_node_names_a_definition_without_building_the_search_snapshot(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`graph --node NAME` looked the name up in the search snapshot's symbol table, so a one-shot command built the
    whole snapshot and saved it (the answer took twice as long at 3,400 files after a change), for a graph that
    needs none of it. It reads the index's symbols instead; where a snapshot is at hand (a server's) it looks them
    up there, to the same files."""
    from codeloupe.snapshot_file import lexical_file, saved_snapshot_generation, snapshot_file

    root = tmp_path / "repo"
    for rel, text in {
        "src/views.py": "class Renderer:\n    def render(self):\n        pass\n",
        "src/console.py": "class Screen:\n    def render(self):\n        pass\n",
        "src/output.py": "def render(text):\n    return text\n",
        "src/app.py": "from src.views import Renderer\n\n\ndef main():\n    return Renderer().render()\n",
        "docs/guide.md": "# Renderer\n\nHow pages are drawn.\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert cli_main(["graph", str(root), "--no-embed", "--node", "Renderer"]) == 0
    assert capsys.readouterr().out.startswith("src/views.py  (community ")
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        assert saved_snapshot_generation(snapshot_file(ws.store.path), ws.store.index_id) is None
        assert not lexical_file(ws.store.path).exists()
        asked = ["Renderer", "renderer", "render", "Screen.render", "screen.RENDER", "Renderer.render"]
        one_shot = [(node.path, node.resolved_by) for node in map(lambda name: graph_node(ws, name), asked)]
        assert not ws.searcher().snapshot_at_hand()
        ws.search("render")  # a server's state: the snapshot held
        assert ws.searcher().snapshot_at_hand()
        assert [(graph_node(ws, name).path, graph_node(ws, name).resolved_by) for name in asked] == one_shot
    finally:
        ws.close()
    assert one_shot == [("src/views.py", "definition"), ("src/views.py", "definition"),
                        ("src/output.py", "definition"), ("src/console.py", "definition"),
                        ("src/console.py", "definition"), ("src/views.py", "definition")]


def test_every_edge_of_the_json_names_the_file_its_line_is_in(tmp_path: Path) -> None:
    # `line` alone is a line of the node's file for `imports` but of the neighbour's for `importers` (and of
    # `from` for a folder's `uses`, of `path` for its `usedBy`): `use` says which, so no reader works it out.
    ws = open_fixture("python", tmp_path)
    try:
        node = graph_node(ws, "src/shop/cart.py").to_dict()
        folder = graph_node(ws, "src/shop/payments").to_dict()
        edges = [(e, node["path"]) for e in node["imports"]] + [(e, e["path"]) for e in node["importers"]] + \
            [(e, e["from"]) for e in folder["uses"]] + [(e, e["path"]) for e in folder["usedBy"]]
        assert len(edges) == 9 and {e["use"]["path"] for e, _ in edges} > {node["path"]}
        for edge, user in edges:
            assert edge["use"] == {"path": user, "startLine": edge["line"], "endLine": edge["line"]}
            text = _line(ws, edge["use"]["path"], edge["line"])
            assert "import" in text and all(symbol in text for symbol in edge["symbols"]), (edge, text)
    finally:
        ws.close()


def test_edge_and_definition_lines_are_the_editors_in_a_file_with_lone_cr_breaks(tmp_path: Path) -> None:
    # Tree-sitter's rows count "\n" only: in old-Mac (lone CR) files every graph line after the first break was
    # the file's row 1 while the chunks, the editor and the LSP count each CR as a line's end.
    files = {"shop/__init__.py": "",
             "shop/pricing.py": "\"\"\"Prices.\"\"\"\r\rdef total_price(items):\r    return sum(items)\r",
             "shop/cart.py": "\"\"\"A cart.\"\"\"\r\rimport os\r\rfrom shop.pricing import total_price\r\r\r"
                             "def cart_total(items):\r    return total_price(items)\r"}
    ws = Workspace(write_files(tmp_path / "mac", files), overrides={"embed_provider": "none"})
    try:
        ws.index()
        cart = split_lines(files["shop/cart.py"])
        pricing = next(n for n in graph_node(ws, "shop/cart.py").imports if n.path == "shop/pricing.py")
        assert cart[pricing.line - 1].startswith("from shop.pricing import total_price")
        assert dict(definition_users(ws, "shop/pricing.py")["total_price"]) == {
            "shop/cart.py": next(i for i, line in enumerate(cart, 1) if "return total_price(" in line)}
        graph = load_graph(ws)
        graphed = {d.name: (d.start_line, d.end_line) for path in files
                   for d in graph.definitions[graph.index_of(path)]}
        chunked = {s.name: (s.start_line, s.end_line) for row in ws.store.file_rows(files).values()
                   for s in ws.store.symbols_of_file(row.id)}
        assert graphed == chunked == {"total_price": (3, 4), "cart_total": (8, 9)}
    finally:
        ws.close()


def test_names_with_a_character_past_u_ffff_are_read_as_written(tmp_path: Path) -> None:
    # Every parse reads such characters as four letters of the same byte length (tree-sitter-bash's crash on them):
    # the graph read its names from the parsed copy, so `./😀.js` was imported as `./xxxx.js`, which resolves to
    # nothing, and a definition named with one was stored misnamed. Names are read from the file's own bytes.
    files = {"src/😀.js": "export function 𝒻ormat(v) { return v; }\n",
             "src/app.js": "import { 𝒻ormat } from './😀.js';\n\nexport function show(v) { return 𝒻ormat(v); }\n",
             "pkg/__init__.py": "",
             "pkg/𝔪ath.py": "def 𝔞dd(a, b):\n    return a + b\n",
             "pkg/use.py": "from pkg.𝔪ath import 𝔞dd\n\ndef total(a, b):\n    return 𝔞dd(a, b)\n"}
    ws = Workspace(write_files(tmp_path / "astral", files), overrides={"embed_provider": "none"})
    try:
        ws.index()
        assert {("src/app.js", "import", "src/😀.js"), ("pkg/use.py", "import", "pkg/𝔪ath.py")} <= links(ws)
        graph = load_graph(ws)
        assert [d.name for d in graph.definitions[graph.index_of("src/😀.js")]] == ["𝒻ormat"]
        assert [d.name for d in graph.definitions[graph.index_of("pkg/𝔪ath.py")]] == ["𝔞dd"]
        assert dict(definition_users(ws, "src/😀.js")["𝒻ormat"]) == {"src/app.js": 3}
    finally:
        ws.close()


def _line(ws: Workspace, path: str, line: int) -> str:
    return (ws.root / path).read_text().splitlines()[line - 1]


def test_a_node_outside_the_workspace_says_nothing_of_what_is_on_the_disk(tmp_path: Path) -> None:
    ws = open_fixture("python", tmp_path / "ws")
    (tmp_path / "secret.txt").write_text("x")
    try:
        answers = []
        for target in ("/etc/passwd", "/etc/nonexistent", "/root", "../secret.txt", "../nosuch.txt"):
            with pytest.raises(GraphError) as raised:
                graph_node(ws, target)
            answers.append(str(raised.value).replace(target, "TARGET"))
        assert len(set(answers)) == 1 and "outside the workspace" in answers[0]
        assert "is not in the graph" in str(pytest.raises(GraphError, graph_node, ws, "README.md").value)
        # A folder is a node's question (its part of the graph), never a route's end.
        assert "a folder, not a file" in str(pytest.raises(GraphError, graph_path, ws, "src/shop", "cart").value)
        folder = graph_node(ws, "src/shop")
        assert isinstance(folder, GraphFolder) and folder.files
        assert all(node.path.startswith("src/shop/") for node in folder.files)
        for root in (".", "./", str(ws.root)):  # the root holds every file: its answer is the map, not "no code"
            message = str(pytest.raises(GraphError, graph_node, ws, root).value)
            assert "the workspace root" in message and "no code file" not in message
        with pytest.raises(GraphError, match="no such file in the workspace"):
            graph_node(ws, "x" * 1000 + ".py")  # a name longer than the file system takes
    finally:
        ws.close()


def test_neighbours_summary_and_definition_users(tmp_path: Path) -> None:
    ws = open_fixture("python", tmp_path)
    try:
        related = neighbours(ws, ["src/shop/cart.py"], limit=7)
        assert len(related) <= 7 and related == neighbours(ws, ["src/shop/cart.py"], limit=7)
        reasons = dict(related)
        assert reasons["src/shop/pricing.py"] == "imported by src/shop/cart.py"
        assert reasons["src/shop/payments/card.py"] == "imports src/shop/cart.py"
        assert "src/shop/cart.py" not in reasons
        assert len(neighbours(ws, ["src/shop/cart.py"], limit=2)) == 2
        summary = file_summary(ws, "src/shop/cart.py")
        assert (summary.imports, summary.importers) == (2, 3)
        users = definition_users(ws, "src/shop/cart.py")
        assert dict(users["Cart"]) == {"src/shop/__init__.py": 4, "src/shop/payments/card.py": 4,
                                       "tests/check_shop.py": 8}
        with pytest.raises(GraphError):
            file_summary(ws, "README.md")
    finally:
        ws.close()


# ------------------------------------------------------------------------------------------ surfaces


def test_cli_json_node_path_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "python"
    shutil.copytree(FIXTURES / "python", root)
    assert cli_main(["graph", str(root), "--json", "--no-embed"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {n["path"] for n in data["nodes"]} >= {"src/shop/cart.py", "tests/check_shop.py"}
    assert all({"source", "target", "kind"} <= set(e) for e in data["edges"])
    assert {e["kind"] for e in data["edges"]} == {"import", "call", "external"}
    assert data["communities"] and all({"id", "name", "size", "members"} <= set(c) for c in data["communities"])
    assert cli_main(["graph", str(root), "--json", "--no-embed", "--path", "cart.py", "log.py"]) == 0
    assert json.loads(capsys.readouterr().out)["found"] is True
    out = tmp_path / "map.html"
    assert cli_main(["graph", str(root), "--no-embed", "--html", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    groups = sum(1 for c in data["communities"] if c["size"] > 1)  # as the text map counts (not single files)
    assert f"({groups} communities, {len(data['nodes'])} files)" in capsys.readouterr().out
    assert len(data["communities"]) > groups  # the fixture has unconnected files: the count differs
    assert cli_main(["graph", str(root), "--no-embed", "--node", "zzzz qqqq"]) == 2



@pytest.mark.parametrize("files", [{}, {"README.md": "# Notes\n\nwords only\n"}], ids=["empty", "docs only"])
def test_cli_map_of_a_workspace_without_code_says_so(files: dict[str, str], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """It printed "0 files · " with nothing after the dot, and "0 communities (0 unconnected files)"."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert cli_main(["graph", str(tmp_path), "--no-embed"]) == 0
    assert capsys.readouterr().out == "no code file is indexed in the workspace: the graph has no files\n"


def test_cli_map_of_one_file_says_one_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It said "1 files", "(1 unconnected files)", "folder: 1 files of the graph" and "wrote ... (1 files)"."""
    root = tmp_path / "repo"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "app.py").write_text("def main():\n    return 1\n")
    assert cli_main(["graph", str(root), "--no-embed", "--html", str(tmp_path / "map.html")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {tmp_path / 'map.html'} (0 communities, 1 file)"
    assert cli_main(["graph", str(root), "--no-embed"]) == 0
    assert capsys.readouterr().out.splitlines()[:3] == ["1 file", "", "0 communities (1 unconnected file)"]
    assert cli_main(["graph", str(root), "--no-embed", "--node", "lib"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "lib/  (folder: 1 file of the graph)"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.parametrize("hostile", [False, True], ids=["plain", "a file named like markup"])
def test_html_renders_one_bubble_per_multi_file_community(tmp_path: Path, hostile: bool) -> None:
    # scripts/test.sh installs Debian's chromium; without it this fails rather than passing unchecked.
    assert CHROMIUM, "needs Debian chromium (apt-get install -y chromium; scripts/test.sh does this as root)"
    root = tmp_path / "js"
    shutil.copytree(FIXTURES / "js", root)
    if hostile:  # inside the page's data block, "<!--" then "<script" kept the browser from ever ending it
        (root / "lib" / "router" / "<!--<script>.js").write_text("const layer = require('./layer');\n")
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        ws.index()
        gmap = graph_map(ws)
    finally:
        ws.close()
    assert not hostile or any("<!--" in n.path for n in gmap.nodes)
    expected = sum(1 for c in gmap.communities if c.size > 1)
    assert expected >= 2
    page = tmp_path / "map.html"
    page.write_text(render_html(gmap), encoding="utf-8")
    assert "http://" not in page.read_text().replace("http://www.w3.org/2000/svg", "")
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert dom.count('class="community"') == expected
    assert f"{len(gmap.nodes)} files, {expected} communities" in dom


def write_repo(root: Path, files: dict[str, str]) -> Workspace:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    ws.index()
    return ws


def test_only_code_with_definitions_joins_the_semantic_lane_and_surprises(tmp_path: Path) -> None:
    """Empty `__init__.py` pairs, SVG logos, `cert.pem ~ key.pem` and JSON twins embed alike (there is nothing
    in them); only the two real parsers in different corners of the repository are a surprise."""
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><circle r="{}"/></svg>\n'
    ws = write_repo(tmp_path, {
        "pkg_a/__init__.py": "", "pkg_b/__init__.py": "",
        "assets/logo.svg": svg.format(4), "assets/icon.svg": svg.format(5),
        "tls/cert.pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "tls/key.pem": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
        "config/a.json": '{"name": "a"}\n', "config/b.json": '{"name": "b"}\n',
        "src/alpha.py": "def parse_tokens(text):\n    return text.split()\n",
        "lib/beta.py": "def parse_words(text):\n    return text.split()\n",
    })
    try:
        rows = ws.store.file_rows()
        paths = sorted(p for p in rows if not rows[p].is_doc)
        vectors = np.zeros((len(paths), 8), np.float32)
        for k, path in enumerate(paths):
            # The empty and non-code files all share one direction; the two parsers another.
            vectors[k, 0 if path.endswith(("__init__.py", ".svg", ".pem", ".json")) else 1] = 1.0
        ws.store.put_vectors("skeleton", "test-model", [rows[p].id for p in paths], vectors)
        gmap = graph_map(ws)
        assert {(s.a, s.b) for s in gmap.surprises} == {("lib/beta.py", "src/alpha.py")}
        assert not [e for e in gmap.edges if e.kind == "semantic" and not e.source.endswith(("alpha.py", "beta.py"))]
    finally:
        ws.close()


def test_a_route_between_code_never_detours_through_tests(tmp_path: Path) -> None:
    """parser.py -> _utils.py -> tests/test_arguments.py -> decorators.py was the route: a test imports
    both ends, and the hub toll made that look cheaper than the code's own connection."""
    users = {f"app/user{i}.py": f"from app._utils import helper\n\n\ndef use{i}():\n    return helper()\n"
             for i in range(8)}
    ws = write_repo(tmp_path, {
        "app/__init__.py": "",
        "app/_utils.py": "def helper():\n    return 1\n",
        "app/parser.py": "from app._utils import helper\n\n\ndef parse():\n    return helper()\n",
        "app/decorators.py": "from app._utils import helper\n\n\ndef decorate():\n    return helper()\n",
        "tests/test_arguments.py": "from app.parser import parse\nfrom app.decorators import decorate\n\n\n"
                                   "def test_both():\n    assert parse() and decorate()\n",
        **users,
    })
    try:
        route = graph_path(ws, "app/parser.py", "app/decorators.py")
        assert route.found and [h.target for h in route.hops] == ["app/_utils.py", "app/decorators.py"]
        # With a test as an endpoint, tests are fair game.
        direct = graph_path(ws, "tests/test_arguments.py", "app/decorators.py")
        assert [h.target for h in direct.hops] == ["app/decorators.py"]
    finally:
        ws.close()
