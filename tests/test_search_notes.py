"""A bundle's `notes` (docs/protocol.md): a dense lane the user turned off says nothing, one that
is configured but has no vectors yet says the results match words only."""

from __future__ import annotations

from pathlib import Path

from codeloupe.api import Workspace


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
        assert bundle.notes == []
    finally:
        ws.close()


def test_a_configured_dense_lane_without_vectors_yet_says_so(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "local")
    try:
        bundle = ws.search("check_password")
        [dense] = [s for s in bundle.lanes if s.name == "dense"]
        assert not dense.ready and not dense.off
        assert [n for n in bundle.notes if n.startswith("dense lane not ready")], bundle.notes
    finally:
        ws.close()


def test_the_cli_prints_the_notes_with_the_results(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "auth.py").write_text("def check_password(user, password):\n    return user.hash == password\n")
    out = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(tmp_path), "zzqx unmatched words",
                          "--embed-provider", "none"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "note: nothing in the workspace matches the query" in out.stdout


def test_a_scope_that_names_nothing_indexed_says_so(tmp_path: Path) -> None:
    """A mistyped `--scope` answered "nothing in the workspace matches the query", as if the words were absent."""
    (tmp_path / "pkg").mkdir()
    ws = _workspace(tmp_path / "pkg", "none")
    try:
        assert ws.search("check_password", scope="nope").notes == [
            "no indexed file lies under 'nope': the scope names no folder or file of the index"]
        assert ws.search("check_password", scope="auth.py").files  # a file is a scope too
        # A scope of thousands of characters (a client's: MCP and HTTP take 4,096) is named by its start only.
        assert ws.search("check_password", scope="nope/" * 800).notes == [
            f"no indexed file lies under '{'nope/' * 40}…': the scope names no folder or file of the index"]
        assert ws.search("unrelated_words_nowhere", scope="auth.py").notes == [
            "nothing in the workspace matches the query"]
    finally:
        ws.close()


def test_an_empty_index_does_not_say_its_vectors_are_being_computed(tmp_path: Path) -> None:
    """A folder with nothing to index answered 'dense lane not ready (vectors are still being computed)'."""
    (tmp_path / "README").write_bytes(b"\x00\x01binary")  # nothing indexable
    ws = Workspace(tmp_path, overrides={"embed_provider": "local"})
    try:
        ws.index()
        bundle = ws.search("anything at all")
        assert bundle.notes == ["no file is indexed in the workspace: it holds no file codeloupe reads"]
        assert [(s.ready, s.note) for s in bundle.lanes if s.name == "dense"] == [(True, "nothing indexed to embed")]
    finally:
        ws.close()


def test_the_cli_says_an_empty_folder_has_nothing_indexed(tmp_path: Path, capsys) -> None:
    """It said "nothing in the workspace matches the query", as if files were there without the words."""
    from codeloupe.cli import main

    (tmp_path / "empty").mkdir()
    assert main(["search", str(tmp_path / "empty"), "anything", "--embed-provider", "none"]) == 0
    out = capsys.readouterr().out
    assert "note: no file is indexed in the workspace: it holds no file codeloupe reads" in out
    assert "matches the query" not in out
