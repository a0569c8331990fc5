"""A store's file ids after changes, read from what changed since an earlier look (the ids above the last one
seen, the removal log), equal the ids read whole: over random writes, rewrites and deletions, from many
earlier looks, and once the log has been pruned past a look."""

from __future__ import annotations

import random
from pathlib import Path

from codeloupe.store import FileIds, Store
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton


def _write(store: Store, rel: str, version: int) -> None:
    chunks = [Chunk(1, 1, "function", "f", rel, f"def f():\n    return {version}\n")]
    store.replace_file(ChunkedFile(rel, "python", chunks, [], FileSkeleton(rel, rel)), hash=f"{rel}{version}",
                       size=1, mtime=1.0, is_doc=False, encoding="utf-8", chunker_version=1, line_count=2)


def test_the_ids_from_what_changed_equal_the_ids_read_whole(tmp_path: Path) -> None:
    store = Store(tmp_path / "index.sqlite")
    rng = random.Random(5)
    looks = [store.file_ids_now()]
    for step in range(300):
        rel = f"pkg/m{rng.randrange(40)}.py"
        if rng.random() < 0.3:
            store.delete_files([rel])
        else:
            _write(store, rel, step)  # a rewrite deletes the old row: its id is gone, a new one comes
        whole = store.file_ids().tolist()
        for seen in rng.sample(looks, min(len(looks), 5)):
            now = store.file_ids_now(seen)
            assert now.ids.tolist() == whole and now.removed_up_to >= seen.removed_up_to
        looks.append(store.file_ids_now(looks[-1]))
    assert looks[-1].removed_up_to > 50  # the log was read, not only the ids above the last seen


def _looked_then_one_removed(tmp_path: Path) -> tuple[Store, FileIds]:
    """A store of m0.py, m1.py, m2.py, a look at its ids, then m1.py deleted."""
    store = Store(tmp_path / "index.sqlite")
    for f in range(3):
        _write(store, f"m{f}.py", 0)
    seen = store.file_ids_now()
    store.delete_files(["m1.py"])
    return store, seen


def test_a_look_older_than_the_pruned_log_reads_every_id(tmp_path: Path) -> None:
    store, old = _looked_then_one_removed(tmp_path)
    with store.transaction() as conn:  # 20,000 removals logged: the log keeps the last 10,000 to 20,000
        conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)"
                     " INSERT INTO removed_files (file_id) SELECT -i FROM n")
    kept = store.query("SELECT min(seq), max(seq), count(*) FROM removed_files")[0]
    assert kept[0] > old.removed_up_to + 1 and kept[2] <= 20_000
    # Read from the log alone, m1.py's removal would be missed; the whole read gives the truth.
    assert store.file_ids_now(old).ids.tolist() == store.file_ids().tolist() == [old.ids[0], old.ids[2]]


def test_an_index_without_a_removal_log_answers_by_reading_every_id(tmp_path: Path) -> None:
    """An index written before the log existed and opened read-only (a full disk) never gets one."""
    store = Store(tmp_path / "index.sqlite")
    _write(store, "a.py", 0)
    seen = store.file_ids_now()
    with store.transaction() as conn:  # as such an index is: no log (a read-only open creates nothing)
        for statement in ("DROP TRIGGER removed_files_pruned", "DROP TRIGGER files_removed", "DROP TABLE removed_files"):
            conn.execute(statement)
    _write(store, "b.py", 0)
    _write(store, "a.py", 1)
    for look in (seen, None):
        now = store.file_ids_now(look)
        assert now.ids.tolist() == store.file_ids().tolist() and len(now.ids) == 2 and now.removed_up_to == -1
    assert store.file_ids_now(now).removed_up_to == -1


def test_a_damaged_removal_log_row_costs_a_whole_read_not_a_wrong_answer(tmp_path: Path) -> None:
    store, seen = _looked_then_one_removed(tmp_path)
    with store.transaction() as conn:  # the removal's row damaged: text where an id belongs
        conn.execute("UPDATE removed_files SET file_id = 'not an id' WHERE seq = (SELECT max(seq) FROM removed_files)")
    assert store.file_ids_now(seen).ids.tolist() == store.file_ids().tolist() == [seen.ids[0], seen.ids[2]]
