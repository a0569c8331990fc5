"""What the editor benches share: the standard library workspace, the cold/warm/save sequence, the table.

Each client's bench (bench/nvim_bench.py, bench/vscode_bench.py) supplies one function that runs an editor session
on a workspace with a cache dir and a number of saves, and returns the session's JSON line (`first_answer_ms`,
`second_answer_ms`, `save_ms`).
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
from collections.abc import Callable
from pathlib import Path

DEFAULT_TREE = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"

Session = Callable[[Path, Path, int], dict]


def copy_stdlib(tree: Path, scratch: Path) -> Path:
    """A copy of `tree` without site-packages and __pycache__, marked as a workspace root."""
    root = scratch / "stdlib"
    shutil.copytree(tree, root, ignore=shutil.ignore_patterns("site-packages", "__pycache__"))
    (root / ".codeloupe.toml").write_text("# benchmark workspace\n")
    return root


def copy_prepared(prepared: Path, scratch: Path) -> tuple[Path, Path]:
    """(workspace, cache) from a tree indexed beforehand (`bench/cold_scale.py --prepared DIR` makes one: DIR/tree
    and its index under DIR/cache): the tree hard linked (saves add new files to the copy only) and its index
    copied under the name the copy's path gives it, so the session starts with the index on disk."""
    from codeloupe.settings import load_settings

    root = scratch / "tree"
    shutil.copytree(prepared / "tree", root, copy_function=os.link, symlinks=True)
    (root / ".codeloupe.toml").write_text("# benchmark workspace\n")
    cache = scratch / "cache"
    shutil.copytree(prepared / "cache", cache)
    (index,) = (cache / "indexes").glob("*.sqlite")
    target = load_settings(root, overrides={"cache_dir": str(cache)}).index_path(root)
    for sidecar in (cache / "indexes").glob(index.name + "*"):
        sidecar.rename(target.with_name(target.name + sidecar.name[len(index.name):]))
    return root, cache


def run_session(command: list[str], root: Path, env: dict[str, str]) -> dict:
    """Runs one editor session in `root`; its stdout's JSON line, plus the wall time."""
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("{")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"{command[0]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return {**json.loads(line), "wall_s": wall}


def run_bench(editor: str, session: Session, prefix: str) -> None:
    """One cold session, then warm ones on the same cache (the first also saves); prints the README table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE)
    parser.add_argument("--saves", type=int, default=5)
    parser.add_argument("--runs", type=int, default=2, help="warm runs (the cold run is one)")
    parser.add_argument("--prepared", type=Path, help="a tree indexed beforehand (DIR/tree, DIR/cache, as "
                        "bench/cold_scale.py prepares one): warm runs only, on a copy")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        if args.prepared:
            root, cache = copy_prepared(args.prepared, Path(scratch))
            cold = None
        else:
            root = copy_stdlib(args.tree, Path(scratch))
            cache = Path(scratch) / "cache"
            cold = session(root, cache, 0)
        warm = [session(root, cache, args.saves if k == 0 else 0) for k in range(args.runs)]
        saves = [s for s in warm[0]["save_ms"] if s >= 0]
        print(f"tree: {args.prepared or args.tree} ({sum(1 for _ in root.rglob('*.py'))} .py files)")
        print("| measure | ms |\n|---|---|")
        if cold is not None:
            print(f"| cold: {editor} start -> first lexical answer (server start + first full index) | {cold['first_answer_ms']:.0f} |")
        for k, run in enumerate(warm, 1):
            if "edit_ms" in run:
                print(f"| warm run {k}: {editor}'s own :edit of the first file (its filetype plugins) | {run['edit_ms']:.0f} |")
            if "first_progress_ms" in run:
                print(f"| warm run {k}: {editor} start -> first indexing progress shown | {run['first_progress_ms']:.0f} |")
            print(f"| warm run {k}: {editor} start -> first lexical answer (index on disk) | {run['first_answer_ms']:.0f} |")
            print(f"| warm run {k}: the next search, round trip | {run['second_answer_ms']:.0f} |")
        if saves:
            print(f"| save -> searchable through {editor}, p50 / max of {len(saves)} | "
                  f"{statistics.median(saves):.0f} / {max(saves):.0f} |")
        print("sessions (cold, then warm):")
        for run in [cold, *warm] if cold is not None else warm:
            print(json.dumps(run))
