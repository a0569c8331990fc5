"""A save re-resolves only the edges it can reach; the graph it leaves must be the graph a full rebuild of the
same files gives. Every step below edits a real fixture repository on disk, lets the warm workspace catch up
incrementally, and compares its graph with one built from scratch in a second, cold index.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.graph import analysis
from codeloupe.graph import build as graph_build
from codeloupe.graph.build import load_graph
from test_graph_units import moved_votes

FIXTURES = Path(__file__).parent / "fixtures" / "graph"


def graph_facts(ws: Workspace) -> tuple:
    """Everything the graph says, by path: edges, communities and their names, definitions."""
    graph = load_graph(ws)
    return (graph.paths, sorted(graph.edges, key=repr), graph.community, graph.community_names,
            list(graph.definitions), graph.gods)


def rebuilt(root: Path, cache: Path) -> tuple:
    cold = Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(cache)})
    try:
        cold.index()
        return graph_facts(cold)
    finally:
        cold.close()


def move(root: Path, old: str, new: str) -> list[Path]:
    (root / new).parent.mkdir(parents=True, exist_ok=True)
    (root / old).rename(root / new)
    return [root / old, root / new]


def rewrite(root: Path, rel: str, edit: Callable[[str], str]) -> list[Path]:
    path = root / rel
    path.write_text(edit(path.read_text() if path.exists() else ""))
    return [path]


def delete(root: Path, rel: str) -> list[Path]:
    (root / rel).unlink()
    return [root / rel]


# (what the step does, the edit) per fixture; each edit returns the paths it touched.
PYTHON_STEPS = [
    ("a new import", lambda r: rewrite(r, "src/shop/cart.py", lambda t: "from .payments.card import charge\n" + t
                                       + "\n\ndef pay(cart):\n    return charge(cart, 't')\n")),
    ("a new module defining a name the package star-exports",
     lambda r: rewrite(r, "src/shop/discount.py", lambda _: "def discount(x):\n    return x\n")
     + rewrite(r, "src/shop/pricing.py", lambda t: "from .discount import discount\n" + t)),
    ("a rename, importers not yet updated", lambda r: move(r, "src/shop/pricing.py", "src/shop/prices.py")),
    ("the importers follow the rename",
     lambda r: rewrite(r, "src/shop/cart.py", lambda t: t.replace(".pricing", ".prices"))
     + rewrite(r, "src/shop/__init__.py", lambda t: t.replace(".pricing", ".prices"))),
    ("a deleted module others import", lambda r: delete(r, "src/shop/log.py")),
    ("a script's sibling appears", lambda r: rewrite(r, "scripts/fmt_tools.py", lambda _: "def fmt(v):\n    return v\n")
     + rewrite(r, "scripts/report.py", lambda t: t.replace("from helpers import fmt", "from fmt_tools import fmt"))),
    ("a directory becomes a package", lambda r: rewrite(r, "scripts/__init__.py", lambda _: "")),
    ("a body edited, every definition kept",
     lambda r: rewrite(r, "src/shop/log.py", lambda t: t.replace("print(message)", "print(message, flush=True)"))),
    ("a definition moves between files",
     lambda r: rewrite(r, "src/shop/payments/card.py", lambda t: t.replace("def charge", "def charge_card"))
     + rewrite(r, "src/shop/payments/__init__.py", lambda t: t + "\n\ndef charge(cart, token):\n    return True\n")),
    ("a test imports a name the package does not have yet",
     lambda r: rewrite(r, "tests/check_prices.py", lambda _: "from shop import price_total\n")),
    # The package star-exports prices.py, so once prices.py defines the name, tests/check_prices.py's import
    # edge moves from the package to it: two binding hops away, with no edge to prices.py before the save.
    ("a star-exported definition renamed to it",
     lambda r: rewrite(r, "src/shop/prices.py", lambda t: t.replace("def total_price", "def price_total"))),
]

GENERIC_STEPS = {
    "ruby": [("a rename", lambda r: move(r, "lib/shop/pricing.rb", "lib/shop/prices.rb")),
             ("the require follows", lambda r: rewrite(r, "lib/shop/cart.rb", lambda t: t.replace("'pricing'", "'prices'"))),
             # A constant defined in two files is ambiguous; a save that drops one definition (keeping the
             # file's other one) makes it unique, and the file naming it gains an edge.
             ("a constant defined twice, used bare",
              lambda r: rewrite(r, "lib/shop/audit.rb", lambda _: "module Shop\n  class Audit\n  end\nend\n")
              + rewrite(r, "lib/shop/audit_copy.rb",
                        lambda _: "module Shop\n  class Audit\n  end\n  RETRIES = 2\nend\n")
              + rewrite(r, "lib/shop/prices.rb", lambda t: t.replace("items.sum", "Audit.new\n      items.sum"))),
             ("one definition dropped, the file's other kept",
              lambda r: rewrite(r, "lib/shop/audit_copy.rb", lambda _: "module Shop\n  RETRIES = 2\nend\n")),
             ("a body edited, every definition kept",
              lambda r: rewrite(r, "lib/shop/audit.rb", lambda t: t.replace("  end\n", "    # audited\n  end\n"))),
             ("a deletion", lambda r: delete(r, "lib/shop/cart.rb"))],
    "js": [("a rename", lambda r: move(r, "src/core/format.ts", "src/core/fmt.ts")),
           ("the re-export follows", lambda r: rewrite(r, "src/core/index.ts", lambda t: t.replace("./format", "./fmt"))),
           ("a deletion", lambda r: delete(r, "src/util/helper.ts"))],
    "go": [("a new file in the package", lambda r: rewrite(r, "internal/store/open.go",
                                                          lambda _: "package store\n\nfunc Reopen() {}\n")),
           ("a use of it", lambda r: rewrite(r, "main.go", lambda t: t.replace("run()", "run()\n\tstore.Reopen()"))),
           ("a deletion", lambda r: delete(r, "internal/store/flush.go"))],
}


@pytest.mark.parametrize("fixture, steps", [("python", PYTHON_STEPS)] + sorted(GENERIC_STEPS.items()),
                         ids=["python", *sorted(GENERIC_STEPS)])
def test_graph_after_saves_equals_a_full_rebuild(fixture: str, steps: list, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    replays = checking_replays(monkeypatch)
    root = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, root)
    ws = Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(tmp_path / "warm")})
    try:
        ws.index()
        assert graph_facts(ws) == rebuilt(root, tmp_path / "cold-0")
        for number, (what, edit) in enumerate(steps, 1):
            ws.update_files(edit(root))
            assert graph_facts(ws) == rebuilt(root, tmp_path / f"cold-{number}"), what
    finally:
        ws.close()
    assert replays and not any(missed for missed in replays)


def checking_replays(monkeypatch: pytest.MonkeyPatch) -> list[set[int]]:
    """From now on, every label propagation that can replay the last (after a save, `analysis.propagate`) does,
    however much of a small tree it reaches, and its moved nodes are checked against every node's votes
    compared: for each replay, the nodes whose votes moved that it missed (recorded, not raised, as a graph may
    be built on another thread)."""
    replays: list[set[int]] = []
    ran: dict[bytes, analysis.Weights] = {}  # what each propagation ran over, by its course

    def course(propagation: analysis.Propagation) -> bytes:  # the same after the graph is saved and read back
        return np.array(propagation.labels, np.int64).tobytes() + b"".join(
            np.concatenate(part).astype(np.int64).tobytes() for part in zip(*propagation.rounds))

    real = analysis.propagate

    def checking(n: int, weights: analysis.Weights, replay: analysis.Replay | None = None
                 ) -> analysis.Propagation:
        if replay is not None:
            replays.append(moved_votes(ran[course(replay.last)], weights, replay.renumber) - replay.moved)
        propagation = real(n, weights, replay)
        ran[course(propagation)] = weights
        return propagation

    monkeypatch.setattr(analysis, "propagate", checking)
    monkeypatch.setattr(analysis, "REPLAY_LIMIT", 1.0)
    return replays


def counting_resolutions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files resolved from now on, in order (until `monkeypatch` is undone)."""
    resolved: list[str] = []
    real = graph_build.resolve_file

    def counting(ctx, path):
        resolved.append(path)
        return real(ctx, path)

    monkeypatch.setattr(graph_build, "resolve_file", counting)
    return resolved


def resolved_by_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[Path], list[Path]],
                     prepare: Callable[[Path], object] = lambda root: None) -> list[str]:
    """The files one save re-resolves, in the python fixture (after `prepare` edits it before indexing); the
    graph it leaves is checked against a full rebuild."""
    root = tmp_path / "python"
    shutil.copytree(FIXTURES / "python", root)
    prepare(root)
    ws = Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(tmp_path / "warm")})
    try:
        ws.index()
        load_graph(ws)
        resolved = counting_resolutions(monkeypatch)
        ws.update_files(edit(root))
        load_graph(ws)
        monkeypatch.undo()
        assert graph_facts(ws) == rebuilt(root, tmp_path / "cold")
    finally:
        ws.close()
    return sorted(resolved)


def test_a_save_resolves_only_what_it_reaches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    resolved = resolved_by_save(tmp_path, monkeypatch, lambda r: rewrite(
        r, "scripts/helpers.py", lambda t: t + "\n\ndef pad(v):\n    return v\n"))
    # helpers.py itself and report.py (it imports helpers); nothing under src/ or tests/.
    assert resolved == ["scripts/helpers.py", "scripts/report.py"]


def test_a_save_that_keeps_its_definitions_skips_files_that_only_mention_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolution asks whether a file defines a name, never where: a file that names `fmt` without importing
    helpers.py cannot see a save of helpers.py that keeps `fmt`, so it is not resolved again."""
    resolved = resolved_by_save(
        tmp_path, monkeypatch, lambda r: rewrite(r, "scripts/helpers.py", lambda t: t.replace(">4", ">6")),
        prepare=lambda r: rewrite(r, "src/shop/render.py", lambda _: "def show(v):\n    return fmt(v)\n"))
    assert resolved == ["scripts/helpers.py", "scripts/report.py"]


def test_a_new_module_resolves_only_the_files_whose_imports_can_bind_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python file's resolution reads other files only through what its imports bind: a new module whose name no
    import names changes no file's edges but its own, though files all over the tree call a `log` it defines."""
    resolved = resolved_by_save(tmp_path, monkeypatch, lambda r: rewrite(
        r, "src/shop/audit.py", lambda _: "def log(message):\n    return message\n"))
    assert resolved == ["src/shop/audit.py"]


def test_a_deleted_module_resolves_only_the_files_whose_imports_bound_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """report.py imports helpers.py; render.py calls a `fmt` of its own scope, which only an import could bind."""
    resolved = resolved_by_save(
        tmp_path, monkeypatch, lambda r: delete(r, "scripts/helpers.py"),
        prepare=lambda r: rewrite(r, "src/shop/render.py", lambda _: "def show(v):\n    return fmt(v)\n"))
    assert resolved == ["scripts/report.py"]


def test_an_import_a_package_re_exports_reaches_two_binding_hops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pricing.py keeps every definition but imports a name the package star-exports from it: check_audit.py,
    which imports that name from the package and has no edge to pricing.py, now resolves it through two
    re-exports (the graph is checked against a full rebuild on the way)."""
    resolved = resolved_by_save(
        tmp_path, monkeypatch,
        lambda r: rewrite(r, "src/shop/pricing.py", lambda t: "from .log import log as audit_total\n" + t),
        prepare=lambda r: rewrite(r, "tests/check_audit.py", lambda _: "from shop import audit_total\n"))
    assert "tests/check_audit.py" in resolved


def test_a_body_edited_reaches_only_the_files_with_an_edge_to_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same re-export in place before the save: a save that keeps pricing.py's imports and definitions
    cannot change how check_audit.py resolves through it (its edge goes to log.py); the files resolved again
    are the ones with an edge to it."""
    def audited(root: Path) -> None:
        rewrite(root, "src/shop/pricing.py", lambda t: "from .log import log as audit_total\n" + t)
        rewrite(root, "tests/check_audit.py", lambda _: "from shop import audit_total\n")

    resolved = resolved_by_save(
        tmp_path, monkeypatch, lambda r: rewrite(r, "src/shop/pricing.py", lambda t: t + "\n# totals in cents\n"),
        prepare=audited)
    assert resolved == ["src/shop/__init__.py", "src/shop/cart.py", "src/shop/pricing.py", "tests/check_shop.py"]


def mirrored(root: Path) -> None:
    """A copy of the package under a second import root (a vendored copy, a monorepo's twin package): the same
    names in other files; an import in either tree resolves within it. The copy has one more module, importing
    a name its package does not have yet."""
    shutil.copytree(root / "src", root / "mirror" / "src")
    rewrite(root, "mirror/src/shop/payments/refund.py", lambda _: "from shop import price_total\n")


def renamed_in_mirror(root: Path) -> list[Path]:
    return rewrite(root, "mirror/src/shop/pricing.py", lambda t: t.replace("def total_price", "def price_total"))


# The mirror's pricing.py, the files whose imports bind it (cart.py imports from it, the package's __init__.py
# star-exports it), and refund.py two hops away (it imports the new name from the package: its edge moves).
IN_REACH_OF_MIRRORED_PRICING = ["mirror/src/shop/__init__.py", "mirror/src/shop/cart.py",
                                "mirror/src/shop/payments/refund.py", "mirror/src/shop/pricing.py"]


def relayed(root: Path) -> None:
    """The mirror, then a name only src/'s log.py defines, imported by a script from the package both trees hold
    (a tie: nothing bound) and from that script by another."""
    mirrored(root)
    rewrite(root, "src/shop/log.py", lambda t: t + "\n\ndef audit(message):\n    return message\n")
    rewrite(root, "tests/relay.py", lambda _: "from shop.log import audit\n")
    rewrite(root, "tests/check_relay.py", lambda _: "from relay import audit\n")


def test_a_tie_a_deletion_breaks_reaches_the_files_reading_through_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deleting the mirror's log.py leaves src/'s the only `shop.log`: relay.py's import binds it now, and
    check_relay.py's `audit`, read through relay.py, resolves to it, though check_relay.py names nothing the
    deleted file provided (the graph is checked against a full rebuild on the way)."""
    resolved = resolved_by_save(tmp_path, monkeypatch, lambda r: delete(r, "mirror/src/shop/log.py"), prepare=relayed)
    assert {"tests/relay.py", "tests/check_relay.py"} <= set(resolved)


def test_a_save_in_place_skips_files_whose_imports_cannot_reach_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """src/shop/cart.py and src/shop/__init__.py name `total_price` and `pricing` too, but their imports bind
    src/'s pricing.py, and tests/check_shop.py's `from shop import` is ambiguous between the two trees: a Python
    file's resolution reads other files only through what its imports bind, re-export by re-export, so the
    mirror's rename cannot change their edges and they are not resolved again."""
    resolved = resolved_by_save(tmp_path, monkeypatch, renamed_in_mirror, prepare=mirrored)
    assert resolved == IN_REACH_OF_MIRRORED_PRICING


def test_a_query_never_waits_for_a_large_workspace_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from codeloupe.graph import neighbours

    monkeypatch.setattr(graph_build, "QUERY_BUILD_MAX_FILES", 0)  # every workspace counts as large
    root = tmp_path / "python"
    shutil.copytree(FIXTURES / "python", root)
    ws = Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(tmp_path / "cache")})
    try:
        ws.index()
        assert neighbours(ws, ["src/shop/cart.py"]) == []  # no graph yet: answered without one
        graph_build._building[ws].join(60)  # ...while it builds on its own thread
        assert ("src/shop/log.py", "imported by src/shop/cart.py") in neighbours(ws, ["src/shop/cart.py"])
    finally:
        ws.close()


@pytest.mark.parametrize("damage", ["{not json", '{"go.mod": 7}', ""])
def test_a_damaged_record_of_configuration_files_is_rebuilt(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "go"
    shutil.copytree(FIXTURES / "go", root)
    cache = tmp_path / "warm"
    first = Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(cache)})
    first.index()
    expected = graph_facts(first)
    first.store.set_meta("graph_configs", damage)
    first.close()
    reopened = Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(cache)})
    try:
        assert graph_facts(reopened) == expected
        assert "go.mod" in json.loads(reopened.store.get_meta("graph_configs"))  # recorded again, whole
    finally:
        reopened.close()


def test_a_configuration_changed_while_closed_is_not_trusted(tmp_path: Path) -> None:
    root = tmp_path / "go"
    shutil.copytree(FIXTURES / "go", root)
    cache = tmp_path / "warm"
    first = Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(cache)})
    first.index()
    graph_facts(first)
    first.close()
    # The module is renamed: its own imports no longer name files of the workspace.
    rewrite(root, "go.mod", lambda t: t.replace("example.com/shop", "example.com/renamed"))
    reopened = Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(cache)})
    try:
        assert graph_facts(reopened) == rebuilt(root, tmp_path / "cold")
    finally:
        reopened.close()
