"""Warm search latency through each surface on the same queries: in process (`Workspace.search`), MCP over
stdio (`codeloupe mcp`, the SDK's client calling the `search` tool), and HTTP (`codeloupe serve`,
`GET /v1/search`); then HTTP requests per second with concurrent clients.

Every surface answers from the same on-disk index (built once first). Each query is asked once to warm up,
then `--rounds` times; p50/p95 are over all timed calls. MCP and HTTP include their own serialisation (the
MCP answer is the sized text bundle, HTTP the bundle JSON) and the refresh walk each does at most once a second.

Usage:  .venv/bin/python bench/serve_bench.py [--corpus click] [--embed none|local] [--rounds 5]
Results print as a table and are written to bench/results/serve_bench.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2 as httpx
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from codeloupe.api import Workspace
from codeloupe.eval.golden import load_golden

REPO = Path(__file__).resolve().parents[1]
CORPORA = Path("/work/corpora/golden")
GOLDEN = Path("/work/shared/golden/public.json")
RESULTS = REPO / "bench" / "results" / "serve_bench.json"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(times_s: list[float]) -> dict[str, float]:
    ms = [t * 1000 for t in times_s]
    return {"p50_ms": round(percentile(ms, 0.5), 2), "p95_ms": round(percentile(ms, 0.95), 2),
            "mean_ms": round(statistics.fmean(ms), 2), "calls": len(ms)}


def timed(call, queries: list[str], rounds: int) -> list[float]:
    for query in queries:
        call(query)  # warm-up: snapshot, caches, connections
    times = []
    for _ in range(rounds):
        for query in queries:
            started = time.perf_counter()
            call(query)
            times.append(time.perf_counter() - started)
    return times


def in_process(root: Path, queries: list[str], rounds: int) -> list[float]:
    ws = Workspace(root)
    try:
        return timed(lambda q: ws.search(q), queries, rounds)
    finally:
        ws.close()


def over_mcp_stdio(root: Path, queries: list[str], rounds: int, env: dict[str, str]) -> list[float]:
    async def run() -> list[float]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "codeloupe", "mcp", str(root)], env=env)
        async with Client(params, read_timeout_seconds=120) as client:
            async def call(query: str) -> None:
                result = await client.call_tool("search", {"query": query})
                assert not result.is_error, result.content
            for query in queries:
                await call(query)
            times = []
            for _ in range(rounds):
                for query in queries:
                    started = time.perf_counter()
                    await call(query)
                    times.append(time.perf_counter() - started)
            return times

    return asyncio.run(run())


def start_http(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "codeloupe", "serve", str(root), "--port", "0", "--rate", "100000"],
                            env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"at (http://\S+?)/ ", line)
    if not found:
        proc.kill()
        raise RuntimeError(f"codeloupe serve did not start: {line}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining its log
    base = found.group(1)
    deadline = time.monotonic() + 300
    while httpx.get(f"{base}/readyz").status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError("not ready after 300 s")
        time.sleep(0.2)
    return proc, base


def throughput(base: str, queries: list[str], clients: int, total: int) -> float:
    with httpx.Client(limits=httpx.Limits(max_connections=clients), timeout=120) as client, \
            ThreadPoolExecutor(max_workers=clients) as pool:
        started = time.perf_counter()
        codes = list(pool.map(lambda i: client.get(f"{base}/v1/search",
                                                   params={"q": queries[i % len(queries)]}).status_code,
                              range(total)))
        elapsed = time.perf_counter() - started
    assert codes == [200] * total, sorted(set(codes))
    return total / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="click")
    parser.add_argument("--embed", choices=["none", "local"], default="none")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients for requests/s")
    parser.add_argument("--requests", type=int, default=400, help="requests for the requests/s measurement")
    args = parser.parse_args()

    golden = load_golden(GOLDEN)
    corpus = next(c for c in golden.corpora if c.id == args.corpus)
    root = CORPORA / args.corpus / "repo"
    queries = [q.query for q in corpus.queries]
    cache = tempfile.mkdtemp(prefix="serve-bench-")
    os.environ.update(CODELOUPE_CACHE_DIR=cache, CODELOUPE_EMBED_PROVIDER=args.embed)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "engine"), str(REPO / "server"), env.get("PYTHONPATH", "")])

    ws = Workspace(root)
    try:
        ws.index()
        if args.embed != "none":
            ws.embed()
    finally:
        ws.close()

    results: dict[str, object] = {"corpus": args.corpus, "queries": len(queries), "rounds": args.rounds,
                                  "embed": args.embed, "cpus": os.cpu_count()}
    results["in_process"] = summary(in_process(root, queries, args.rounds))
    results["mcp_stdio"] = summary(over_mcp_stdio(root, queries, args.rounds, env))
    proc, base = start_http(root, env)
    try:
        with httpx.Client(timeout=120) as client:
            def get(query: str) -> None:
                assert client.get(f"{base}/v1/search", params={"q": query}).status_code == 200
            results["http"] = summary(timed(get, queries, args.rounds))
        results["http_requests_per_s"] = round(throughput(base, queries, args.clients, args.requests), 1)
        results["http_clients"] = args.clients
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    print(f"{args.corpus}: {len(queries)} queries x {args.rounds} rounds, embed={args.embed}, {os.cpu_count()} CPUs")
    print("| surface | p50 ms | p95 ms |\n|---|---|---|")
    for name, label in (("in_process", "in process (`Workspace.search`)"), ("mcp_stdio", "MCP over stdio (`search` tool)"),
                        ("http", "HTTP (`GET /v1/search`)")):
        row = results[name]
        print(f"| {label} | {row['p50_ms']} | {row['p95_ms']} |")  # type: ignore[index]
    print(f"HTTP: {results['http_requests_per_s']} requests/s with {args.clients} concurrent clients")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
