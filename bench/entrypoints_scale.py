"""Entry points after a save at scale: what each file says is kept per file version, so a save reads only the
saved file instead of every file's text.

    .venv/bin/python bench/entrypoints_scale.py [--tree DIR] [--files 40000] [--rounds 3]

The tree is linked into a temporary root and grown to `--files` files as `bench/reindex_scale.py` does (index
rows copied, the copies hard-linked on disk). Then: the first `Workspace.entry_points()` (every file read; the
findings kept and saved), and for each round an editor's save (a copy replaced on disk by its text plus a
`__main__` guard, `update_files`, the search's delta view) followed by the entry points listed two ways in the
same process, alternating which goes first: from the kept findings with only the saved file read (this
checkout's way) and from every file's text (what every save cost before). Prints ms each and checks that both
ways list the same entry points.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scale_tree import linked_workspace, stdlib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=stdlib())
    parser.add_argument("--files", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from codeloupe.entrypoints import file_findings, listed

    with linked_workspace(args.tree, args.files, "codeloupe-entrypoints-") as ws:
        ws.searcher().snapshot()
        t = time.perf_counter()
        first = ws.entry_points()
        print(f"{ws.store.counts()['files']} files: first entry points (every file read) "
              f"{time.perf_counter() - t:.2f} s, {len(first)} found", flush=True)

        def every_file() -> list:
            snap = ws.searcher().snapshot()
            return listed(file_findings(snap, None, ws.store.iter_symbol_rows()), snap, ws.store)

        kept_ms, every_ms = [], []
        saved = [p for (p,) in ws.store.query(
            "SELECT path FROM files WHERE path LIKE 'copy-%' AND path LIKE '%.py' ORDER BY id DESC LIMIT ?",
            (args.rounds,))]
        for round_, rel in enumerate(saved):
            path = ws.root / rel
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            path.unlink()  # a hard link to the source tree: replace it, never write through it
            path.write_text(text + '\n\nif __name__ == "__main__":\n    pass\n', encoding="utf-8",
                            errors="surrogateescape")
            ws.update_files([rel])
            ws.searcher().snapshot()  # the delta view, built before either way is timed
            ways = [("kept", ws.entry_points, kept_ms), ("every file", every_file, every_ms)]
            answers = {}
            for name, way, into in (ways if round_ % 2 == 0 else ways[::-1]):
                t = time.perf_counter()
                answers[name] = way()
                into.append((time.perf_counter() - t) * 1000)
            assert answers["kept"] == answers["every file"], "the two ways disagree"
            assert any(p.path == rel and p.kind == "main guard" for p in answers["kept"])
            print(f"save {round_ + 1} ({rel}): kept findings {kept_ms[-1]:.1f} ms, every file read "
                  f"{every_ms[-1]:.0f} ms", flush=True)
        print(f"entry points after a save, median of {len(saved)}: {statistics.median(kept_ms):.1f} ms from the "
              f"kept findings vs {statistics.median(every_ms):.0f} ms with every file read "
              f"({statistics.median(every_ms) / statistics.median(kept_ms):.0f}x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
