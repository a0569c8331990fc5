"""The note of a graph route is true of the whole route (issue 14: "meet in X, which both sides use" was said of
routes where one side does not use X)."""

from __future__ import annotations

from types import SimpleNamespace

from codeloupe.graph.model import Hop
from codeloupe.graph.query import _describe


def _route(*directions: str) -> tuple[SimpleNamespace, list[int], list[Hop]]:
    paths = [f"f{k}.py" for k in range(len(directions) + 1)]
    hops = [Hop(paths[k], paths[k + 1], "semantic" if d == "similar" else "import", d, [])
            for k, d in enumerate(directions)]
    return SimpleNamespace(paths=paths), list(range(len(paths))), hops


def test_meeting_in_the_middle_needs_every_hop_to_point_at_it() -> None:
    assert _describe(*_route("uses", "uses", "used-by")) == (
        True, "f0.py and f3.py never call each other; they meet in f2.py, which both sides use")
    assert _describe(*_route("used-by", "uses")) == (
        True, "f0.py and f2.py never call each other; they meet in f1.py, which uses both sides")


def test_a_mixed_route_never_claims_a_shared_middle() -> None:
    meets, note = _describe(*_route("uses", "used-by", "uses"))
    assert meets is False and "meet in" not in note and "mixed route" in note


def test_a_route_through_similar_files_says_so() -> None:
    meets, note = _describe(*_route("similar", "uses", "used-by"))
    assert meets is False and "read alike" in note and "meet in" not in note


def test_one_way_routes_name_who_uses_whom() -> None:
    assert _describe(*_route("uses", "uses"))[1] == "f0.py reaches f2.py through what it uses"
    assert _describe(*_route("used-by"))[1] == "f1.py reaches f0.py through what it uses"
