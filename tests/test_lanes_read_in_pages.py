"""The summary and entity lanes read their texts a page of files at a time (all 40K files' texts at once were
tens of MB more at the server's peak): each index must be the one built from every text at once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codeloupe.lanes import entity, summary
from codeloupe.store import Store
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton, Symbol


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "index.sqlite")
    for f in range(7):
        rel = f"pkg/m{f}.py"
        chunks = [Chunk(1, 2, "function", f"f{f}", rel, f"def f{f}():\n    return {f}\n")]
        symbols = [Symbol(f"parse_token_{f}", "function", 1, 2, "", f"parse_token_{f}(reader) -> Token")]
        skeleton = FileSkeleton(rel, f"{rel}\ndef parse_token_{f}(reader) -> Token\n\"\"\"Reads token {f}.\"\"\"")
        store.replace_file(ChunkedFile(rel, "python", chunks, symbols, skeleton), hash=rel, size=1, mtime=1.0,
                           is_doc=False, encoding="utf-8", chunker_version=1, line_count=2)
    return store


def test_the_store_gives_the_texts_of_the_files_asked_for(store: Store) -> None:
    for read in (store.skeletons, store.definition_words):
        every = read()
        some = sorted(every)[1:4]
        assert len(every) == 7 and read(some) == {file_id: every[file_id] for file_id in some}


def test_an_index_read_in_pages_equals_one_read_at_once(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    file_ids = np.array(sorted(store.skeletons(), reverse=True) + [10_000])  # any order; one without a skeleton
    words = {int(file_ids[2]): ["tokenizer", "lexer"]}
    terms = ["token", "parse", "reader", "lexer", "m3"]
    whole = summary.build_summary_index(file_ids, store, words).scores(terms)
    monkeypatch.setattr(summary, "SKELETON_PAGE", 2)
    paged = summary.build_summary_index(file_ids, store, words).scores(terms)
    assert np.array_equal(whole, paged) and np.count_nonzero(whole) == len(file_ids) - 1


def test_an_entity_index_read_in_pages_equals_one_read_at_once(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = {r.id: r.path for r in store.file_rows().values()}
    terms = ["parse", "token", "reader", "m3"]
    ids, whole = entity.build_entity_index(paths, store)
    monkeypatch.setattr(entity, "DEFINITIONS_PAGE", 2)
    paged_ids, paged = entity.build_entity_index(paths, store)
    assert np.array_equal(ids, paged_ids) and np.array_equal(whole.scores(terms), paged.scores(terms))
    assert np.count_nonzero(whole.scores(["parse"])) == len(paths)
