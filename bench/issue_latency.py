"""Issue-mode latency: p50/p95 of each search phase over bug reports, warm workspaces.

    .venv/bin/python bench/issue_latency.py GOLDEN.json --corpora DIR [--kind issue] [--repeat 3]
        [--set NAME=VALUE ...]
    .venv/bin/python bench/issue_latency.py COMMITS.jsonl [--repos 4] [--messages 12] [--tree DIR ...]
        [--no-embed] [--random-vectors] ...

Each `--set` overrides a constant of `codeloupe.ranking` (a Python literal), e.g.
`--set 'DENSE_VARIANTS={"query", "full", "title"}'`, so the cost of a choice is measured in the same process
as its quality (bench/tune_ranking.py). Indexes and vectors come from the cache dir (CODELOUPE_CACHE_DIR).

A `.jsonl` set (bench/devsets/commit_pairs.py: real commit messages) gives real long reports: its
`--messages` longest messages that read as reports (issue mode) are each searched on the trees of its `--repos`
largest repositories (one tree each) and on every `--tree` given: latency depends on the tree's size and the
report's text, and the set's longest reports come from its smaller repositories.

`--random-vectors` stores random unit vectors for every chunk and skeleton of the trees instead of embedding
them (bench/scale_tree.py; a query's cost does not depend on the values), so a SWE-bench-sized tree
(`--tree /usr/lib/python3.11`, a large sdist) is measured without an hour of embedding on two cores; the
reports themselves still go through the real model. `cpu` is the searching thread's CPU time per search, the
figure to compare on a loaded machine.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
import time
from pathlib import Path

from codeloupe import ranking
from codeloupe.api import Workspace
from codeloupe.eval.golden import load_golden, load_swebench
from codeloupe.issue import is_issue

HERE = Path(__file__).resolve().parent

def report_queries(path: Path, repos: int, messages: int, trees: list[Path]) -> list[tuple[Path, str]]:
    """(tree, message): the longest report-shaped messages of a commits set, on its largest trees and `trees`."""
    instances = load_swebench(path)
    by_repo = {}
    for inst in instances:
        by_repo.setdefault(inst.id.rsplit("-fix-", 1)[0], inst.repo)
    sizes = {name: sum(1 for p in tree.rglob("*") if p.is_file()) for name, tree in by_repo.items()}
    largest = [by_repo[name] for name in sorted(by_repo, key=lambda n: (-sizes[n], n))[:repos]]
    reports = [i.query for i in sorted(instances, key=lambda i: (-len(i.query), i.id)) if is_issue(i.query)]
    return [(tree, query) for tree in [*largest, *trees] for query in reports[:messages]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path)
    parser.add_argument("--corpora", type=Path)
    parser.add_argument("--kind", default="issue")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--repos", type=int, default=4, help="a .jsonl set: this many of its largest repositories")
    parser.add_argument("--messages", type=int, default=12, help="a .jsonl set: its longest reports")
    parser.add_argument("--tree", type=Path, action="append", default=[], help="a .jsonl set: one more tree")
    parser.add_argument("--no-embed", action="store_true", help="lexical and symbol lanes only")
    parser.add_argument("--random-vectors", action="store_true",
                        help="random chunk vectors instead of embedding the trees (the reports are embedded)")
    parser.add_argument("--out", type=Path, help="also write the figures here as JSON")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    for item in args.set:
        name, value = item.split("=", 1)
        setattr(ranking, name, ast.literal_eval(value))

    if args.golden.suffix == ".jsonl":
        queries = report_queries(args.golden, args.repos, args.messages, args.tree)
    else:
        if args.corpora is None:
            parser.error("--corpora is needed for a golden set")
        golden = load_golden(args.golden)
        queries = [(args.corpora / c.id / "repo", q.query) for c in golden.corpora for q in c.queries
                   if q.kind == args.kind]
    overrides = {"embed_provider": "none"} if args.no_embed else None
    workspaces = {}
    for tree in dict.fromkeys(t for t, _ in queries):
        ws = Workspace(tree, overrides=overrides)
        ws.index()
        if args.random_vectors and not args.no_embed:
            _random_vectors(ws)
        elif not args.no_embed:
            ws.embed()
        ws.warm()  # the search snapshot and the graph, as a server has them before a report comes
        workspaces[tree] = ws
    issue_mode = sum(workspaces[t].search(q).issue_mode for t, q in queries)  # warm-up, not timed
    for ws in workspaces.values():
        ws.wait_for_lanes()  # past a few thousand files the summary lane is built on its own thread: time its searches
    phases: dict[str, list[float]] = {}
    per_tree: dict[Path, list[float]] = {}
    for run in range(args.repeat):
        for n, (tree, query) in enumerate(queries):
            # A pasted report is new to the model: numbering its first line keeps each timed search from
            # being answered by a memo of query vectors (the warm-up filled it; the same report goes to
            # every tree, and a provider may serve several workspaces).
            cpu = time.thread_time()
            timing = workspaces[tree].search(f"({run}.{n}) {query}").timing_ms
            # The searching thread's CPU and the dense product's, which runs on a thread of its own.
            timing["cpu"] = (time.thread_time() - cpu) * 1000 + timing.get("dense_cpu", 0.0)
            for phase, ms in timing.items():
                phases.setdefault(phase, []).append(ms)
            per_tree.setdefault(tree, []).append(timing["cpu"])
    words = sorted(len(q.split()) for _, q in queries)
    sizes = ", ".join(f"{t.name} {ws.store.counts()['files']} files / {ws.store.counts()['chunks']} chunks"
                      for t, ws in workspaces.items())
    print(f"trees: {sizes}")
    print(f"{len(queries)} {args.kind} queries over {len(workspaces)} trees ({issue_mode} in issue mode, "
          f"median {statistics.median(words):.0f} words) x {args.repeat}")
    figures: dict[str, dict[str, float]] = {}
    for phase, values in phases.items():
        values.sort()
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        figures[phase] = {"p50_ms": statistics.median(values), "p95_ms": p95}
        print(f"  {phase:<9} p50 {statistics.median(values):7.1f} ms   p95 {p95:7.1f} ms")
    for tree, values in per_tree.items():
        print(f"  cpu p50 {statistics.median(values):7.1f} ms on {tree}")
    if args.out:
        args.out.write_text(json.dumps({
            "queries": len(queries), "repeat": args.repeat, "median_words": statistics.median(words),
            "trees": {str(t): ws.store.counts() for t, ws in workspaces.items()}, "phases": figures,
            "cpu_p50_ms_per_tree": {str(t): statistics.median(v) for t, v in per_tree.items()}}, indent=1))
    for ws in workspaces.values():
        ws.close()
    return 0


def _random_vectors(ws: Workspace) -> None:
    sys.path.insert(0, str(HERE))
    from codeloupe.embed import describe_provider
    from scale_tree import random_vectors

    _, model = describe_provider(ws.settings)
    random_vectors(ws, model, ws.embedding_provider().dim)


if __name__ == "__main__":
    sys.exit(main())
