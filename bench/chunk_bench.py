"""What an indexing worker spends a file on: `prepare()` (read, hash, decode, chunk, count terms) over trees held
in memory, in one process, for this checkout's engine and a baseline revision's.

    .venv/bin/python bench/chunk_bench.py --stdlib [--corpora DIR] [TREE ...] [--baseline main] [--rounds 3]

Each engine runs in a process of its own (its engine/ first on the path) and prepares every file of the trees
`--rounds` times from bytes read beforehand (no disk in the timing), after one pass that warms its caches; the
best pass's CPU time a file is printed. The engines take turns twice. Each prints a digest of what it prepared
(every file's chunks, symbols, skeleton and term counts): a change meant only to be faster must leave it equal.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from scale_tree import engines_to_compare, tree_bench_arguments

_CHILD = r"""
import dataclasses, hashlib, json, pickle, sys, time
from pathlib import Path
from codeloupe.discover import walk
from codeloupe.index import prepare_bytes
from codeloupe.settings import load_settings
rounds, trees = int(sys.argv[1]), sys.argv[2:]
jobs = []
for tree in trees:
    settings = load_settings(Path(tree))
    for candidate in walk(Path(tree), settings).candidates:
        try:
            jobs.append((candidate, candidate.abs_path.read_bytes(), settings))
        except OSError:
            pass
digest = hashlib.sha256()
for candidate, raw, settings in jobs:  # the warm-up pass, and what is compared
    p = prepare_bytes(candidate, raw, "", settings)
    shown = None if p.chunked is None else (dataclasses.asdict(p.chunked), p.terms and dataclasses.asdict(p.terms))
    digest.update(pickle.dumps((candidate.rel_path, p.skip_reason, shown)))
best = float("inf")
for _ in range(rounds):
    started = time.process_time()
    for candidate, raw, settings in jobs:
        prepare_bytes(candidate, raw, "", settings)
    best = min(best, time.process_time() - started)
print(json.dumps({"files": len(jobs), "cpu_ms_a_file": best * 1000 / max(len(jobs), 1),
                  "digest": digest.hexdigest()}))
"""


def measure(engine: str, trees: list[Path], rounds: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(rounds), *map(str, trees)], capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": engine, "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    args, trees = tree_bench_arguments(__doc__, "read", "main", "timed passes in each engine's process")
    checkout = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as into:
        engines = engines_to_compare(checkout, checkout / "engine", args.baseline, Path(into))
        runs: dict[str, list[dict]] = {engine: [] for engine in engines}
        for turn in range(2):
            for engine in engines if turn == 0 else engines[::-1]:
                runs[engine].append(measure(engine, trees, args.rounds))
    print("| engine | files | CPU ms a file (best) | digest |")
    print("|---|---|---|---|")
    for engine, label in zip(engines, ("this checkout", args.baseline)):
        best = min(runs[engine], key=lambda m: m["cpu_ms_a_file"])
        print(f"| {label} | {best['files']} | {best['cpu_ms_a_file']:.3f} | {best['digest'][:16]} |")
    if len({m["digest"] for ms in runs.values() for m in ms}) > 1:
        print("the engines prepared different files (chunks, symbols, skeletons or term counts differ)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
