#!/usr/bin/env python3
"""Repeat-question latency of `ask`: fresh (retrieval + model + splice + storing the flow) vs served from the
flow cache (retrieval + lookup + re-hashing the cited files), on a golden corpus.

    .venv/bin/python bench/flow_bench.py [--corpus click] [--questions 10] [--model-delay-s 0.0] [--out FILE]

The model is the tests' scripted server (tests/chat_server.py, via bench/ask_eval.py), answering at once
unless `--model-delay-s` makes it wait first: the fresh numbers hold no real model's time, so the gap
measured is the least a cache hit saves. Embeddings are the configured provider's (the local MiniLM by
default), so the served/attached decisions are the real thresholds on real vectors. Each corpus gets a
fresh cache directory (no flow from an earlier run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ask_eval import DEFAULT_CORPORA, DEFAULT_GOLDEN, scripted_chat
from codeloupe.api import Workspace
from codeloupe.eval.golden import load_golden
from codeloupe.eval.runner import corpus_repo


def timed_ask(ws: Workspace, question: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    result = None
    for event in ws.ask(question, agents=False):
        result = event.result or result
    elapsed = (time.perf_counter() - started) * 1000
    assert result is not None
    return elapsed, {"fallback": result.fallback, "flow": result.flow.action if result.flow else None}


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 1), "mean_ms": round(statistics.fmean(values), 1),
            "max_ms": round(max(values), 1)} if values else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", type=Path, default=DEFAULT_GOLDEN)
    parser.add_argument("--corpora", type=Path, default=DEFAULT_CORPORA / "golden")
    parser.add_argument("--corpus", default="click")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--model-delay-s", type=float, default=0.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    corpus = load_golden(args.golden).corpus(args.corpus)
    questions = [q.query for q in corpus.queries if q.kind in ("short", "symbol")][:args.questions]
    records = []
    with tempfile.TemporaryDirectory() as cache, scripted_chat(args.model_delay_s) as chat:
        ws = Workspace(corpus_repo(args.corpora, corpus.id), overrides={**chat, "cache_dir": cache})
        try:
            ws.index()
            ws.embed()
            ws.warm()
            timed_ask(ws, "warm up the query path")  # model load and first-call costs stay out of the numbers
            for question in questions:
                fresh_ms, fresh = timed_ask(ws, question)
                again_ms, again = timed_ask(ws, question)
                records.append({"question": question, "fresh_ms": round(fresh_ms, 1), "fresh": fresh,
                                "repeat_ms": round(again_ms, 1), "repeat": again})
        finally:
            ws.close()
    served = [r for r in records if r["repeat"]["flow"] == "served"]
    report = {
        "corpus": corpus.id, "questions": len(records), "model_delay_s": args.model_delay_s,
        "fresh": summary([r["fresh_ms"] for r in records if r["fresh"]["fallback"] is None]),
        "repeat_served": summary([r["repeat_ms"] for r in served]), "served": len(served),
        "not_served": [r["question"] for r in records if r not in served],
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps({"summary": report, "records": records}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
