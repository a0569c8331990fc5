"""The summary lane reads skeletons a page of files at a time (all 40K files' texts at once were ~40 MB more
at the server's peak): the index must be the one built from every skeleton at once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codeloupe.lanes import summary
from codeloupe.store import Store
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "index.sqlite")
    for f in range(7):
        rel = f"pkg/m{f}.py"
        chunks = [Chunk(1, 2, "function", f"f{f}", rel, f"def f{f}():\n    return {f}\n")]
        skeleton = FileSkeleton(rel, f"{rel}\ndef parse_token_{f}(reader) -> Token\n\"\"\"Reads token {f}.\"\"\"")
        store.replace_file(ChunkedFile(rel, "python", chunks, [], skeleton), hash=rel, size=1, mtime=1.0,
                           is_doc=False, encoding="utf-8", chunker_version=1, line_count=2)
    return store


def test_the_store_gives_the_skeletons_of_the_files_asked_for(store: Store) -> None:
    every = store.skeletons()
    some = sorted(every)[1:4]
    assert store.skeletons(some) == {file_id: every[file_id] for file_id in some}


def test_an_index_read_in_pages_equals_one_read_at_once(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    file_ids = np.array(sorted(store.skeletons(), reverse=True) + [10_000])  # any order; one without a skeleton
    words = {int(file_ids[2]): ["tokenizer", "lexer"]}
    terms = ["token", "parse", "reader", "lexer", "m3"]
    whole = summary.build_summary_index(file_ids, store, words).scores(terms)
    monkeypatch.setattr(summary, "SKELETON_PAGE", 2)
    paged = summary.build_summary_index(file_ids, store, words).scores(terms)
    assert np.array_equal(whole, paged) and np.count_nonzero(whole) == len(file_ids) - 1
