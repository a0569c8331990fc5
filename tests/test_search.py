"""Retrieval end to end on a real index: lanes, fusion, issue mode, scope, docs mode, and the bundle."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.search import FILE_KINDS

FILES = {
    "app/auth.py": '''\
        """Authentication: password hashing and login sessions."""

        import hashlib

        from app.db import find_user


        def hash_password(password: str, salt: str) -> str:
            """Derive the stored hash of a password."""
            return hashlib.sha256((salt + password).encode()).hexdigest()


        def verify_password(user, password: str) -> bool:
            """Check a login attempt against the stored password hash."""
            return hash_password(password, user.salt) == user.password_hash


        class SessionManager:
            """Creates and expires login sessions."""

            def login(self, name: str, password: str):
                user = find_user(name)
                if user is None or not verify_password(user, password):
                    raise PermissionError("bad credentials")
                return self.open_session(user)

            def open_session(self, user):
                return {"user": user.name}
        ''',
    "app/db.py": '''\
        """Database access."""

        CONNECTION_URL = "sqlite:///app.db"


        def connect(url: str = CONNECTION_URL):
            """Open a database connection."""
            return object()


        def find_user(name: str):
            """Look a user up by name."""
            return None
        ''',
    "app/render.py": '''\
        """HTML rendering of templates."""


        def render_template(name: str, context: dict) -> str:
            """Render a named template with its context."""
            return name.format(**context)
        ''',
    "tests/test_auth.py": '''\
        from app.auth import verify_password


        def test_verify_password_rejects_wrong_password():
            assert not verify_password(None, "wrong password")
        ''',
    "README.md": '''\
        # Demo app

        ## Installing

        Run the installer, then configure the database connection URL.

        ## Passwords

        Passwords are hashed with a salt.
        ''',
    "web/server.js": '''\
        const express = require('express');

        function startServer(port) {
          const app = express();
          app.get('/health', (req, res) => res.send('ok'));
          return app.listen(port);
        }

        module.exports = { startServer };
        ''',
}


def write_files(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_files(tmp_path_factory.mktemp("repo"))


@pytest.fixture
def views_held(tmp_path: Path, lexical_workspace, monkeypatch: pytest.MonkeyPatch):
    """(workspace, searcher) over a copy of FILES of its own, its full snapshot built and the rebuild after a save
    held off: every search after a save reads the delta view until `searcher.refresh()`."""
    from codeloupe import ranking

    ws = lexical_workspace(write_files(tmp_path))
    searcher = ws.searcher()
    searcher.refresh()
    monkeypatch.setattr(ranking, "REBUILD_QUIET_S", 3600.0)
    return ws, searcher


@pytest.fixture
def ws(repo: Path, lexical_workspace) -> Workspace:
    return lexical_workspace(repo)


def paths(bundle) -> list[str]:
    return [h.path for h in bundle.files]


def test_identifier_query_finds_the_definition_first(ws: Workspace) -> None:
    bundle = ws.search("verify_password")
    assert paths(bundle)[0] == "app/auth.py"
    best = bundle.core[0].chunks
    assert any("def verify_password" in c.text for c in best)
    assert "symbol" in bundle.core[0].why
    assert "tests/test_auth.py" in paths(bundle)  # completeness: the test is a candidate, just lower


def test_natural_language_query_and_lane_report(ws: Workspace) -> None:
    bundle = ws.search("how are login sessions created")
    assert paths(bundle)[0] == "app/auth.py"
    lanes = {s.name: s for s in bundle.lanes}
    assert lanes["dense"].ready is False and "no embedding provider" in lanes["dense"].note
    assert lanes["lexical"].ready and lanes["symbol"].ready
    assert bundle.timing_ms["total"] > 0


def test_core_chunks_are_verbatim_and_related_is_a_map(ws: Workspace, repo: Path) -> None:
    bundle = ws.search("database connection")
    assert bundle.core, "a match must produce a CORE file"
    for hit in bundle.core:
        lines = (repo / hit.path).read_text().splitlines(keepends=True)
        for chunk in hit.chunks:
            assert chunk.text == "".join(lines[chunk.start_line - 1:chunk.end_line])
    for hit in bundle.related:
        assert all(c.text == "" for c in hit.chunks)
        assert hit.best_start_line >= 1 and hit.why
    ranks = [h.rank for h in bundle.files]
    assert ranks == list(range(1, len(ranks) + 1))


def test_docs_mode_scope_and_code_default(ws: Workspace) -> None:
    assert "README.md" not in paths(ws.search("running the database connection"))
    # a question about installing, versions or settings is also a question for the docs (the project lane)
    assert "README.md" in paths(ws.search("installing the database connection"))
    docs = ws.search("installing the database connection", mode="docs")
    assert paths(docs) == ["README.md"]
    assert docs.core[0].chunks[0].kind == "section"
    both = ws.search("passwords hashed with a salt", mode="both")
    assert {"README.md", "app/auth.py"} <= set(paths(both))
    scoped = ws.search("password", scope="tests")
    assert paths(scoped) == ["tests/test_auth.py"]


def test_a_long_question_about_the_docs_is_still_a_question(ws: Workspace) -> None:
    # Long enough to read as a bug report in code mode; a docs search never reads it so (its frames, pins and
    # entity lane point at code, which docs mode leaves out).
    question = ("Before the first run we followed the installing section, ran the installer and then tried to "
                "configure the database connection URL the way the readme describes, but we could not tell where "
                "the installer expects the URL to be written or whether passwords need a salt set beforehand")
    assert ws.search(question).issue_mode
    docs = ws.search(question, mode="docs")
    assert not docs.issue_mode
    assert paths(docs) == ["README.md"]
    assert "entity" not in {lane.name for lane in docs.lanes}


def test_issue_mode_grounds_traceback_frames_from_another_machine(ws: Workspace) -> None:
    report = textwrap.dedent('''\
        Login crashes with AttributeError when the user has no salt

        Steps: create a user without a salt, call SessionManager.login with any password.

        Traceback (most recent call last):
          File "/home/someone/checkout/app/web.py", line 88, in handle
            session = manager.login(name, password)
          File "/home/someone/checkout/app/auth.py", line 22, in login
            if user is None or not verify_password(user, password):
          File "/home/someone/checkout/app/auth.py", line 14, in verify_password
            return hash_password(password, user.salt) == user.password_hash
        AttributeError: 'NoneType' object has no attribute 'salt'

        Expected a clean PermissionError instead of a crash in `verify_password`.
        ''')
    bundle = ws.search(report)
    assert bundle.issue_mode
    assert paths(bundle)[0] == "app/auth.py"
    assert "traceback frame" in bundle.core[0].why


def test_javascript_and_unmatched_queries(ws: Workspace) -> None:
    assert paths(ws.search("startServer port"))[0] == "web/server.js"
    empty = ws.search("zzzqqq xyzzy")
    assert empty.core == [] and empty.related == []


def test_new_content_is_searchable_after_update(ws: Workspace, repo: Path) -> None:
    path = repo / "app/billing.py"
    path.write_text("def charge_invoice(customer, amount):\n    return amount\n")
    try:
        ws.update_files([path])
        assert paths(ws.search("charge_invoice"))[0] == "app/billing.py"
    finally:
        path.unlink()
        ws.update_files([path])
    assert "app/billing.py" not in paths(ws.search("charge_invoice"))


def test_cli_search_json(repo: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "codeloupe", "search", str(repo), "render a template", "--json",
         "--embed-provider", "none"],
        capture_output=True, text=True, check=True,
    )
    data = json.loads(out.stdout)
    assert data["core"][0]["path"] == "app/render.py"
    assert {"start_line", "end_line"} <= set(data["core"][0]["chunks"][0])
    assert "total" in data["timing_ms"] and isinstance(data["related"], list)


def test_cli_search_shows_every_code_line_whole_when_piped(tmp_path: Path) -> None:
    """Rule 5: shown code is the file's. A pipe gives rich an 80-column console, where code would be cropped
    (a line the file does not have) or wrapped (a line grep cannot find); piped code comes line by line as the
    file has it, numbered, rich markup and all."""
    long_line = "    return " + " + ".join(f"weight_{i}" for i in range(30)) + " + final_ledger_total"
    markup = '    label = "[bold]total[/bold] :smile:"'
    (tmp_path / "ledger.py").write_text(f"def ledger_sum():\n{markup}\n{long_line}\n")
    out = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(tmp_path), "ledger sum",
                          "--embed-provider", "none"], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert f"2  {markup}" in lines and f"3  {long_line}" in lines and "1  def ledger_sum():" in lines


def test_cli_search_shows_a_repositorys_names_and_control_characters_as_text(tmp_path: Path) -> None:
    """Rule 6: a file named like a rich closing tag (`d[/x].py`) crashed the search's output, and escape
    sequences in code or names went to the terminal as they were (a title set, colours changed). Both come out
    as text; the JSON keeps the bytes."""
    (tmp_path / "d[").mkdir()
    (tmp_path / "d[" / "x].py").write_text('def ledger_sum():\n    title = "\x1b]0;owned\x07\x1b[31mred"\n')
    for piped in (True, False):
        env = {**os.environ, "TTY_COMPATIBLE": "0" if piped else "1", "COLUMNS": "200"}
        out = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(tmp_path), "ledger sum",
                              "--embed-provider", "none"], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        shown = out.stdout if piped else re.sub("\x1b\\[[0-9;]*m", "", out.stdout)  # rich's own colours
        assert "d[/x].py" in shown and r"\x1b]0;owned\x07\x1b[31mred" in shown, shown
        assert "\x1b]0;owned" not in out.stdout and "\x07" not in out.stdout  # no sequence reached the terminal
        assert "\x1b[31mred" not in out.stdout
    data = json.loads(subprocess.run([sys.executable, "-m", "codeloupe", "search", str(tmp_path), "ledger sum",
                                      "--embed-provider", "none", "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    assert "\x1b]0;owned\x07" in data["core"][0]["chunks"][0]["text"]


def test_cli_errors(tmp_path: Path) -> None:
    missing = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(tmp_path / "nope"), "x"],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "no such directory" in missing.stderr
    file = tmp_path / "f.py"
    file.write_text("x = 1\n")
    not_dir = subprocess.run([sys.executable, "-m", "codeloupe", "index", str(file)], capture_output=True, text=True)
    assert not_dir.returncode == 2 and "not a directory" in not_dir.stderr


def test_frames_are_read_innermost_first() -> None:
    from codeloupe.issue import frames

    python = 'Traceback:\n  File "/x/app/web.py", line 3, in a\n  File "/x/app/auth.py", line 9, in b\nKeyError\n'
    assert [f.path for f in frames(python)] == ["/x/app/auth.py", "/x/app/web.py"]
    go = "panic: boom\n\ngoroutine 1 [running]:\nmain.inner()\n\t/src/app/tree.go:245 +0x1\nmain.outer()\n\t/src/app/gin.go:331 +0x2\n"
    assert [f.path for f in frames(go)] == ["/src/app/tree.go", "/src/app/gin.go"]
    assert frames('  File "a.py", line 7, in f\n')[0].function == "f"


def test_changed_files_are_searched_beside_the_last_full_snapshot(ws: Workspace, repo: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from codeloupe import ranking

    searcher = ws.searcher()
    searcher.refresh()
    monkeypatch.setattr(ranking, "REBUILD_QUIET_S", 3600.0)  # keep the background rebuild out of the way
    base = searcher.snapshot()
    (repo / "app/render.py").write_text("def paint_canvas(brush):\n    return brush\n")
    (repo / "app/extra.py").write_text("def mix_colours(a, b):\n    return a\n")
    try:
        ws.update_files([repo / "app/render.py", repo / "app/extra.py"])
        view = searcher.snapshot()
        assert view.base is base and view.pending_files == 0
        assert paths(ws.search("paint_canvas brush"))[0] == "app/render.py"
        assert paths(ws.search("mix_colours"))[0] == "app/extra.py"
        assert "app/render.py" not in paths(ws.search("named template context"))  # the old text is gone
        delta_top = paths(ws.search("paint canvas brush mix colours"))
        searcher.refresh()
        assert searcher.snapshot().base is None
        assert paths(ws.search("paint canvas brush mix colours")) == delta_top
        # A bulk change waits for the rebuild and says so instead of re-tokenising on the query path.
        monkeypatch.setattr(ranking, "DELTA_MAX_FILES", 0)
        (repo / "app/extra.py").write_text("def blend_colours(a, b):\n    return b\n")
        ws.update_files([repo / "app/extra.py"])
        bundle = ws.search("blend_colours")
        assert "app/extra.py" not in paths(bundle)
        assert any("join the index shortly" in lane.note for lane in bundle.lanes)
        assert "1 changed files join the index shortly; this answer lacks them until then" in bundle.notes
        searcher.refresh()
        assert paths(ws.search("blend_colours"))[0] == "app/extra.py"
    finally:
        (repo / "app/render.py").write_text(textwrap.dedent(FILES["app/render.py"]))
        (repo / "app/extra.py").unlink()
        ws.update_files([repo / "app/render.py", repo / "app/extra.py"])


def test_a_delta_views_maps_are_a_full_snapshots_of_the_same_state(tmp_path: Path, lexical_workspace,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The delta view after a save patches the base snapshot's per-file maps instead of building them anew
    (1.7 s of the first query after every save at 40K files): what it holds for the live rows and files is
    what a full snapshot of the same index holds, after an edit, a new file, a deleted file and a file that
    took a name another file has."""
    from codeloupe import ranking

    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/guide.md").write_text("# Guide\n\nHow to render a template.\n")
    ws = lexical_workspace(tmp_path)
    searcher = ws.searcher()
    searcher.refresh()
    monkeypatch.setattr(ranking, "REBUILD_QUIET_S", 3600.0)
    base = searcher.snapshot()
    (tmp_path / "app/render.py").write_text("def paint_canvas(brush):\n    return brush\n")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/auth.py").write_text("def second_auth():\n    return 2\n")  # a basename app/ has too
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests/test_new.py").write_text("def test_new():\n    assert True\n")
    (tmp_path / "cmd").mkdir()
    (tmp_path / "cmd/main.go").write_text("package main\n\nfunc main() {}\n")  # a language the base had not
    deleted = next(rel for rel in FILES if rel != "app/render.py" and rel != "app/auth.py")
    (tmp_path / deleted).unlink()
    ws.update_files([tmp_path / "app/render.py", tmp_path / "lib/auth.py", tmp_path / "tests/test_new.py",
                     tmp_path / "cmd/main.go", tmp_path / deleted])
    view = searcher.snapshot()
    assert view.base is base and view.pending_files == 0
    full = searcher._build_snapshot(view.generation)

    def by_file(snap):
        return {snap.file_paths[f]: sorted(int(snap.table.ids[r]) for r in rows)
                for f, rows in snap.file_chunk_rows.items()}

    def rows_of(snap):
        live = np.ones(len(snap.table.ids), bool) if snap.live is None else snap.live
        t = snap.table
        return sorted((int(t.ids[r]), snap.chunk_paths[r], bool(snap.chunk_is_doc[r]), int(snap.chunk_kind[r]),
                       t.kinds[r], t.names[r], t.breadcrumbs[r], t.symbols[r], int(t.start_lines[r]))
                      for r in np.flatnonzero(live))

    for name in ("file_paths", "file_languages", "file_is_doc", "file_kind", "path_to_file"):
        assert getattr(view, name) == getattr(full, name), name

    def languages_of(snap):  # each live row's language as `related` reads it
        names, codes = snap.chunk_languages()
        live = np.ones(len(snap.table.ids), bool) if snap.live is None else snap.live
        return sorted((int(snap.table.ids[r]), names[codes[r]]) for r in np.flatnonzero(live))

    assert languages_of(view) == languages_of(full) and ("go" in dict(languages_of(view)).values())
    assert (view.chunk_languages()[1][~view.live] == -1).all()
    assert {k: sorted(v) for k, v in view.by_basename.items()} == {k: sorted(v) for k, v in full.by_basename.items()}
    assert sorted(view.by_basename["auth.py"]) == ["app/auth.py", "lib/auth.py"]
    assert by_file(view) == by_file(full) and deleted not in by_file(view)
    assert rows_of(view) == rows_of(full)
    dead = np.flatnonzero(~view.live)  # the rows of the edited and the deleted file in the base
    assert len(dead) > 0 and [view.chunk_paths[r] for r in dead] == [""] * len(dead)
    assert list(view.chunk_paths) == [view.chunk_paths[r] for r in range(len(view.table.ids))]
    for scope in ("app", "lib", "tests", deleted):  # a scope is by file: the same rows as a full snapshot's
        assert {int(i) for i in view.table.ids[searcher._mask(view, scope, "all")]} == \
            {int(i) for i in full.table.ids[searcher._mask(full, scope, "all")]}
    assert view.table.ids[searcher._mask(view, "lib", "all")].size > 0
    assert view.table.symbols.many([0, len(view.table.ids) - 1]) == [view.table.symbols[0], view.table.symbols[-1]]
    assert view.file_kind[view.path_to_file["tests/test_new.py"]] == FILE_KINDS.index("test")


# Questions that rank files by their whole text or their skeletons (the file and summary lanes) as much as by
# their chunks.
SAVED_FILE_QUESTIONS = ["how are passwords hashed and checked at login", "password hash salt",
                        "open a database connection and look a user up", "render a template with its context",
                        "login session", "start the server and answer health checks"]


def test_files_saved_a_moment_ago_rank_as_after_the_rebuild(tmp_path: Path, views_held) -> None:
    """Right after a save the delta view answers; the files just saved must score as the full snapshot of the
    same files scores them, not lower because the file-level lanes (the file's whole text, its skeleton and
    neighbours' words) had only the base's (the public set, every gold file saved: R@1 0.45 from the view
    against 0.925 after the rebuild; `bench/view_quality.py`)."""
    ws, searcher = views_held
    saved = ["app/auth.py", "app/db.py", "app/render.py"]
    for rel in saved:
        with (tmp_path / rel).open("a") as fh:
            fh.write("\n# reviewed\n")
    ws.update_files([tmp_path / rel for rel in saved])
    assert searcher.snapshot().base is not None

    def saved_files_scores() -> list[dict[str, float]]:
        return [{f.path: round(f.score, 3) for f in ws.search(q).files if f.path in saved}
                for q in SAVED_FILE_QUESTIONS]

    from_view = saved_files_scores()
    searcher.refresh()
    assert searcher.snapshot().base is None
    assert from_view == saved_files_scores()


BUG_REPORT = """verify_password fails for every user after the accounts change

Traceback (most recent call last):
  File "app/auth.py", line 24, in login
    user = find_account(name)
NameError: name 'find_account' is not defined
"""


def test_a_bug_report_after_a_save_reads_only_the_saved_files_definitions(
        tmp_path: Path, views_held, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entity lane of a delta view stands on its base's: only the files saved since are read and tokenised
    (every file's definitions were, at the first bug report after every save: 7-9 s at 40K files), and the saved
    file scores as after the rebuild."""
    from codeloupe import search as search_module

    ws, searcher = views_held
    ws.search(BUG_REPORT)  # the base's entity index built
    read: list[list[str]] = []
    real = search_module.build_entity_index

    def reading(file_paths, store, **options):
        read.append(sorted(file_paths.values()))
        return real(file_paths, store, **options)

    monkeypatch.setattr(search_module, "build_entity_index", reading)
    db = tmp_path / "app/db.py"
    db.write_text(db.read_text().replace("def find_user", "def find_account"))
    ws.update_files([db])
    assert searcher.snapshot().base is not None

    def db_rank_and_score() -> tuple[int, float]:
        files = ws.search(BUG_REPORT).files
        return next((rank, f.score) for rank, f in enumerate(files) if f.path == "app/db.py")

    rank, score = db_rank_and_score()
    assert read == [["app/db.py"]]
    monkeypatch.setattr(search_module, "build_entity_index", real)
    searcher.refresh()
    assert searcher.snapshot().base is None
    # the same place; the score within what the base's statistics (the old version's words counted) move
    assert db_rank_and_score() == (rank, pytest.approx(score, abs=0.01))


def test_each_save_s_view_knows_the_files_the_index_holds(tmp_path: Path, views_held) -> None:
    """A view after a save starts from the previous view's file ids and reads only what changed since: over
    edits, a new file, a deletion and a file that comes back, every view holds the ids the index holds and the
    rows and files of a full snapshot of the same state."""
    ws, searcher = views_held
    base = searcher.snapshot()
    render = tmp_path / "app/render.py"
    steps = [(render, "def paint_canvas(brush):\n    return brush\n"),
             (tmp_path / "app/extra.py", "def blend_colours(a, b):\n    return a\n"),
             (tmp_path / "app/extra.py", None),
             (render, "def paint_canvas(brush, colour):\n    return brush\n"),
             (tmp_path / "app/extra.py", "def blend_colours(a, b, c):\n    return c\n")]
    for path, text in steps:
        if text is None:
            path.unlink()
        else:
            path.write_text(text)
        ws.update_files([path])
        view = searcher.snapshot()
        assert view.base is base
        assert view.indexed.ids.tolist() == ws.store.file_ids().tolist()
        full = searcher._build_snapshot(view.generation)
        assert dict(view.file_paths) == full.file_paths
        assert {int(i) for i in view.table.ids[view.live]} == {int(i) for i in full.table.ids}
    assert paths(ws.search("blend_colours"))[0] == "app/extra.py"


def test_the_lexical_index_is_reused_by_the_next_process_only_for_the_same_state(repo: Path) -> None:
    first = Workspace(repo, overrides={"embed_provider": "none"})
    first.index()
    expected = paths(first.search("database connection"))
    saved = first.store.path.with_name(first.store.path.name + ".bm25.npz")
    assert saved.is_file()
    stamp = saved.stat().st_mtime_ns
    first.close()
    again = Workspace(repo, overrides={"embed_provider": "none"})
    assert paths(again.search("database connection")) == expected
    assert saved.stat().st_mtime_ns == stamp  # loaded, not rebuilt
    saved.write_bytes(b"truncated")  # a damaged file is rebuilt, never trusted
    fresh = Workspace(repo, overrides={"embed_provider": "none"})
    assert paths(fresh.search("database connection")) == expected
    again.close()
    fresh.close()


def test_search_symbols_returns_the_definitions_of_matching_chunks(ws: Workspace) -> None:
    found = ws.search_symbols("verify_password")
    assert found[0][0] == "app/auth.py"  # the defining file first, the test that calls it later
    symbol = next(s for p, s in found if p == "app/auth.py" and s.name == "verify_password")
    lines = (ws.root / "app/auth.py").read_text().splitlines()
    assert lines[symbol.start_line - 1].startswith("def verify_password")


def test_cli_search_with_an_unreachable_embedding_endpoint_degrades_to_lexical(repo: Path) -> None:
    env = {**os.environ, "CODELOUPE_EMBED_PROVIDER": "openai", "CODELOUPE_EMBED_BASE_URL": "http://127.0.0.1:9/v1"}
    out = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(repo), "render a template", "--json"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "warning: no vectors computed" in out.stderr and "127.0.0.1:9" in out.stderr
    data = json.loads(out.stdout)
    assert data["core"][0]["path"] == "app/render.py"
    assert {lane["name"]: lane["ready"] for lane in data["lanes"]}["dense"] is False


def test_rewriting_the_newest_file_replaces_its_chunks_in_search(tmp_path: Path, lexical_workspace) -> None:
    """SQLite hands a deleted row's id back when it was the largest: the delta view must not mistake the
    rewritten file for the unchanged one it replaced (a save would keep serving the old text)."""
    (tmp_path / "a.py").write_text("def zebra_stripes():\n    return 1\n")
    ws = lexical_workspace(tmp_path)
    assert paths(ws.search("zebra_stripes")) == ["a.py"]
    (tmp_path / "a.py").write_text("def giraffe_neck():\n    return 2\n")
    ws.update_files([tmp_path / "a.py"])
    found = ws.search("giraffe_neck")
    assert paths(found) == ["a.py"]
    assert "giraffe_neck" in found.core[0].chunks[0].text
    assert paths(ws.search("zebra_stripes")) == []


def test_a_query_during_the_first_refresh_waits_for_it_instead_of_building_a_second_snapshot(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from codeloupe.search import Searcher

    ws = Workspace(repo)
    ws.index()
    searcher = ws.searcher()
    builds: list[int] = []
    entered = threading.Event()
    build = Searcher._build_snapshot

    def slow_build(self: Searcher, generation: int, *rest: object):
        builds.append(generation)
        entered.set()
        time.sleep(0.3)  # a real tree takes seconds: long enough for the first query to arrive meanwhile
        return build(self, generation, *rest)

    monkeypatch.setattr(Searcher, "_build_snapshot", slow_build)
    warming = threading.Thread(target=searcher.refresh)  # the server warms its readers on the writer thread
    warming.start()
    try:
        assert entered.wait(10)
        assert paths(ws.search("find_user"))  # the editor's first search, sent at start-up
    finally:
        warming.join()
    assert len(builds) == 1, f"the full snapshot was built {len(builds)} times at start-up"


def test_closing_a_workspace_stops_its_pending_snapshot_rebuild(tmp_path: Path, lexical_workspace,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A save schedules a rebuild for when the index is quiet; a workspace closed meanwhile (an editor folder
    closed, a test finishing) must not have that thread read the closed index and print its failure."""
    import threading

    from codeloupe import ranking

    monkeypatch.setattr(ranking, "REBUILD_QUIET_S", 0.3)
    monkeypatch.setattr(ranking, "PENDING_QUIET_S", 0.3)
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.py").write_text("def first_thing():\n    return 1\n")
    ws = lexical_workspace(tmp_path / "repo")
    ws.search("first thing")
    (tmp_path / "repo" / "a.py").write_text("def second_thing():\n    return 2\n")
    ws.update_files([tmp_path / "repo" / "a.py"])
    assert paths(ws.search("second_thing")) == ["a.py"]  # a delta view: the rebuild is pending
    rebuilds = [t for t in threading.enumerate() if t.name == "codeloupe-snapshot-rebuild"]
    assert rebuilds
    ws.close()
    for thread in rebuilds:
        thread.join(5)
        assert not thread.is_alive()
    assert "rebuilding the search snapshot failed" not in caplog.text


def test_catching_up_after_a_few_changed_files_searches_them_at_once_and_rebuilds_later(
        tmp_path: Path, lexical_workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """An editor's start-up refresh that finds a few files changed while it was closed must not rebuild the
    whole snapshot on its writer (a minute at 40K files, every save queued behind it): the changed files are
    searched beside the loaded snapshot, the full one follows in the background; a bulk change rebuilds now."""
    from codeloupe import ranking

    monkeypatch.setattr(ranking, "REBUILD_QUIET_S", 3600.0)  # keep the background rebuild out of the way
    (tmp_path / "repo").mkdir()
    for i in range(4):
        (tmp_path / "repo" / f"m{i}.py").write_text(f"def handler_{i}(event):\n    return event\n")
    ws = lexical_workspace(tmp_path / "repo")
    try:
        searcher = ws.searcher()
        ws.warm(graph=False)
        loaded = searcher.snapshot()
        assert loaded.base is None
        (tmp_path / "repo" / "fresh.py").write_text("def zqx_closed_editor_change():\n    return 1\n")
        ws.index()
        ws.warm(graph=False)
        view = searcher.snapshot()
        assert view.base is loaded and view.pending_files == 0  # not rebuilt on the writer
        assert paths(ws.search("zqx_closed_editor_change"))[0] == "fresh.py"
        monkeypatch.setattr(ranking, "DELTA_MAX_FILES", 0)  # a bulk change: rebuilt now, as before
        (tmp_path / "repo" / "bulk.py").write_text("def zqx_bulk_change():\n    return 2\n")
        ws.index()
        ws.warm(graph=False)
        assert searcher.snapshot().base is None
        assert paths(ws.search("zqx_bulk_change"))[0] == "bulk.py"
    finally:
        ws.close()


def test_a_scope_keeps_exactly_the_files_at_or_under_its_folder(tmp_path: Path, lexical_workspace,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A scope is found by bisecting the snapshot's sorted paths, not by a loop over every file: the files it
    keeps are those whose path is the scope or starts with it and a slash, never a sibling that only shares
    its first letters ("app-extra", "app.py", "app0"), in a full snapshot and in a view after a save."""
    from codeloupe import ranking

    names = ["app/a.py", "app/sub/b.py", "app-extra/c.py", "app.py", "app0/d.py", "apps/e.py", "ap/f.py",
             "zeta/ü/g.py", "zeta/h.py", "top.py"]
    for rel in names:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"def shared_word_{rel.count('/')}():\n    return 'shared'\n")
    ws = lexical_workspace(tmp_path)
    searcher = ws.searcher()
    searcher.refresh()
    monkeypatch.setattr(ranking, "REBUILD_QUIET_S", 3600.0)

    def kept(snap, scope: str) -> set[str]:
        return {snap.chunk_paths[int(r)] for r in np.flatnonzero(searcher._mask(snap, scope, "all"))}

    def expected(snap, scope: str) -> set[str]:
        folder = scope.strip("/")
        return {p for p in snap.file_paths.values() if p == folder or p.startswith(folder + "/")}

    scopes = ["app", "app/", "/app/sub", "app.py", "app0", "ap", "zeta/ü", "zeta", "top.py", "nowhere", "a"]
    full = searcher.snapshot()
    for scope in scopes:
        assert kept(full, scope) == expected(full, scope), scope
    assert kept(full, "app") == {"app/a.py", "app/sub/b.py"} and kept(full, "app.py") == {"app.py"}
    (tmp_path / "app/new.py").write_text("def shared_word_new():\n    return 'shared'\n")
    (tmp_path / "app-extra/c.py").unlink()
    (tmp_path / "zeta/h.py").write_text("def shared_word_changed():\n    return 'shared'\n")
    ws.update_files([tmp_path / "app/new.py", tmp_path / "app-extra/c.py", tmp_path / "zeta/h.py"])
    view = searcher.snapshot()
    assert view.base is full
    for scope in scopes:
        assert kept(view, scope) == expected(view, scope), scope
    assert "app/new.py" in kept(view, "app") and not kept(view, "app-extra")
    assert paths(ws.search("shared_word_new", scope="app"))[0] == "app/new.py"


def test_search_symbols_lists_the_definitions_the_query_names_first(tmp_path: Path) -> None:
    """A file's definitions came in their order in it: `OptionParser` listed the module's `V = TypeVar(...)`
    ahead of `_OptionParser`, the one asked for (seen through Neovim's workspace-symbol list)."""
    (tmp_path / "parser.py").write_text(
        "import typing as t\n\nV = t.TypeVar('V')\n\n\ndef split_opt(opt):\n    return opt[:1], opt[1:]\n\n\n"
        "class _OptionParser:\n    '''Parses command line options.'''\n\n    def parse_args(self, args):\n"
        "        return split_opt(args[0])\n")
    ws = Workspace(tmp_path, overrides={"embed_provider": "none"})
    try:
        ws.index()
        names = [s.name for _, s in ws.search_symbols("OptionParser")]
        assert names[0] == "_OptionParser" and "V" in names  # first, and nothing dropped
    finally:
        ws.close()


def test_a_snapshot_s_maps_do_not_depend_on_how_large_its_file_ids_are() -> None:
    """A shared index hands out file ids across every repository and never twice, so a repository indexed late
    has large ids for its few files. The per-chunk maps were built through arrays indexed by the id itself, as
    long as the largest id (an object array of ~100M entries, seconds, for a repository of 2,500 files; ids as
    large as here could not be searched at all); they are the same with the ids shifted, rows of a file the
    snapshot does not hold included."""
    from codeloupe.search import _assemble
    from codeloupe.store import ChunkTable, FileRow, JsonLists

    def assembled(shift: int):  # noqa: ANN202 - a Snapshot
        files = [FileRow(id=shift + i, path=path, hash="h", language=language, size=1, mtime=0.0, is_doc=doc,
                         chunker_version=1, line_count=9)
                 for i, path, language, doc in ((7, "src/b.py", "python", False), (3, "README.md", "markdown", True),
                                                (5, "web/a.js", "javascript", False))]
        chunk_files = np.array([5, 3, 7, 7, 11, 5, 3], np.int64) + shift  # 11: no longer a file of the index
        n = len(chunk_files)
        table = ChunkTable(ids=np.arange(n, dtype=np.int64), file_ids=chunk_files,
                           start_lines=np.zeros(n, np.int32), end_lines=np.ones(n, np.int32), kinds=["function"] * n,
                           names=[""] * n, breadcrumbs=[""] * n, symbols=JsonLists(["[]"] * n), texts=None)
        return _assemble(1, table, files, bm25=None, symbols=None, kinds={shift + 7: 2, shift + 5: 1})

    small, large = assembled(0), assembled(2**62)
    assert small.chunk_paths == ["web/a.js", "README.md", "src/b.py", "src/b.py", "", "web/a.js", "README.md"]
    assert large.chunk_paths == small.chunk_paths
    assert large.chunk_is_doc.tolist() == small.chunk_is_doc.tolist() == [False, True, False, False, False, False,
                                                                          True]
    assert large.chunk_kind.tolist() == small.chunk_kind.tolist() == [1, 0, 2, 2, 0, 1, 0]
    assert {f - 2**62: rows for f, rows in large.file_chunk_rows.items()} == small.file_chunk_rows == \
        {3: [1, 6], 5: [0, 5], 7: [2, 3]}
    languages, of_chunk = large.chunk_languages()
    assert (languages, of_chunk.tolist()) == (small.chunk_languages()[0], small.chunk_languages()[1].tolist())
    assert [languages[i] if i >= 0 else None for i in of_chunk.tolist()] == \
        ["javascript", "markdown", "python", "python", None, "javascript", "markdown"]
