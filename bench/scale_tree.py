"""A large index built from copies of a real tree, shared by the scale benchmarks.

The tree (default: this interpreter's standard library) is indexed once for real; its files, chunks, symbols
and skeletons are then copied under `copy-N/` prefixes until the index holds `chunks` chunks (or `files`
files). Copies go through the real store (`Store.replace_file`) with their original's size, mtime and chunker
version and their chunks' term counts (counted as indexing's workers count them), so every table and counter
is as a real index of that many files would leave it, and a tree of hard links laid out the same way
(`link_copies`) is current to the indexer. Graph facts are not copied: the graph under test extracts them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from codeloupe.api import Workspace
from codeloupe.lanes.lexical import count_chunk_terms
from codeloupe.lanes.tokens import path_tokens
from codeloupe.types import Chunk, ChunkedFile, FileSkeleton, Symbol


def grow(ws: Workspace, *, chunks: int = 0, files: int = 0, log=print) -> int:
    """Index `ws` for real, then copy its files until it holds `chunks` chunks or `files` files; returns the
    number of copies made."""
    t = time.perf_counter()
    report = ws.index()
    log(f"base index: {report.files_indexed} files, {report.chunks} chunks in {time.perf_counter() - t:.1f}s")
    store = ws.store
    base_files = store.query(
        "SELECT id, path, hash, language, size, mtime, line_count, chunker_version, is_doc, encoding FROM files")
    if files:
        copies = max(0, -(-files // max(len(base_files), 1)) - 1)
    else:
        copies = max(0, (chunks - report.chunks) // max(report.chunks, 1) + 1)
    t = time.perf_counter()
    for copy in range(1, copies + 1):
        for file_id, path, digest, language, size, mtime, line_count, chunker, is_doc, encoding in base_files:
            file_chunks = [Chunk(*row[:5], row[5], tuple(json.loads(row[6]))) for row in store.query(
                "SELECT start_line, end_line, kind, name, breadcrumb, text, symbols FROM chunks"
                " WHERE file_id=? ORDER BY ord", (file_id,))]
            symbols = [Symbol(*row) for row in store.query(
                "SELECT name, kind, start_line, end_line, parent, signature FROM symbols WHERE file_id=?",
                (file_id,))]
            skeleton = store.query("SELECT text FROM skeletons WHERE file_id=?", (file_id,))
            new_path = f"copy-{copy}/{path}"
            path_terms = path_tokens(new_path)  # kept as indexing keeps them (the copy's path is among its terms)
            terms = count_chunk_terms([(path_terms, c.breadcrumb, c.text) for c in file_chunks]).kept()
            store.replace_file(ChunkedFile(new_path, language, file_chunks, symbols,
                                           FileSkeleton(new_path, skeleton[0][0] if skeleton else "")),
                               hash=digest, size=size, mtime=mtime, is_doc=bool(is_doc), encoding=encoding,
                               chunker_version=chunker, line_count=line_count, terms=terms)
    counts = store.counts()
    log(f"copied to {counts['files']} files, {counts['chunks']} chunks ({copies} copies) "
        f"in {time.perf_counter() - t:.1f}s")
    return copies


def link_copies(source: Path, root: Path, copies: int) -> None:
    """`copies` copies of `source` under `root/copy-N/`, as hard links (no space, same size and mtime)."""
    for copy in range(1, copies + 1):
        shutil.copytree(source, root / f"copy-{copy}", copy_function=os.link, symlinks=True)


@contextlib.contextmanager
def linked_workspace(tree: Path, files: int, prefix: str) -> Iterator[Workspace]:
    """`tree` hard-linked into a temporary folder, indexed lexical only and grown to `files` files with every
    copy linked on disk too (a tree of that many files, current in its index); removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        root = scratch / "tree"
        shutil.copytree(tree, root, copy_function=os.link, symlinks=True)
        ws = Workspace(root, overrides={"cache_dir": str(scratch / "cache"), "embed_provider": "none"})
        link_copies(tree, root, grow(ws, files=files))
        try:
            yield ws
        finally:
            ws.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def random_vectors(ws: Workspace, model: str, dim: int) -> None:
    """Random unit vectors for every chunk and skeleton, stored through the real store (a query's cost does
    not depend on the values)."""
    store = ws.store
    rng = np.random.default_rng(0)
    for table, sql in (("chunk", "SELECT id FROM chunks"), ("skeleton", "SELECT file_id FROM skeletons")):
        ids = [r[0] for r in store.query(sql)]
        for start in range(0, len(ids), 20_000):
            part = ids[start:start + 20_000]
            vectors = rng.standard_normal((len(part), dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            store.put_vectors(table, model, part, vectors)


def engines_to_compare(checkout: Path, engine: Path, baseline: str, into: Path) -> list[str]:
    """`engine`, then the engine/ of git revision `baseline` of `checkout` extracted under `into` (none for '')."""
    engines = [str(engine)]
    if baseline:
        archive = subprocess.run(["git", "-C", str(checkout), "archive", baseline, "engine"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
        engines.append(str(into / "engine"))
    return engines


def stdlib() -> Path:
    import sysconfig

    return Path(sysconfig.get_paths()["stdlib"])


def tree_bench_arguments(doc: str, verb: str, baseline: str, rounds: str) -> tuple[argparse.Namespace, list[Path]]:
    """A bench's command line over trees, parsed: the trees named, a golden set's corpora (`--corpora`) and this
    interpreter's standard library (`--stdlib`), which `verb` ("indexed", "read"); `--baseline REV` (whose
    engine/ runs beside this checkout's; '' for none, `baseline` by default) and `--rounds N` (`rounds` says
    what a round is). (arguments, the trees)"""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--corpora", type=Path, help=f"fetch_corpora.sh target dir (each <id>/repo is {verb})")
    parser.add_argument("--stdlib", action="store_true", help="also this interpreter's standard library")
    parser.add_argument("--baseline", default=baseline, help="the git revision whose engine/ is compared ('' for none)")
    parser.add_argument("--rounds", type=int, default=3, help=rounds)
    args = parser.parse_args()
    trees = list(args.trees)
    if args.corpora:
        trees += sorted(p / "repo" for p in args.corpora.iterdir() if (p / "repo").is_dir())
    if args.stdlib:
        trees.append(stdlib())
    return args, trees
