"""An index run writes its files a group at a time (`Store.batch`): the group is one transaction, seen by
other connections whole or not at all, rolled back whole on a failure, and the store is as before after it."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from codeloupe.store import Store
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton


def _write(store: Store, rel: str) -> None:
    chunks = [Chunk(1, 2, "function", "f", rel, "def f():\n    return 1\n")]
    store.replace_file(ChunkedFile(rel, "python", chunks, [], FileSkeleton(rel, rel)), hash=rel, size=1,
                       mtime=1.0, is_doc=False, encoding="utf-8", chunker_version=1, line_count=2)


def _paths(store: Store) -> list[str]:
    return [row[0] for row in store.query("SELECT path FROM files ORDER BY path")]


def test_a_batch_is_seen_by_another_connection_only_once_it_ends(tmp_path: Path) -> None:
    store, reader = Store(tmp_path / "index.sqlite"), Store(tmp_path / "index.sqlite")
    with store.batch():
        _write(store, "a.py")
        _write(store, "b.py")
        assert _paths(store) == ["a.py", "b.py"]  # its own writes, on its own connection
        assert _paths(reader) == []
    assert _paths(reader) == ["a.py", "b.py"]


def test_a_failure_in_a_batch_rolls_the_whole_group_back_and_writes_go_on_after_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "index.sqlite")
    _write(store, "before.py")
    with pytest.raises(RuntimeError), store.batch():
        _write(store, "a.py")
        raise RuntimeError("a write failed")
    assert _paths(store) == ["before.py"]
    _write(store, "after.py")  # a transaction of its own again, committed
    with pytest.raises(RuntimeError), store.transaction() as conn:  # ... and rolled back whole on a failure
        conn.execute("DELETE FROM files")
        raise RuntimeError("a write failed")
    assert _paths(Store(tmp_path / "index.sqlite")) == ["after.py", "before.py"]


def test_another_thread_writes_after_the_batch_not_inside_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "index.sqlite")
    reader = Store(tmp_path / "index.sqlite")
    started, other_done = threading.Event(), threading.Event()

    def other() -> None:
        started.wait()
        _write(store, "other.py")
        other_done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with pytest.raises(RuntimeError), store.batch():
        _write(store, "a.py")
        started.set()
        assert not other_done.wait(0.3)  # it waits for the batch: its write is not part of the group
        raise RuntimeError("the batch fails")
    thread.join(10)
    assert other_done.is_set() and _paths(reader) == ["other.py"]


def test_an_index_run_tells_its_progress_between_groups_with_the_files_counted_written(tmp_path: Path) -> None:
    """Progress is told after a group's transaction ends: another connection then sees as many files as it says
    are done, and another thread can read the index meanwhile (told inside the group, the listener ran holding
    the store's lock: an editor slow to read its pipe held up every search)."""
    from codeloupe.api import Workspace
    from codeloupe.index import PROGRESS_EVERY, WRITE_BATCH

    files = 120
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(files):
        (root / f"m{i:03}.py").write_text(f"def f{i}():\n    return {i}\n")
    ws = Workspace(root, overrides={"cache_dir": str(tmp_path / "cache"), "embed_provider": "none"})
    told: list[tuple[int, int, bool]] = []

    def progress(p) -> None:
        if p.phase != "chunk":
            return
        seen = len(Store(ws.store.path).file_rows())
        reading = threading.Thread(target=ws.store.file_rows)
        reading.start()
        reading.join(5)
        told.append((p.done, seen, not reading.is_alive()))

    ws.index(progress, edges=False)
    assert all(seen == done and free for done, seen, free in told), told
    # Each told count ends a group, and is told once past each multiple of PROGRESS_EVERY, and at the end.
    ends = [min(end, files) for end in range(WRITE_BATCH, files + WRITE_BATCH, WRITE_BATCH)]
    expected = [end for before, end in zip([0, *ends], ends)
                if end // PROGRESS_EVERY > before // PROGRESS_EVERY or end == files]
    assert [done for done, _, _ in told] == expected and len(expected) > 1


def test_an_index_written_with_the_old_name_index_loses_it_at_open_and_keeps_its_rows(tmp_path: Path) -> None:
    """No statement reads symbols by name; earlier versions kept an index of them that every write updated."""
    path = tmp_path / "index.sqlite"
    store = Store(path)
    _write(store, "a.py")
    store.query("CREATE INDEX symbols_name ON symbols(name COLLATE NOCASE)")  # as earlier versions made it
    store.close()
    again = Store(path)
    indexes = {row[0] for row in again.query("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "symbols_name" not in indexes and "symbols_file" in indexes
    assert _paths(again) == ["a.py"] and again.counts()["chunks"] == 1


def test_an_index_opened_while_another_process_writes_keeps_the_old_name_index_for_later_and_stays_sound(
        tmp_path: Path) -> None:
    """Dropping the old name index is the one write an open makes: met by another process's write, it waits a
    moment and is left for a later open. A lock there read as an unreadable index, moved aside and rebuilt."""
    path = tmp_path / "index.sqlite"
    store = Store(path)
    _write(store, "a.py")
    store.query("CREATE INDEX symbols_name ON symbols(name COLLATE NOCASE)")
    store.close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO meta VALUES ('held', 'by another process')")
    try:
        during = Store(path)
        assert during.rebuilt_reason == "" and _paths(during) == ["a.py"]
        assert during.query("SELECT name FROM sqlite_master WHERE name = 'symbols_name'")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    after = Store(path)
    assert not after.query("SELECT name FROM sqlite_master WHERE name = 'symbols_name'")
    assert not list(tmp_path.glob("*.damaged*")) and _paths(after) == ["a.py"]
