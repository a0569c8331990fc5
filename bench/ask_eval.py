#!/usr/bin/env python3
"""Score `ask` on the golden set: what the walkthroughs cite, not just what retrieval found.

    .venv/bin/python bench/ask_eval.py [--golden FILE] [--corpora DIR] [--corpus ID ...] [--kinds short,issue]
        [--limit N] [--agents | --no-agents] [--best] [--embed-provider none] [--scripted] [--out FILE.json]

The chat model is whatever the settings say (CODELOUPE_CHAT_BASE_URL / _MODEL / _API_KEY, .codeloupe.toml);
`--scripted` instead starts the tests' scripted server (tests/chat_server.py) answering every question by
citing the first excerpts it was shown: a smoke run of the whole path, not a measurement of any model.

Reported together, per kind and overall (every score is over the questions it applies to):
* file citation accuracy   cited files that are gold files / cited files (questions with citations)
* symbol citation accuracy questions with a citation overlapping a gold symbol's definition in a gold file
                           / questions with citations and gold symbols
* retrieval recall         questions whose bundle holds every gold file
* citation validity        citations whose text is byte-for-byte the file's lines now / citations
* marker resolution        model markers that became a block or a back-reference / markers emitted
plus how often ask abstained or fell back (and why). Every question's record (bundle, citations, events
summary, metrics) goes to --out, so any score can be audited.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from codeloupe.api import Workspace
from codeloupe.ask import AskResult
from codeloupe.eval.golden import GoldenQuery, load_golden
from codeloupe.eval.metrics import all_in_bundle, symbol_segments
from codeloupe.eval.runner import corpus_repo

CHECKOUT = Path(__file__).resolve().parent.parent
DEFAULT_GOLDEN = CHECKOUT.parent / "shared" / "golden" / "public.json"
DEFAULT_CORPORA = Path(os.environ.get("CODELOUPE_CORPORA", "/work/corpora"))
# Marker outcomes in the splice stats that mean "the model cited something that showed nothing".
DROPPED = ("malformed", "unknown", "out_of_range", "unreadable", "stale")


def symbol_spans(ws: Workspace, paths: set[str]) -> dict[str, list[tuple[tuple[str, ...], int, int]]]:
    """Per gold file: (qualified-name segments, start, end) of every indexed definition."""
    rows = ws.store.file_rows()
    out: dict[str, list[tuple[tuple[str, ...], int, int]]] = {}
    for path in paths:
        if path in rows:
            out[path] = [(symbol_segments(f"{s.parent}.{s.name}" if s.parent else s.name), s.start_line, s.end_line)
                         for s in ws.store.symbols_of_file(rows[path].id)]
    return out


def cites_gold_symbol(result: AskResult, query: GoldenQuery, spans: dict[str, list]) -> bool:
    wanted = [symbol_segments(label) for label in query.gold_symbols]
    for c in result.citations:
        for segments, start, end in spans.get(c.path, []):
            overlaps = start <= c.end_line and c.start_line <= end
            if overlaps and any(w and segments[-len(w):] == w for w in wanted):
                return True
    return False


def valid_on_disk(root: Path, path: str, start: int, end: int, text: str) -> bool:
    try:
        lines = (root / path).read_bytes().decode("utf-8", errors="replace").splitlines(keepends=True)
    except OSError:
        return False
    return "".join(lines[start - 1:end]) == text


def score_question(ws: Workspace, query: GoldenQuery, result: AskResult, elapsed_ms: float) -> dict[str, Any]:
    gold = set(query.gold_files)
    cited_files = sorted({c.path for c in result.citations})
    stats = {k[len("splice_"):]: v for k, v in result.metrics.items() if k.startswith("splice_")}
    markers = stats.get("markers", 0)
    return {
        "id": query.id, "kind": query.kind, "query": query.query, "gold_files": sorted(gold),
        "gold_symbols": list(query.gold_symbols),
        "bundle": [h.path for h in result.bundle.files],
        "citations": [{"path": c.path, "start_line": c.start_line, "end_line": c.end_line, "k": c.k,
                       "snapped": c.snapped, "changed": c.changed,
                       "valid": valid_on_disk(ws.root, c.path, c.start_line, c.end_line, c.text)}
                      for c in result.citations],
        "cited_files": cited_files,
        "cited_gold_files": [p for p in cited_files if p in gold],
        "cites_gold_symbol": cites_gold_symbol(result, query, symbol_spans(ws, gold)) if query.gold_symbols
        else None,
        "retrieval_recall": all_in_bundle([h.path for h in result.bundle.files], gold),
        "markers": markers, "markers_dropped": sum(stats.get(k, 0) for k in DROPPED),
        "abstained": result.abstained, "fallback": result.fallback, "elapsed_ms": round(elapsed_ms, 1),
        "metrics": result.metrics, "answer": result.answer,
    }


def ratio(num: float, den: float) -> float | None:
    return round(num / den, 3) if den else None


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    cited = [r for r in records if r["citations"]]
    with_symbols = [r for r in cited if r["cites_gold_symbol"] is not None]
    citations = [c for r in records for c in r["citations"]]
    markers = sum(r["markers"] for r in records)
    return {
        "questions": len(records),
        "file_citation_accuracy": ratio(sum(len(r["cited_gold_files"]) for r in cited),
                                        sum(len(r["cited_files"]) for r in cited)),
        "symbol_citation_accuracy": ratio(sum(r["cites_gold_symbol"] for r in with_symbols), len(with_symbols)),
        "retrieval_recall": ratio(sum(r["retrieval_recall"] for r in records), len(records)),
        "citation_validity": ratio(sum(c["valid"] for c in citations), len(citations)),
        "marker_resolution": ratio(markers - sum(r["markers_dropped"] for r in records), markers),
        "answered": len(cited), "abstained": sum(r["abstained"] for r in records),
        "fallbacks": dict(Counter(r["fallback"] for r in records if r["fallback"])),
        "p50_ms": sorted(r["elapsed_ms"] for r in records)[len(records) // 2] if records else None,
    }


@contextmanager
def scripted_chat(hang_s: float = 0.0) -> Iterator[dict[str, Any]]:
    """The tests' scripted server, citing the first two excerpts of whatever it is shown (after `hang_s`: a
    stand-in for a real model's time to first token)."""
    sys.path.insert(0, str(CHECKOUT / "tests"))
    from chat_server import ChatServer, Reply, excerpt_numbers

    def answer(body: dict[str, Any]) -> str:
        shown = excerpt_numbers(body)
        if not shown:
            return "<<ABSTAIN>> Nothing was shown."
        first = f"The answer starts here [[{shown[0][0]}]]."
        if len(shown) < 2:
            return first
        k, _, a, b = shown[1]
        return f"{first}\nIt continues in [[{k}:{a}-{min(b, a + 5)}]]."

    with ChatServer() as server:
        server.add(Reply(render=answer, times=10**9, hang_s=hang_s))
        yield {"chat_base_url": server.base_url, "chat_model": "scripted"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", type=Path, default=DEFAULT_GOLDEN)
    parser.add_argument("--corpora", type=Path, default=DEFAULT_CORPORA)
    parser.add_argument("--corpus", action="append", default=[], help="corpus id (repeatable; default all)")
    parser.add_argument("--kinds", default="", help="comma-separated query kinds (default all)")
    parser.add_argument("--limit", type=int, default=0, help="at most N questions per corpus")
    agents = parser.add_mutually_exclusive_group()
    agents.add_argument("--agents", action="store_true", dest="agents", default=None)
    agents.add_argument("--no-agents", action="store_false", dest="agents")
    parser.add_argument("--best", action="store_true", help="model rerank first")
    parser.add_argument("--embed-provider", choices=["local", "openai", "onnx", "none"])
    parser.add_argument("--scripted", action="store_true", help="use the scripted chat server (smoke run)")
    parser.add_argument("--out", type=Path, default=CHECKOUT / "bench" / "results" / "ask_eval.json")
    args = parser.parse_args(argv)

    golden = load_golden(args.golden)
    kinds = {k for k in args.kinds.split(",") if k}
    records: list[dict[str, Any]] = []
    with scripted_chat() if args.scripted else nullcontext({}) as chat:
        overrides = {**chat, **({"embed_provider": args.embed_provider} if args.embed_provider else {})}
        for corpus in golden.corpora:
            if args.corpus and corpus.id not in args.corpus:
                continue
            ws = Workspace(corpus_repo(args.corpora, corpus.id), overrides=overrides)
            try:
                ws.index()
                if ws.settings.embed_provider != "none":
                    ws.embed()
                queries = [q for q in corpus.queries if not kinds or q.kind in kinds]
                for query in queries[:args.limit or None]:
                    started = time.perf_counter()
                    *_, done = ws.ask(query.query, mode="docs" if query.kind == "docs" else "code",
                                      agents=args.agents, best=args.best)
                    record = score_question(ws, query, done.result, (time.perf_counter() - started) * 1000)
                    records.append({"corpus": corpus.id, **record})
                    print(f"{corpus.id} {query.id}: cited {record['cited_files'] or '-'}"
                          f" fallback={record['fallback']}", file=sys.stderr)
            finally:
                ws.close()

    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_kind[record["kind"]].append(record)
    summary = {"overall": summarise(records), **{k: summarise(v) for k, v in sorted(by_kind.items())}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "questions": records, "scripted": args.scripted},
                                   indent=2, default=str))
    print(json.dumps(summary, indent=2))
    print(f"per-question records: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
