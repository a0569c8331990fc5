"""No-op re-index at scale: a tree of hard-linked copies of a real tree, current in the index, indexed again.

    .venv/bin/python bench/reindex_scale.py [--tree DIR] [--files 40000]

The tree is linked into a temporary root (hard links: no space, same sizes and mtimes), indexed for real once,
then grown to `--files` files with `bench/scale_tree.py` (index rows copied, the copies linked on disk) and
indexed once more (the copies' graph facts), so every file is current. Prints the time of
`Workspace.index()` with nothing to do, twice.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scale_tree import linked_workspace, stdlib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=stdlib())
    parser.add_argument("--files", type=int, default=40_000)
    args = parser.parse_args()

    with linked_workspace(args.tree, args.files, "codeloupe-reindex-") as ws:
        t = time.perf_counter()
        ws.index()  # the copies' graph facts and edges: what the index run after copying would have done
        print(f"graph facts and edges of the copies: {time.perf_counter() - t:.1f} s", flush=True)
        for attempt in (1, 2):
            t = time.perf_counter()
            report = ws.index()
            print(f"no-op re-index {attempt}: {report.files_seen} files seen, {report.files_unchanged} unchanged, "
                  f"{report.files_indexed} indexed in {time.perf_counter() - t:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
