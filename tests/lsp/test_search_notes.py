"""The server's `notes` on a search (docs/protocol.md): a dense lane the user turned off says nothing, one that
is configured but has no vectors yet says the results match words only."""

from __future__ import annotations

from pathlib import Path

from codeloupe.api import Workspace
from codeloupe_lsp.convert import search_notes


def _workspace(root: Path, provider: str) -> Workspace:
    (root / "auth.py").write_text("def check_password(user, password):\n    return user.hash == password\n")
    ws = Workspace(root, overrides={"embed_provider": provider})
    ws.index()  # chunks only: no vectors are computed here
    return ws


def test_a_dense_lane_turned_off_by_the_user_gets_no_note(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "none")
    try:
        bundle = ws.search("check_password")
        assert [s.off for s in bundle.lanes if s.name == "dense"] == [True]
        assert search_notes(bundle) == []
    finally:
        ws.close()


def test_a_configured_dense_lane_without_vectors_yet_says_so(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "local")
    try:
        bundle = ws.search("check_password")
        [dense] = [s for s in bundle.lanes if s.name == "dense"]
        assert not dense.ready and not dense.off
        assert [n for n in search_notes(bundle) if n.startswith("dense lane not ready")], search_notes(bundle)
    finally:
        ws.close()
