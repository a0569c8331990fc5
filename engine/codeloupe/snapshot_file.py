"""What a search snapshot is built from, saved beside the index: the chunk table, the file rows with their kinds
(test, example, ...) and the symbol postings, so a restarted process loads arrays instead of reading every chunk
row through SQL and rebuilding the symbol maps in Python (tens of seconds at 40K files). Same rules as the saved
lexical index (`codeloupe.saved`): used only for the exact index state it was built from, rebuilt when anything
is off.

The chunk texts are not saved: they are in the index already, and a loaded table reads them from the store
when asked (`ChunkTexts`), as a table read from the store does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from codeloupe.lanes.lexical import TOKENS_VERSION
from codeloupe.lanes.symbols import SymbolIndex
from codeloupe.saved import load_arrays, pack_strings, save_arrays, saved_generation, unpack_strings
from codeloupe.store import ChunkTable, ChunkTexts, FileRow, JsonLists, TextReader

# Bump when what is saved, or how, changes: a file of another version is rebuilt.
SNAPSHOT_FILE_VERSION = 6

_TABLE_NUMBERS = ("ids", "file_ids", "start_lines", "end_lines")
_TABLE_STRINGS = ("kinds", "names", "breadcrumbs")
_FILE_NUMBERS = ("id", "size", "mtime", "is_doc", "chunker_version", "line_count")
_FILE_STRINGS = ("path", "hash", "language")


def snapshot_file(index_path: Path) -> Path:
    return index_path.with_name(index_path.name + ".snapshot.npz")


def lexical_file(index_path: Path) -> Path:
    """Where the chunk lane's BM25 matrix is kept beside the index."""
    return index_path.with_name(index_path.name + ".bm25.npz")


def saved_past(index_path: Path, index_id: str, generation: int) -> bool:
    """Whether the search snapshot or the lexical index saved beside the index at `index_path` (id `index_id`, now
    at content `generation`) were saved for a later state of it: its last writes were lost (its write-ahead log
    deleted, an older copy of the file put back). Its ids and generations are then handed out again for other
    contents, and what was saved for them would be taken for the index's own; the caller gives the index a new
    id. Only the two files' stamps are read."""
    saved = (saved_snapshot_generation(snapshot_file(index_path), index_id),
             saved_generation(lexical_file(index_path), f"{TOKENS_VERSION}:{index_id}:"))
    return any(g is not None and g > generation for g in saved)


def save_snapshot_inputs(path: Path, stamp: str, table: ChunkTable, files: list[FileRow], symbols: SymbolIndex,
                         file_kinds: dict[int, int]) -> None:
    arrays: dict[str, np.ndarray] = {f"table_{name}": getattr(table, name) for name in _TABLE_NUMBERS}
    for name in _TABLE_STRINGS:
        arrays[f"table_{name}"], arrays[f"table_{name}_ends"] = pack_strings(getattr(table, name))
    arrays["table_symbols"], arrays["table_symbols_ends"] = pack_strings(table.symbols.encoded)  # JSON per chunk
    for name in _FILE_NUMBERS:
        arrays[f"file_{name}"] = np.array([getattr(r, name) for r in files],
                                          np.float64 if name == "mtime" else np.int64)
    for name in _FILE_STRINGS:
        arrays[f"file_{name}"], arrays[f"file_{name}_ends"] = pack_strings([getattr(r, name) for r in files])
    arrays["file_kind"] = np.array([file_kinds[r.id] for r in files], np.int8)
    arrays.update({f"symbols_{name}": value for name, value in symbols.arrays().items()})
    save_arrays(path, f"{SNAPSHOT_FILE_VERSION}:{stamp}", arrays)


def saved_snapshot_generation(path: Path, index_id: str) -> int | None:
    """The content generation of the index `index_id` the snapshot inputs at `path` were saved for, if any."""
    return saved_generation(path, f"{SNAPSHOT_FILE_VERSION}:{index_id}:")


def load_snapshot_inputs(path: Path, stamp: str, n_kinds: int, store: TextReader
                         ) -> tuple[ChunkTable, list[FileRow], SymbolIndex, dict[int, int]] | None:
    """(chunk table, file rows, symbol index, file id -> kind below `n_kinds`) saved for exactly `stamp`,
    else None; the table's texts are read from `store` (the index the file was saved beside)."""
    arrays = load_arrays(path, f"{SNAPSHOT_FILE_VERSION}:{stamp}")
    if arrays is None:
        return None
    try:
        table, files, symbols = _decode(arrays, store)
        kinds = arrays["file_kind"]
        if len(kinds) != len(files) or (len(kinds) and not 0 <= int(kinds.min()) <= int(kinds.max()) < n_kinds):
            return None
        return table, files, symbols, dict(zip((r.id for r in files), kinds.tolist()))
    except (KeyError, ValueError, IndexError, TypeError):  # arrays that do not fit together: rebuild
        return None


def _decode(arrays: dict[str, np.ndarray], store: TextReader) -> tuple[ChunkTable, list[FileRow], SymbolIndex]:
    numbers = {name: arrays[f"table_{name}"] for name in _TABLE_NUMBERS}
    n = len(numbers["ids"])
    strings = {name: _strings(arrays, f"table_{name}") for name in _TABLE_STRINGS}
    symbols_json = _strings(arrays, "table_symbols")
    if any(len(column) != n for column in (*numbers.values(), *strings.values(), symbols_json)):
        raise ValueError("the saved chunk table's columns differ in length")
    ids = numbers["ids"].astype(np.int64)
    table = ChunkTable(ids=ids, file_ids=numbers["file_ids"].astype(np.int64),
                       start_lines=numbers["start_lines"].astype(np.int32),
                       end_lines=numbers["end_lines"].astype(np.int32),
                       kinds=[sys.intern(kind) for kind in strings["kinds"]], names=strings["names"],
                       breadcrumbs=strings["breadcrumbs"], symbols=JsonLists(symbols_json),
                       texts=ChunkTexts(store, ids))
    columns = [arrays[f"file_{name}"].tolist() for name in _FILE_NUMBERS]
    paths, hashes, languages = (_strings(arrays, f"file_{name}") for name in _FILE_STRINGS)
    if any(len(column) != len(paths) for column in (*columns, hashes, languages)):
        raise ValueError("the saved file rows' columns differ in length")
    files = [FileRow(id=int(i), path=p, hash=h, language=lang, size=int(size), mtime=float(mtime),
                     is_doc=bool(doc), chunker_version=int(version), line_count=int(lines))
             for i, size, mtime, doc, version, lines, p, h, lang
             in zip(*columns, paths, hashes, languages)]
    symbols = SymbolIndex.from_arrays(table, {name[len("symbols_"):]: value for name, value in arrays.items()
                                              if name.startswith("symbols_")})
    return table, files, symbols


def _strings(arrays: dict[str, np.ndarray], name: str) -> list[str]:
    return unpack_strings(arrays[name], arrays[f"{name}_ends"])
