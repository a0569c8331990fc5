"""Try ranking constants on the whole golden set, in one process, against warm workspaces.

    .venv/bin/python bench/tune_ranking.py GOLDEN.json --corpora DIR [--set NAME=VALUE ...] [--grid "NAME=V1;V2;..."]

Each `--set` overrides a constant of `codeloupe.ranking` for every run (Python literal values); each `--grid`
adds one axis; every combination is scored on every query (R@1, Acc@5, bundle recall, MRR) and printed next to
the baseline (the module's own values). Indexes and vectors come from the cache dir (CODELOUPE_CACHE_DIR), so
run `codeloupe eval` once first. Tune on the whole set, never on one query.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import sys
from pathlib import Path

from codeloupe import ranking
from codeloupe.api import Workspace
from codeloupe.eval import metrics
from codeloupe.eval.golden import load_golden


def score(workspaces: dict[str, Workspace], golden, docs_mode: str = "docs") -> dict[str, float]:
    r1 = acc5 = recall = rr = files = 0.0
    n = 0
    misses = []
    for corpus in golden.corpora:
        ws = workspaces[corpus.id]
        for q in corpus.queries:
            bundle = ws.search(q.query, mode=docs_mode if q.kind == "docs" else "code")
            ranked = [h.path for h in bundle.files]
            hit = metrics.hit_at_1(ranked, q.gold_files)
            r1 += hit
            acc5 += metrics.all_in_top_k(ranked, q.gold_files, 5)
            recall += metrics.all_in_bundle(ranked, q.gold_files)
            rr += metrics.reciprocal_rank(ranked, q.gold_files)
            files += len(ranked)
            n += 1
            if not hit:
                misses.append(q.id)
    return {"R@1": r1 / n, "Acc@5": acc5 / n, "bundle": recall / n, "MRR": rr / n, "files": files / n, "misses": misses}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path)
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1;V2")
    parser.add_argument("--show-misses", action="store_true")
    args = parser.parse_args()

    for item in args.set:
        name, value = item.split("=", 1)
        setattr(ranking, name, ast.literal_eval(value))
    axes = []
    for item in args.grid:
        name, values = item.split("=", 1)
        axes.append([(name, ast.literal_eval(v)) for v in _split(values)])

    golden = load_golden(args.golden)
    workspaces = {}
    for corpus in golden.corpora:
        ws = Workspace(args.corpora / corpus.id / "repo")
        ws.index()
        ws.embed()
        workspaces[corpus.id] = ws

    def run(label: str) -> None:
        s = score(workspaces, golden)
        line = f"R@1 {s['R@1']:.3f}  Acc@5 {s['Acc@5']:.3f}  bundle {s['bundle']:.3f}  MRR {s['MRR']:.3f}  files {s['files']:.1f}  {label}"
        print(line + (f"\n    misses: {' '.join(s['misses'])}" if args.show_misses else ""), flush=True)

    run("baseline")
    for combo in itertools.product(*axes) if axes else []:
        saved = {name: getattr(ranking, name) for name, _ in combo}
        for name, value in combo:
            setattr(ranking, name, value)
        run(" ".join(f"{n}={v!r}" for n, v in combo))
        for name, value in saved.items():
            setattr(ranking, name, value)
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
