"""The graph at scale: first graph and graph after one save on a tree of copies of a real tree, for this
checkout's engine and a baseline revision's (today's main) on the same prepared index.

    .venv/bin/python bench/graph_scale.py [--tree DIR] [--files 40000] [--baseline REV] [--profile N]
        [--save import|reparse|create] [--phases index,open,restart | index,saves] [--prepared DIR]
        [--out FILE.json]

The index is prepared once (`bench/scale_tree.py`: the tree indexed for real, then copied; random skeleton
vectors so the semantic lane has work) and kept under `--prepared`; each engine then runs in its own process
on a copy of it and times, in two processes as an editor session would:
- facts and edges: every copied file's facts extracted and every edge resolved (`update_edges`), the graph
  work that indexing does;
- first graph: a new process opens that index (edges current on disk) and builds the graph: edges,
  communities and the semantic lane (`graph_map`);
- after one save: one file re-stored with an added import (`--save`), then its edges (`update_edges`) and
  the whole graph (`graph_map`) brought up to date, with the number of files the save resolved again;
- after the saved file is embedded again: its skeleton vector stored (a new random one), then the graph
  (`graph_map`), whose semantic lane takes the new vector;
- restart: a third process opens the index as that save left it and asks for the graph (`graph_map`), which
  it loads from the graph saved beside the index where the engine saves one.
- saves (`--phases index,saves`, instead of open and restart): an editor's saves one after another on the
  index with its graph saved, each followed by the language server's refresh; per save, the edges' update,
  when a search first sees the new graph, and when the refresh returns (`saves_phase`).
Each figure is wall-clock seconds with its CPU seconds beside it (`*_cpu_s`: the process's own, a fairer
figure on a shared machine), and each phase's peak RSS.
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


def index_phase(root: Path, work: Path, profile: int) -> dict:
    """What indexing adds for the graph: facts of every copied file extracted and every edge resolved."""
    from codeloupe.graph import update_edges

    ws = _workspace(root, work)
    seconds, cpu, _ = _timed(lambda: update_edges(ws), profile)
    ws.close()
    return {"facts_and_edges_s": seconds, "facts_and_edges_cpu_s": cpu, "index_peak_rss_mb": _peak_rss_mb()}


def open_phase(root: Path, work: Path, profile: int, save: str) -> dict:
    """A process opening the index (edges current on disk): the first graph, then one save."""
    from codeloupe.graph import graph_map, update_edges
    from codeloupe.graph.build import load_graph

    ws = _workspace(root, work)
    first_s, first_cpu, first = _timed(lambda: graph_map(ws), profile)
    saved = _save(ws, "copy-1/json/decoder.py", save)
    resolved = _counting_resolutions()
    edges_s, edges_cpu, _ = _timed(lambda: update_edges(ws), profile)
    files_resolved = len(resolved)
    graph_s, graph_cpu, _ = _timed(lambda: graph_map(ws), profile)
    _embed_again(ws, saved)
    embedded_s, embedded_cpu, _ = _timed(lambda: graph_map(ws), profile)
    digest = _digest(load_graph(ws))
    ws.close()
    return {"nodes": len(first.nodes),
            "communities": sum(1 for c in first.communities if c.size > 1),
            "graph_digest": digest, "first_graph_s": first_s, "first_graph_cpu_s": first_cpu,
            "edges_after_save_s": edges_s, "edges_after_save_cpu_s": edges_cpu,
            "files_resolved_by_save": files_resolved,
            "graph_after_save_s": graph_s, "graph_after_save_cpu_s": graph_cpu,
            "graph_after_embedding_s": embedded_s, "graph_after_embedding_cpu_s": embedded_cpu,
            "open_peak_rss_mb": _peak_rss_mb()}


def saves_phase(root: Path, work: Path) -> dict:
    """An editor's saves one after another, on an index whose graph is saved beside it (built and saved first
    when it is not): a new process loads it, then each of `SAVES` is stored, its edges brought up to date
    (`update_edges`) and the language server's refresh run (`Workspace.refresh_graph`), while another thread
    asks for the graph as a search does (`load_graph(allow_stale=True)`) every 2 ms: `visible_s` is when a
    search first gets the new graph after the save, `refresh_s` when the refresh returns (the graph file
    written)."""
    import threading

    from codeloupe.graph import update_edges
    from codeloupe.graph.build import load_graph

    ws = _workspace(root, work)
    load_graph(ws)  # the first graph, saved beside the index
    ws.close()
    ws = _workspace(root, work)  # the editor opened again: the graph is read back
    load_graph(ws)
    out: dict[str, list[float | None] | str] = {}
    for label, path, kind in SAVES:
        _save(ws, path, kind)
        shown, seen = load_graph(ws, allow_stale=True), []
        started = time.perf_counter()
        update_edges(ws)
        edges_s = time.perf_counter() - started
        done = threading.Event()

        def watch(before=shown, seen=seen, done=done) -> None:
            while not done.is_set():
                if load_graph(ws, allow_stale=True) is not before:
                    seen.append(time.perf_counter())
                    return
                time.sleep(0.002)

        watcher = threading.Thread(target=watch)
        watcher.start()
        ws.refresh_graph()
        refresh_s = time.perf_counter() - started
        done.set()
        watcher.join()
        # visible None: no search saw another graph (the refresh kept the last one)
        out[label] = [round(edges_s, 3), round(seen[0] - started, 3) if seen else None, round(refresh_s, 3)]
    out["graph_digest"] = _digest(load_graph(ws))
    ws.close()
    return out


# The saves of `saves_phase`: (label, the file saved, `_save`'s kind).
SAVES = (("import", "copy-2/json/decoder.py", "import"), ("create", "copy-1/json/decoder.py", "create"),
         ("import again", "copy-3/json/decoder.py", "import"), ("create again", "copy-4/json/decoder.py", "create"))


def restart_phase(root: Path, work: Path, profile: int) -> dict:
    """A new process opening the index as the open phase's save left it: its first graph."""
    from codeloupe.graph import graph_map
    from codeloupe.graph.build import load_graph

    ws = _workspace(root, work)
    seconds, cpu, _ = _timed(lambda: graph_map(ws), profile)
    digest = _digest(load_graph(ws))
    ws.close()
    return {"restart_graph_s": seconds, "restart_graph_cpu_s": cpu, "restart_graph_digest": digest,
            "restart_peak_rss_mb": _peak_rss_mb()}


def _counting_resolutions() -> list[str]:
    """The files resolved from now on, in order (each engine resolves one file at a time in
    `graph.build.resolve_file`)."""
    from codeloupe.graph import build

    resolved: list[str] = []
    real = build.resolve_file

    def counting(ctx, path: str):
        resolved.append(path)
        return real(ctx, path)

    build.resolve_file = counting
    return resolved


def _digest(graph) -> str:
    return hashlib.sha256(repr((sorted(graph.edges, key=repr), graph.community)).encode()).hexdigest()[:12]


def _peak_rss_mb() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _timed(fn, profile: int):
    """(wall seconds, CPU seconds, result) of `fn()`; with `profile`, its top cProfile rows go to stderr."""
    import cProfile
    import pstats

    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    t, cpu = time.perf_counter(), time.process_time()
    result = fn()
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(profile)
    return round(seconds, 3), round(cpu, 3), result


def _save(ws, path: str, kind: str) -> str:
    """One save, as the indexer stores it; the path saved. `import`: the file gains an import of a sibling
    module on its first import line (`import re` -> `import re; import json.scanner`), every other line and
    definition kept. `reparse`: its first line is replaced by that import; in json/decoder.py that line opens
    the module docstring, so the rest of the file parses differently and every definition changes (the save
    earlier figures used). `create`: a new file beside it (`decoder_new.py`) with the import save's text, as a
    file created in the editor."""
    from codeloupe.types import Chunk, ChunkedFile, FileSkeleton

    store = ws.store
    file_id = store.file_rows()[path].id
    chunks = [Chunk(*row[:5], row[5], tuple(json.loads(row[6]))) for row in store.query(
        "SELECT start_line, end_line, kind, name, breadcrumb, text, symbols FROM chunks WHERE file_id=? ORDER BY ord",
        (file_id,))]
    if kind == "reparse":
        at, text = 0, "import json.scanner\n" + chunks[0].text.split("\n", 1)[-1]
    else:
        at = next(k for k, c in enumerate(chunks) if "\nimport " in "\n" + c.text)
        head, line, rest = ("\n" + chunks[at].text).partition("\nimport ")
        first, newline, tail = rest.partition("\n")
        text = (head + line + first + "; import json.scanner" + newline + tail)[1:]
    chunk = chunks[at]
    if kind == "create":
        path = path.removesuffix(".py") + "_new.py"
    chunks[at] = Chunk(chunk.start_line, chunk.end_line, chunk.kind, chunk.name, chunk.breadcrumb, text,
                       chunk.symbols)
    store.replace_file(ChunkedFile(path, "python", chunks, [], FileSkeleton(path, "")), hash="saved", size=1,
                       mtime=time.time(), is_doc=False, encoding="utf-8", chunker_version=0,
                       line_count=chunks[-1].end_line)
    return path


def _embed_again(ws, path: str) -> None:
    """The saved file's skeleton embedded again, as the embedder stores it after a save (a new random vector
    of the prepared index's model): the vectors' generation moves, so the semantic lane is brought up to date."""
    import numpy as np

    store = ws.store
    model = store.query("SELECT DISTINCT model FROM skeleton_vectors")[0][0]
    dim = len(store.query("SELECT vec FROM skeleton_vectors LIMIT 1")[0][0])
    vector = np.random.default_rng(1).standard_normal((1, dim)).astype(np.float32)
    store.put_vectors("skeleton", model, [store.file_rows()[path].id], vector / np.linalg.norm(vector))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument("--files", type=int, default=40_000)
    parser.add_argument("--prepared", type=Path, default=None, help="where the prepared index is kept")
    parser.add_argument("--baseline", default="main", help="the git revision compared against (its engine/ is"
                        " extracted to a temporary directory; '' for none)")
    parser.add_argument("--profile", type=int, default=0, help="print the top N cProfile rows of the first graph")
    parser.add_argument("--save", choices=["import", "reparse", "create"], default="import",
                        help="the one saved file's edit (see `_save`)")
    parser.add_argument("--phases", default="index,open,restart",
                        help="the phases run, in order, each engine on its own copy of the prepared index")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds allowed to each engine's phase")
    parser.add_argument("--out", type=Path, default=None, help="also write every engine's figures here (JSON)")
    parser.add_argument("--phase", choices=["index", "open", "saves", "restart"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tree is None:
        sys.path.insert(0, str(HERE))
        from scale_tree import stdlib

        args.tree = stdlib()
    prepared = args.prepared or Path(tempfile.gettempdir()) / f"codeloupe-graph-scale-{args.files}"
    if args.phase:
        print(json.dumps(index_phase(args.tree, args.work, args.profile) if args.phase == "index"
                         else open_phase(args.tree, args.work, args.profile, args.save) if args.phase == "open"
                         else saves_phase(args.tree, args.work) if args.phase == "saves"
                         else restart_phase(args.tree, args.work, args.profile)))
        return 0
    if not prepared.exists():
        prepare(args.tree, args.files, prepared)
    baseline = Path(tempfile.mkdtemp(prefix="codeloupe-baseline-"))
    sys.path.insert(0, str(HERE))
    from scale_tree import engines_to_compare

    engines = engines_to_compare(HERE.parent, HERE.parent / "engine", args.baseline, baseline)
    results: dict[str, dict] = {}
    for engine in engines:
        work = Path(tempfile.mkdtemp(prefix="codeloupe-graph-scale-"))
        shutil.copytree(prepared, work, dirs_exist_ok=True)
        results[engine] = {}
        for phase in args.phases.split(","):
            try:
                out = subprocess.run([sys.executable, __file__, "--phase", phase, "--tree", str(args.tree),
                                      "--work", str(work), "--profile", str(args.profile), "--save", args.save],
                                     env=dict(os.environ, PYTHONPATH=engine), capture_output=True, text=True,
                                     check=False, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                results[engine][phase] = f"over {args.timeout} s"
                break
            if out.stderr:
                print(out.stderr, file=sys.stderr)
            results[engine].update(json.loads(out.stdout) if out.returncode == 0 else {phase: out.returncode})
        shutil.rmtree(work, ignore_errors=True)
        print(f"{engine}: {results[engine]}", flush=True)
    shutil.rmtree(baseline, ignore_errors=True)
    if args.out is not None:
        args.out.write_text(json.dumps({"files": args.files, "save": args.save, "baseline": args.baseline,
                                        "results": results}, indent=1))
    if len(engines) == 2:
        new, old = (results[e] for e in engines)
        for figure in ("facts_and_edges_s", "first_graph_s", "edges_after_save_s", "graph_after_save_s",
                       "graph_after_embedding_s", "restart_graph_s"):
            figure_cpu = figure[:-2] + "_cpu_s"
            if isinstance(new.get(figure_cpu), float) and isinstance(old.get(figure_cpu), float):
                print(f"{figure_cpu}: {new[figure_cpu]} vs {old[figure_cpu]}")
            if isinstance(new.get(figure), float) and isinstance(old.get(figure), float):
                print(f"{figure}: {new[figure]} vs {old[figure]} ({old[figure] / max(new[figure], 1e-9):.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
