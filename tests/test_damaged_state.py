"""A damaged index or vector cache (pages overwritten, header intact) heals: found by the open-time check
or by the first statement that reads a bad page, moved aside, warned about and rebuilt."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codeloupe.api import Workspace
from codeloupe.embed.cache import EmbeddingCache, text_key
from codeloupe.store import index_problem
from codeloupe.store.health import integrity_problem

PAGE = 4096


def write_repo(root: Path, files: int = 60) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / f"mod{i}.py").write_text("".join(
            f"def handler_{i}_{j}(request):\n    return request.get('field_{j}')  # padding for pages\n"
            for j in range(40)))
    return root


def indexed_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository of 12 files written, indexed and closed: (its root, its index file)."""
    root = write_repo(tmp_path / "repo", files=12)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    ws.index()
    ws.close()
    return root, ws.store.path


def settle(path: Path) -> None:
    """Move everything from the WAL into the main file, as a clean shutdown leaves it."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def zero_cell_pointers(path: Path) -> None:
    """Damage that PRAGMA quick_check reports as findings (rows), without raising: the second cell pointer
    of six leaf pages in the middle of the file is zeroed; the header and the schema page are intact."""
    data = bytearray(path.read_bytes())
    pages = len(data) // PAGE
    damaged = 0
    for page in range(pages // 3, pages):
        at = page * PAGE
        is_leaf = data[at] in (0x0A, 0x0D)  # index leaf, table leaf
        cells = int.from_bytes(data[at + 3:at + 5], "big")
        if is_leaf and cells >= 2:
            data[at + 10:at + 12] = bytes(2)  # leaf header is 8 bytes; pointers are 2 bytes each
            damaged += 1
        if damaged == 6:
            break
    assert damaged == 6
    path.write_bytes(bytes(data))


def garbage_over_middle_pages(path: Path, everything: bool = False) -> None:
    """Random bytes over 40 pages from a quarter into the file (or over every page but the first)."""
    pages = path.stat().st_size // PAGE
    rng = np.random.default_rng(7)
    with path.open("r+b") as fh:
        for page in range(1, pages) if everything else range(pages // 4, pages // 4 + 40):
            fh.seek(page * PAGE)
            fh.write(rng.integers(0, 256, PAGE, dtype=np.uint8).tobytes())


def another_writer_commits(path: Path) -> None:
    """A second process writes (a CLI beside the editor): this connection's page cache is no longer trusted."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('touched_by', 'another process')")
    conn.close()


def test_damage_the_open_time_check_finds_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    root = write_repo(tmp_path / "repo")
    ws = Workspace(root, overrides={"embed_provider": "none"})
    ws.index()
    index = ws.store.path
    ws.close()
    settle(index)
    zero_cell_pointers(index)
    with sqlite3.connect(index) as probe:  # the check reports the damage as rows, it does not raise
        assert integrity_problem(probe)

    searched_and_healed(root, index, "handler_7_3", "mod7.py", "the index was rebuilt: corrupt index", 60)


def searched_and_healed(root: Path, index: Path, query: str, path: str, said: str, files: int) -> None:
    """`codeloupe search` in a new process says `said` on stderr and answers `path` from the index it rebuilt,
    sound and of `files` files, the damaged one kept beside it."""
    run = subprocess.run([sys.executable, "-m", "codeloupe", "search", str(root), query,
                          "--embed-provider", "none", "--json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert said in run.stderr
    assert f'"{path}"' in run.stdout
    assert Path(str(index) + ".damaged").is_file()
    with sqlite3.connect(index) as healed:
        assert index_problem(healed) == ""
        assert healed.execute("SELECT count(*) FROM files").fetchone()[0] == files


def test_chunks_deleted_by_hand_are_found_at_open_and_the_index_rebuilt(tmp_path: Path) -> None:
    """Rows deleted from the chunks table leave every page sound: the index opened and searched as if whole, the
    files missing part of their code (never indexed again while unchanged on disk)."""
    root = write_repo(tmp_path / "repo")
    (root / "big.py").write_text("".join(f"def big_{j}(request):\n    return request.get('big_{j}')\n\n\n"
                                         for j in range(400)))
    ws = Workspace(root, overrides={"embed_provider": "none"})
    ws.index()
    index = ws.store.path
    ws.close()
    with sqlite3.connect(index) as hand:  # the chunk holding big_200, and the whole of mod9.py
        gone = hand.execute("SELECT start_line, end_line FROM chunks WHERE text LIKE '%def big_200(%'").fetchone()
        assert gone[0] > 1
        hand.execute("DELETE FROM chunks WHERE text LIKE '%def big_200(%'"
                     " OR file_id = (SELECT id FROM files WHERE path = 'mod9.py')")
    with sqlite3.connect(index) as probe:
        assert integrity_problem(probe) == ""  # the pages are sound

    said = ("the index was rebuilt: corrupt index (the chunks of 2 files no longer cover their lines ('big.py':"
            f" {1600 - (gone[1] - gone[0] + 1)} of 1600)")
    searched_and_healed(root, index, "big_200", "big.py", said, 61)


def test_chunks_deleted_by_hand_are_found_by_the_deferred_check(tmp_path: Path) -> None:
    """The language server opens the index unchecked and checks it once its progress shows."""
    root, index = indexed_repo(tmp_path)
    with sqlite3.connect(index) as hand:
        hand.execute("DELETE FROM chunks WHERE id = (SELECT max(id) FROM chunks)")
    ws = Workspace(root, overrides={"embed_provider": "none"}, check_index=False)
    try:
        assert ws.store.rebuilt_reason == ""
        assert "no longer cover their lines" in ws.check_index()
        ws.index()
        assert index_problem(sqlite3.connect(ws.store.path)) == ""
        assert ws.store.counts()["files"] == 12
    finally:
        ws.close()


def reopened_after_a_clean_index(root: Path) -> Workspace:
    """A workspace indexed, closed and checkpointed, then opened again: sound at open, its cache cold."""
    ws = Workspace(write_repo(root), overrides={"embed_provider": "none"})
    ws.index()
    ws.close()
    settle(ws.store.path)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    assert ws.store.rebuilt_reason == ""
    return ws


def test_damage_met_at_first_use_is_moved_aside_and_the_index_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    ws = reopened_after_a_clean_index(root)
    try:
        garbage_over_middle_pages(ws.store.path)
        another_writer_commits(ws.store.path)
        (root / "mod5.py").write_text("def handler_5_2(request):\n    return 'changed'\n")
        report = ws.index()  # the write that meets a bad page starts the index over, into a new file
        assert "corrupt index" in ws.store.rebuilt_reason
        assert Path(str(ws.store.path) + ".damaged").is_file()
        assert report.files_indexed == 60
        assert [f.path for f in ws.search("handler_5_2").files][0] == "mod5.py"
        assert integrity_problem(sqlite3.connect(ws.store.path)) == ""
    finally:
        ws.close()


def test_a_read_that_meets_damage_recovers_instead_of_failing_forever(tmp_path: Path) -> None:
    ws = reopened_after_a_clean_index(tmp_path / "repo")
    try:
        garbage_over_middle_pages(ws.store.path)
        another_writer_commits(ws.store.path)
        assert list(ws.store.chunk_table().texts) == []  # the new, empty index; no "malformed" error
        assert "corrupt index" in ws.store.rebuilt_reason
        ws.index()
        assert ws.store.counts()["files"] == 60
    finally:
        ws.close()


def test_a_save_that_meets_damage_rebuilds_the_whole_index(tmp_path: Path) -> None:
    """The editor's save path: one file re-indexed, the damage found, everything re-indexed."""
    root = tmp_path / "repo"
    ws = reopened_after_a_clean_index(root)
    try:
        another_writer_commits(ws.store.path)  # first: its page lands in the WAL, undamaged
        garbage_over_middle_pages(ws.store.path, everything=True)  # the files table too
        (root / "mod5.py").write_text("def handler_5_2(request):\n    return 'saved'\n")
        report = ws.update_files(["mod5.py"])
        assert "corrupt index" in ws.store.rebuilt_reason
        assert report.files_indexed + report.files_unchanged == 60 == ws.store.counts()["files"]
        assert [f.path for f in ws.search("handler_5_2").files][0] == "mod5.py"
    finally:
        ws.close()


def fill_cache(path: Path, count: int = 3000) -> tuple[list[bytes], np.ndarray]:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(count, 384)).astype(np.float32)
    keys = [text_key(f"text {i}") for i in range(count)]
    cache = EmbeddingCache(path)
    cache.put("model-a", keys, vectors)
    cache.close()
    settle(path)
    return keys, vectors


def test_a_damaged_vector_cache_is_found_at_open_moved_aside_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    keys, vectors = fill_cache(path)
    zero_cell_pointers(path)
    with sqlite3.connect(path) as probe:
        assert integrity_problem(probe)
    cache = EmbeddingCache(path)
    try:
        assert Path(str(path) + ".damaged").is_file()
        assert cache.get("model-a", keys[:10]) == {}
        cache.put("model-a", keys[:10], vectors[:10])
        assert len(cache.get("model-a", keys[:10])) == 10
    finally:
        cache.close()
    assert integrity_problem(sqlite3.connect(path)) == ""


def test_a_vector_cache_damaged_while_open_recovers_at_first_use(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    keys, vectors = fill_cache(path)
    cache = EmbeddingCache(path)
    try:
        garbage_over_middle_pages(path)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("INSERT OR REPLACE INTO vectors VALUES ('other', x'00', 1.0, x'00')")
        conn.close()
        assert cache.get("model-a", keys) == {}  # not "database disk image is malformed", forever
        assert Path(str(path) + ".damaged").is_file()
        cache.put("model-a", keys[:5], vectors[:5])
        assert len(cache.get("model-a", keys[:5])) == 5
    finally:
        cache.close()


def test_search_after_a_recovery_never_shows_the_old_index_s_rows(tmp_path: Path) -> None:
    """The language server's start: the saved snapshot loads while the deferred check runs; the check finds
    damage and the index is rebuilt, numbering its files anew. The old snapshot must be replaced, not patched
    by file id (mod1.py would take mod0.py's id and show mod0.py's text)."""
    ws = reopened_after_a_clean_index(tmp_path / "repo")
    assert ws.search("handler_1_5").files[0].path == "mod1.py"  # saves the snapshot beside the index
    ws.close()
    zero_cell_pointers(ws.store.path)
    (tmp_path / "repo" / "mod0.py").unlink()
    ws = Workspace(tmp_path / "repo", overrides={"embed_provider": "none"}, check_index=False)
    try:
        ws.warm(graph=False)
        assert "corrupt index" in ws.check_index()
        ws.index()
        found = ws.search("handler_1_5").files
        assert found[0].path == "mod1.py" and "handler_1_5" in found[0].chunks[0].text
        assert "mod0.py" not in [f.path for f in ws.search("handler_0_5").files]
    finally:
        ws.close()


# Rows whose pages are sound but whose cells hold what this store never writes (SQLite keeps any type in any
# column): each failed `codeloupe search` with a traceback, a blob reaching a tokenizer or a path join as bytes.
DAMAGED_CELLS = {
    "a chunk's text a blob that is not UTF-8": "UPDATE chunks SET text = X'fffe00' WHERE id = 3",
    "a file's path a blob": "UPDATE files SET path = X'ff' WHERE path = 'mod4.py'",
    "a file's language a blob": "UPDATE files SET language = X'ff' WHERE path = 'mod3.py'",
    "a symbol's name a blob": "UPDATE symbols SET name = X'ff' WHERE name = 'handler_5_5'",
    "a skeleton a blob": "UPDATE skeletons SET text = X'ff' WHERE file_id = 2",
    "the content generation not a number": "UPDATE meta SET value = 'abc' WHERE key = 'content_generation'",
    "the schema version not a number": "UPDATE meta SET value = 'abc' WHERE key = 'schema_version'",
    "the schema version a blob": "UPDATE meta SET value = X'ff00' WHERE key = 'schema_version'",
}


@pytest.mark.parametrize("damage", DAMAGED_CELLS.values(), ids=DAMAGED_CELLS.keys())
def test_a_cell_of_a_type_the_store_never_writes_is_damage_that_heals(tmp_path: Path, damage: str) -> None:
    root, index = indexed_repo(tmp_path)
    with sqlite3.connect(index) as db:
        assert db.execute(damage).rowcount == 1
    for saved in index.parent.glob(index.name + ".*.npz"):  # so that the search reads the rows themselves
        saved.unlink()

    command = [sys.executable, "-m", "codeloupe", "search", str(root), "handler_7_3", "--embed-provider", "none",
               "--json"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    # Met as damage: moved aside and said so (a search that meets it after the index step answers from the new,
    # empty index, as one meeting a bad page does), or read as the text it holds; the next search answers.
    assert ("rebuilt" in run.stderr and Path(str(index) + ".damaged").is_file()) or '"mod7.py"' in run.stdout
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "rebuilt" not in again.stderr and '"mod7.py"' in again.stdout


@pytest.mark.parametrize("table", ["chunks", "symbols"])
def test_an_index_missing_a_table_of_its_schema_is_damage_that_heals(tmp_path: Path, table: str) -> None:
    """The schema script would make the table anew, empty: every file's row says it is indexed, so its chunks
    (or names) would never come back, and CORE would show files with no code."""
    root, index = indexed_repo(tmp_path)
    with sqlite3.connect(index) as db:
        db.execute(f"DROP TABLE {table}")
    reopened = Workspace(root, overrides={"embed_provider": "none"})
    try:
        assert f"table {table} missing" in reopened.store.rebuilt_reason
        assert Path(str(index) + ".damaged").is_file()
        reopened.index()
        hit = reopened.search("handler_7_3").core[0]
        assert hit.path == "mod7.py" and "def handler_7_3" in hit.chunks[0].text
    finally:
        reopened.close()


def test_an_index_put_back_to_an_earlier_state_never_answers_from_what_was_saved_for_the_later_one(
        tmp_path: Path) -> None:
    """Its write-ahead log lost, or an older copy of the file put back: the index hands its ids and generations
    out again for other contents, and the lexical index and snapshot saved beside it for the lost state would
    match their stamps and row ids."""
    root, index = indexed_repo(tmp_path)
    overrides = {"embed_provider": "none"}
    settle(index)
    earlier = index.read_bytes()
    (root / "mod3.py").write_text("def quokkazebra(request):\n    return request\n")
    ws = Workspace(root, overrides=overrides)
    ws.index()
    assert ws.search("quokkazebra").core[0].path == "mod3.py"  # saved beside the index for this state
    ws.close()
    for suffix in ("-wal", "-shm"):
        Path(str(index) + suffix).unlink(missing_ok=True)
    index.write_bytes(earlier)
    (root / "mod3.py").write_text("def wombatyak(request):\n    return request\n")
    ws = Workspace(root, overrides=overrides)
    try:
        ws.index()
        assert not any(h.path == "mod3.py" for h in ws.search("quokkazebra").core)
        found = ws.search("wombatyak").core
        assert found and found[0].path == "mod3.py" and "def wombatyak" in found[0].chunks[0].text
    finally:
        ws.close()


NOT_FILES = {
    "the WAL a link to another file": lambda index, tmp: Path(f"{index}-wal").symlink_to(tmp / "repo" / "mod1.py"),
    "the WAL a directory": lambda index, tmp: Path(f"{index}-wal").mkdir(),
    "the shared memory a dangling link": lambda index, tmp: Path(f"{index}-shm").symlink_to(tmp / "nowhere"),
    "the index a FIFO": lambda index, tmp: index.unlink() or os.mkfifo(index),
    "the index a link to /dev/zero": lambda index, tmp: index.unlink() or index.symlink_to("/dev/zero"),
}


@pytest.mark.parametrize("damage", NOT_FILES.values(), ids=NOT_FILES.keys())
def test_an_index_or_its_wal_that_is_no_regular_file_is_damage_that_heals(tmp_path: Path, damage) -> None:
    """SQLite reports these as a file it cannot open, or as a full disk (then the index was opened read-only
    and every write refused with 'cannot create the index': a misleading error, and nothing healed it)."""
    root, index = indexed_repo(tmp_path)
    before = (root / "mod1.py").read_bytes()
    damage(index, tmp_path)
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        assert "not a regular file" in ws.store.rebuilt_reason and not ws.store.read_only_reason
        ws.index()
        assert ws.search("handler_7_3").core[0].path == "mod7.py"
    finally:
        ws.close()
    assert (root / "mod1.py").read_bytes() == before  # what a link pointed at is never written
