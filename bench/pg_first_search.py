"""A fresh process's first search of shared repositories whose saved files are already in the database, two
engines alternated, their answers asserted identical.

    .venv/bin/python bench/pg_first_search.py --corpora /work/corpora/golden --repos 10 --baseline /tmp/main/engine

What an every-repository search pays for each repository it chooses and has not searched before in this process
(docs/org-scale-measurements.md: ~3 s each at 2M chunks): its search snapshot's inputs, vectors, graph and file
summaries taken from `saved_files`, its lanes' first statements, its bundle. The organisation is built as
`bench/pg_org.py` builds it (`--stdlib-tests`: the seed is the golden corpora and the standard library with its
tests, ~11,800 chunks, embedded by the local model; its rows copied under `--repos - 1` more repository ids, row
ids shifted as a shared index's sequences hand them out), or taken as it is from `--url`. One process searches
those repositories in full once per query (so the first replica's saved files are in the database), then for each
query and round, one new process per engine (its own empty cache directory, as another replica) asks it once:
of one repository (`Workspace.search`) and of `--full` repositories from `--first-repo` at once (`search_repositories`, as the 8 an
every-repository search chooses are searched). The engine under test is this checkout's; `--baseline` names an
older checkout's engine folder (its `server` beside it), run first on even rounds and second on odd ones. Every
file, rank and score of each first answer must be the same for both engines (asserted). Reported: wall and
process CPU of the first search, p50 per engine and case, the ratio, and the load average. The background
loads a first search starts (the graph, the file summaries) are held back in the measured processes: the answer
is then what the search itself gives, not what a race with them did.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import pg_server  # noqa: E402
from pg_org import SEED, copy_organisation, seed_tree  # noqa: E402
from pg_workers import GOLDEN  # noqa: E402

HERE = Path(__file__).resolve().parent.parent
# Golden queries asked (their index among the public set's code queries), each a first search in a new process.
QUERY_PICKS = (3, 25, 47, 66, 15, 35)


def golden_queries(golden: Path) -> list[tuple[str, str]]:
    from codeloupe.eval.golden import load_golden

    corpora = [c for c in load_golden(golden).corpora if c.id in GOLDEN]
    return [(q.query, "docs" if q.kind == "docs" else "code") for c in corpora for q in c.queries]


def build(args: argparse.Namespace, url: str, scratch: Path) -> None:
    """The seed indexed and embedded for real, then copied (`pg_org.copy_organisation`): org-001 to the last of
    `--repos`, and the repositories searched where they lie past it."""
    import psycopg

    from codeloupe.api import Workspace

    overrides = {"store_url": url, "embed_provider": "local", "store_repository": SEED}
    ws = Workspace(seed_tree(args.corpora, scratch, True, True), overrides=overrides)
    ws.index()
    ws.embed()
    ws.close()
    with psycopg.connect(url, autocommit=True) as conn:
        seed_id = conn.execute("SELECT id FROM repositories WHERE name = %s", (SEED,)).fetchone()[0]
        rng = np.random.default_rng(args.seed)
        offset, _ = copy_organisation(conn, seed_id, range(1, args.repos), 5, rng, 0.5)
        if args.first_repo + args.full > args.repos:  # late copies, their row ids as far apart as their numbers
            copy_organisation(conn, seed_id, range(max(args.first_repo, args.repos), args.first_repo + args.full),
                              5, rng, 0.5, offset)
        conn.execute("VACUUM ANALYZE")


def child(args: argparse.Namespace) -> int:
    """One first search in this new process; its timings and answer as JSON on stdout."""
    import resource

    from codeloupe.api import open_shared, search_repositories
    from codeloupe.graph import build

    # The graph's and the file summaries' loads a first search starts on their own threads (a second later) are
    # held back: where one lands before a later repository's bundle, that bundle has the graph's related files or
    # the summary lane, so a slower search answered otherwise (seen: 2,994 files against 2,380 for one query).
    build.BACKGROUND_START_DELAY_S = 3600.0
    query, mode = golden_queries(args.golden)[args.child_query]
    names = searched(args)[:1 if args.child == "one" else None]
    workspaces = open_shared(names, {"store_url": args.url, "embed_provider": "local", "cache_dir": args.cache_dir})
    workspaces[0].embedding_provider().embed_query("the model loaded before the clock starts")
    started, cpu = time.perf_counter(), time.process_time()
    bundle = workspaces[0].search(query, mode=mode) if args.child == "one" else \
        search_repositories(workspaces, query, mode=mode)
    out = {"wall_s": time.perf_counter() - started, "cpu_s": time.process_time() - cpu,
           "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
           "files": [[h.repository, h.path, h.rank, h.score, h.tail] for h in bundle.files]}
    print(json.dumps(out))
    return 0


def searched(args: argparse.Namespace) -> list[str]:
    """The repositories searched at once; the first of them is the one searched alone."""
    return [f"org-{k:03d}" for k in range(args.first_repo, args.first_repo + args.full)]


def first_search(engine: Path, case: str, query: int, args: argparse.Namespace, url: str, scratch: Path) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="replica-", dir=scratch))
    try:
        env = {**os.environ, "PYTHONPATH": f"{engine}:{engine.parent / 'server'}"}
        done = subprocess.run([sys.executable, __file__, "--child", case, "--child-query", str(query), "--url", url,
                               "--cache-dir", str(cache), "--full", str(args.full), "--first-repo", str(args.first_repo),
                               "--golden", str(args.golden)],
                              env=env, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def difference(case: str, pick: int, answers: dict[str, list]) -> dict:
    """Where two answers to one first search differ: their lengths and the first entry that does."""
    first, second = answers.values()
    at = next((i for i, (a, b) in enumerate(zip(first, second)) if a != b), min(len(first), len(second)))
    return {"case": case, "query": pick, "files": [len(first), len(second)], "first_difference_at": at,
            "entries": [entries[at] if at < len(entries) else None for entries in (first, second)]}


def compare(args: argparse.Namespace, url: str, scratch: Path) -> dict:
    from codeloupe import ranking as R
    from codeloupe.api import open_shared, search_repositories

    queries = golden_queries(args.golden)
    picks = [p for p in QUERY_PICKS if p < len(queries)][:args.queries]
    every = open_shared(searched(args), {"store_url": url, "embed_provider": "local", "cache_dir": str(scratch / "first")})
    with contextlib.ExitStack() as stack:
        stack.callback(setattr, R, "REPOSITORIES_SEARCHED_FULLY", R.REPOSITORIES_SEARCHED_FULLY)
        R.REPOSITORIES_SEARCHED_FULLY = len(every)
        for pick in picks:  # the first replica: builds each repository's files and keeps them in the database
            search_repositories(every, queries[pick][0], mode=queries[pick][1])
    for ws in every:
        ws.close()
    engines = {"baseline": args.baseline.resolve(), "this": HERE / "engine"}
    runs: dict[str, dict[str, list[dict]]] = {case: {name: [] for name in engines} for case in ("one", "full")}
    for round_ in range(args.rounds):
        for pick in picks:
            for case in runs:
                order = list(engines) if round_ % 2 == 0 else list(reversed(engines))
                answers = {}
                for name in order:
                    got = first_search(engines[name], case, pick, args, url, scratch)
                    answers[name] = got.pop("files")
                    runs[case][name].append(got)
                    print(round_, pick, case, name, f"{got['wall_s']:.2f} s", f"cpu {got['cpu_s']:.2f} s", flush=True)
                assert answers["baseline"] == answers["this"], difference(case, pick, answers)
    report: dict = {"load_average": os.getloadavg(), "queries": picks, "rounds": args.rounds,
                    "repositories": searched(args)}
    for case, by_engine in runs.items():
        report[case] = {name: {"wall_p50_s": round(statistics.median(r["wall_s"] for r in rs), 3),
                               "cpu_p50_s": round(statistics.median(r["cpu_s"] for r in rs), 3),
                               "rss_mb_max": max(r["rss_mb"] for r in rs)} for name, rs in by_engine.items()}
        report[case]["wall_ratio"] = round(report[case]["this"]["wall_p50_s"] / report[case]["baseline"]["wall_p50_s"], 3)
        report[case]["cpu_ratio"] = round(report[case]["this"]["cpu_p50_s"] / report[case]["baseline"]["cpu_p50_s"], 3)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", type=Path, default=Path("/work/shared/golden/public.json"))
    parser.add_argument("--corpora", type=Path, help="the golden corpora (to build the organisation)")
    parser.add_argument("--repos", type=int, default=10, help="repository ids in all, the seed included")
    parser.add_argument("--url", help="an organisation built already (by this bench or pg_org's way)")
    parser.add_argument("--baseline", type=Path, help="the older engine folder (a checkout's engine/)")
    parser.add_argument("--full", type=int, default=8, help="repositories searched at once (as the chosen are)")
    parser.add_argument("--first-repo", type=int, default=1, help="the first of them (org-NNN): the later a copy,"
                        " the larger its row ids, as in a shared index where a repository indexed late gets late ids")
    parser.add_argument("--queries", type=int, default=len(QUERY_PICKS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pg-parent", type=Path, default=Path(tempfile.gettempdir()) / "pgbench")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", choices=("one", "full"), help=argparse.SUPPRESS)
    parser.add_argument("--child-query", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if not args.baseline or not (args.url or args.corpora):
        parser.error("--baseline, and --url or --corpora, are needed")
    with contextlib.ExitStack() as stack:
        args.pg_parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="pg-first-", dir=args.pg_parent))
        stack.callback(shutil.rmtree, scratch, True)
        os.environ["CODELOUPE_CACHE_DIR"] = str(scratch / "cache")
        url = args.url
        if url is None:
            url = stack.enter_context(pg_server.running(args.pg_parent, {"shared_buffers": "1GB", "jit": "off",
                                                                         "synchronous_commit": "off"}))
            build(args, url, scratch)
        report = compare(args, url, scratch)
    return pg_server.emit(report, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
