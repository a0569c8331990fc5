"""Saved lexical indexes are read in place (the file mapped, not copied): a process holds the pages its queries
read, not the whole matrix, and a damaged file is still found by its checksums and rebuilt."""

from __future__ import annotations

import mmap
import os
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import sparse

from codeloupe.api import Workspace
from codeloupe.lanes.lexical import BM25Index
from codeloupe.saved import load_arrays, release_pages, save_arrays, saved_stamp


def _resident_mb() -> float:
    """This process's resident memory (anonymous and file-backed pages alike), MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024


def _large_index(docs: int, terms: int, entries: int) -> BM25Index:
    """A BM25 index of `entries` random counts (built from the matrix: tokenising that many words takes long)."""
    rng = np.random.default_rng(5)
    counts = sparse.csr_matrix((rng.integers(1, 4, entries).astype(np.float32),
                                (rng.integers(0, docs, entries), rng.integers(0, terms, entries))),
                               shape=(docs, terms)).tocsc()
    counts.sum_duplicates()
    index = BM25Index.__new__(BM25Index)
    index._weigh(counts, {f"t{i}": i for i in range(terms)}, None, keep_counts=True)
    return index


def test_a_loaded_index_holds_only_the_pages_its_queries_read(tmp_path: Path) -> None:
    docs, terms = 200_000, 50_000
    built = _large_index(docs, terms, 12_000_000)  # ~10 bytes an entry: ~120 MB saved
    ids = np.arange(docs)
    built.save(tmp_path / "i.npz", ids, "s")
    expected = {q: built.scores(list(q)) for q in (("t1",), ("t7", "t4000", "t49999"))}
    del built
    before = _resident_mb()
    loaded = BM25Index.load(tmp_path / "i.npz", ids, "s")
    assert loaded is not None
    for query, scores in expected.items():
        np.testing.assert_array_equal(loaded.scores(list(query)), scores)
    # A copy holds every entry (~120 MB); in place, the vocabulary, the pointers and the queried columns.
    assert _resident_mb() - before < 40


def _is_mapped(array: np.ndarray) -> bool:
    """Whether `array` is a view of a mapped file (what `load_arrays` and a save return), not memory of its own."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return isinstance(base, mmap.mmap)


def test_a_saved_index_answers_from_the_bytes_it_wrote_and_holds_no_copy_of_them(tmp_path: Path) -> None:
    docs, terms = 200_000, 50_000
    built = _large_index(docs, terms, 12_000_000)
    queries = [["t1"], ["t7", "t4000", "t49999"]]
    expected = [built.scores(q) for q in queries]
    path = tmp_path / "i.npz"
    saved = built.save(path, np.arange(docs), "s")
    assert saved is not built
    # Another writer replaces the file at once: the index saved goes on reading the bytes its own save wrote.
    save_arrays(path, "other", {"data": np.zeros(10, np.float32)})
    # Its entries are the file's pages, not the arrays built in memory (which can go).
    for entries in (saved._matrix.data, saved._matrix.indices, saved._counts.data):
        assert _is_mapped(entries)
    del built
    for query, scores in zip(queries, expected):
        np.testing.assert_array_equal(saved.scores(query), scores)
    groups = np.arange(docs, dtype=np.int64) // 10
    grouped = BM25Index.grouped(saved, groups, docs // 10)  # its counts are read in place too
    assert grouped.scores(["t1"]).shape == (docs // 10,)


def test_a_flipped_byte_in_an_array_read_in_place_is_found(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    save_arrays(path, "s", {"data": np.arange(100_000, dtype=np.float32), "small": np.arange(3)})
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("data.npy")
    raw = bytearray(path.read_bytes())
    raw[info.header_offset + 4096] ^= 0x01  # inside the array's bytes, past every header
    path.write_bytes(bytes(raw))
    assert load_arrays(path, "s", mapped=("data",)) is None


def test_arrays_are_read_in_place_aligned_and_equal(tmp_path: Path) -> None:
    arrays = {"f": np.linspace(0, 1, 1001, dtype=np.float32), "i": np.arange(17, dtype=np.int64),
              "u": np.array([1, 65535], np.uint16), "empty": np.zeros(0, np.int32), "m": np.eye(3)}
    save_arrays(tmp_path / "a.npz", "s", arrays)
    loaded = load_arrays(tmp_path / "a.npz", "s", mapped=tuple(arrays))
    assert loaded is not None and set(loaded) == set(arrays)
    for name, array in arrays.items():
        np.testing.assert_array_equal(loaded[name], array)
        assert loaded[name].dtype == array.dtype and loaded[name].shape == array.shape
    assert not loaded["f"].flags.writeable and loaded["f"].flags.aligned  # a view of the file, not a copy
    release_pages(loaded["f"])
    np.testing.assert_array_equal(loaded["f"], arrays["f"])  # read again where used
    np.savez(tmp_path / "plain.npz", f=arrays["f"], __stamp__=np.array("s"))  # unaligned members: copied
    plain = load_arrays(tmp_path / "plain.npz", "s", mapped=("f",))
    assert plain is not None
    np.testing.assert_array_equal(plain["f"], arrays["f"])


def test_an_index_read_in_place_still_answers_after_its_file_is_replaced(tmp_path: Path) -> None:
    """A snapshot keeps answering from the file it mapped while a newer index state is saved over it: saves
    write a new file and rename it over the old one, never rewrite the mapped bytes."""
    ids = np.arange(4)
    first = BM25Index([["parse", "header"], ["header", "cookie"], ["render"], ["cookie", "jar"]])
    first.save(tmp_path / "i.npz", ids, "one")
    loaded = BM25Index.load(tmp_path / "i.npz", ids, "one")
    assert loaded is not None
    expected = first.scores(["cookie", "header"])
    BM25Index([["other"], ["words"], ["entirely"], ["cookie"]]).save(tmp_path / "i.npz", ids, "two")
    np.testing.assert_array_equal(loaded.scores(["cookie", "header"]), expected)
    assert BM25Index.load(tmp_path / "i.npz", ids, "one") is None  # the file is now the newer state's


def test_a_member_whose_header_is_elsewhere_than_the_archive_says_is_refused(tmp_path: Path) -> None:
    """The archive's directory points a member's header at a header signature a few bytes before the end of
    the file (here in the archive's comment; a damaged directory that `np.load` still reads): refused, never
    read past the end."""
    path = tmp_path / "a.npz"
    save_arrays(path, "s", {"data": np.arange(1000, dtype=np.float32)})
    with zipfile.ZipFile(path, "a") as archive:
        archive.comment = b"PK\x03\x04ab"
    raw = bytearray(path.read_bytes())
    entry = raw.index(b"PK\x01\x02")  # the archive directory's first entry
    assert raw[entry + 46:entry + 46 + len(b"data.npy")] == b"data.npy"
    raw[entry + 42:entry + 46] = (len(raw) - 6).to_bytes(4, "little")  # its local header's offset
    path.write_bytes(bytes(raw))
    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo("data.npy").header_offset == len(raw) - 6  # the directory still reads
    assert load_arrays(path, "s", mapped=("data",)) is None


def test_writers_of_one_saved_file_at_once_leave_one_whole_file(tmp_path: Path) -> None:
    """Two threads of a server (or a server and a command) saving the same file at once each write a file of their
    own: with one shared temporary name their bytes mixed and one rename failed. Whichever wins, the file is one
    writer's whole: its stamp and its arrays agree."""
    import threading

    path = tmp_path / "index.sqlite.bm25.npz"
    arrays = {stamp: {"values": np.full(2_000_000, value, np.int64)} for stamp, value in (("a", 1), ("b", 2))}
    failures: list[BaseException] = []

    def writer(stamp: str) -> None:
        try:
            for _ in range(6):
                save_arrays(path, stamp, arrays[stamp])
        except BaseException as exc:  # reported below: a failed save is what this test is about
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(stamp,)) for stamp in arrays]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    found = [(stamp, load_arrays(path, stamp)) for stamp in arrays]
    (stamp, loaded), = [(s, a) for s, a in found if a is not None]
    assert np.array_equal(loaded["values"], arrays[stamp]["values"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary file left


def test_a_temporary_file_a_killed_writer_left_is_removed_once_stale(tmp_path: Path) -> None:
    import os
    import time

    from codeloupe.saved import STALE_TMP_S

    path = tmp_path / "index.sqlite.files.npz"
    stale, recent = (tmp_path / f"{path.name}.{name}.tmp" for name in ("killed", "writing"))
    for left in (stale, recent):
        left.write_bytes(b"partial")
    os.utime(stale, (time.time() - STALE_TMP_S - 60,) * 2)
    save_arrays(path, "s", {"values": np.arange(3)})
    assert not stale.exists() and recent.exists()  # another writer's file, still being written, is left alone
    assert load_arrays(path, "s")["values"].tolist() == [0, 1, 2]


def _finishes(work: Callable[[], object], within_s: float = 60) -> object:
    """`work()`'s result; the test fails (instead of hanging for good) when it has not returned in `within_s`."""
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    thread.join(within_s)
    assert out, f"still waiting after {within_s:g} s"
    return out[0]


def test_a_fifo_in_a_saved_file_s_place_is_refused_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    os.mkfifo(path)
    assert _finishes(lambda: load_arrays(path, "s", mapped=("data",))) is None
    assert _finishes(lambda: saved_stamp(path)) is None


def test_a_search_rebuilds_a_saved_index_a_fifo_took_the_place_of(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for i in range(5):
        (root / f"m{i}.py").write_text(f"def parse_header_{i}(request):\n    return request.headers[{i}]\n")
    overrides = {"embed_provider": "none", "cache_dir": str(tmp_path / "cache")}
    ws = Workspace(root, overrides=overrides)
    ws.index()
    expected = [h.path for h in ws.search("parse header").files]
    ws.close()
    saved = [p for p in (tmp_path / "cache").rglob("*.npz")]
    assert saved
    for path in saved:
        path.unlink()
        os.mkfifo(path)
    again = Workspace(root, overrides=overrides)
    try:
        assert [h.path for h in _finishes(lambda: again.search("parse header")).files] == expected
        assert (again.store.path.parent / (again.store.path.name + ".bm25.npz")).is_file()
    finally:
        again.close()
