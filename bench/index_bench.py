"""Index benchmark: cold index (chunks only), warm re-index with nothing changed, and peak RSS.

    .venv/bin/python bench/index_bench.py [--corpora /work/corpora] [--stdlib] [TREE ...]
    .venv/bin/python bench/index_bench.py --stdlib --baseline main --rounds 4

Each tree is indexed in a fresh subprocess with its own cache dir, so the numbers are cold and the RSS is
the indexer's own. Vectors are not computed here (see bench/embed_bench.py). With `--baseline REV` the engine/
of that revision indexes each tree too, `--rounds` times each, the two engines taking turns to go first; each
engine's median cold wall time and CPU time (the indexing process and its worker processes) are printed, and
the chunk counts must agree.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scale_tree import engines_to_compare, tree_bench_arguments

_CHILD = r"""
import json, resource, sys, time
from codeloupe.api import Workspace
ws = Workspace(sys.argv[1], overrides={"embed_provider": "none"})
t = time.perf_counter(); cold = ws.index(); cold_s = time.perf_counter() - t
t = time.perf_counter(); warm = ws.index(); warm_s = time.perf_counter() - t
print(json.dumps({"files": cold.files_indexed, "chunks": cold.chunks, "cold_s": cold_s, "warm_s": warm_s,
                  "warm_unchanged": warm.files_unchanged, "violations": cold.partition_violations,
                  "skipped": sum(cold.skipped.values()),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(tree: Path, engine: str | None = None) -> dict:
    """One cold index and one warm re-index of `tree` in a new process (with `engine` first on its path);
    `cpu_s`: the CPU time of that process and of the worker processes it waited for."""
    env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": engine} if engine else {})}
    with tempfile.TemporaryDirectory() as cache:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([sys.executable, "-c", _CHILD, str(tree)], capture_output=True, text=True, check=True,
                             env={**env, "CODELOUPE_CACHE_DIR": cache})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["cpu_s"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return figures


def _name(tree: Path) -> str:
    return tree.parent.name if tree.name == "repo" else tree.name


def compare(trees: list[Path], baseline: str, rounds: int) -> None:
    """Both engines on each tree, `rounds` times, taking turns to go first: medians side by side."""
    with tempfile.TemporaryDirectory() as into:
        engines = engines_to_compare(Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[1]
                                     / "engine", baseline, Path(into))
        print("| tree | engine | files | chunks | cold s (median) | CPU s (median) | runs |")
        print("|---|---|---|---|---|---|---|")
        for tree in trees:
            runs: dict[str, list[dict]] = {engine: [] for engine in engines}
            for round_ in range(rounds):
                for engine in engines if round_ % 2 == 0 else engines[::-1]:
                    runs[engine].append(measure(tree, engine))
            if len({m["chunks"] for ms in runs.values() for m in ms}) != 1:
                print(f"{tree}: the engines' chunk counts differ", file=sys.stderr)
            for engine, label in zip(engines, ("this checkout", baseline)):
                ms = runs[engine]
                each = ", ".join(f"{m['cold_s']:.1f}/{m['cpu_s']:.1f}" for m in ms)
                print(f"| {_name(tree)} | {label} | {ms[0]['files']} | {ms[0]['chunks']} | "
                      f"{statistics.median(m['cold_s'] for m in ms):.2f} | "
                      f"{statistics.median(m['cpu_s'] for m in ms):.2f} | "
                      f"{each} |")


def main() -> int:
    args, trees = tree_bench_arguments(__doc__, "indexed", "", "with --baseline: runs of each engine on each tree")
    if args.baseline:
        compare(trees, args.baseline, args.rounds)
        return 0
    print("| tree | files | chunks | cold s | files/s | chunks/s | warm re-index s | peak RSS MB | violations |")
    print("|---|---|---|---|---|---|---|---|---|")
    for tree in trees:
        m = measure(tree)
        print(f"| {_name(tree)} | {m['files']} | {m['chunks']} | {m['cold_s']:.2f} | {m['files'] / m['cold_s']:.0f} | "
              f"{m['chunks'] / m['cold_s']:.0f} | {m['warm_s']:.3f} | {m['peak_rss_mb']:.0f} | {m['violations']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
