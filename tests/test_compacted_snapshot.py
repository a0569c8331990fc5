"""The full snapshot made from a delta view (`Searcher._compacted`): the base's live rows and the new files'
rows, the base's kept term counts with the new rows' appended. It must be what a full build from the store makes
of the same index state, column for column and weight for weight, after edits, deletions, a rename and new
files, without tokenising any chunk but the new ones."""

from __future__ import annotations

import pytest

from codeloupe import ranking
from codeloupe.lanes import lexical

FILES = {
    "pkg/models.py": "class Account:\n    def check_password(self, password):\n        return password == 'x'\n",
    "pkg/cli.py": "def parse_arguments(argv):\n    \"\"\"Parse the command line.\"\"\"\n    return list(argv)\n",
    "pkg/mailer.py": "def send_welcome_mail(address):\n    return address\n",
    "web/routes.js": "function registerRoutes(app) {\n  app.get('/health', () => 'ok');\n}\n",
    "docs/guide.md": "# Guide\n\nAccounts check the password before a session opens.\n",
    "tests/test_models.py": "from pkg.models import Account\n\n\ndef test_password():\n    assert Account()\n",
}


def _facts(snap) -> dict:
    table = snap.table
    bm25 = snap.bm25
    return {
        "table": [table.ids.tolist(), table.file_ids.tolist(), table.start_lines.tolist(), table.end_lines.tolist(),
                  list(table.kinds), list(table.names), list(table.breadcrumbs), list(table.symbols),
                  list(table.texts)],
        "maps": [dict(snap.file_paths), dict(snap.file_languages), dict(snap.file_is_doc), list(snap.chunk_paths),
                 snap.chunk_is_doc.tolist(), snap.chunk_kind.tolist(), dict(snap.file_kind),
                 {k: sorted(v) for k, v in snap.by_basename.items()}, dict(snap.path_to_file),
                 dict(snap.file_chunk_rows)],
        # each name map's rows per key (keys are numbered in another order by a compaction, which no lookup reads)
        "symbols": {name: {key: getattr(snap.symbols, name).get(key) for key in getattr(snap.symbols, name)._slots}
                    for name in ("by_name", "by_lower", "by_qualified")},
        "definitions": {name: snap.symbols.definitions(name) for name in
                        ("Account", "check_password", "tokenize_input", "parse_arguments", "record_login")},
        "vocab": sorted(bm25.vocab),
        "weights": {term: bm25.scores([term]).tolist() for term in bm25.vocab},
        "stats": [bm25.n_docs, bm25.avg_len],
    }


@pytest.fixture
def changed_view(make_tree, lexical_workspace, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(ranking, "REBUILD_QUIET_S", 3600.0)
    tmp_path = make_tree(FILES)
    ws = lexical_workspace(tmp_path)
    searcher = ws.searcher()
    searcher.refresh()
    (tmp_path / "pkg/cli.py").write_text("def tokenize_input(text):\n    return text.split()\n")
    (tmp_path / "web/routes.js").unlink()
    (tmp_path / "pkg/mailer.py").rename(tmp_path / "pkg/notify.py")
    (tmp_path / "pkg/audit.py").write_text("def record_login(user):\n    \"\"\"Zqx audit words.\"\"\"\n\n\n"
                                           "def check_password(password):\n    return password\n")  # models.py's too
    (tmp_path / "pkg/empty.py").write_text("")
    ws.update_files([tmp_path / p for p in ("pkg/cli.py", "web/routes.js", "pkg/mailer.py", "pkg/notify.py",
                                            "pkg/audit.py", "pkg/empty.py")])
    view = searcher.snapshot()
    assert view.base is not None and view.pending_files == 0
    return ws, searcher, view


@pytest.fixture
def tokenised(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many documents each call of the lexical index's counting was given, from now on (it still counts)."""
    calls: list[int] = []
    real = lexical.count_terms

    def counting(documents):
        documents = list(documents)
        calls.append(len(documents))
        return real(iter(documents))

    monkeypatch.setattr(lexical, "count_terms", counting)
    return calls


def test_a_snapshot_made_from_the_view_is_the_full_build_of_the_same_state(changed_view, tokenised) -> None:
    ws, searcher, view = changed_view
    full = searcher._build_snapshot(view.generation)
    for saved in ws.store.path.parent.glob(ws.store.path.name + ".*.npz"):
        saved.unlink()  # the compaction must make its own, not load the full build's
    tokenised.clear()
    made = searcher._compacted(view)
    assert made is not None
    assert tokenised == [len(view.table.ids) - len(view.base.table.ids)]  # only the new files' chunks
    assert _facts(made) == _facts(full)
    assert "zqx" in made.bm25.vocab and not any(t.startswith("registerroute") for t in made.bm25.vocab)


def test_the_full_rebuild_after_a_save_is_made_from_the_view_and_saved_for_the_next_start(changed_view,
                                                                                         tokenised) -> None:
    ws, searcher, view = changed_view
    tokenised.clear()
    searcher.refresh()
    assert tokenised == [len(view.table.ids) - len(view.base.table.ids)]  # not every chunk again
    full = searcher.snapshot()
    assert full.base is None and full.generation == view.generation
    restarted = type(ws)(ws.root, settings=ws.settings)
    try:
        again = restarted.searcher().snapshot()  # loads what the refresh saved for this state
        assert again.base is None and _facts(again) == _facts(full)
        assert [hit.path for hit in restarted.search("tokenize_input").files][0] == "pkg/cli.py"
    finally:
        restarted.close()


@pytest.mark.parametrize("seed", range(4))
def test_compacted_counts_weigh_to_a_new_index_of_the_same_documents(seed: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Some documents kept (or none, or all), new ones appended (some with terms never seen, some empty), made
    a few terms at a time: the same terms, weights, counts and statistics as indexing those documents anew."""
    import random

    import numpy as np

    monkeypatch.setattr(lexical, "_ENTRIES_AT_ONCE", 40)  # many blocks of terms
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(80)]
    docs = [[rng.choice(words) for _ in range(rng.randint(0, 30))] for _ in range(60)]
    more = [[rng.choice([*words, "fresh", "unseen"]) for _ in range(rng.randint(0, 20))] for _ in range(seed * 3)]
    rows = sorted(rng.sample(range(60), [0, 60, 35, 12][seed]))
    made = lexical.BM25Index(iter(docs)).compacted(np.array(rows, np.int64), iter(more))
    fresh = lexical.BM25Index(iter([docs[i] for i in rows] + more))
    assert made is not None and set(made.vocab) == set(fresh.vocab)
    assert (made.n_docs, made.avg_len) == (fresh.n_docs, fresh.avg_len)
    for term in fresh.vocab:
        assert np.array_equal(made.scores([term]), fresh.scores([term])), term
    assert (made._counts[:, [made.vocab[t] for t in fresh.vocab]] != fresh._counts).nnz == 0
