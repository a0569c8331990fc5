"""The graph at scale: first graph and graph after one save on a tree of copies of a real tree, for this
checkout's engine and a baseline revision's (today's main) on the same prepared index.

    .venv/bin/python bench/graph_scale.py [--tree DIR] [--files 40000] [--baseline REV] [--profile N]

The index is prepared once (`bench/scale_tree.py`: the tree indexed for real, then copied; random skeleton
vectors so the semantic lane has work) and kept under `--prepared`; each engine then runs in its own process
on a copy of it and times:
- first graph: facts of every copied file extracted, every edge resolved, communities and the semantic lane
  computed (`graph_map`), as the first graph request after opening the workspace does;
- after one save: one file re-stored with an added import, then the graph read again (`graph_map`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _workspace(root: Path, cache: Path):
    from codeloupe.api import Workspace

    return Workspace(root, overrides={"cache_dir": str(cache), "embed_provider": "none"})


def prepare(root: Path, files: int, prepared: Path) -> None:
    sys.path.insert(0, str(HERE))
    from scale_tree import grow, random_vectors

    ws = _workspace(root, prepared)
    grow(ws, files=files)
    random_vectors(ws, "bench-random", 384)
    ws.close()


def measure(root: Path, prepared: Path, profile: int) -> dict:
    from codeloupe.graph import graph_map

    cache = Path(tempfile.mkdtemp(prefix="codeloupe-graph-scale-"))
    try:
        shutil.copytree(prepared, cache, dirs_exist_ok=True)
        ws = _workspace(root, cache)
        first_s, first = _timed(lambda: graph_map(ws), profile)
        # One save: a file of the first copy gains an import of a sibling module.
        path = "copy-1/json/decoder.py"
        rows = ws.store.file_rows()
        saved_s = _save_and_reread(ws, path, profile) if path in rows else None
        from codeloupe.graph.build import load_graph

        graph = load_graph(ws)
        digest = hashlib.sha256(repr((sorted(graph.edges, key=repr), graph.community)).encode()).hexdigest()[:12]
        ws.close()
        return {"nodes": len(graph.paths), "communities": sum(1 for c in first.communities if c.size > 1),
                "graph_digest": digest,
                "first_graph_s": first_s, "after_save_s": saved_s}
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _timed(fn, profile: int):
    """(seconds, result) of `fn()`; with `profile`, its top cProfile rows go to stderr."""
    import cProfile
    import pstats

    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    t = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(profile)
    return round(seconds, 3), result


def _save_and_reread(ws, path: str, profile: int) -> float:
    from codeloupe.graph import graph_map
    from codeloupe.types import Chunk, ChunkedFile, FileSkeleton

    store = ws.store
    file_id = store.file_rows()[path].id
    chunks = [Chunk(*row[:5], row[5], tuple(json.loads(row[6]))) for row in store.query(
        "SELECT start_line, end_line, kind, name, breadcrumb, text, symbols FROM chunks WHERE file_id=? ORDER BY ord",
        (file_id,))]
    first = chunks[0]
    chunks[0] = Chunk(first.start_line, first.end_line, first.kind, first.name, first.breadcrumb,
                      "import json.scanner\n" + first.text[first.text.index("\n") + 1:] if "\n" in first.text
                      else "import json.scanner\n", first.symbols)

    def save() -> None:
        store.replace_file(ChunkedFile(path, "python", chunks, [], FileSkeleton(path, "")), hash="saved", size=1,
                           mtime=time.time(), is_doc=False, encoding="utf-8", chunker_version=0,
                           line_count=chunks[-1].end_line)
        graph_map(ws)

    return _timed(save, profile)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument("--files", type=int, default=40_000)
    parser.add_argument("--prepared", type=Path, default=None, help="where the prepared index is kept")
    parser.add_argument("--baseline", default="main", help="the git revision compared against (its engine/ is"
                        " extracted to a temporary directory; '' for none)")
    parser.add_argument("--profile", type=int, default=0, help="print the top N cProfile rows of the first graph")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tree is None:
        sys.path.insert(0, str(HERE))
        from scale_tree import stdlib

        args.tree = stdlib()
    prepared = args.prepared or Path(tempfile.gettempdir()) / f"codeloupe-graph-scale-{args.files}"
    if args.measure:
        print(json.dumps(measure(args.tree, prepared, args.profile)))
        return 0
    if not prepared.exists():
        prepare(args.tree, args.files, prepared)
    baseline = Path(tempfile.mkdtemp(prefix="codeloupe-baseline-"))
    engines = [str(HERE.parent / "engine")]
    if args.baseline:
        archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", args.baseline, "engine"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive, check=True)
        engines.append(str(baseline / "engine"))
    results = {}
    for engine in engines:
        env = dict(os.environ, PYTHONPATH=engine)
        out = subprocess.run([sys.executable, __file__, "--measure", "--tree", str(args.tree), "--prepared",
                              str(prepared), "--profile", str(args.profile)],
                             env=env, capture_output=True, text=True, check=False)
        if out.stderr:
            print(out.stderr, file=sys.stderr)
        results[engine] = json.loads(out.stdout) if out.returncode == 0 else {"error": out.returncode}
        print(f"{engine}: {results[engine]}", flush=True)
    shutil.rmtree(baseline, ignore_errors=True)
    if len(engines) == 2 and all("first_graph_s" in r for r in results.values()):
        new, old = (results[e] for e in engines)
        print(f"first graph: {new['first_graph_s']} s vs {old['first_graph_s']} s "
              f"({old['first_graph_s'] / max(new['first_graph_s'], 1e-9):.1f}x)")
        if new["after_save_s"] and old["after_save_s"]:
            print(f"after one save: {new['after_save_s']} s vs {old['after_save_s']} s "
                  f"({old['after_save_s'] / max(new['after_save_s'], 1e-9):.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
