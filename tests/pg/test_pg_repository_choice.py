"""A search across more repositories of the shared index than it searches in full: the lexical and dense lanes
are asked of all of them in the database, the repositories whose chunks rank first are searched as one
ranking (the same answer as searching those alone), the bundle says which, and the others are never loaded."""

from __future__ import annotations

import random
from pathlib import Path

import psycopg
import pytest
from pg_locks import LOCK_WAIT, Locked

from codeloupe import ranking as R
from codeloupe.api import Workspace, build_global_vector_indexes, open_shared, search_repositories

LEDGER = '''def reconcile_ledger_entries(ledger, statement):
    """Match each bank statement line to the ledger entry it settles."""
    return [entry for entry in ledger if entry.amount in statement]
'''
# What the scripted embedder calls near: the ledger's chunk and the question below, which shares no word with it.
QUESTION = "which code pairs up money movements with the bookkeeping records"


# A word only one repository holds, for each (the tokeniser keeps them whole).
MARKERS = ["alpaca", "bramble", "cobalt", "dervish", "ember", "fjord", "glacier", "harbor", "iris", "juniper"]


def _aligned(text: str) -> list[float]:
    return [1.0, 0.0, 0.0, 0.0] if "reconcile_ledger" in text or text == QUESTION else [0.0, 1.0, 0.0, 0.0]


def _filler(root: Path, rng: random.Random) -> None:
    words = ["parse", "render", "config", "session", "token", "cache", "route", "handler", "query", "stream"]
    root.mkdir(parents=True, exist_ok=True)
    for f in range(rng.randint(3, 8)):
        body = "\n\n".join(f"def {rng.choice(words)}_{rng.choice(words)}_{f}_{g}():\n    return"
                           f" '{' '.join(rng.choices(words, k=8))}'\n" for g in range(3))
        (root / f"mod{f}.py").write_text(body)


def _shared_index(tmp_path: Path, pg_url: str, overrides: dict[str, object], markers: bool = False) -> list[str]:
    """Ten repositories of filler code, the ledger in team07; `markers`: a function only each one defines."""
    rng = random.Random(3)
    names = [f"team{n:02d}" for n in range(10)]
    for name in names:
        _filler(tmp_path / name, rng)
        if markers:
            (tmp_path / name / "marker.py").write_text(f"def {MARKERS[names.index(name)]}():\n"
                                                       "    return 1\n")
    (tmp_path / "team07" / "ledger.py").write_text(LEDGER)
    for name in names:
        ws = Workspace(tmp_path / name, overrides={**overrides, "store_url": pg_url, "store_repository": name})
        try:
            ws.index()
            if overrides.get("embed_provider") != "none":
                ws.embed()
        finally:
            ws.close()
    return names


def _vectors_held(pg_url: str) -> int:
    with psycopg.connect(pg_url) as conn:
        return conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0]


def _answer(bundle) -> list[tuple[str, str, float]]:
    return [(h.repository, h.path, h.score) for h in bundle.files]


@pytest.mark.parametrize("by", ["words", "meaning", "meaning, through the global graph"])
def test_only_the_repositories_whose_chunks_rank_first_are_searched_and_the_bundle_names_them(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, by: str) -> None:
    from chat_server import ChatServer

    monkeypatch.setattr(R, "REPOSITORIES_SEARCHED_FULLY", 3)
    with ChatServer(embedder=_aligned) as server:
        overrides = {"embed_provider": "none"} if by == "words" else {
            "embed_provider": "openai", "embed_base_url": server.base_url, "embed_model": "scripted-embed",
            "embed_dimensions": 4}
        names = _shared_index(tmp_path, pg_url, overrides)
        if by.endswith("graph"):
            assert [g.vectors for g in build_global_vector_indexes(pg_url)] == [_vectors_held(pg_url)]
        # Words every repository holds too (its chunks rank below the ledger's), or no word of the ledger's.
        query = "reconcile ledger entries in the session cache" if by == "words" else QUESTION
        shared = open_shared([], {**overrides, "store_url": pg_url})
        try:
            assert [ws.repository_name for ws in shared] == names
            bundle = search_repositories(shared, query)
            [note] = [n for n in bundle.notes if n.startswith("searched 3 of 10 repositories in full: ")]
            chosen = note.split(": ", 1)[1].split(" (", 1)[0].split(", ")
            assert chosen[0] == "team07" and len(chosen) == 3, note
            assert ("words and meaning" in note) == by.startswith("meaning")
            ledger = next(h for h in bundle.files if (h.repository, h.path) == ("team07", "ledger.py"))
            assert ledger.rank == 1 if by == "words" else "dense #1" in ledger.why, ledger
            assert {h.repository for h in bundle.files} <= set(chosen)
            # Nothing of the others was loaded: no snapshot, no searcher.
            assert all(ws._searcher is None for ws in shared if ws.repository_name not in chosen)
            # The same answer as the chosen repositories searched alone, as one ranking.
            alone = search_repositories([ws for ws in shared if ws.repository_name in chosen], query)
            assert _answer(alone) == _answer(bundle)
            assert not any(n.startswith("searched ") for n in alone.notes)
        finally:
            for ws in shared:
                ws.close()


def test_a_long_running_server_holds_only_the_most_recently_chosen_repositories_snapshots(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each query loads the snapshots of the repositories it chooses; those chosen longest ago are let go
    beyond `SHARED_SNAPSHOTS_HELD`, and one chosen again is loaded again and answers as before."""
    monkeypatch.setattr(R, "REPOSITORIES_SEARCHED_FULLY", 3)
    monkeypatch.setattr(R, "SHARED_SNAPSHOTS_HELD", 4)
    overrides = {"embed_provider": "none"}
    names = _shared_index(tmp_path, pg_url, overrides, markers=True)
    shared = open_shared([], {**overrides, "store_url": pg_url})
    try:
        first = search_repositories(shared, MARKERS[0])
        assert {h.repository for h in first.files} == {"team00"}
        for n in range(1, 7):  # six more queries, each about one other repository
            assert {h.repository for h in search_repositories(shared, MARKERS[n]).files} == {names[n]}
        held = [ws.repository_name for ws in shared if ws._searcher is not None]
        assert held == names[3:7], held
        assert _answer(search_repositories(shared, MARKERS[0])) == _answer(first)
    finally:
        for ws in shared:
            ws.close()


def test_a_query_nothing_matches_or_the_model_cannot_embed_still_searches_some_repositories(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No chunk ranked anywhere: the first repositories in order are searched (the bundle says so, empty or
    not); a model that fails on the query costs the choice its dense vote, not the search."""
    from chat_server import ChatServer

    monkeypatch.setattr(R, "REPOSITORIES_SEARCHED_FULLY", 3)
    with ChatServer(embedder=_aligned) as server:
        overrides = {"embed_provider": "openai", "embed_base_url": server.base_url, "embed_model": "scripted-embed",
                     "embed_dimensions": 4}
        names = _shared_index(tmp_path, pg_url, overrides)
        shared = open_shared([], {**overrides, "store_url": pg_url})
        try:
            server.embedder = lambda text: [1.0]  # vectors of another size from now on
            nothing = search_repositories(shared, "?? !!")
            assert nothing.notes[0].startswith(f"searched 3 of 10 repositories in full: {', '.join(names[:3])} (")
            assert "for the query's words across" in nothing.notes[0]
            found = search_repositories(shared, "reconcile ledger entries")
            assert found.notes[0].startswith("searched 1 of 10 repositories in full: team07 (")
            assert (found.files[0].repository, found.files[0].path) == ("team07", "ledger.py")
        finally:
            for ws in shared:
                ws.close()


def _chosen(bundle) -> list[str]:
    [note] = [n for n in bundle.notes if n.startswith("searched ")]
    return note.split(": ", 1)[1].split(" (", 1)[0].split(", ")


@pytest.mark.parametrize("by", ["words", "meaning"])
def test_the_choice_reads_only_the_files_the_search_scope_and_mode_keep(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, by: str) -> None:
    """The ledger is code in team07 and team04 (there under billing/), documentation in team02: a docs search
    chooses team02, a search scoped to billing/ team04, a code search the two code repositories first."""
    from chat_server import ChatServer

    monkeypatch.setattr(R, "REPOSITORIES_SEARCHED_FULLY", 3)
    with ChatServer(embedder=_aligned) as server:
        overrides = {"embed_provider": "none"} if by == "words" else {
            "embed_provider": "openai", "embed_base_url": server.base_url, "embed_model": "scripted-embed",
            "embed_dimensions": 4}
        (tmp_path / "team02" / "docs").mkdir(parents=True)
        (tmp_path / "team02" / "docs" / "ledger.md").write_text(
            "# Settling the books\n\nCall `reconcile_ledger_entries` with the ledger and the bank statement.\n")
        (tmp_path / "team04" / "billing").mkdir(parents=True)
        (tmp_path / "team04" / "billing" / "ledger_sync.py").write_text(LEDGER)
        _shared_index(tmp_path, pg_url, overrides)
        query = "reconcile ledger entries" if by == "words" else QUESTION
        shared = open_shared([], {**overrides, "store_url": pg_url})
        try:
            assert _chosen(search_repositories(shared, query, mode="docs")) == ["team02"]
            assert _chosen(search_repositories(shared, query, scope="billing")) == ["team04"]
            assert _chosen(search_repositories(shared, query, scope="billing/", mode="both")) == ["team04"]
            code = _chosen(search_repositories(shared, query))
            assert set(code[:2]) == {"team04", "team07"}, code
            assert "team02" in _chosen(search_repositories(shared, query, mode="both"))[:3]
        finally:
            for ws in shared:
                ws.close()


def test_a_lane_the_database_cannot_answer_leaves_the_choice_to_the_other(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lexical lane's tables locked past the lock timeout: the repositories are chosen by meaning alone
    and the bundle says why; with both lanes' tables locked, the first repositories in order are chosen."""
    from chat_server import ChatServer

    monkeypatch.setattr(R, "REPOSITORIES_SEARCHED_FULLY", 3)
    with ChatServer(embedder=_aligned) as server:
        overrides = {"embed_provider": "openai", "embed_base_url": server.base_url, "embed_model": "scripted-embed",
                     "embed_dimensions": 4}
        names = _shared_index(tmp_path, pg_url, overrides)
        shared = open_shared([], {**overrides, "store_url": pg_url + LOCK_WAIT})
        try:
            expected = search_repositories(shared, QUESTION)
            assert _chosen(expected)[0] == "team07"
            with Locked(pg_url, "lex_terms", release_at_wait=2):  # the choice's wait, then the search's
                bundle = search_repositories(shared, QUESTION)
            [note] = [n for n in bundle.notes if n.startswith("searched ")]
            assert "rank first for the query's meaning across all of them; could not rank by words: canceling" \
                " statement due to lock timeout);" in note, note
            assert "postgresql://" not in note and "SELECT" not in note  # the log has those, the reader does not
            assert _chosen(bundle) == _chosen(expected) and _answer(bundle) == _answer(expected)

            # The choice's two waits, then the search's first: every lock is let go.
            with Locked(pg_url, "lex_terms", "chunk_vectors", release_at_wait=3):
                bundle = search_repositories(shared, QUESTION)
            [note] = [n for n in bundle.notes if n.startswith("searched ")]
            assert _chosen(bundle) == names[:3]
            assert "(the first named: the shared index could not rank their chunks; could not rank by words: " in note
            assert note.count("lock timeout") == 2 and "; could not rank by meaning: " in note, note
        finally:
            for ws in shared:
                ws.close()
