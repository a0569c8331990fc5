"""Index benchmark: cold index (chunks only), warm re-index with nothing changed, and peak RSS.

    .venv/bin/python bench/index_bench.py [--corpora /work/corpora] [--stdlib] [TREE ...]

Each tree is indexed in a fresh subprocess with its own cache dir, so the numbers are cold and the RSS is
the indexer's own. Vectors are not computed here (see bench/embed_bench.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

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


def measure(tree: Path) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        out = subprocess.run([sys.executable, "-c", _CHILD, str(tree)], capture_output=True, text=True, check=True,
                             env={"CODELOUPE_CACHE_DIR": cache, "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--corpora", type=Path, help="fetch_corpora.sh target dir (each <id>/repo is indexed)")
    parser.add_argument("--stdlib", action="store_true", help="also index this interpreter's standard library")
    args = parser.parse_args()
    trees = list(args.trees)
    if args.corpora:
        trees += sorted(p / "repo" for p in args.corpora.iterdir() if (p / "repo").is_dir())
    if args.stdlib:
        trees.append(Path(sysconfig.get_paths()["stdlib"]))
    print("| tree | files | chunks | cold s | files/s | chunks/s | warm re-index s | peak RSS MB | violations |")
    print("|---|---|---|---|---|---|---|---|---|")
    for tree in trees:
        m = measure(tree)
        name = tree.parent.name if tree.name == "repo" else tree.name
        print(f"| {name} | {m['files']} | {m['chunks']} | {m['cold_s']:.2f} | {m['files'] / m['cold_s']:.0f} | "
              f"{m['chunks'] / m['cold_s']:.0f} | {m['warm_s']:.3f} | {m['peak_rss_mb']:.0f} | {m['violations']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
