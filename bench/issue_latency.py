"""Issue-mode latency: p50/p95 of each search phase over bug reports, warm workspaces.

    .venv/bin/python bench/issue_latency.py GOLDEN.json --corpora DIR [--kind issue] [--repeat 3]
        [--set NAME=VALUE ...]
    .venv/bin/python bench/issue_latency.py COMMITS.jsonl [--repos 4] [--messages 12] [--tree DIR ...]
        [--no-embed] ...

Each `--set` overrides a constant of `codeloupe.ranking` (a Python literal), e.g.
`--set 'DENSE_VARIANTS={"query", "full", "title"}'`, so the cost of a choice is measured in the same process
as its quality (bench/tune_ranking.py). Indexes and vectors come from the cache dir (CODELOUPE_CACHE_DIR).

A `.jsonl` set (bench/devsets/commit_pairs.py: real commit messages) gives real long reports: its
`--messages` longest messages that read as reports (issue mode) are each searched on the trees of its `--repos`
largest repositories (one tree each) and on every `--tree` given: latency depends on the tree's size and the
report's text, and the set's longest reports come from its smaller repositories.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
from pathlib import Path

from codeloupe import ranking
from codeloupe.api import Workspace
from codeloupe.eval.golden import load_golden, load_swebench
from codeloupe.issue import is_issue


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
        if not args.no_embed:
            ws.embed()
        workspaces[tree] = ws
    issue_mode = sum(workspaces[t].search(q).issue_mode for t, q in queries)  # warm-up, not timed
    phases: dict[str, list[float]] = {}
    for run in range(args.repeat):
        for tree, query in queries:
            # A pasted report is new to the model: numbering its first line keeps each timed search from
            # being answered by the provider's memo of query vectors (the warm-up filled it).
            for phase, ms in workspaces[tree].search(f"({run}) {query}").timing_ms.items():
                phases.setdefault(phase, []).append(ms)
    words = sorted(len(q.split()) for _, q in queries)
    print(f"{len(queries)} {args.kind} queries over {len(workspaces)} trees ({issue_mode} in issue mode, "
          f"median {statistics.median(words):.0f} words) x {args.repeat}")
    for phase, values in phases.items():
        values.sort()
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        print(f"  {phase:<9} p50 {statistics.median(values):7.1f} ms   p95 {p95:7.1f} ms")
    for ws in workspaces.values():
        ws.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
