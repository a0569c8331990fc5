"""One ranking across repositories: does the gold file of a query about one repository come first among all?

    .venv/bin/python bench/search_across.py ../shared/golden/public.json --corpora .golden [--no-embed] \
        [--cache-dir DIR] [--store postgresql://...] [--out FILE]

Every corpus of the golden set is one repository; every query is asked of all of them at once. Scored per
query, file level: R@1 (the first file is a gold file of the query's own repository) and Acc@5, for

- `alone`: the query's own repository searched by itself (the ceiling: what a user who picked the right
  repository gets);
- `lane_ranks`: `api.search_repositories`, each lane ranking one list across the repositories by its own
  score, lanes fused by those ranks (what `/v1/search/all`, `search --all` and MCP `repos` answer);
- `own_scores`: each repository searched alone and the files ordered by their repository's own fused score
  (every repository's best file scores about alike: what `/v1/search/all` did before).

Runs on the workspaces' own (SQLite) indexes, or with `--store` on repositories of a shared index (each
corpus indexed into it under its id, then searched through `api.open_shared` with no checkout): the ranking
is the same code above either store; the latency is not.

`--distractors DIR ...`: every folder named is one more repository that no query is about (e.g. packages of the
standard library: `http`, `email`, `asyncio`...), so that a search across them all has to find the query's
repository among many. With more repositories of a shared index than `ranking.REPOSITORIES_SEARCHED_FULLY`,
`lane_ranks` is then the search with every repository searched in full (the choice turned off) and `chosen`
the search as it runs, the repositories chosen first (`repository_choice`); `chosen_recall` is how often the
query's own repository was among those chosen.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from codeloupe import ranking as R
from codeloupe.api import Workspace, open_shared, search_repositories
from codeloupe.bundle import merge_bundles


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("golden", type=Path)
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--no-embed", action="store_true")
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--store", metavar="URL", help="index into and search from this shared index")
    parser.add_argument("--distractors", type=Path, nargs="*", default=[],
                        help="folders indexed as more repositories, which no query is about")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    overrides: dict = {"cache_dir": str(args.cache_dir)} if args.cache_dir else {}
    if args.no_embed:
        overrides["embed_provider"] = "none"
    corpora = json.loads(args.golden.read_text())["corpora"]
    workspaces = {}
    repositories = {c["id"]: args.corpora / c["id"] / "repo" for c in corpora}
    repositories.update({f"other-{folder.name}": folder for folder in args.distractors})
    for name, root in repositories.items():
        shared = {"store_url": args.store, "store_repository": name} if args.store else {}
        ws = Workspace(root, overrides={**overrides, **shared})
        ws.index()
        if not args.no_embed:
            ws.embed()
        workspaces[name] = ws
        print(f"{name}: ready", file=sys.stderr, flush=True)
    if args.store:
        for ws in workspaces.values():
            ws.close()
        workspaces = {ws.repository_name: ws for ws in open_shared(list(repositories),
                                                                    {**overrides, "store_url": args.store})}
    # A hit names its repository by its shown name, or by its folder where two share one (three packages' folders
    # are all named `package`)
    names = {name: cid for cid, ws in workspaces.items() for name in (ws.repository_name, str(ws.root))}
    rows = []
    timings: dict[str, list[float]] = {"alone": [], "lane_ranks": [], "own_scores": []}
    # Only a shared index chooses (`repository_choice` asks its database): folders' own indexes are all searched.
    choosing = args.store is not None and len(workspaces) > R.REPOSITORIES_SEARCHED_FULLY
    if choosing:
        timings["chosen"] = []
    searched_fully = R.REPOSITORIES_SEARCHED_FULLY
    for corpus in corpora:
        for q in corpus["queries"]:
            gold = set(q["gold_files"])
            row = {"id": q["id"]}
            started = time.perf_counter()
            own = workspaces[corpus["id"]].search(q["query"])
            timings["alone"].append((time.perf_counter() - started) * 1000)
            row["alone"] = [(corpus["id"], h.path) for h in own.files[:5]]
            R.REPOSITORIES_SEARCHED_FULLY = len(workspaces)  # every repository searched in full
            started = time.perf_counter()
            fused = search_repositories(list(workspaces.values()), q["query"])
            timings["lane_ranks"].append((time.perf_counter() - started) * 1000)
            R.REPOSITORIES_SEARCHED_FULLY = searched_fully
            row["lane_ranks"] = [(names[h.repository], h.path) for h in fused.files[:5]]
            if choosing:
                started = time.perf_counter()
                chosen = search_repositories(list(workspaces.values()), q["query"])
                timings["chosen"].append((time.perf_counter() - started) * 1000)
                row["chosen"] = [(names[h.repository], h.path) for h in chosen.files[:5]]
                note = next(n for n in chosen.notes if n.startswith("searched "))
                row["chosen_repositories"] = note.split(": ", 1)[1].split(" (", 1)[0].split(", ")
            started = time.perf_counter()
            separate = merge_bundles(q["query"], "code", {ws.repository_name: ws.search(q["query"])
                                                          for ws in workspaces.values()})
            timings["own_scores"].append((time.perf_counter() - started) * 1000)
            row["own_scores"] = [(names[h.repository], h.path) for h in separate.files[:5]]
            for method in timings:
                hits = [repo == corpus["id"] and path in gold for repo, path in row[method]]
                row[method + "_r1"] = bool(hits[:1] and hits[0])
                row[method + "_acc5"] = any(hits)
            rows.append(row)
            print(f"{q['id']}: {' '.join(m for m in timings if row[m + '_r1'])}", file=sys.stderr, flush=True)
    print(f"{len(rows)} queries over {len(workspaces)} repositories ({'lexical' if args.no_embed else 'embedded'})")
    print("| method | R@1 | Acc@5 | p50 ms |\n|---|---|---|---|")
    for method, times in timings.items():
        r1 = sum(r[method + "_r1"] for r in rows) / len(rows)
        acc5 = sum(r[method + "_acc5"] for r in rows) / len(rows)
        print(f"| {method} | {r1:.3f} | {acc5:.3f} | {statistics.median(times):.1f} |")
    if choosing:
        own = [corpus["id"] in r["chosen_repositories"] for corpus in corpora for r in rows
               if r["id"] in {q["id"] for q in corpus["queries"]}]
        print(f"chosen_recall: the query's own repository among the {R.REPOSITORIES_SEARCHED_FULLY} chosen in"
              f" {sum(own)} of {len(own)} ({sum(own) / len(own):.3f})")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    for ws in workspaces.values():
        ws.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
