"""The search snapshot's compact columns: chunk texts read from the store on demand, symbol lists kept as
JSON, per-file maps as arrays. Each must read exactly what the store holds."""

from __future__ import annotations

from pathlib import Path

from codeloupe.store import Store
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton, Symbol


def _store_file(store: Store, rel: str, bodies: list[str]) -> None:
    chunks, line = [], 1
    for i, body in enumerate(bodies):
        end = line + body.count("\n") - 1
        chunks.append(Chunk(line, end, "function", f"f{i}", f"{rel} > f{i}", body, (f"f{i}", f"g{i}")))
        line = end + 1
    store.replace_file(ChunkedFile(rel, "python", chunks, [], FileSkeleton(rel, "")), hash=rel + str(bodies),
                       size=1, mtime=1.0, is_doc=False, encoding="utf-8", chunker_version=1, line_count=line - 1)


def test_chunk_texts_read_what_the_store_holds_in_batches_and_a_replaced_chunk_reads_empty(tmp_path: Path) -> None:
    store = Store(tmp_path / "index.sqlite")
    bodies = {f"m{f}.py": [f"def f{i}():\n    return {f * 1000 + i}  # é\n" for i in range(700)] for f in range(4)}
    for rel, texts in bodies.items():
        _store_file(store, rel, texts)
    table = store.chunk_table()
    expected = [text for texts in bodies.values() for text in texts]
    assert len(table.texts) == len(expected) == 2800
    assert list(table.texts) == expected  # streamed in batches larger than one SQL statement's limit
    assert table.texts[1234] == expected[1234] and table.texts[5:8] == expected[5:8]
    assert table.texts.many([2799, 0, 700]) == [expected[2799], expected[0], expected[700]]
    assert table.symbols[3] == ["f3", "g3"] and table.symbols[1:3] == [["f1", "g1"], ["f2", "g2"]]

    _store_file(store, "m0.py", ["def changed():\n    pass\n"])  # m0's old chunks leave the index
    assert table.texts[0] == "" and table.texts[700] == expected[700]
    extra = store.chunk_table([store.file_rows()["m0.py"].id])
    both = table.texts + extra.texts
    assert len(both) == 2801 and both[2800] == "def changed():\n    pass\n"
    assert (table.symbols + extra.symbols)[2800] == ["f0", "g0"]


def test_the_chunk_holding_a_line_is_found_per_file_as_a_scan_of_the_file_would_find_it(tmp_path: Path) -> None:
    from codeloupe.lanes.symbols import SymbolIndex
    from codeloupe.store import SymbolRow

    store = Store(tmp_path / "index.sqlite")
    _store_file(store, "b.py", ["x = 1\n" * 3, "y = 2\n" * 4, "z = 3\n"])  # chunks at lines 1, 4, 8
    _store_file(store, "a.py", ["def f():\n    pass\n"] * 5)
    _store_file(store, "empty.py", [])
    files = store.file_rows()
    table = store.chunk_table()
    index = SymbolIndex(table, [SymbolRow(files["b.py"].id, "y", "function", 5, 5, "", ""),
                                SymbolRow(files["a.py"].id, "f", "function", 7, 8, "K", ""),
                                SymbolRow(files["empty.py"].id, "ghost", "function", 1, 1, "", "")])

    def scan(file_id: int, line: int) -> int | None:
        rows = sorted((int(table.start_lines[r]), r) for r in range(len(table.ids)) if table.file_ids[r] == file_id)
        if not rows:
            return None
        holding = [r for start, r in rows if start <= line]
        return holding[-1] if holding else rows[0][1]

    for path in ("a.py", "b.py", "empty.py"):
        for line in (-1, 0, 1, 2, 3, 4, 7, 8, 9, 10, 11, 100):
            assert index.chunk_at(files[path].id, line) == scan(files[path].id, line), (path, line)
    assert index.chunk_at(999, 1) is None
    assert index.definitions("y") == [scan(files["b.py"].id, 5)]
    assert index.definitions("K.f") == [scan(files["a.py"].id, 7)]
    assert index.definitions("ghost") == []


def test_symbols_read_in_pages_and_postings_keep_every_definition_in_order(tmp_path: Path) -> None:
    from codeloupe.lanes.symbols import SymbolIndex

    store = Store(tmp_path / "index.sqlite")
    for f in range(3):
        rel = f"copy-{f}/m.py"
        chunks = [Chunk(i * 2 + 1, i * 2 + 2, "function", f"run{i}", rel, f"def run{i}():\n    pass\n") for i in range(4)]
        symbols = [Symbol(f"run{i}", "function", i * 2 + 1, i * 2 + 2, "Task" if i % 2 else "", f"run{i}()")
                   for i in range(4)]
        store.replace_file(ChunkedFile(rel, "python", chunks, symbols, FileSkeleton(rel, "")), hash=rel, size=1,
                           mtime=1.0, is_doc=False, encoding="utf-8", chunker_version=1, line_count=8)
    assert list(store.iter_symbol_rows(page=5)) == store.symbol_rows()
    index = SymbolIndex(store.chunk_table(), store.iter_symbol_rows(page=5))
    assert index.definitions("run1") == [1, 5, 9]  # one per copy, in table order
    assert index.definitions("task.run3") == [3, 7, 11] and index.definitions("RUN2") == [2, 6, 10]
    assert index.definitions("missing") == []
    scores = index.scores("run1")
    assert scores[[1, 5, 9]].min() > 0 and scores.sum() == scores[[1, 5, 9]].sum()


def test_the_symbol_names_a_build_reads_make_the_index_whole_rows_make(tmp_path: Path) -> None:
    """A snapshot builds its symbol lane from the names alone (`iter_symbol_names`), in pages; the postings, key
    for key and row for row, are those of the whole symbol rows, a symbol outside every chunk left out."""
    import numpy as np

    from codeloupe.lanes.symbols import SymbolIndex

    store = Store(tmp_path / "index.sqlite")
    for f in range(4):
        rel = f"pkg{f % 2}/mod{f}.py"
        chunks = [Chunk(i * 3 + 1, i * 3 + 3, "function", f"step{i}", rel, f"def step{i}():\n    pass\n\n")
                  for i in range(5)]
        symbols = [Symbol(f"step{i % 3}", "function", i * 3 + 1, i * 3 + 3, "Runner" if i % 2 else "", "")
                   for i in range(5)] + [Symbol("Runner", "class", 1, 15, "", "")]
        store.replace_file(ChunkedFile(rel, "python", chunks, symbols, FileSkeleton(rel, "")), hash=rel, size=1,
                           mtime=1.0, is_doc=False, encoding="utf-8", chunker_version=1, line_count=15)
    store.replace_file(ChunkedFile("empty.py", "python", [], [Symbol("ghost", "function", 1, 1, "", "")],
                                   FileSkeleton("empty.py", "")), hash="e", size=1, mtime=1.0, is_doc=False,
                       encoding="utf-8", chunker_version=1, line_count=1)
    table = store.chunk_table()
    whole = SymbolIndex(table, store.iter_symbol_rows(page=7))
    named = SymbolIndex.of_names(table, store.iter_symbol_names(page=7))
    for name in ("by_name", "by_lower", "by_qualified"):
        a, b = getattr(whole, name), getattr(named, name)
        assert list(a._slots.items()) == list(b._slots.items())
        assert np.array_equal(a._offsets, b._offsets) and np.array_equal(a._rows, b._rows)
    assert named.definitions("runner.step1") == whole.definitions("runner.step1") != []
    assert named.definitions("ghost") == []
