"""What parsing in a kept worker process costs: a small first index and a save's re-chunk through the language
server, this checkout's engine against a baseline revision's, in one run.

    .venv/bin/python bench/kept_worker_cost.py [--tree DIR] [--baseline origin/main] [--saves 20] [--rounds 2]

`--tree`: a workspace of fewer than 200 files (POOL_MIN_ITEMS: no pool, so every file is parsed in the kept worker
where this checkout has one, in the server's own process where the baseline has none); by default the click
corpus. Each round runs each engine (alternating) in a fresh `codeloupe-lsp` on a fresh copy of the tree and an
empty cache, lexical lanes only: the first index (server start -> its progress' end), then `--saves` saves of one
file, each followed by searches until the file's new word is found (save -> searchable). Prints, per engine and
round, the index's seconds and the saves' median ms, and the ratios of this checkout's medians to the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import from_fs_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lsp_bench import copy_tree, start, stop, wait_ready  # noqa: E402

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent
DEFAULT_TREE = Path("/work/ci/fresh115/.golden/corpora/click/repo")


def baseline_tree(revision: str, into: Path) -> Path:
    """The baseline revision's engine and server, unpacked under `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(CHECKOUT), "archive", revision, "engine", "server"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


async def one_run(engine: Path, tree: Path, work: Path, saves: int) -> tuple[float, float]:
    """(first index s, median save -> searchable ms) of a server running `engine`'s code."""
    os.environ["PYTHONPATH"] = f"{engine / 'engine'}:{engine / 'server'}"  # the server's, through `start`'s env
    root = copy_tree(tree, work / "repo")
    started = time.perf_counter()
    client = await start(root, work / "cache", "none")
    await asyncio.wait_for(client.progress_ended.wait(), timeout=600)
    await wait_ready(client)
    index_s = time.perf_counter() - started
    target = root / "kept_worker_probe.py"
    save_ms = []
    for _ in range(saves):
        token = f"probe{uuid.uuid4().hex[:10]}"
        target.write_text(f"def {token}_handler():\n    return '{token}'\n", encoding="utf-8")
        started = time.perf_counter()
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=from_fs_path(str(target)))))
        while not any(f["path"] == target.name for f in
                      (await client.request("codeloupe/search", {"query": token, "limit": 3}))["core"]):
            await asyncio.sleep(0.005)
        save_ms.append((time.perf_counter() - started) * 1000)
    await stop(client)
    return index_s, statistics.median(save_ms)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE)
    parser.add_argument("--baseline", default="origin/main")
    parser.add_argument("--saves", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kept-worker-cost-") as tmp:
        engines = {"baseline": baseline_tree(args.baseline, Path(tmp) / "baseline"), "this": CHECKOUT}
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in engines}
        for round_ in range(args.rounds):
            for name, engine in engines.items():
                work = Path(tmp) / f"{name}-{round_}"
                index_s, save_ms = await one_run(engine, args.tree.resolve(), work, args.saves)
                results[name].append((index_s, save_ms))
                print(f"round {round_ + 1} {name:<8} first index {index_s:6.2f} s   save -> searchable median"
                      f" {save_ms:7.1f} ms", flush=True)
    medians = {name: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
               for name, runs in results.items()}
    print(f"ratio this/baseline: first index {medians['this'][0] / medians['baseline'][0]:.2f}x, "
          f"save -> searchable {medians['this'][1] / medians['baseline'][1]:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
