"""CPU per question: thread CPU time of `Workspace.search` and of rendering its answer as LSP JSON, warm.

    .venv/bin/python bench/question_cpu.py GOLDEN.json --corpora DIR [--kinds short,symbol] [--no-embed]
        [--repeat 1]

Wall-clock p50 on a shared machine moves with everyone else's load (the same build measured 8.6 to 18.2 ms
p50 on the public set within ten minutes); the CPU time the searching thread spends does not, so two builds
are compared by this, alternating runs. Each question runs once per repeat (the first repeat is what
`codeloupe eval` measures: nothing of the question is cached yet). The embedding model's own threads are
not counted: with the dense lane, compare with the model's time in mind. Indexes and vectors come from the
cache dir (CODELOUPE_CACHE_DIR).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from codeloupe.api import Workspace
from codeloupe.eval.golden import load_golden
from codeloupe_lsp.convert import search_result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path)
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--kinds", default="short,symbol", help="query kinds to time (comma-separated)")
    parser.add_argument("--no-embed", action="store_true", help="lexical and symbol lanes only")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    kinds = set(args.kinds.split(","))
    overrides = {"embed_provider": "none"} if args.no_embed else {}

    search_ms: list[float] = []
    render_ms: list[float] = []
    files: list[int] = []
    for corpus in load_golden(args.golden).corpora:
        questions = [q.query for q in corpus.queries if q.kind in kinds]
        if not questions:
            continue
        ws = Workspace(args.corpora / corpus.id / "repo", overrides=overrides)
        try:
            ws.index()
            if not args.no_embed:
                ws.embed()
            ws.search("where is the entry point")  # warm-up: snapshot, graph, vectors (not timed)
            for _ in range(args.repeat):
                for question in questions:
                    started = time.thread_time()
                    bundle = ws.search(question)
                    searched = time.thread_time()
                    json.dumps(search_result(bundle))
                    # The dense product runs on a thread of its own: its CPU is the search's too.
                    search_ms.append((searched - started) * 1000.0 + bundle.timing_ms.get("dense_cpu", 0.0))
                    render_ms.append((time.thread_time() - searched) * 1000.0)
                    files.append(len(bundle.files))
        finally:
            ws.close()
    print(f"{len(search_ms)} questions ({args.kinds}), {'lexical' if args.no_embed else 'embedded'}, "
          f"x{args.repeat}: bundle files mean {statistics.mean(files):.1f}")
    for label, values in (("search", search_ms), ("render LSP JSON", render_ms)):
        print(f"  {label:<16} CPU p50 {statistics.median(values):6.2f} ms   mean {statistics.mean(values):6.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
