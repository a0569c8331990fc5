"""Background embedding over a real Store: order, the shared cache, model changes, stop and resume."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from codeloupe.embed import background as background_module
from codeloupe.embed import embedding_text, make_provider
from codeloupe.embed.background import embed_pending
from codeloupe.embed.local import EncoderOptions, OnnxSentenceEncoder, load_local_provider
from codeloupe.index import index_workspace
from codeloupe.settings import Settings
from codeloupe.store import Store
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton, Progress
from processes import alive, children_but_parse_workers

FILES = {
    "app/auth.py": [
        ("def login", "def login(user, password):\n    return check_password(user, password)\n"),
        ("def logout", "def logout(session):\n    session.clear()\n"),
    ],
    "app/db.py": [
        ("def connect", "def connect(url):\n    return sqlite3.connect(url)\n"),
        ("def migrate", "def migrate(conn):\n    conn.execute('CREATE TABLE users (id INTEGER)')\n"),
    ],
    "app/ui.py": [
        ("def render", "def render(template, **values):\n    return template.format(**values)\n"),
        ("def progress", "def progress(items):\n    for item in items:\n        yield item\n"),
    ],
}


class CountingProvider:
    """The real model, counting the texts it is asked to embed (the vectors are the model's own)."""

    def __init__(self, inner: OnnxSentenceEncoder, model_id: str | None = None) -> None:
        self.inner = inner
        self.model_id = model_id or inner.model_id
        self.dim = inner.dim
        self.embedded: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def release_workers(self) -> None:
        self.inner.release_workers()


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> OnnxSentenceEncoder:
    return make_provider(Settings(cache_dir=str(tmp_path_factory.mktemp("model-cache"))))


def _store(path: Path, files: dict[str, list[tuple[str, str]]] = FILES) -> Store:
    store = Store(path)
    for rel, chunks in files.items():
        line = 1
        built = []
        for name, text in chunks:
            end = line + text.count("\n") - 1
            built.append(Chunk(line, end, "function", name.split()[-1], f"{rel} > {name}", text))
            line = end + 1
        skeleton = FileSkeleton(rel, "\n".join(name for name, _ in chunks))
        store.replace_file(ChunkedFile(rel, "python", built, [], skeleton), hash=rel, size=1, mtime=1.0,
                           is_doc=False, encoding="utf-8", chunker_version=1, line_count=line - 1)
    return store


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_embeds_skeletons_first_then_chunks_and_stores_real_vectors(tmp_path: Path,
                                                                     model: OnnxSentenceEncoder) -> None:
    store = _store(tmp_path / "index.sqlite")
    provider = CountingProvider(model)
    events: list[Progress] = []
    report = embed_pending(store, provider, Settings(cache_dir=str(tmp_path)), progress=events.append)
    assert (report.skeletons_done, report.chunks_done, report.computed, report.cache_hits) == (3, 6, 9, 0)
    assert not report.stopped
    assert [e.phase for e in events] == ["embed", "embed"] and events[-1].done == events[-1].total == 9
    assert "skeleton" in events[0].message and events[0].done == 3
    assert store.vector_counts(model.model_id) == {"chunks_done": 6, "skeletons_done": 3}
    # The skeletons went to the model before any chunk.
    assert provider.embedded[:3] == ["def login\ndef logout", "def connect\ndef migrate", "def render\ndef progress"]
    matrix = store.vector_matrix("chunk", model.model_id)
    stored = matrix.q.astype(np.float32) * matrix.scales[:, None]
    table = store.chunk_table()
    expected = model.embed([embedding_text(b, t) for b, t in zip(table.breadcrumbs, table.texts)])
    assert _cosines(stored, expected).min() > 0.999
    again = embed_pending(store, provider, Settings(cache_dir=str(tmp_path)))
    assert (again.skeletons_done, again.chunks_done, again.computed) == (0, 0, 0)


def test_a_second_checkout_is_answered_by_the_shared_cache(tmp_path: Path, model: OnnxSentenceEncoder) -> None:
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    embed_pending(_store(tmp_path / "one.sqlite"), CountingProvider(model), settings)
    provider = CountingProvider(model)
    second = _store(tmp_path / "two.sqlite")
    report = embed_pending(second, provider, settings)
    assert provider.embedded == []
    assert (report.cache_hits, report.computed, report.chunks_done, report.skeletons_done) == (9, 0, 6, 3)
    assert second.vector_counts(model.model_id) == {"chunks_done": 6, "skeletons_done": 3}


def test_a_model_change_drops_old_vectors_and_recomputes(tmp_path: Path, model: OnnxSentenceEncoder) -> None:
    settings = Settings(cache_dir=str(tmp_path))
    store = _store(tmp_path / "index.sqlite")
    embed_pending(store, CountingProvider(model), settings)
    other = CountingProvider(model, model_id="local:another-model@128")
    report = embed_pending(store, other, settings)
    assert report.computed == 9 and report.cache_hits == 0 and len(other.embedded) == 9
    assert store.vector_counts(model.model_id) == {"chunks_done": 0, "skeletons_done": 0}
    assert store.vector_counts(other.model_id) == {"chunks_done": 6, "skeletons_done": 3}


def test_stopped_midway_then_resumed_computes_only_what_is_missing(tmp_path: Path, model: OnnxSentenceEncoder,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background_module, "POOL_TEXTS", 2)
    store = _store(tmp_path / "index.sqlite")
    steps = []
    first = CountingProvider(model)
    report = embed_pending(store, first, Settings(cache_dir=str(tmp_path / "cache-a")),
                           progress=steps.append, should_stop=lambda: len(steps) >= 3)
    assert report.stopped and (report.skeletons_done, report.chunks_done) == (3, 2)
    store.close()
    reopened = Store(tmp_path / "index.sqlite")
    # A fresh cache: anything already embedded would have to be recomputed if the store had lost it.
    second = CountingProvider(model)
    resumed = embed_pending(reopened, second, Settings(cache_dir=str(tmp_path / "cache-b")))
    assert not resumed.stopped and (resumed.skeletons_done, resumed.chunks_done, resumed.computed) == (0, 4, 4)
    assert not set(second.embedded) & set(first.embedded)
    assert reopened.vector_counts(model.model_id) == {"chunks_done": 6, "skeletons_done": 3}


def test_preferred_paths_are_embedded_first(tmp_path: Path, model: OnnxSentenceEncoder,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background_module, "POOL_TEXTS", 2)
    provider = CountingProvider(model)
    embed_pending(_store(tmp_path / "index.sqlite"), provider, Settings(cache_dir=str(tmp_path)),
                  prefer_paths=["app/ui.py"])
    chunks = provider.embedded[3:]
    assert [t.split("\n")[0] for t in chunks[:2]] == ["app/ui.py > def render", "app/ui.py > def progress"]


def test_identical_texts_are_embedded_once(tmp_path: Path, model: OnnxSentenceEncoder) -> None:
    same = "def noop():\n    pass\n"
    files = {"a.py": [("def noop", same)], "b.py": [("def noop", same)]}
    provider = CountingProvider(model)
    report = embed_pending(_store(tmp_path / "index.sqlite", files), provider, Settings(cache_dir=str(tmp_path)))
    # Both skeletons read "def noop"; the two chunks differ by their breadcrumb's path.
    assert report.computed == 3 and report.cache_hits == 1 and len(provider.embedded) == 3
    assert (report.skeletons_done, report.chunks_done) == (2, 2)


def test_rows_with_nothing_to_embed_get_the_zero_vector_without_the_model(tmp_path: Path,
                                                                           model: OnnxSentenceEncoder) -> None:
    # Every embedded text starts with its path, so each empty file was a distinct text for the model: 100,000 of
    # them were 159 s of a 211-s index, for vectors no lane uses.
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "empty.js").write_text("")
    (root / "blank.py").write_text("  \n\n\t\n")
    (root / "app.py").write_text("def login(user):\n    return user\n")
    store = Store(tmp_path / "index.sqlite")
    index_workspace(root, store, Settings(cache_dir=str(tmp_path), embed_provider="none"))
    provider = CountingProvider(model)
    report = embed_pending(store, provider, Settings(cache_dir=str(tmp_path)))
    table, app = store.chunk_table(), store.file_rows()["app.py"].id
    code = [embedding_text(b, t) for f, b, t in zip(table.file_ids.tolist(), table.breadcrumbs, table.texts) if f == app]
    assert sorted(provider.embedded) == sorted([*code, store.skeletons()[app]])
    assert (report.computed, report.blank) == (len(provider.embedded), 4)  # 3 skeletons, blank.py's chunk
    assert store.vector_counts(model.model_id) == {"chunks_done": len(table.ids), "skeletons_done": 4}
    chunks, skeletons = (store.vector_matrix(t, model.model_id) for t in ("chunk", "skeleton"))
    assert [bool(row.any()) for row in skeletons.q] == [i == app for i in skeletons.ids.tolist()]
    assert [bool(row.any()) for row in chunks.q] == [f == app for f in table.file_ids.tolist()]
    # Zero vectors are no model's output: the shared cache holds the code's vectors only.
    rows = sqlite3.connect(Settings(cache_dir=str(tmp_path)).embed_cache_path).execute("SELECT count(*) FROM vectors")
    assert rows.fetchone()[0] == len(provider.embedded)


def test_a_corrupt_cache_file_is_replaced(tmp_path: Path, model: OnnxSentenceEncoder) -> None:
    settings = Settings(cache_dir=str(tmp_path))
    settings.embed_cache_path.write_bytes(b"this is not an SQLite database" * 100)
    report = embed_pending(_store(tmp_path / "index.sqlite"), CountingProvider(model), settings)
    assert report.computed == 9
    rows = sqlite3.connect(settings.embed_cache_path).execute("SELECT count(*) FROM vectors").fetchone()[0]
    assert rows == 9


def test_a_bulk_run_embeds_in_worker_processes_and_ends_them(tmp_path: Path) -> None:
    pooled = load_local_provider(Settings(cache_dir=str(tmp_path)), options=EncoderOptions(threads=2))
    words = " ".join(f"name{k}" for k in range(80))  # distinct words enough for the maximum windows
    store = _store(tmp_path / "index.sqlite", {"big.py": [(f"def f{i}", f"{words} f{i}\n") for i in range(70)]})
    workers_seen: list[list[int]] = []
    embed_pending(store, pooled, Settings(cache_dir=str(tmp_path)),
                  progress=lambda _: workers_seen.append(children_but_parse_workers(os.getpid())))
    assert max(len(w) for w in workers_seen) >= 2, "the bulk run never used worker processes"
    assert not any(alive(pid) for seen in workers_seen for pid in seen), "workers outlived the run"
    assert store.vector_counts(pooled.model_id)["chunks_done"] == 70
