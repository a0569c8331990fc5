"""No-op re-index of a small tree beside many files the walk skips by name (issue #15).

    .venv/bin/python bench/skipped_reindex.py [--sources 200] [--skipped 20000] [--runs 5]

Two trees in temporary folders: `--sources` small Python files, and the same files with `--skipped` tiny
.png files beside them (skipped by their name). Each is indexed once, then `Workspace.index()` is timed
with nothing changed, `--runs` times; prints the median of each and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "engine"))
from codeloupe.api import Workspace  # noqa: E402


def make_tree(root: Path, sources: int, skipped: int) -> None:
    for i in range(sources):
        folder = root / "src" / f"pkg{i // 20}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"def handler_{i}(value):\n    return value + {i}\n\n\n"
                                           f"class Thing{i}:\n    size = {i}\n")
    for i in range(skipped):
        folder = root / "assets" / f"set{i // 500}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"icon{i}.png").write_bytes(b"\x89PNG\r\n\x1a\n")


def noop_reindex(sources: int, skipped: int, runs: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="codeloupe-skipped-") as tmp:
        root = Path(tmp)
        make_tree(root, sources, skipped)
        ws = Workspace(root, overrides={"embed_provider": "none"})
        try:
            ws.index()
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                report = ws.index()
                times.append(time.perf_counter() - t)
            return statistics.median(times), sum(report.skipped.values())
        finally:
            ws.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=200)
    parser.add_argument("--skipped", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    plain, _ = noop_reindex(args.sources, 0, args.runs)
    print(f"{args.sources} sources: no-op re-index median {plain:.3f} s", flush=True)
    beside, counted = noop_reindex(args.sources, args.skipped, args.runs)
    print(f"{args.sources} sources + {args.skipped} .png ({counted} skipped): no-op re-index median {beside:.3f} s"
          f" ({beside / plain:.2f}x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
