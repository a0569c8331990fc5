"""Opening one more large workspace in a process that already holds many (a server of several repositories, a
replica of the shared index): each load's cost, this checkout's engine against a baseline revision's.

    .venv/bin/python bench/held_workspaces.py [--tree DIR] [--workspaces 10] [--rounds 2] [--baseline main]

The tree (default: this interpreter's standard library, 2,262 files) is indexed once, lexical only. Each engine
then runs in its own process, in turns (`--rounds`): it opens `--workspaces` workspaces on that index one after
another, keeping every one open, and for each times the load of its search snapshot, its first search, its
graph and its first bug report (issue mode), each read from the files saved beside the index. What a load costs besides reading its own files is what it
spends on the objects the process already holds (the collector settled after each large build). Prints each
load's ms and the process's peak RSS.
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(HERE))
from scale_tree import engines_to_compare, stdlib  # noqa: E402

QUERY = "parse the header of an email message"
REPORT = ('Traceback (most recent call last):\n  File "email/feedparser.py", line 195, in _parse_headers\n'
          "    raise HeaderParseError('header line without a colon')\nemail.errors.HeaderParseError")


def measure(root: Path, cache: Path, workspaces: int) -> dict[str, object]:
    from codeloupe.api import Workspace

    held: list = []
    steps = {"load_ms": lambda ws: ws.searcher().snapshot(), "first_search_ms": lambda ws: ws.search(QUERY),
             "graph_ms": lambda ws: ws.graph_map(), "first_report_ms": lambda ws: ws.search(REPORT)}
    measured: dict[str, object] = {name: [] for name in steps}
    for _ in range(workspaces):
        ws = Workspace(root, overrides={"cache_dir": str(cache), "embed_provider": "none"})
        held.append(ws)
        for name, step in steps.items():
            t = time.perf_counter()
            step(ws)
            measured[name].append(round((time.perf_counter() - t) * 1000, 1))
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    for ws in held:
        ws.close()
    return {**measured, "peak_rss_mb": int(fields["VmHWM"].split()[0]) // 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=stdlib())
    parser.add_argument("--workspaces", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--phase", choices=["measure"], help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "measure":
        print(json.dumps(measure(args.tree, args.cache, args.workspaces)))
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="codeloupe-held-"))
    try:
        from codeloupe.api import Workspace

        root = scratch / "tree"  # hard links: nothing written beside the real tree
        shutil.copytree(args.tree, root, copy_function=os.link, symlinks=True)
        ws = Workspace(root, overrides={"cache_dir": str(scratch / "cache"), "embed_provider": "none"})
        report = ws.index()
        for step in (lambda: ws.searcher().snapshot(), lambda: ws.graph_map(), lambda: ws.search(REPORT)):
            step()  # the snapshot's inputs, the graph, issue mode's entity index saved, as a server leaves them
        ws.close()
        print(f"{report.files_indexed} files indexed", flush=True)
        engines = engines_to_compare(HERE.parent, HERE.parent / "engine", args.baseline, scratch)
        runs: dict[str, list[dict]] = {engine: [] for engine in engines}
        for round_ in range(args.rounds):
            for engine in (engines if round_ % 2 == 0 else engines[::-1]):
                out = subprocess.run([sys.executable, __file__, "--phase", "measure", "--tree", str(root),
                                      "--cache", str(scratch / "cache"), "--workspaces", str(args.workspaces)],
                                     env=dict(os.environ, PYTHONPATH=engine), capture_output=True, text=True,
                                     check=True)
                runs[engine].append(json.loads(out.stdout))
                print(f"{engine}: {runs[engine][-1]}", flush=True)
        for engine, measured in runs.items():
            steps = [name for name in measured[0] if name.endswith("_ms")]
            # each step of the workspaces opened with others held: p50 and max over the rounds
            later = {name: [ms for run in measured for ms in run[name][1:]] for name in steps}
            whole = [sum(run[name][i] for name in steps) for run in measured for i in range(1, len(run[steps[0]]))]
            print(f"{engine}: with others held, p50 (max) " + ", ".join(
                f"{name} {statistics.median(v):.0f} ({max(v):.0f})" for name, v in later.items())
                + f"; a workspace's whole opening p50 {statistics.median(whole):.0f} ms; peak RSS "
                f"{max(run['peak_rss_mb'] for run in measured)} MB", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
