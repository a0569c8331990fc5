"""Cold start and no-op re-index on a 40K-file tree, for this checkout's engine and a baseline revision's.

    .venv/bin/python bench/cold_scale.py [--prepared DIR] [--files 40000] [--baseline main] [--phases ...]

The tree is prepared once under `--prepared` and reused: the standard library without site-packages, hard
linked (no space, same sizes and mtimes), indexed for real, then grown to `--files` files by
`bench/scale_tree.py` (index rows copied, the copies hard linked on disk) and indexed once more so every
file and every graph edge is current. Each engine then works on its own copy of the index, each phase in a
new process (a restarted editor), in this order:
- first open: a process opens the index and answers one lexical query (it saves whatever it persists);
- server: the real `codeloupe-lsp` over stdio on that index (an editor restart): process start -> first
  `$/progress`, -> first `codeloupe/search` answer, -> the start-up refresh's end;
- no-op re-index: `Workspace.index()` with nothing changed, twice, in a process that opened the index;
- cold open: a new process opening the index (integrity check included) and answering one lexical query;
Six more, run only when named:
- graph: a new process opening the index and bringing its graph up to date (edges, communities, the semantic
  lane), as a restarted editor does once it has answered; a digest of every edge and community it lists lets
  two engines' graphs be compared (one built from an earlier saved graph, one from the store);
- terminal index: the real `codeloupe index` in a terminal, with nothing changed (an engine that saves the
  search snapshot before it exits builds it here: `--phases terminal_index+server` is an editor opening an
  index made in a terminal, which no process has searched yet);
- first index: a new process indexing the tree into an empty index (the prepared one is only copied, not
  used), then answering one lexical query: the time from the end of chunking to that answer, and its CPU
  (this process's, and its workers' as they are reaped), and digests of the lexical index it saved and of its
  symbol table (two engines building the same matrix, the same name maps, give the same digests);
- first server: the real server opening the tree with an empty index, its first search sent at once: when its
  progress says the chunking is done (`chunked`) and when the search is answered;
- late server: the server phase with the search sent once the start-up refresh has ended (a user who
  searches when the progress is gone; in the server phase the first search can be answered from the index as
  it was before the refresh wrote anything);
- `edited_` before a phase's name: that phase after `--edited` files (40) were edited, a quarter as many
  deleted and as many added while no process had the index open (a `git pull` with the editor closed);
  phases joined by "+" run one after the other on the same edits. `--phases first_open,edited_late_server`:
  the index as it was when the last process saved its snapshot, then the changes; `--phases
  first_open,edited_reindex+late_server`: the changes indexed by a process that saved no snapshot (an editor
  closed within seconds of a save, before its background rebuild, or `codeloupe index` in a terminal), then
  the editor started. The tree is put back afterwards: an edited or deleted file is replaced by a new file,
  never written in place (the tree's files are hard links, to the standard library's own among them), and its
  original is linked back.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUERY = "parse the command line arguments"
PHASES = ("first_open", "server", "reindex", "cold_open")


def _workspace(root: Path, cache: Path):
    from codeloupe.api import Workspace

    return Workspace(root, overrides={"cache_dir": str(cache), "embed_provider": "none"})


def prepare(prepared: Path, files: int) -> None:
    """The tree under `prepared/tree`, its index under `prepared/cache` (every file and edge current)."""
    sys.path.insert(0, str(HERE))
    from scale_tree import grow, link_copies, stdlib

    base = prepared / "base"
    root = prepared / "tree"
    ignore = shutil.ignore_patterns("site-packages", "__pycache__")
    shutil.copytree(stdlib(), base, copy_function=os.link, symlinks=True, ignore=ignore)
    shutil.copytree(base, root, copy_function=os.link, symlinks=True)
    ws = _workspace(root, prepared / "cache")
    copies = grow(ws, files=files)
    link_copies(base, root, copies)
    t = time.perf_counter()
    ws.index()  # the copies' graph facts and edges: what the index run after copying would have done
    print(f"graph facts and edges of the copies: {time.perf_counter() - t:.1f} s", flush=True)
    ws.close()


@contextlib.contextmanager
def edits_while_closed(root: Path, count: int) -> Iterator[None]:
    """`count` Python files edited (a line appended), `count // 4` deleted and as many new ones added, all put
    back on leaving. Edited and deleted files are replaced, never written in place: the tree's files are hard
    links, some to the standard library's, which must not change. The files picked are spread over the tree."""
    # Package markers are left alone: a pull deletes a package's `__init__.py` with its package, and one deleted
    # alone makes the graph's resolution start over (a change of layout), which is not what this measures.
    files = sorted(p for p in root.rglob("*.py") if p.is_file() and not p.is_symlink() and p.name != "__init__.py")
    step = max(1, len(files) // (count + count // 4 + 1))
    picked = files[::step][:count + count // 4]
    edited, deleted = picked[:count], picked[count:]
    added = [root / f"codeloupe_bench_added_{i}.py" for i in range(count // 4)]
    aside = root.parent / "originals-aside"  # beside the tree (hard links need the same file system), not in it
    aside.mkdir(exist_ok=True)
    kept = [(path, aside / f"{i}.py") for i, path in enumerate(edited + deleted)]
    try:
        for path, original in kept:
            os.link(path, original)
        for path in edited:
            text = path.read_bytes() + b"\n# edited while the editor was closed\n"
            fresh = aside / "new.py"
            fresh.write_bytes(text)
            fresh.replace(path)
        for path in deleted:
            path.unlink()
        for i, path in enumerate(added):
            path.write_text(f"def added_while_closed_{i}(value):\n    return value\n")
        yield
    finally:
        for path in added:
            path.unlink(missing_ok=True)
        for path, original in kept:
            if original.exists():
                original.replace(path)


def open_phase(root: Path, cache: Path) -> dict:
    """A new process: open the index and answer one lexical query (the snapshot built or loaded on the way)."""
    started = time.perf_counter()
    ws = _workspace(root, cache)
    opened = time.perf_counter()
    bundle = ws.search(QUERY)
    answered = time.perf_counter()
    out = {"open_s": round(opened - started, 2), "first_answer_s": round(answered - started, 2),
           "top": bundle.files[0].path if bundle.files else "", "peak_rss_mb": _peak_rss_mb()}
    ws.close()
    return out


def graph_phase(root: Path, cache: Path) -> dict:
    """A new process: open the index and bring the graph up to date (what a restarted editor's start-up refresh
    does after its first answer), timed in wall and CPU seconds."""
    ws = _workspace(root, cache)
    started, cpu = time.perf_counter(), time.process_time()
    ws.refresh_graph()
    out = {"graph_s": round(time.perf_counter() - started, 2), "graph_cpu_s": round(time.process_time() - cpu, 2),
           "peak_rss_mb": _peak_rss_mb()}
    listed = ws.graph_map()  # what came out, to compare engines by (the digest: every edge and community)
    out.update(nodes=len(listed.nodes), edges=len(listed.edges), communities=len(listed.communities),
               surprises=len(listed.surprises), digest=hashlib.sha256(json.dumps(
                   [sorted(json.dumps(e.to_dict(), sort_keys=True) for e in listed.edges),
                    sorted(json.dumps(c.to_dict(), sort_keys=True) for c in listed.communities)]).encode()).hexdigest()[:16])
    ws.close()
    return out


def reindex_phase(root: Path, cache: Path) -> dict:
    """`Workspace.index()` with nothing changed on disk, twice, in a process that opened the index."""
    ws = _workspace(root, cache)
    out: dict = {}
    for attempt in (1, 2):
        started = time.perf_counter()
        report = ws.index()
        out[f"noop_{attempt}_s"] = round(time.perf_counter() - started, 2)
    out.update(files_seen=report.files_seen, unchanged=report.files_unchanged, indexed=report.files_indexed,
               skipped=report.skipped)
    ws.close()
    return out


def first_index_phase(root: Path, cache: Path) -> dict:
    """A new process on an empty index beside `cache` (the prepared one is not used): the whole tree chunked and
    written, as an editor's first open of the folder does (the graph's edges left to later), then one lexical
    query, which builds the first search snapshot: "answer lexical queries as soon as chunking is done"."""
    import resource

    empty = cache.with_name(cache.name + "-first-index")
    shutil.rmtree(empty, ignore_errors=True)
    def cpu() -> tuple[float, float]:  # this process's, and its ended children's (workers count once reaped)
        own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime

    ws = _workspace(root, empty)
    started, at_start = time.perf_counter(), cpu()
    report = ws.index(edges=False)
    indexed, at_indexed = time.perf_counter(), cpu()
    bundle = ws.search(QUERY)
    answered, at_answer = time.perf_counter(), cpu()
    symbols_digest = _symbols_digest(ws.searcher().snapshot().symbols)
    ws.close()
    at_end = cpu()
    out = {"index_s": round(indexed - started, 1), "files": report.files_indexed, "chunks": report.chunks,
           "after_index_to_answer_s": round(answered - indexed, 2),
           "answer_cpu_s": round(at_answer[0] - at_indexed[0], 2),
           # Workers' CPU is counted when they are reaped: the chunking's after the index, a join's when its
           # pool closes (a worker that joined while the run went on counts where it is reaped).
           "answer_children_cpu_s": round(at_answer[1] - at_indexed[1], 2),
           "index_cpu_s": round(at_indexed[0] - at_start[0], 1),
           "index_children_cpu_s": round(at_indexed[1] - at_start[1], 1),
           "total_cpu_s": round(sum(at_end) - sum(at_start), 1),
           "top": bundle.files[0].path if bundle.files else "", "peak_rss_mb": _peak_rss_mb(),
           "lexical_digest": _lexical_digest(ws), "symbols_digest": symbols_digest}
    shutil.rmtree(empty, ignore_errors=True)
    return out


def _lexical_digest(ws) -> str:
    """A digest of the chunk lane's BM25 index as saved beside the index (weights, counts, pointers, vocabulary,
    rows): two engines' first indexes of the same tree give the same digest when their matrices are the same."""
    import numpy as np

    path = ws.store.path.with_name(ws.store.path.name + ".bm25.npz")
    digest = hashlib.sha256()
    with np.load(path) as saved:
        for name in ("data", "counts", "indices", "indptr", "shape", "idf", "vocab", "vocab_ends", "row_ids"):
            digest.update(np.ascontiguousarray(saved[name]).tobytes())
    return digest.hexdigest()[:16]


def _symbols_digest(symbols) -> str:
    """A digest of the symbol table's name maps (each map's keys in order, their offsets and rows): two engines'
    first snapshots of the same tree give the same digest when their symbol tables are the same."""
    import numpy as np

    digest = hashlib.sha256()
    for name, array in sorted(symbols.arrays().items()):
        digest.update(name.encode() + np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]


def terminal_index_phase(root: Path, cache: Path) -> dict:
    """`codeloupe index` in a terminal, the real command (an engine that saves the search snapshot before it
    exits does so here; the next phase, an editor starting, then loads it)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "codeloupe", "index", str(root), "--embed-provider", "none",
                           "--json"], env=dict(os.environ, CODELOUPE_CACHE_DIR=str(cache)),
                          capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    return {"index_s": round(time.perf_counter() - started, 2), "indexed": report["files_indexed"],
            "prepared_s": report.get("prepared_s")}


async def _server_phase(root: Path, cache: Path, timeout: float, *, answer: bool = True, late: bool = False,
                        hold: float = 0.0, follow: float = 0.0) -> dict:
    """The real server over stdio on the index on disk: process start -> first `$/progress`, -> first search
    answer, -> the start-up refresh's progress end (`answer=False`: stop at the first progress; `late`: the
    search sent once that progress has ended), then the server's peak memory, read `hold` seconds after the
    start (so that it includes what the server does in the background by then). `follow`: for that many seconds
    after the first answer, more searches, one after another a quarter second apart (a user searching on while
    the server's background work runs), their answer times summarised."""
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient
    from pygls.protocol import default_converter
    from pygls.protocol.json_rpc import JsonRPCResponseMessage
    from pygls.uris import from_fs_path

    def raw_converter():  # custom requests' answers as plain JSON
        converter = default_converter()
        converter.register_structure_hook(JsonRPCResponseMessage, lambda obj, cls: cls(**obj))
        return converter

    client = LanguageClient("cold-scale", "1", converter_factory=raw_converter)
    seen: dict[str, float] = {}
    started = time.perf_counter()

    @client.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def on_create(params: lsp.WorkDoneProgressCreateParams) -> None:
        return None

    @client.feature(lsp.PROGRESS)
    def on_progress(params) -> None:
        kind = params.value.get("kind")
        seen.setdefault(f"progress_{kind}", time.perf_counter() - started)
        if kind == "report" and (params.value.get("message") or "").startswith("indexed"):
                seen.setdefault("indexed", time.perf_counter() - started)
        if kind == "report" and (params.value.get("message") or "").startswith("preparing search"):
            seen.setdefault("chunked", time.perf_counter() - started)  # a first index's chunking done

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def on_register(params) -> None:
        return None

    await client.start_io(sys.executable, "-m", "codeloupe_lsp", env={**os.environ, "CODELOUPE_CACHE_DIR": str(cache)})
    await client.initialize_async(lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=True)),
        workspace_folders=[lsp.WorkspaceFolder(uri=from_fs_path(str(root)), name=root.name)],
        initialization_options={"embedProvider": "none"}))
    client.initialized(lsp.InitializedParams())
    seen["initialized"] = time.perf_counter() - started
    if not answer:
        deadline = time.perf_counter() + timeout
        while "progress_begin" not in seen and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
        return {k: round(v, 2) for k, v in seen.items()}
    if late:
        deadline = time.perf_counter() + timeout
        while "progress_end" not in seen and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
    found = await asyncio.wait_for(client.protocol.send_request_async("codeloupe/search", {"query": QUERY}),
                                    timeout)
    seen["first_answer"] = time.perf_counter() - started
    followed = await _follow_up(client, follow)
    deadline = time.perf_counter() + timeout
    while "progress_end" not in seen and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(max(0.0, hold - (time.perf_counter() - started)))
    server_peak_mb = _peak_of(client._server.pid) if client._server is not None else 0
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    core = found["core"]
    return {**{k: round(v, 2) for k, v in seen.items()}, "top": core[0]["path"] if core else "",
            "server_peak_rss_mb": server_peak_mb, **followed}


FOLLOW_QUERIES = ("open a socket with a timeout", "read a zip archive", "format an email date", "thread pool shutdown",
                  "parse an http cookie", "compile a regular expression")


async def _follow_up(client, seconds: float) -> dict:
    """Searches sent for `seconds`, each a quarter second after the last answer: their answer times in ms, and
    when the slow ones were sent."""
    if seconds <= 0:
        return {}
    times: list[float] = []
    slow: list[tuple[float, int, dict]] = []  # (seconds after the first answer, ms, stages) over 200 ms
    begun = time.perf_counter()
    while time.perf_counter() < begun + seconds:
        sent = time.perf_counter()
        found = await client.protocol.send_request_async(
            "codeloupe/search", {"query": FOLLOW_QUERIES[len(times) % len(FOLLOW_QUERIES)]})
        times.append((time.perf_counter() - sent) * 1000)
        if times[-1] > 200:  # with the engine's own stages: what the answer waited for outside them shows
            stages = {k: round(v) for k, v in (found.get("timingMs") or {}).items()}
            slow.append((round(sent - begun, 1), round(times[-1]), stages))
        await asyncio.sleep(0.25)
    ordered = sorted(times)
    return {"follow_n": len(times), "follow_p50_ms": round(ordered[len(ordered) // 2]),
            "follow_p90_ms": round(ordered[int(len(ordered) * 0.9)]), "follow_max_ms": round(ordered[-1]),
            "follow_first_ms": round(times[0]), "follow_slow": slow}


def _peak_of(pid: int) -> int:
    """A live process's peak resident memory so far, in MB (0 where /proc cannot tell)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def server_phase(root: Path, cache: Path, hold: float = 0.0, follow: float = 0.0) -> dict:
    return asyncio.run(_server_phase(root, cache, 600.0, hold=hold, follow=follow))


def first_server_phase(root: Path, cache: Path, hold: float = 0.0, follow: float = 0.0) -> dict:
    """The server phase on an empty index beside `cache` (the prepared one is not used): an editor's first open
    of the folder, its first search sent at once and answered once chunking is done and the first snapshot
    built; `chunked` is when its progress said the chunking was done."""
    empty = cache.with_name(cache.name + "-first-server")
    shutil.rmtree(empty, ignore_errors=True)
    try:
        out = asyncio.run(_server_phase(root, empty, 1500.0, hold=hold, follow=follow))
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    if "chunked" in out:
        out["chunked_to_answer_s"] = round(out["first_answer"] - out["chunked"], 2)
    return out


def late_server_phase(root: Path, cache: Path, hold: float = 0.0, follow: float = 0.0) -> dict:
    return asyncio.run(_server_phase(root, cache, 600.0, late=True, hold=hold, follow=follow))


def progress_phase(root: Path, cache: Path) -> dict:
    """Only process start -> the first `$/progress` (light: the server is stopped right after it)."""
    return asyncio.run(_server_phase(root, cache, 120.0, answer=False))


def _peak_rss_mb() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _run_phase(phase: str, prepared: Path, cache: Path, engine: list[str], timeout: int, hold: float,
               follow: float) -> dict:
    """One phase in a new process running `engine` (its import path), on the index in `cache`."""
    kind = "open" if phase.endswith("_open") else phase
    try:
        out = subprocess.run([sys.executable, __file__, "--phase", kind, "--prepared", str(prepared),
                              "--cache", str(cache), "--hold", str(hold), "--follow", str(follow)],
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(engine)),
                             capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout_s": timeout}
    return json.loads(out.stdout) if out.returncode == 0 else {"exit": out.returncode, "stderr": out.stderr[-2000:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepared", type=Path, default=Path(tempfile.gettempdir()) / "codeloupe-cold-scale")
    parser.add_argument("--files", type=int, default=40_000)
    parser.add_argument("--baseline", default="main", help="the git revision compared against ('' for none)")
    parser.add_argument("--git", type=Path, default=HERE.parent, help="the repository the baseline is taken from")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated, of {', '.join(PHASES)}, late_server, graph, terminal_index, "
                        "first_index and first_server; joined by + to run one after the other, edited_ before them "
                        "to run them after edits")
    parser.add_argument("--timeout", type=int, default=900, help="seconds allowed to each phase")
    parser.add_argument("--hold", type=float, default=0.0, help="seconds after its start at which a server "
                        "phase reads the server's peak memory (and then stops it)")
    parser.add_argument("--follow", type=float, default=0.0, help="seconds after its first answer during which a "
                        "server phase keeps searching, a quarter second after each answer (their times summarised)")
    parser.add_argument("--edited", type=int, default=40, help="files an edited_ phase edits (a quarter as many "
                        "are deleted and added)")
    parser.add_argument("--phase", choices=["open", "reindex", "server", "late_server", "progress", "graph",
                                            "terminal_index", "first_index", "first_server"],
                        help="run one phase here, on --cache (the run itself uses this for each engine)")
    parser.add_argument("--cache", type=Path, help="the index (cache dir) a --phase works on")
    args = parser.parse_args()
    root = args.prepared / "tree"
    if args.phase:
        if args.phase in ("server", "late_server", "first_server"):
            run = functools.partial({"server": server_phase, "late_server": late_server_phase,
                                     "first_server": first_server_phase}[args.phase],
                                    hold=args.hold, follow=args.follow)
        else:
            run = {"open": open_phase, "reindex": reindex_phase, "progress": progress_phase,
                   "graph": graph_phase, "terminal_index": terminal_index_phase,
                   "first_index": first_index_phase}[args.phase]
        print(json.dumps(run(root, args.cache)))
        return 0
    if not (args.prepared / "cache").exists():
        prepare(args.prepared, args.files)
    checkout = HERE.parent
    engines = {"this": [str(checkout / "engine"), str(checkout / "server")]}
    scratch = Path(tempfile.mkdtemp(prefix="codeloupe-cold-scale-"))
    if args.baseline:
        archive = subprocess.run(["git", "-C", str(args.git), "archive", args.baseline, "engine", "server"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
        engines[args.baseline] = [str(scratch / "engine"), str(scratch / "server")]
    results: dict[str, dict] = {}
    try:
        for name, path in engines.items():
            cache = scratch / f"cache-{name}"
            shutil.copytree(args.prepared / "cache", cache)
            results[name] = {}
            for phase in args.phases.split(","):
                steps = phase.removeprefix("edited_").split("+")
                with edits_while_closed(root, args.edited) if phase.startswith("edited_") else \
                        contextlib.nullcontext():
                    for step in steps:
                        result = _run_phase(step, args.prepared, cache, path, args.timeout, args.hold, args.follow)
                        label = phase if len(steps) == 1 else f"{phase}[{step}]"
                        results[name][label] = result
                        print(f"{name} {label}: {json.dumps(result)}", flush=True)
            shutil.rmtree(cache, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
