"""The symbol names a snapshot's symbol lane is built from, read a page of JSON columns at a time: every name
comes back as written, in id order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codeloupe.store import Store, SymbolNames
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton, Symbol

ODD_NAMES = ['quote"d', "back\\slash", "new\nline", "tab\tand\x01control", "naïve_ünïcode", "日本語", "", "[]",
             "123", "null", "a,b", "emoji_\U0001F600"]


def test_every_name_and_parent_reads_back_as_written_in_id_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "index.sqlite")
    written = []
    for f in range(3):
        rel = f"m{f}.py"
        symbols = [Symbol(name, "function", i + 1, i + 1, ODD_NAMES[-1 - i], "") for i, name in enumerate(ODD_NAMES)]
        store.replace_file(ChunkedFile(rel, "python", [Chunk(1, 20, "module", rel, rel, "x\n" * 20)], symbols,
                                       FileSkeleton(rel, "")), hash=rel, size=1, mtime=1.0, is_doc=False,
                           encoding="utf-8", chunker_version=1, line_count=20)
        written.extend((rel, i + 1, s.name, s.parent) for i, s in enumerate(symbols))
    store.delete_files(["m1.py"])  # a gap in the ids
    expected = [w for w in written if w[0] != "m1.py"]
    paths = {r.id: r.path for r in store.file_rows().values()}
    for page in (5, 7, 1000):
        read = [(paths[int(f)], int(line), name, parent) for names in store.iter_symbol_names(page=page)
                for f, line, name, parent in zip(names.file_ids, names.start_lines, names.names, names.parents)]
        assert read == expected


def test_an_empty_symbol_table_reads_as_no_page(tmp_path: Path) -> None:
    assert list(Store(tmp_path / "index.sqlite").iter_symbol_names()) == []


def test_columns_out_of_order_are_put_in_order_of_their_ids() -> None:
    names = SymbolNames(np.array([7, 8, 9]), np.array([1, 2, 3]), ["c", "a", "b"], ["", "A", "B"])
    ordered = names.sorted_by(np.array([30, 10, 20]))
    assert ordered.file_ids.tolist() == [8, 9, 7] and ordered.start_lines.tolist() == [2, 3, 1]
    assert ordered.names == ["a", "b", "c"] and ordered.parents == ["A", "B", ""]
    assert names.sorted_by(np.array([1, 2, 3])) is names
