"""Files derived from a shared repository (the search snapshot's inputs, the graph, the file summaries) are kept
in the database by the first process that builds them, and another process, on another machine (another cache
directory), takes them from there instead of building them again; a copy that is damaged, too large or for
another state is never used."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import psycopg
import pytest

from codeloupe.api import Workspace, open_shared
from codeloupe.saved import load_arrays, save_arrays
from codeloupe.store import postgres

NO_MODEL = {"embed_provider": "none"}
QUERY = "how are orders priced and shipped"
KEPT = {".snapshot.npz", ".graph.npz", ".summaries.npz"}
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "graph" / "python"


def _indexed(tmp_path: Path, pg_url: str) -> Path:
    root = tmp_path / "shop"
    shutil.copytree(FIXTURE, root)
    ws = Workspace(root, overrides={**NO_MODEL, "store_url": pg_url, "store_repository": "shop"})
    try:
        ws.index()
    finally:
        ws.close()
    return root


def _machine(tmp_path: Path, pg_url: str, name: str):
    """The repository opened as a process with its own cache directory (another machine) opens it."""
    return open_shared(["shop"], {**NO_MODEL, "store_url": pg_url, "cache_dir": str(tmp_path / name)})[0]


def _answer(bundle) -> list[tuple[str, float, list[tuple[int, int]]]]:
    return [(h.path, h.score, [(c.start_line, c.end_line) for c in h.chunks]) for h in bundle.files]


def _kept(pg_url: str) -> dict[str, tuple[str, bytes]]:
    """suffix -> (stamp, data) of the newest copy kept of each file."""
    with psycopg.connect(pg_url) as conn:
        return {suffix: (stamp, bytes(data)) for suffix, stamp, data in
                conn.execute("SELECT suffix, stamp, data FROM saved_files ORDER BY saved_at").fetchall()}


def _local(ws, suffix: str) -> Path:
    return ws.store.path.with_name(ws.store.path.name + suffix)


def test_another_machine_takes_the_files_the_first_built(tmp_path: Path, pg_url: str) -> None:
    _indexed(tmp_path, pg_url)
    first = _machine(tmp_path, pg_url, "a")
    expected = _answer(first.search(QUERY))
    kept = _kept(pg_url)
    assert set(kept) == KEPT
    for suffix, (_, data) in kept.items():  # what was kept is what the first machine saved
        assert _local(first, suffix).read_bytes() == data

    # Mark the kept graph (the same arrays and stamp, one array more) to tell a copy taken from the database
    # from one built again.
    stamp, _ = kept[".graph.npz"]
    arrays = load_arrays(_local(first, ".graph.npz"), stamp)
    assert arrays is not None
    marked = tmp_path / "marked.npz"
    save_arrays(marked, stamp, {**arrays, "taken_from_the_database": np.array([1])})
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE saved_files SET data = %s WHERE suffix = '.graph.npz'", (marked.read_bytes(),))

    second = _machine(tmp_path, pg_url, "b")
    assert _answer(second.search(QUERY)) == expected
    taken = load_arrays(_local(second, ".graph.npz"), stamp)
    assert taken is not None and "taken_from_the_database" in taken
    for suffix in KEPT - {".graph.npz"}:
        assert _local(second, suffix).read_bytes() == kept[suffix][1]


def test_damaged_copies_are_built_again_and_replaced(tmp_path: Path, pg_url: str) -> None:
    _indexed(tmp_path, pg_url)
    expected = _answer(_machine(tmp_path, pg_url, "a").search(QUERY))
    good = _kept(pg_url)
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE saved_files SET data = substring(data from 1 for length(data) / 2)")
    # Truncated copies: the second machine builds every file itself, answers the same, and keeps good copies.
    second = _machine(tmp_path, pg_url, "b")
    assert _answer(second.search(QUERY)) == expected
    now = _kept(pg_url)
    assert set(now) == KEPT
    for suffix, (stamp, data) in now.items():
        assert stamp == good[suffix][0] and len(data) == len(good[suffix][1])
        assert data == _local(second, suffix).read_bytes()


def test_a_copy_for_another_state_is_not_taken(tmp_path: Path, pg_url: str) -> None:
    root = _indexed(tmp_path, pg_url)
    _machine(tmp_path, pg_url, "a").search(QUERY)
    before = _kept(pg_url)
    # The repository changes: every stamp moves, and a machine that opens it now builds from the new rows.
    (root / "fresh_module.py").write_text("def ship_orders_overnight(orders):\n    return sorted(orders)\n")
    ws = Workspace(root, overrides={**NO_MODEL, "store_url": pg_url, "store_repository": "shop"})
    try:
        ws.index()
    finally:
        ws.close()
    second = _machine(tmp_path, pg_url, "b")
    assert "fresh_module.py" in [h.path for h in second.search("ship orders overnight").files]
    after = _kept(pg_url)
    assert all(after[suffix][0] != before[suffix][0] for suffix in KEPT)


def test_files_over_the_size_limit_stay_on_their_machine(tmp_path: Path, pg_url: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "SAVED_FILE_MAX_BYTES", 0)
    _indexed(tmp_path, pg_url)
    first = _machine(tmp_path, pg_url, "a")
    assert first.search(QUERY).files
    assert _kept(pg_url) == {}
    assert all(_local(first, suffix).exists() for suffix in KEPT)


def test_a_small_repository_s_vectors_are_held_by_the_process_and_kept_for_the_next(tmp_path: Path,
                                                                                    pg_url: str) -> None:
    """Up to EXACT_SEARCH_MAX_VECTORS, a repository's vectors are read once and scanned in the process (as the
    SQLite store's), not asked of the database each query, and kept in the database for the next process:
    with the vector tables locked past the URL's lock timeout, the warm process and a second machine answer
    by meaning as before."""
    from pg_locks import LOCK_WAIT, Locked

    from chat_server import ChatServer

    with ChatServer() as chat:
        embed = {"embed_provider": "openai", "embed_base_url": chat.base_url, "embed_model": "scripted"}
        root = tmp_path / "shop"
        shutil.copytree(FIXTURE, root)
        ws = Workspace(root, overrides={**embed, "store_url": pg_url, "store_repository": "shop"})
        try:
            ws.index()
            ws.embed()
        finally:
            ws.close()

        def machine(name: str):  # noqa: ANN202
            return open_shared(["shop"], {**embed, "store_url": pg_url + LOCK_WAIT,
                                          "cache_dir": str(tmp_path / name)})[0]

        first = machine("a")
        bundle = first.search(QUERY)
        expected = _answer(bundle)
        assert [lane.ready for lane in bundle.lanes if lane.name == "dense"] == [True]
        assert ".vectors.npz" in _kept(pg_url)
        with Locked(pg_url, "chunk_vectors", "skeleton_vectors"):
            assert _answer(first.search(QUERY)) == expected
            second = machine("b")
            bundle = second.search(QUERY)
            assert [lane.ready for lane in bundle.lanes if lane.name == "dense"] == [True]
            assert _answer(bundle) == expected


def test_a_repository_growing_past_the_exact_size_is_searched_by_its_index_and_held_again_once_it_shrinks(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dense lane's home is chosen per vector generation: the process holds a repository's vectors up to
    EXACT_SEARCH_MAX_VECTORS; a write taking it past that size builds its HNSW index, and a serving process's
    next vector generation asks the database through it; a write taking it back under returns the vectors to
    the process. The index's reads, counted by PostgreSQL, say which."""
    import time

    from chat_server import ChatServer

    with ChatServer() as chat:
        embed = {"embed_provider": "openai", "embed_base_url": chat.base_url, "embed_model": "scripted"}
        root = tmp_path / "shop"
        shutil.copytree(FIXTURE, root)
        writer = Workspace(root, overrides={**embed, "store_url": pg_url, "store_repository": "shop"})
        reader = open_shared(["shop"], {**embed, "store_url": pg_url, "cache_dir": str(tmp_path / "reader")})[0]
        try:
            writer.index()
            writer.embed()
            held = len(writer.store.query("SELECT chunk_id FROM chunk_vectors"))
            monkeypatch.setattr(postgres, "EXACT_SEARCH_MAX_VECTORS", held)
            index = f"chunk_vectors_hnsw_r{writer.store.repo_id}_{len(chat.embedder('x'))}"

            def index_reads() -> int:  # -1: no index
                reader.store.query("SELECT pg_stat_force_next_flush()")  # the connection the search used
                with psycopg.connect(pg_url) as conn:
                    row = conn.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s",
                                       (index,)).fetchone()
                return -1 if row is None else int(row[0])

            asked = iter(range(1000))

            def search_read_the_index() -> bool:
                """A search for a question not asked before (the database's dense answer is kept per query
                vector); whether it read the index."""
                before = index_reads()
                bundle = reader.search(f"{QUERY} {next(asked)}")
                assert [lane.ready for lane in bundle.lanes if lane.name == "dense"] == [True]
                return index_reads() > before

            def loaded(reads: bool) -> None:
                """Search until the vector generation written last is searched (it loads in the background, the
                one before answering meanwhile), which reads the index or not."""
                deadline = time.monotonic() + 30
                while search_read_the_index() != reads and time.monotonic() < deadline:
                    time.sleep(postgres.STATE_TTL_S + 0.1)

            expected = [h.path for h in reader.search(QUERY).files]
            assert index_reads() == -1  # held by the process: no index, none read

            (root / "src" / "invoices.py").write_text("def invoice_total(order):\n    return order.price\n")
            writer.index()
            writer.embed()  # one vector more than the process holds: the write builds the index
            assert index_reads() == 0
            loaded(reads=True)
            assert search_read_the_index() and search_read_the_index()  # asked of the database every time now
            assert "src/invoices.py" in [h.path for h in reader.search("invoice total of an order").files]

            (root / "src" / "invoices.py").unlink()
            writer.index()  # its chunk and vector gone: back to the size the process holds
            loaded(reads=False)
            assert not search_read_the_index() and not search_read_the_index()
            reads = index_reads()
            assert [h.path for h in reader.search(QUERY).files] == expected
            assert index_reads() == reads
        finally:
            reader.close()
            writer.close()


def test_copies_for_two_states_are_both_kept_so_two_versions_do_not_replace_each_other(
        tmp_path: Path, pg_url: str) -> None:
    """Two replicas of different versions (stamps) keep their own copy of a repository's file: each takes its
    own at its next open instead of building it again; a third stamp replaces the oldest."""
    _indexed(tmp_path, pg_url)
    store = _machine(tmp_path, pg_url, "a").store
    for stamp in ("v1:state", "v2:state"):
        store.keep_saved(".x.npz", stamp, stamp.encode())
    assert store.fetch_saved(".x.npz", "v1:state") == b"v1:state"
    assert store.fetch_saved(".x.npz", "v2:state") == b"v2:state"
    store.keep_saved(".x.npz", "v1:state", b"v1 again")  # kept again: now the newest
    store.keep_saved(".x.npz", "v3:state", b"v3:state")
    assert store.fetch_saved(".x.npz", "v2:state") is None
    assert store.fetch_saved(".x.npz", "v1:state") == b"v1 again"
    assert store.fetch_saved(".x.npz", "v3:state") == b"v3:state"
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM saved_files WHERE suffix = '.x.npz'").fetchone()[0] == \
            postgres.SAVED_STAMPS_KEPT


def test_another_machine_takes_the_entry_points_the_first_found(tmp_path: Path, pg_url: str) -> None:
    """Finding a repository's entry points reads every file's text from the database; the first process keeps
    what each file says there, and another answers from its copy."""
    import dataclasses

    from codeloupe.entrypoints import _decoded, _encoded

    _indexed(tmp_path, pg_url)
    first = _machine(tmp_path, pg_url, "a")
    found = first.entry_points()
    assert found and ".entrypoints.npz" in _kept(pg_url)
    # Marked, saved again by the first process (and so kept in the database): the second process's answer is
    # the kept copy, not the texts read again.
    stamp = _kept(pg_url)[".entrypoints.npz"][0]
    saved = _decoded(load_arrays(_local(first, ".entrypoints.npz"), stamp), "")
    assert saved is not None
    save_arrays(_local(first, ".entrypoints.npz"), stamp, _encoded(dataclasses.replace(
        saved, findings=[f._replace(detail=f"kept: {f.detail}") for f in saved.findings])))
    first.close()
    second = _machine(tmp_path, pg_url, "b")
    try:
        assert second.entry_points() == [dataclasses.replace(p, detail=f"kept: {p.detail}") for p in found]
    finally:
        second.close()
