"""What a delta view answers against a fresh index of the same files: the ranking a user gets right after a save.

    .venv/bin/python bench/view_quality.py GOLDEN --corpora DIR [--out FILE]

For each corpus of a golden set (lexical lanes only, no vectors), a copy of its tree is indexed and every query
searched once (the full snapshot built); then every gold file of the corpus's queries is saved with a comment line
appended (the files a user was just working on) and `update_files` takes them in, so the queries are answered
from the delta view, as the language server answers right after a save; then a fresh index of the edited copy
answers them too. Reported: R@1 / Acc@5 / bundle recall / MRR both ways, how many top-5 lists and whole rankings
differ, and the gold files' ranks that moved. The engine is the one on the import path (a baseline: run this
script with `PYTHONPATH` set to its `engine` folder).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

COMMENT = {".py": "#", ".rb": "#", ".go": "//", ".js": "//", ".ts": "//", ".php": "//", ".rs": "//"}


def answers(ws, corpus, options) -> list:
    """Each query of `corpus` answered by `ws`, as `codeloupe eval` scores it."""
    from codeloupe.eval.runner import outcome_of

    out = []
    for q in corpus.queries:
        mode = options.mode_for(q.kind)
        bundle = ws.search(q.query, mode=mode, limit=options.limit)
        out.append(outcome_of(bundle, corpus=corpus.id, query_id=q.id, kind=q.kind, query=q.query, mode=mode,
                              lane="all", gold_files=q.gold_files, gold_symbols=q.gold_symbols, latency_ms=0.0))
    return out


def main() -> int:
    from codeloupe import ranking
    from codeloupe.api import Workspace
    from codeloupe.eval.golden import load_golden
    from codeloupe.eval.runner import EvalOptions, corpus_repo, score

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path)
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--out", type=Path, help="every query's two rankings, as JSON")
    args = parser.parse_args()
    options = EvalOptions(embed=False)
    scratch = Path(tempfile.mkdtemp(prefix="codeloupe-view-quality-"))
    outcomes: dict[str, list] = {"view": [], "fresh": []}
    ranking.REBUILD_QUIET_S = 3600.0  # every answer after the saves from the view, none from a rebuild
    rows = []
    try:
        for corpus in load_golden(args.golden).corpora:
            tree = scratch / corpus.id
            shutil.copytree(corpus_repo(args.corpora, corpus.id), tree, symlinks=True)

            saved = sorted({f for q in corpus.queries for f in q.gold_files if (tree / f).is_file()})
            warm = Workspace(tree, overrides={"cache_dir": str(scratch / f"cache-{corpus.id}"),
                                              **options.workspace_overrides()})
            try:
                warm.index()
                answers(warm, corpus, options)  # the full snapshot built and searched
                for rel in saved:
                    path = tree / rel
                    mark = COMMENT.get(path.suffix, "#")
                    path.write_bytes(path.read_bytes() + f"\n{mark} edited\n".encode())
                warm.update_files([tree / rel for rel in saved])
                view = answers(warm, corpus, options)
                outcomes["view"] += view
            finally:
                warm.close()
            fresh_ws = Workspace(tree, overrides={"cache_dir": str(scratch / f"fresh-{corpus.id}"),
                                                  **options.workspace_overrides()})
            try:
                fresh_ws.index()
                fresh = answers(fresh_ws, corpus, options)
                outcomes["fresh"] += fresh
            finally:
                fresh_ws.close()
            for a, b in zip(view, fresh, strict=True):
                rows.append({"corpus": corpus.id, "id": a.id, "view": a.ranked_files, "fresh": b.ranked_files,
                             "gold": a.gold_files, "view_ranks": a.gold_ranks, "fresh_ranks": b.gold_ranks})
            print(f"{corpus.id}: {len(saved)} gold files saved", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report: dict = {}
    for way in ("view", "fresh"):
        s = score(outcomes[way])
        report[way] = {"r_at_1": round(s.r_at_1, 3), "acc_at_5": round(s.acc_at_5, 3),
                       "bundle_recall": round(s.bundle_recall, 3), "mrr": round(s.mrr, 3)}
    report["top5_differ"] = sum(r["view"][:5] != r["fresh"][:5] for r in rows)
    report["rankings_differ"] = sum(r["view"] != r["fresh"] for r in rows)
    report["gold_ranks_moved"] = [
        {"query": f"{r['corpus']}/{r['id']}", "file": f, "view": r["view_ranks"][f], "fresh": r["fresh_ranks"][f]}
        for r in rows for f in r["gold"] if r["view_ranks"][f] != r["fresh_ranks"][f]]
    report["queries"] = len(rows)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
