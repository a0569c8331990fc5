"""Try ranking constants on whole golden sets, in one process, against warm workspaces.

    .venv/bin/python bench/tune_ranking.py GOLDEN.json [GOLDEN2.json ...] --corpora DIR [--corpora DIR2 ...]
        [--set NAME=VALUE ...] [--grid "NAME=V1;V2;..."] [--folds K] [--no-embed] [--kinds K[,K]]
        [--corpora-per-set N] [--queries-per-corpus N] [--max-files N] [--issue-mode]

Each golden set is read with the `--corpora` at the same position (one `--corpora` serves them all). Each
`--set` overrides a constant of `codeloupe.ranking` for every run (Python literal values); each `--grid` adds
one axis; every combination is scored on every query (R@1, Acc@5, bundle recall, MRR, mean bundle size) and
printed next to the baseline (the module's own values). With `--folds K` the corpora (repositories) are split
into K folds and the grid is cross-validated: for each fold the combination that scores best (R@1, then MRR)
on the other folds is scored on it, so the printed CV line is what choosing by this grid is worth on
repositories it did not see. Each workspace is scored once its graph and summary lane are built, as a warm
server holds them (`Workspace.wait_for_lanes`: past 2,000 files they build on threads of their own, and the
first queries went without them). Indexes and vectors come from the cache dir (CODELOUPE_CACHE_DIR). Tune on whole
sets, never on one query. The sampling options are bench/devsets/baseline.py's (the same hash sample), to keep
an embedded run bounded; with several query kinds each combination also gets one line per kind.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path

from codeloupe import ranking
from codeloupe.api import Workspace
from codeloupe.eval import metrics
from codeloupe.eval.golden import load_golden, load_swebench
from codeloupe.issue import is_issue
from devsets.baseline import sample


@dataclass(frozen=True)
class Case:
    corpus: str
    id: str
    kind: str
    query: str
    gold: tuple[str, ...]
    set: str = ""  # the golden set's file name, for per-set lines


def score_cases(ws: Workspace, cases: list[Case]) -> list[tuple[float, float, float, float, int]]:
    """(hit@1, all gold in top 5, all gold in bundle, reciprocal rank, bundle size) per case."""
    out = []
    for case in cases:
        bundle = ws.search(case.query, mode="docs" if case.kind == "docs" else "code")
        ranked = [h.path for h in bundle.files]
        gold = list(case.gold)
        out.append((float(metrics.hit_at_1(ranked, gold)), float(metrics.all_in_top_k(ranked, gold, 5)),
                    float(metrics.all_in_bundle(ranked, gold)), metrics.reciprocal_rank(ranked, gold), len(ranked)))
    return out


def summary(rows: list[tuple[float, float, float, float, int]]) -> str:
    n = max(len(rows), 1)
    r1, acc5, bundle, rr, files = (sum(r[i] for r in rows) / n for i in range(5))
    return f"R@1 {r1:.3f}  Acc@5 {acc5:.3f}  bundle {bundle:.3f}  MRR {rr:.3f}  files {files:.1f}  (n={len(rows)})"


def fold_of(corpus: str, folds: int) -> int:
    """Folds group repositories: every instance of one repository (`py-attrs-fix-1499c77e79`) falls together."""
    repo = corpus.rsplit("-fix-", 1)[0]
    return int(hashlib.sha256(repo.encode()).hexdigest(), 16) % folds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path, nargs="+")
    parser.add_argument("--corpora", type=Path, action="append", default=[])
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1;V2")
    parser.add_argument("--folds", type=int, default=0, help="cross-validate the grid over K folds of corpora")
    parser.add_argument("--no-embed", action="store_true", help="lexical and symbol lanes only")
    parser.add_argument("--kinds", default="", help="only these query kinds")
    parser.add_argument("--per-repo", type=int, default=0,
                        help="a .jsonl set: at most this many instances per repository (a hash sample)")
    parser.add_argument("--corpora-per-set", type=int, default=0, help="sample this many corpora per set (0: all)")
    parser.add_argument("--queries-per-corpus", type=int, default=0, help="sample this many queries (0: all)")
    parser.add_argument("--max-files", type=int, default=0,
                        help="sample only corpora with at most this many files (bounds embedding time)")
    parser.add_argument("--issue-mode", action="store_true",
                        help="only the queries issue mode reads as bug reports (issue constants change no other)")
    parser.add_argument("--show-misses", action="store_true")
    args = parser.parse_args()

    for item in args.set:
        name, value = item.split("=", 1)
        setattr(ranking, name, ast.literal_eval(value))
    axes = []
    for item in args.grid:
        name, values = item.split("=", 1)
        axes.append([(name, ast.literal_eval(v)) for v in _split(values)])

    kinds = {k for k in args.kinds.split(",") if k}
    overrides = {"embed_provider": "none"} if args.no_embed else None
    sources: list[tuple[Path, list[Case]]] = []  # one workspace's tree and its cases
    for i, path in enumerate(args.golden):
        if path.suffix == ".jsonl":  # SWE-bench style: every instance is its own tree, its own "corpus"
            per_repo: dict[str, int] = {}
            for inst in sorted(load_swebench(path), key=lambda x: hashlib.sha256(x.id.encode()).hexdigest()):
                repo_key = inst.id.rsplit("-", 2)[0]
                if args.per_repo and per_repo.get(repo_key, 0) >= args.per_repo:
                    continue
                per_repo[repo_key] = per_repo.get(repo_key, 0) + 1
                sources.append((inst.repo, [Case(inst.id, inst.id, "issue", inst.query, tuple(inst.gold_files), path.name)]))
            continue
        corpora = args.corpora[min(i, len(args.corpora) - 1)] if args.corpora else Path(".")
        golden = sample(load_golden(path), corpora, args.corpora_per_set, args.queries_per_corpus, args.max_files)
        for corpus in golden.corpora:
            key = f"{path.stem}:{corpus.id}"
            queries = [q for q in corpus.queries if not kinds or q.kind in kinds]
            if queries:
                sources.append((corpora / corpus.id / "repo",
                                [Case(key, q.id, q.kind, q.query, tuple(q.gold_files), path.name) for q in queries]))
    if args.issue_mode:
        sources = [(repo, kept) for repo, group in sources if (kept := [c for c in group if is_issue(c.query)])]
    cases = [c for _, group in sources for c in group]
    print(f"{len(cases)} queries over {len(sources)} corpora", flush=True)

    combos: list[tuple[tuple[str, object], ...]] = [(), *itertools.product(*axes)]  # () is the baseline
    results: list[list[tuple[float, float, float, float, int]]] = [[] for _ in combos]
    # One workspace open at a time, every combination scored on it before it closes: a set of hundreds of
    # instance trees (the commits set) fits in memory.
    for repo, group in sources:
        ws = Workspace(repo, overrides=overrides)
        try:
            ws.index()
            if not args.no_embed:
                ws.embed()
            # Past 2,000 files the graph and the summary lane are built on threads of their own: a large tree's
            # first queries were scored without them, where a warm server has them.
            ws.wait_for_lanes()
            for k, combo in enumerate(combos):
                saved = {name: getattr(ranking, name) for name, _ in combo}
                for name, value in combo:
                    setattr(ranking, name, value)
                results[k] += score_cases(ws, group)
                for name, value in saved.items():
                    setattr(ranking, name, value)
        finally:
            ws.close()
    for k, combo in enumerate(combos):
        print(f"{summary(results[k])}  {' '.join(f'{n}={v!r}' for n, v in combo) or 'baseline'}", flush=True)
        if len(args.golden) > 1:
            for name in dict.fromkeys(c.set for c in cases):
                print(f"    {summary([r for c, r in zip(cases, results[k]) if c.set == name])}  {name}")
        if len({c.kind for c in cases}) > 1:
            for kind in sorted({c.kind for c in cases}):
                print(f"    {summary([r for c, r in zip(cases, results[k]) if c.kind == kind])}  kind {kind}")
        if args.show_misses:
            print("    misses: " + " ".join(c.id for c, r in zip(cases, results[k]) if not r[0]))
    combos, results = combos[1:], results[1:]
    if args.folds > 1 and combos:
        held_out: list[tuple[float, float, float, float, int]] = []
        for fold in range(args.folds):
            inside = [i for i, c in enumerate(cases) if fold_of(c.corpus, args.folds) == fold]
            outside = [i for i, c in enumerate(cases) if fold_of(c.corpus, args.folds) != fold]
            if not inside or not outside:
                continue
            best = max(range(len(combos)), key=lambda k: (sum(results[k][i][0] for i in outside),
                                                         sum(results[k][i][3] for i in outside), -k))
            held_out += [results[best][i] for i in inside]
            print(f"  fold {fold}: chose {' '.join(f'{n}={v!r}' for n, v in combos[best])}")
        print(f"{summary(held_out)}  cross-validated over {args.folds} folds of corpora")
    return 0


def _split(values: str) -> list[str]:
    """Split on semicolons outside brackets and braces, so dict and tuple values survive."""
    out, depth, cur = [], 0, ""
    for ch in values:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == ";" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out


if __name__ == "__main__":
    sys.exit(main())
