"""A start after files changed while no process had the index open (a `git pull` with the editor closed): the
next process searches the snapshot the last one saved, for the state before the changes, with the changed files
beside it, as after a save, instead of re-tokenising every chunk before its first answer (86-104 s at 40K files).
What it answers must be what a full rebuild holds: no row of a changed, deleted or renamed file's old content,
every new file; the full snapshot follows in the background. Saved files that are damaged, or not of one and
the same earlier state, are never a base."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from codeloupe import ranking
from codeloupe.api import Workspace
from codeloupe.snapshot_file import snapshot_file

FILES = {
    "pkg/models.py": '''\
        class Account:
            def check_password(self, password):
                return password == "secret"
        ''',
    "pkg/cli.py": '''\
        def parse_arguments(argv):
            """Parse the command line arguments."""
            return list(argv)
        ''',
    "pkg/mailer.py": '''\
        def send_welcome_mail(address):
            return f"welcome {address}"
        ''',
    "web/routes.js": '''\
        function registerRoutes(app) {
          app.get('/health', (req, res) => res.send('ok'));
        }
        ''',
    "docs/guide.md": "# Guide\n\nAccounts check the password before a session opens.\n",
}


def _open(root: Path, *, interim_answers: bool = False) -> Workspace:
    return Workspace(root, overrides={"embed_provider": "none"}, interim_answers=interim_answers)


def _start(root: Path) -> Workspace:
    """What the server does as it opens a folder: bring the index up to date, then the searcher."""
    ws = _open(root, interim_answers=True)
    ws.index()
    ws.warm(graph=False)
    return ws


@pytest.fixture
def closed_after_changes(make_tree, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tree searched once (which saves the snapshot), then changed with no process open: an edit, a deletion,
    a rename and a new file."""
    monkeypatch.setattr(ranking, "REBUILD_QUIET_S", 3600.0)  # the background rebuild: only where a test waits
    root = make_tree(FILES)
    ws = _start(root)
    ws.search("password")
    ws.close()
    (root / "pkg/cli.py").write_text("def tokenize_input(text):\n    return text.split()\n")
    (root / "web/routes.js").unlink()
    (root / "pkg/mailer.py").rename(root / "pkg/notify.py")
    (root / "pkg/audit.py").write_text("def record_login_attempt(user):\n    return user\n")
    return root


def _paths(ws: Workspace, query: str) -> list[str]:
    return [hit.path for hit in ws.search(query).files]


def _live(snap) -> dict[str, list[int]]:
    """Each file's chunk ids among the rows a query can reach."""
    live = np.ones(len(snap.table.ids), bool) if snap.live is None else snap.live
    found: dict[str, list[int]] = {}
    for row in np.flatnonzero(live):
        found.setdefault(snap.chunk_paths[int(row)], []).append(int(snap.table.ids[row]))
    return found


def _rebuilt(root: Path) -> tuple[dict[str, list[int]], dict[str, list[str]]]:
    """The rows, and answers, of a snapshot built from the store alone (the saved files moved aside)."""
    ws = _open(root)
    saved = [p for p in ws.store.path.parent.iterdir() if p.name.endswith(".npz")]
    for path in saved:
        path.replace(path.with_name(path.name + ".aside"))
    try:
        snap = ws.searcher().snapshot()
        assert snap.base is None
        return _live(snap), {q: _paths(ws, q) for q in QUERIES}
    finally:
        ws.close()
        for path in saved:
            path.with_name(path.name + ".aside").replace(path)


QUERIES = ("tokenize_input", "parse_arguments", "send_welcome_mail", "registerRoutes", "record_login_attempt",
           "check the password")


def test_a_start_searches_the_earlier_snapshot_beside_the_changed_files(closed_after_changes: Path) -> None:
    ws = _start(closed_after_changes)
    try:
        view = ws.searcher().snapshot()
        assert view.base is not None and view.base.generation < view.generation  # not re-tokenised on start
        answers = {q: _paths(ws, q) for q in QUERIES}
        rows = _live(view)
    finally:
        ws.close()
    assert answers["tokenize_input"][0] == "pkg/cli.py"
    assert answers["send_welcome_mail"][0] == "pkg/notify.py"
    assert answers["record_login_attempt"][0] == "pkg/audit.py"
    assert "pkg/cli.py" not in answers["parse_arguments"]
    assert not any({"web/routes.js", "pkg/mailer.py"} & set(found) for found in answers.values())
    expected_rows, expected_answers = _rebuilt(closed_after_changes)
    assert rows == expected_rows
    assert [found[:1] for found in answers.values()] == [found[:1] for found in expected_answers.values()]


def test_the_full_snapshot_follows_in_the_background_and_is_saved_for_the_new_state(
        closed_after_changes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "REBUILD_QUIET_S", 0.05)
    ws = _start(closed_after_changes)
    try:
        searcher = ws.searcher()
        assert searcher.snapshot().base is not None
        deadline = time.monotonic() + 30
        while searcher.snapshot().base is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        full = searcher.snapshot()
        assert full.base is None and full.generation == ws.store.generation("content")
        saved = str(np.load(snapshot_file(ws.store.path))["__stamp__"])
        assert saved.endswith(f":{ws.store.index_id}:{full.generation}")
        assert _live(full) == _rebuilt(closed_after_changes)[0]
    finally:
        ws.close()


def test_a_start_after_a_bulk_change_answers_at_once_and_says_which_files_are_not_in_yet(
        closed_after_changes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More changed files than a view takes in (`DELTA_MAX_FILES`): the first queries are answered from the
    earlier snapshot without the changed files' old rows, saying how many are still to come, while the start-up
    refresh builds the full snapshot, as after a bulk change in a session."""
    monkeypatch.setattr(ranking, "DELTA_MAX_FILES", 1)  # three new ids (the edit, the rename, audit.py): bulk
    ws = _open(closed_after_changes, interim_answers=True)
    try:
        ws.index()
        view = ws.searcher().snapshot()
        assert view.base is not None and view.pending_files == 3
        early = ws.search("record_login_attempt")
        assert "pkg/audit.py" not in [hit.path for hit in early.files]
        assert any("3 changed files join the index shortly" in lane.note for lane in early.lanes)
        assert not {"web/routes.js", "pkg/mailer.py", "pkg/cli.py"} & set(_paths(ws, "parse_arguments registerRoutes"))
        ws.warm(graph=False)  # the start-up refresh's end: the full snapshot, built at once
        snap = ws.searcher().snapshot()
        assert snap.base is None and snap.generation == ws.store.generation("content")
        assert _paths(ws, "record_login_attempt")[0] == "pkg/audit.py"
    finally:
        ws.close()


def test_a_one_shot_command_after_a_bulk_change_answers_from_the_full_snapshot(
        closed_after_changes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`codeloupe search` (index, then one answer) has no later answer to make up for one that leaves files out:
    after a bulk change it builds the full snapshot first, as before."""
    monkeypatch.setattr(ranking, "DELTA_MAX_FILES", 1)
    ws = _open(closed_after_changes)
    try:
        ws.index()
        assert _paths(ws, "record_login_attempt")[0] == "pkg/audit.py"
        snap = ws.searcher().snapshot()
        assert snap.base is None and snap.generation == ws.store.generation("content")
    finally:
        ws.close()


def test_a_start_up_refresh_after_a_bulk_change_leaves_the_full_build_to_the_background(
        closed_after_changes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The start-up refresh comes before any query: it does not hold the editor's next saves behind a full
    build either; the full snapshot follows on its own thread."""
    monkeypatch.setattr(ranking, "DELTA_MAX_FILES", 1)
    monkeypatch.setattr(ranking, "PENDING_QUIET_S", 0.05)
    ws = _start(closed_after_changes)
    try:
        searcher = ws.searcher()
        assert searcher.snapshot().pending_files == 3
        deadline = time.monotonic() + 30
        while searcher.snapshot().base is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert searcher.snapshot().base is None
        assert _paths(ws, "record_login_attempt")[0] == "pkg/audit.py"
    finally:
        ws.close()


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _lexical(root: Path) -> Path:
    path = snapshot_file(_index_path(root))
    return path.with_name(path.name.replace(".snapshot.npz", ".bm25.npz"))


def _index_path(root: Path) -> Path:
    ws = _open(root)
    try:
        return ws.store.path
    finally:
        ws.close()


def _damage_the_snapshot(root: Path) -> None:
    _flip_a_byte(snapshot_file(_index_path(root)))


def _damage_the_lexical_index(root: Path) -> None:
    _flip_a_byte(_lexical(root))


def _lexical_index_of_another_state(root: Path) -> None:
    """The lexical index saved for a later state than the snapshot's (a process killed between the two)."""
    path = _lexical(root)
    arrays = dict(np.load(path))
    stamp = str(arrays.pop("__stamp__"))
    version, index_id, generation = stamp.rsplit(":", 2)
    from codeloupe.saved import save_arrays

    save_arrays(path, f"{version}:{index_id}:{int(generation) + 1}", arrays)


@pytest.mark.parametrize("spoil", [_damage_the_snapshot, _damage_the_lexical_index, _lexical_index_of_another_state])
def test_saved_files_that_are_damaged_or_of_two_states_are_never_a_base(closed_after_changes: Path, spoil) -> None:
    spoil(closed_after_changes)
    ws = _start(closed_after_changes)
    try:
        snap = ws.searcher().snapshot()
        assert snap.base is None and snap.generation == ws.store.generation("content")
        rows = _live(snap)
    finally:
        ws.close()
    assert rows == _rebuilt(closed_after_changes)[0]


def test_two_asks_for_a_full_build_at_once_build_it_once(closed_after_changes: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """After a bulk change the writer's catch-up and the background rebuild both ask for the full snapshot: the
    second waits for the first and finds it current (two builds side by side took 97 s at 40K files where one
    takes 38)."""
    import threading

    from codeloupe.search import Searcher

    monkeypatch.setattr(ranking, "DELTA_MAX_FILES", 1)
    ws = _open(closed_after_changes, interim_answers=True)
    try:
        ws.index()
        searcher = ws.searcher()
        assert searcher.snapshot().pending_files == 3
        built: list[int] = []
        real = Searcher._build_snapshot

        def build_slowly(self, generation, *rest):
            built.append(generation)
            time.sleep(0.3)  # both threads are asking by now
            return real(self, generation, *rest)

        monkeypatch.setattr(Searcher, "_build_snapshot", build_slowly)
        threads = [threading.Thread(target=searcher.refresh) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert built == [ws.store.generation("content")]
        assert searcher.snapshot().base is None
    finally:
        ws.close()


@pytest.mark.parametrize("generation", ["9" * 5000, "-3", "7a", "", "٣"])
def test_a_saved_stamp_whose_generation_is_not_a_number_is_never_a_base(closed_after_changes: Path,
                                                                          generation: str) -> None:
    """A damaged stamp (thousands of digits, which int() refuses, a sign, letters, other scripts' digits) is
    read as no saved state, never an error at start."""
    from codeloupe.saved import save_arrays

    for path in (snapshot_file(_index_path(closed_after_changes)), _lexical(closed_after_changes)):
        arrays = dict(np.load(path))
        version, index_id, _ = str(arrays.pop("__stamp__")).rsplit(":", 2)
        save_arrays(path, f"{version}:{index_id}:{generation}", arrays)
    ws = _start(closed_after_changes)
    try:
        snap = ws.searcher().snapshot()
        assert snap.base is None and _paths(ws, "record_login_attempt")[0] == "pkg/audit.py"
    finally:
        ws.close()
