"""The first search after each save at monorepo scale, this checkout's engine against a baseline revision's.

    .venv/bin/python bench/save_scale.py --prepared DIR [--saves 10] [--rounds 2] [--baseline main]

`--prepared`: an index made by `bench/search_scale.py --prepared DIR` (its tree, by default this interpreter's
standard library, indexed and copied to 201,132 chunks / 40,716 files). Its lexical index is built and saved
into DIR first when missing, so each engine opens it as a restarted editor does. Then each round runs each
engine in a process of its own on a fresh copy of DIR, lexical lanes only (the delta view is what a save
changes; the dense lane is the same before and after): the index opened, the graph built (a warm server's: none
is built in the background during the saves) and the summary lane, four queries, then `--saves` saves, each a
`copy-N/` file dropped from the index (it exists in the index only, so nothing on disk changes), followed by the
first search after it and a second one, then as many saves each followed by a bug report. The background
rebuild of the full snapshot is held off, so every search after a save reads the delta view. Prints, per engine
and round, the median ms of `update_files`, of the first and second searches and of the report, and of the
collector's passes during the first search, and each first search's and report's ms.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUERIES = ("how does the lexer read a token", "parse a url into parts")
# A bug report (issue mode: its entity lane reads files' definitions), asked third after each save.
REPORT = """tokenize.generate_tokens raises IndentationError on a file that mixes tabs and spaces

Traceback (most recent call last):
  File "tokenize.py", line 530, in _tokenize
    raise IndentationError(
IndentationError: unindent does not match any outer indentation level
"""


def _workspace(tree: Path, cache: Path):
    from codeloupe.api import Workspace

    return Workspace(tree, overrides={"cache_dir": str(cache), "embed_provider": "none"})


def measure(tree: Path, work: Path, saves: int) -> dict:
    from codeloupe import ranking
    from codeloupe.graph import graph_map

    ranking.REBUILD_QUIET_S = 3600.0  # the delta view alone: no rebuild of the full snapshot meanwhile
    collector: list[float] = []
    started: list[float] = []
    gc.callbacks.append(lambda phase, _info: started.append(time.perf_counter()) if phase == "start"
                        else collector.append((time.perf_counter() - started.pop()) * 1000))
    ws = _workspace(tree, work)
    ws.search("warm up")
    graph_map(ws)
    for query in (*QUERIES, "getattr", REPORT):
        ws.search(query)
    # The summary lane is built on a thread of its own at this scale: waited for, so that the saves' searches
    # do not share the interpreter with it (a warm server's steady state, as the graph above).
    ws.wait_for_lanes()
    gone = [r[0] for r in ws.store.query(
        "SELECT path FROM files WHERE path LIKE 'copy-%' ORDER BY id DESC LIMIT ?", (2 * saves,))]
    rows = []
    for path in gone[:saves]:
        t = time.perf_counter()
        ws.update_files([path])
        update = (time.perf_counter() - t) * 1000
        collector.clear()
        t = time.perf_counter()
        ws.search(QUERIES[0])
        first, first_gc = (time.perf_counter() - t) * 1000, sum(collector)
        t = time.perf_counter()
        ws.search(QUERIES[1])
        rows.append({"update_ms": update, "first_ms": first, "first_gc_ms": first_gc,
                     "second_ms": (time.perf_counter() - t) * 1000})
    # Then as many saves, each followed by a bug report alone: a report that rebuilds a large index settles the
    # collector and the heap (`memory.after_large_build`), which would speed up the searches measured above.
    reports = []
    for path in gone[saves:]:
        ws.update_files([path])
        t = time.perf_counter()
        ws.search(REPORT)
        reports.append((time.perf_counter() - t) * 1000)
    ws.close()
    out = {key: round(statistics.median(r[key] for r in rows), 1) for key in rows[0]}
    out["report_ms"] = round(statistics.median(reports), 1)
    out["each_first_ms"] = [round(r["first_ms"]) for r in rows]
    out["each_report_ms"] = [round(ms) for ms in reports]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepared", type=Path, required=True)
    parser.add_argument("--tree", type=Path, default=None, help="the tree the index was made from (default: the"
                        " standard library, as bench/search_scale.py's)")
    parser.add_argument("--saves", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default="main", help="the git revision compared against ('' for none)")
    parser.add_argument("--phase", choices=["measure"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from scale_tree import engines_to_compare, stdlib

    tree = args.tree or stdlib()
    if args.phase == "measure":
        print(json.dumps(measure(tree, args.work, args.saves)))
        return 0
    if not list(args.prepared.glob("indexes/*.bm25.npz")):  # built once, then read by every engine's copy
        ws = _workspace(tree, args.prepared)
        ws.search("build the lexical index")
        ws.close()
    baseline = Path(tempfile.mkdtemp(prefix="codeloupe-baseline-"))
    try:
        engines = engines_to_compare(HERE.parent, HERE.parent / "engine", args.baseline, baseline)
        for round_ in range(args.rounds):
            for engine in engines:
                work = Path(tempfile.mkdtemp(prefix="codeloupe-save-scale-"))
                try:
                    shutil.copytree(args.prepared, work, dirs_exist_ok=True)
                    out = subprocess.run([sys.executable, __file__, "--phase", "measure", "--prepared",
                                          str(args.prepared), "--tree", str(tree), "--work", str(work),
                                          "--saves", str(args.saves)], env=dict(os.environ, PYTHONPATH=engine),
                                         capture_output=True, text=True, check=False)
                    figures = out.stdout.strip().splitlines()[-1] if out.returncode == 0 else out.stderr[-2000:]
                    print(f"round {round_ + 1} {engine}: {figures}", flush=True)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(baseline, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
