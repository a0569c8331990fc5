"""Warm query latency and memory at scale: a 200,000-chunk index built from copies of a real tree, searched by
this checkout's engine and a baseline revision's (today's main) on the same prepared index.

    .venv/bin/python bench/search_scale.py [--tree DIR] [--chunks 200000] [--prepared DIR] [--baseline REV]

The index is prepared once and kept under `--prepared` (`bench/scale_tree.py`: the tree, by default this
interpreter's standard library, indexed for real, then copied under `copy-N/` prefixes until the index holds
`--chunks` chunks; graph edges resolved; chunk and skeleton vectors are random unit vectors stored through the
real store, tagged with the configured model id so the dense lane loads them; the cost of a query does not
depend on their values). Each engine then runs in its own process, as a server started on that index would:
the first query (snapshot: BM25 matrix built and saved, symbol table, per-file maps, vectors), the graph, one
query of each kind so every lane is warm (the entity lane answers issue reports) and the lanes a large workspace
builds on their own threads (the summary lane) finished, then every non-issue query
of `--queries` timed with the query embedded by the real model and again with its vector cached. Prints each
engine's figures and its peak RSS (VmHWM: the whole process, model and graph included) and RSS when warm.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _workspace(root: Path, cache: Path, embed: bool = True):
    from codeloupe.api import Workspace

    return Workspace(root, overrides={"cache_dir": str(cache), **({} if embed else {"embed_provider": "none"})})


def prepare(root: Path, chunks: int, prepared: Path) -> None:
    sys.path.insert(0, str(HERE))
    from codeloupe.embed import describe_provider
    from codeloupe.graph import update_edges
    from scale_tree import grow, random_vectors

    ws = _workspace(root, prepared)
    grow(ws, chunks=chunks)
    t = time.perf_counter()
    update_edges(ws)
    print(f"edges of the copies resolved in {time.perf_counter() - t:.1f}s", flush=True)
    _, model = describe_provider(ws.settings)
    random_vectors(ws, model, ws.embedding_provider().dim)
    ws.close()


def _memory() -> dict[str, float]:
    """Resident and peak resident memory of this process, MB (Linux /proc); of the resident, the pages of
    mapped files (the saved lexical indexes are read in place: the system may drop these and read them again)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {key: int(fields[name].split()[0]) / 1024
            for key, name in (("rss_mb", "VmRSS"), ("peak_mb", "VmHWM"), ("file_mb", "RssFile"))}


def _queries(queries_path: Path) -> tuple[list[str], str]:
    """(every non-issue query of the golden set, its first issue report)."""
    corpora = json.loads(queries_path.read_text())["corpora"]
    return ([q["query"] for c in corpora for q in c["queries"] if q["kind"] != "issue"],
            next(q["query"] for c in corpora for q in c["queries"] if q["kind"] == "issue"))


def _warmed(root: Path, work: Path, issue: str):
    """A server's start on the prepared index: first query, graph, every lane warmed; (workspace, figures)."""
    from codeloupe.graph import graph_map

    ws = _workspace(root, work)
    out: dict = {"chunks": ws.store.counts()["chunks"], "files": ws.store.counts()["files"]}
    t = time.perf_counter()
    ws.search("warm up: load the matrices")
    out["first_query_s"] = round(time.perf_counter() - t, 1)
    out["after_first_query"] = _memory()
    t = time.perf_counter()
    graph_map(ws)
    out["graph_s"] = round(time.perf_counter() - t, 1)
    for query in (issue, "how does the lexer read a token", "getattr"):  # entity, feedback, file, symbol lanes
        ws.search(query)
    t = time.perf_counter()
    for thread in threading.enumerate():  # lanes built off the query's path (the summary lane past 2,000 files)
        if thread.name.startswith("codeloupe-"):
            thread.join(timeout=600)
    out["background_builds_s"] = round(time.perf_counter() - t, 1)
    out["warm"] = _memory()
    return ws, out


def measure(root: Path, work: Path, queries_path: Path, profile: int) -> dict:
    """A server's life on the prepared index: started and warmed (`_warmed`), then timed queries."""
    queries, issue = _queries(queries_path)
    ws, out = _warmed(root, work, issue)
    uncached, cached = [], []
    stages: dict[str, list[float]] = {}
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    for q in queries:
        timed = _timed(ws, q)
        uncached.append(timed["embedded"])
        cached.append(timed["cached"])
        for stage, ms in timed["stages"].items():
            stages.setdefault(stage, []).append(ms)
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(profile)
    for label, values in (("cached", cached), ("embedded", uncached)):
        values.sort()
        out[f"p50_{label}_ms"] = round(statistics.median(values), 1)
        out[f"p95_{label}_ms"] = round(values[int(len(values) * 0.95)], 1)
    out["stages_p50_ms"] = {stage: round(statistics.median(v), 1) for stage, v in stages.items()}  # query embedded
    out["end"] = _memory()
    out["load_avg_1m"] = round(os.getloadavg()[0], 1)
    ws.close()
    return out


def _timed(ws, query: str) -> dict:
    """One query embedded, then again with its vector cached: ms each, wall and CPU (the process's: on a shared
    machine the fair figure), and the first one's stages."""
    t, cpu = time.perf_counter(), time.process_time()
    bundle = ws.search(query)
    embedded, embedded_cpu = (time.perf_counter() - t) * 1000, (time.process_time() - cpu) * 1000
    t, cpu = time.perf_counter(), time.process_time()
    ws.search(query)
    return {"embedded": embedded, "cached": (time.perf_counter() - t) * 1000, "embedded_cpu": embedded_cpu,
            "cached_cpu": (time.process_time() - cpu) * 1000, "stages": bundle.timing_ms, "digest": _digest(bundle)}


def _digest(bundle) -> str:
    """The bundle's content (ranks, paths, chunks, snippets, scores, map lines; not its timings), hashed: two
    engines that answer alike give equal digests."""
    import dataclasses
    import hashlib

    content = dataclasses.asdict(bundle)
    content.pop("timing_ms")
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _stages_in_cpu_time() -> None:
    """Makes the search's stage timings (`Bundle.timing_ms`) the process's CPU time instead of wall time: the
    searcher reads its clock as `time.perf_counter` of its module, so that name alone is swapped, here only."""
    import types

    import codeloupe.search

    codeloupe.search.time = types.SimpleNamespace(perf_counter=time.process_time)


def serve(root: Path, work: Path, queries_path: Path, cpu_stages: bool) -> None:
    """The engine warmed, its figures printed, then each query read from stdin timed (`_timed`), a JSON line
    each: the parent alternates the engines query by query."""
    ws, out = _warmed(root, work, _queries(queries_path)[1])
    if cpu_stages:
        _stages_in_cpu_time()
    print(json.dumps(out), flush=True)
    for line in sys.stdin:
        print(json.dumps(_timed(ws, json.loads(line))), flush=True)
    print(json.dumps({"after_a_save": _after_a_save(ws, _queries(queries_path)[0][0]), "end": _memory()}),
          flush=True)
    ws.close()


def _after_a_save(ws, query: str) -> dict[str, float]:
    """An editor's save, as `update_files` sees one: a file of the index gone from disk (a `copy-N/` file
    exists in the index only, so nothing on disk is touched), then the first search after it (the delta view
    over the full snapshot) and the next; ms each."""
    # Plain SQL, so that a baseline engine without this round's store methods measures the same save.
    gone = ws.store.query("SELECT path FROM files WHERE path LIKE 'copy-%' ORDER BY id DESC LIMIT 1")[0][0]
    figures = {}
    for label, step in (("update_files_ms", lambda: ws.update_files([gone])), ("first_search_after_ms",
                        lambda: ws.search(query)), ("second_search_after_ms", lambda: ws.search(query))):
        t = time.perf_counter()
        step()
        figures[label] = round((time.perf_counter() - t) * 1000, 1)
    return figures


def interleave(engines: list[str], args: argparse.Namespace, prepared: Path) -> None:
    """Both engines started side by side, each on its own copy of the index, then every query sent to one and
    then the other (in turns which goes first): a load that changes during the run weighs on both alike."""
    works = [Path(tempfile.mkdtemp(prefix="codeloupe-search-scale-")) for _ in engines]
    for work in works:
        shutil.copytree(prepared, work, dirs_exist_ok=True)
    procs = [subprocess.Popen([sys.executable, __file__, "--phase", "serve", "--tree", str(args.tree), "--work",
                               str(work), "--queries", str(args.queries), *(["--cpu-stages"] if args.cpu_stages else [])],
                              env=dict(os.environ, PYTHONPATH=engine),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for engine, work in zip(engines, works)]
    try:
        started = [json.loads(proc.stdout.readline()) for proc in procs]
        timed: list[list[dict]] = [[] for _ in engines]
        for i, query in enumerate(_queries(args.queries)[0]):
            for e in (range(len(engines)) if i % 2 == 0 else reversed(range(len(engines)))):
                procs[e].stdin.write(json.dumps(query) + "\n")
                procs[e].stdin.flush()
                timed[e].append(json.loads(procs[e].stdout.readline()))
        for proc, figures in zip(procs, started):  # stdin closed: each engine measures a save and ends
            proc.stdin.close()
            figures.update(json.loads(proc.stdout.readline()))  # the save's figures, memory at the end
        for engine, figures, rows in zip(engines, started, timed):
            for label in ("embedded", "cached", "embedded_cpu", "cached_cpu"):
                values = sorted(r[label] for r in rows)
                figures[f"p50_{label}_ms"] = round(statistics.median(values), 1)
                figures[f"p95_{label}_ms"] = round(values[int(len(values) * 0.95)], 1)
                figures[f"mean_{label}_ms"] = round(statistics.mean(values), 1)
            figures["stages_p50_ms"] = {stage: round(statistics.median(r["stages"][stage] for r in rows), 1)
                                        for stage in rows[0]["stages"]}
            figures["load_avg_1m"] = round(os.getloadavg()[0], 1)
            print(f"{engine}: {json.dumps(figures)}", flush=True)
        if len(engines) == 2:
            same = sum(a["digest"] == b["digest"] for a, b in zip(*timed))
            print(f"bundles identical: {same} of {len(timed[0])}", flush=True)
    finally:
        for proc in procs:
            if not proc.stdin.closed:
                proc.stdin.close()
            proc.wait(timeout=60)
        for work in works:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--queries", type=Path, default=HERE.parents[1] / "shared/golden/public.json",
                        help="a golden set whose queries are timed (default: the shared one beside the checkout)")
    parser.add_argument("--prepared", type=Path, default=None, help="where the prepared index is kept")
    parser.add_argument("--baseline", default="main", help="the git revision compared against (its engine/ is"
                        " extracted to a temporary directory; '' for none)")
    parser.add_argument("--engine", type=Path, default=HERE.parent / "engine",
                        help="the engine/ measured against the baseline (default: this checkout's)")
    parser.add_argument("--profile", type=int, default=0, help="print the top N cProfile rows of the timed queries")
    parser.add_argument("--timeout", type=int, default=900, help="seconds allowed to each engine")
    parser.add_argument("--rounds", type=int, default=1, help="measure the engines this many times, alternating"
                        " (a load that changes during the run then weighs on both)")
    parser.add_argument("--interleave", action="store_true", help="run the engines side by side and alternate"
                        " them query by query (instead of one after the other)")
    parser.add_argument("--cpu-stages", action="store_true", help="with --interleave: stage timings in each engine's"
                        " CPU time (the whole process, the model's threads included) rather than wall time, for a loaded machine")
    parser.add_argument("--phase", choices=["measure", "serve"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tree is None:
        sys.path.insert(0, str(HERE))
        from scale_tree import stdlib

        args.tree = stdlib()
    if args.phase == "serve":
        serve(args.tree, args.work, args.queries, args.cpu_stages)
        return 0
    if args.phase:
        print(json.dumps(measure(args.tree, args.work, args.queries, args.profile)))
        return 0
    prepared = args.prepared or Path(tempfile.gettempdir()) / f"codeloupe-search-scale-{args.chunks}"
    if not prepared.exists():
        prepare(args.tree, args.chunks, prepared)
    baseline = Path(tempfile.mkdtemp(prefix="codeloupe-baseline-"))
    sys.path.insert(0, str(HERE))
    from scale_tree import engines_to_compare

    engines = engines_to_compare(HERE.parent, args.engine, args.baseline, baseline)
    if args.interleave:
        try:
            interleave(engines, args, prepared)
        finally:  # an engine that fails to start must not leave the extracted baseline behind
            shutil.rmtree(baseline, ignore_errors=True)
        return 0
    results: dict[str, dict] = {}
    for engine in engines * args.rounds:
        work = Path(tempfile.mkdtemp(prefix="codeloupe-search-scale-"))
        shutil.copytree(prepared, work, dirs_exist_ok=True)
        try:
            out = subprocess.run([sys.executable, __file__, "--phase", "measure", "--tree", str(args.tree),
                                  "--work", str(work), "--queries", str(args.queries), "--profile", str(args.profile)],
                                 env=dict(os.environ, PYTHONPATH=engine), capture_output=True, text=True,
                                 check=False, timeout=args.timeout)
            if out.stderr:
                print(out.stderr, file=sys.stderr)
            results[engine] = json.loads(out.stdout) if out.returncode == 0 else {"exit": out.returncode}
        except subprocess.TimeoutExpired:
            results[engine] = {"timeout": args.timeout}
        shutil.rmtree(work, ignore_errors=True)
        print(f"{engine}: {json.dumps(results[engine])}", flush=True)
    shutil.rmtree(baseline, ignore_errors=True)
    if len(engines) == 2:
        new, old = (results[e] for e in engines)
        for figure in ("p50_embedded_ms", "p95_embedded_ms", "p50_cached_ms", "p95_cached_ms", "first_query_s"):
            if figure in new and figure in old:
                print(f"{figure}: {new[figure]} vs {old[figure]} ({old[figure] / max(new[figure], 1e-9):.2f}x)")
        if "end" in new and "end" in old:
            for key in ("peak_mb", "rss_mb"):
                print(f"{key}: {new['end'][key]:.0f} vs {old['end'][key]:.0f} "
                      f"({old['end'][key] / max(new['end'][key], 1e-9):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
