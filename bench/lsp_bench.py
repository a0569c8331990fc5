"""Language server benchmark: the real `codeloupe-lsp` over stdio, driven by a pygls client.

For each tree (the public corpora under /work/corpora/<id>/repo, and one large tree):
  index      first full index from an empty cache (server start -> progress end)
  cold       a fresh server on the on-disk index: process start -> first search answered
  search     round-trip p50/p95 of `codeloupe/search` (the corpus's golden queries, or fixed ones)
  save       save -> searchable: write a file with a unique token, didSave, poll search until it is found
  busy       search (and hover) p50/p95 while a full re-index of the tree runs (index dropped first)
  memory     the server's resident set (VmRSS) and peak (VmHWM) after all of the above

Usage:  .venv/bin/python bench/lsp_bench.py [--corpora click,gin] [--large PATH] [--embed none|local]
Results print as a table and are written to bench/results/lsp_bench.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient
from pygls.protocol import default_converter
from pygls.protocol.json_rpc import JsonRPCResponseMessage
from pygls.uris import from_fs_path

CORPORA = Path("/work/corpora")
GOLDEN = Path("/work/shared/golden/public.json")
DEFAULT_LARGE = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
FALLBACK_QUERIES = ["parse command line arguments", "error handling", "read a file", "http request routing",
                    "configuration defaults", "unit test helpers", "render a template", "close the connection"]
RESULTS = Path(__file__).resolve().parent / "results" / "lsp_bench.json"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _raw_converter():
    converter = default_converter()
    converter.register_structure_hook(JsonRPCResponseMessage, lambda obj, cls: cls(**obj))
    return converter


class BenchClient(LanguageClient):
    def __init__(self) -> None:
        super().__init__("lsp-bench", "1", converter_factory=_raw_converter)
        self.progress_ended = asyncio.Event()
        self.progress_tokens: set[Any] = set()

        @self.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def on_create(params: lsp.WorkDoneProgressCreateParams) -> None:
            self.progress_tokens.add(params.token)

        @self.feature(lsp.PROGRESS)
        def on_progress(params: Any) -> None:
            if params.value.get("kind") == "end" and params.token in self.progress_tokens:
                self.progress_ended.set()

        @self.feature(lsp.CLIENT_REGISTER_CAPABILITY)
        def on_register(params: Any) -> None:
            return None

        @self.feature(lsp.WINDOW_SHOW_MESSAGE)
        def on_message(params: Any) -> None:
            print(f"    server says: {params.message}", file=sys.stderr)

    async def request(self, method: str, params: Any) -> Any:
        return await self.protocol.send_request_async(method, params)

    @property
    def pid(self) -> int:
        assert self._server is not None
        return self._server.pid


async def start(root: Path, cache: Path, embed: str) -> BenchClient:
    client = BenchClient()
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(cache)}
    await client.start_io(sys.executable, "-m", "codeloupe_lsp", env=env)
    await client.initialize_async(lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=True)),
        workspace_folders=[lsp.WorkspaceFolder(uri=from_fs_path(str(root)), name=root.name)],
        initialization_options={"embedProvider": embed}))
    client.initialized(lsp.InitializedParams())
    return client


async def stop(client: BenchClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


async def wait_ready(client: BenchClient) -> None:
    while True:
        folders = (await client.request("codeloupe/status", {}))["folders"]
        if folders and all(f["state"] != "indexing" for f in folders):
            return
        await asyncio.sleep(0.05)


async def timed(client: BenchClient, method: str, params: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await client.request(method, params)
    return (time.perf_counter() - started) * 1000, result


def memory_kb(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def golden_queries(corpus: str) -> list[str]:
    if not GOLDEN.is_file():
        return FALLBACK_QUERIES
    for entry in json.loads(GOLDEN.read_text())["corpora"]:
        if entry["id"] == corpus:
            return [q["query"] for q in entry["queries"]]
    return FALLBACK_QUERIES


def copy_tree(src: Path, dest: Path) -> Path:
    """Benchmarks write files (the save test): work on a copy, never on the shared corpus."""
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    return dest


async def bench_tree(name: str, source: Path, queries: list[str], embed: str, work: Path) -> dict[str, Any]:
    root = copy_tree(source.resolve(), work / name)
    cache = work / f"cache-{name}"
    out: dict[str, Any] = {"tree": name, "embed": embed}

    # index: from nothing to progress end
    started = time.perf_counter()
    client = await start(root, cache, embed)
    await asyncio.wait_for(client.progress_ended.wait(), timeout=3600)
    await wait_ready(client)
    out["index_s"] = round(time.perf_counter() - started, 2)
    status = (await client.request("codeloupe/status", {}))["folders"][0]
    out["files"], out["chunks"] = status["files"], status["chunks"]
    await stop(client)

    # cold: a fresh process answering from the on-disk index
    started = time.perf_counter()
    client = await start(root, cache, embed)
    await client.request("codeloupe/search", {"query": queries[0]})
    out["cold_first_answer_ms"] = round((time.perf_counter() - started) * 1000, 1)
    await wait_ready(client)

    # search round trips (warm)
    latencies = []
    for _ in range(3):
        for query in queries:
            ms, _ = await timed(client, "codeloupe/search", {"query": query})
            latencies.append(ms)
    out["search_p50_ms"], out["search_p95_ms"] = round(percentile(latencies, .5), 1), round(
        percentile(latencies, .95), 1)

    # save -> searchable
    save_ms = []
    target = root / "codeloupe_bench_probe.py"
    for _ in range(10):
        token = f"probe{uuid.uuid4().hex[:10]}"
        target.write_text(f"def {token}_handler():\n    return '{token}'\n", encoding="utf-8")
        started = time.perf_counter()
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=from_fs_path(str(target)))))
        while True:
            result = await client.request("codeloupe/search", {"query": token, "limit": 3})
            if any(f["path"] == target.name for f in result["core"]):
                break
            await asyncio.sleep(0.005)
        save_ms.append((time.perf_counter() - started) * 1000)
    out["save_to_searchable_p50_ms"] = round(percentile(save_ms, .5), 1)
    out["save_to_searchable_max_ms"] = round(max(save_ms), 1)

    # busy: requests answered while a full index of the whole tree runs
    await stop(client)
    index_path = Path(status["indexPath"])
    for suffix in ("", "-wal", "-shm"):
        Path(str(index_path) + suffix).unlink(missing_ok=True)
    client = await start(root, cache, embed)
    busy, hover = [], []
    sample = next(iter(sorted(root.rglob("*.py"))), None) or next(p for p in sorted(root.rglob("*")) if p.is_file())
    hover_params = lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=from_fs_path(str(sample))),
                                   position=lsp.Position(line=0, character=0))
    while not client.progress_ended.is_set():
        ms, _ = await timed(client, "codeloupe/search", {"query": queries[len(busy) % len(queries)]})
        busy.append(ms)
        ms, _ = await timed(client, lsp.TEXT_DOCUMENT_HOVER, hover_params)
        hover.append(ms)
    out["busy_requests"] = len(busy)
    out["busy_search_p50_ms"], out["busy_search_p95_ms"] = round(percentile(busy, .5), 1), round(
        percentile(busy, .95), 1)
    out["busy_hover_p50_ms"], out["busy_hover_p95_ms"] = round(percentile(hover, .5), 1), round(
        percentile(hover, .95), 1)
    await wait_ready(client)
    out.update({k.lower() + "_mb": round(v / 1024, 1) for k, v in memory_kb(client.pid).items()})
    await stop(client)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default="", help="comma-separated corpus ids (default: every one present)")
    parser.add_argument("--large", default=str(DEFAULT_LARGE), help="a large tree ('' to skip)")
    parser.add_argument("--embed", default="none", choices=["none", "local"], help="embedding provider")
    args = parser.parse_args()

    wanted = [c for c in args.corpora.split(",") if c]
    trees = [(p.parent.name, p) for p in sorted(CORPORA.glob("*/repo")) if not wanted or p.parent.name in wanted]
    rows = []
    with tempfile.TemporaryDirectory(prefix="codeloupe-lsp-bench-") as tmp:
        for name, path in trees:
            print(f"{name}: {path}", file=sys.stderr)
            rows.append(await bench_tree(name, path, golden_queries(name), args.embed, Path(tmp)))
            print(json.dumps(rows[-1]), file=sys.stderr)
        if args.large:
            print(f"large: {args.large}", file=sys.stderr)
            rows.append(await bench_tree("large", Path(args.large), FALLBACK_QUERIES, args.embed, Path(tmp)))
            print(json.dumps(rows[-1]), file=sys.stderr)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(rows, indent=2) + "\n")
    columns = list(rows[0]) if rows else []
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(str(row.get(c, "")) for c in columns))
    if rows:
        print(f"median save->searchable across trees: "
              f"{statistics.median(r['save_to_searchable_p50_ms'] for r in rows)} ms")


if __name__ == "__main__":
    asyncio.run(main())
