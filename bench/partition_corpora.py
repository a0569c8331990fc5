"""Chunk every file of the golden corpora (and optionally a Python stdlib) and report partition health.

    .venv/bin/python bench/partition_corpora.py [--corpora /work/corpora] [--stdlib] [--budget 4000]

Per language: files, chunks, partition violations, fallbacks (by reason); overall files/s and chunks/s.
Exit status 1 when any file's chunks fail `validate_partition` (chunk_file falls back, so this is a bug).
"""

from __future__ import annotations

import argparse
import os
import sys
import sysconfig
import time
from collections import Counter, defaultdict
from pathlib import Path

from codeloupe.chunk import PartitionError, chunk_file, detect_language, validate_partition

_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "vendor"}
_MAX_BYTES = 1_000_000


def corpus_files(roots: list[Path]) -> list[tuple[Path, Path]]:
    found = []
    for root in roots:
        for directory, subdirs, names in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS)
            for name in sorted(names):
                path = Path(directory, name)
                if path.is_file() and not path.is_symlink() and path.stat().st_size <= _MAX_BYTES:
                    found.append((root, path))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", default=os.environ.get("CODELOUPE_CORPORA", "/work/corpora"))
    parser.add_argument("--stdlib", action="store_true", help="also chunk the running Python's stdlib")
    parser.add_argument("--budget", type=int, default=4000)
    args = parser.parse_args(argv)

    roots = sorted(p for p in Path(args.corpora).glob("*/repo") if p.is_dir())
    if args.stdlib:
        roots.append(Path(sysconfig.get_paths()["stdlib"]))
    if not roots:
        print(f"no corpora under {args.corpora}", file=sys.stderr)
        return 2
    files = corpus_files(roots)
    stats: dict[str, Counter] = defaultdict(Counter)
    reasons: Counter = Counter()
    violations: list[str] = []
    over_budget: list[str] = []
    total_chunks = 0
    started = time.perf_counter()
    for root, path in files:
        raw = path.read_bytes()
        if b"\0" in raw[:8192]:
            continue  # binary
        text = raw.decode("utf-8", errors="replace")
        rel = path.relative_to(root).as_posix()
        language = detect_language(rel, text[:256])
        result = chunk_file(rel, text, language, args.budget)
        row = stats[language]
        row["files"] += 1
        row["chunks"] += len(result.chunks)
        row["symbols"] += len(result.symbols)
        total_chunks += len(result.chunks)
        if result.fallback_reason:
            row["fallbacks"] += 1
            reasons[result.fallback_reason.split(":")[0].split(" (")[0]] += 1
        try:
            validate_partition(text, result.chunks)
        except PartitionError as exc:
            row["violations"] += 1
            violations.append(f"{path}: {exc}")
        for chunk in result.chunks:
            size = len("".join(chunk.text.split()))
            if size > args.budget and chunk.start_line != chunk.end_line:
                over_budget.append(f"{path}:{chunk.start_line}-{chunk.end_line} ({size})")
    elapsed = time.perf_counter() - started

    print(f"roots: {', '.join(str(r) for r in roots)}")
    print(f"{'language':<16}{'files':>7}{'chunks':>8}{'symbols':>9}{'fallbacks':>10}{'violations':>11}")
    for language, row in sorted(stats.items(), key=lambda item: -item[1]["files"]):
        print(f"{language:<16}{row['files']:>7}{row['chunks']:>8}{row['symbols']:>9}"
              f"{row['fallbacks']:>10}{row['violations']:>11}")
    count = sum(row["files"] for row in stats.values())
    print(f"total: {count} files, {total_chunks} chunks in {elapsed:.1f}s "
          f"({count / elapsed:.0f} files/s, {total_chunks / elapsed:.0f} chunks/s)")
    print(f"fallbacks by reason: {dict(reasons) or 'none'}")
    print(f"multi-line chunks over budget: {len(over_budget)}")
    for line in [*violations, *over_budget][:20]:
        print("  " + line)
    return 1 if violations or over_budget else 0


if __name__ == "__main__":
    sys.exit(main())
