"""Issue-mode latency: p50/p95 of each search phase over a golden set's bug reports, warm workspaces.

    .venv/bin/python bench/issue_latency.py GOLDEN.json --corpora DIR [--kind issue] [--repeat 3]
        [--set NAME=VALUE ...]

Each `--set` overrides a constant of `codeloupe.ranking` (a Python literal), e.g.
`--set 'DENSE_VARIANTS={"query", "full", "title"}'`, so the cost of a choice is measured in the same process
as its quality (bench/tune_ranking.py). Indexes and vectors come from the cache dir (CODELOUPE_CACHE_DIR).
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
from pathlib import Path

from codeloupe import ranking
from codeloupe.api import Workspace
from codeloupe.eval.golden import load_golden


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path)
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--kind", default="issue")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    for item in args.set:
        name, value = item.split("=", 1)
        setattr(ranking, name, ast.literal_eval(value))

    golden = load_golden(args.golden)
    queries = [(c.id, q.query) for c in golden.corpora for q in c.queries if q.kind == args.kind]
    workspaces = {}
    for corpus_id in dict.fromkeys(c for c, _ in queries):
        ws = Workspace(args.corpora / corpus_id / "repo")
        ws.index()
        ws.embed()
        workspaces[corpus_id] = ws
    issue_mode = sum(workspaces[c].search(q).issue_mode for c, q in queries)  # warm-up, not timed
    phases: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for corpus_id, query in queries:
            for phase, ms in workspaces[corpus_id].search(query).timing_ms.items():
                phases.setdefault(phase, []).append(ms)
    print(f"{len(queries)} {args.kind} queries ({issue_mode} in issue mode) x {args.repeat}")
    for phase, values in phases.items():
        values.sort()
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        print(f"  {phase:<9} p50 {statistics.median(values):7.1f} ms   p95 {p95:7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
