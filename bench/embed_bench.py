"""Throughput, memory and retrieval quality of the local embedding provider under each setting tried.

    .venv/bin/python bench/embed_bench.py                   # speed grid, quality grid, larger tree
    .venv/bin/python bench/embed_bench.py --skip-quality    # speed only (a few minutes)
    .venv/bin/python bench/embed_bench.py --large PATH      # choose the larger tree
    .venv/bin/python bench/embed_bench.py --only "before,after,@128 distinct words,@128 whole text" --large ''
                                            # main before this recipe against now, speed and quality
    .venv/bin/python bench/embed_bench.py --speed-sample 715 --only "after:" --skip-quality --out FILE
                                            # every golden chunk, the default only; rows as JSON too

Chunks are the real chunker's over the golden corpora (/work/corpora/<id>/repo, or $CODELOUPE_CORPORA),
embedded as `embedding_text(breadcrumb, text)`. Every configuration runs in a fresh subprocess, so its peak
RSS is its own ("worker MB": the largest worker process's). On a shared machine wall-clock throughput depends
on the neighbours, so CPU time is reported too, the worker processes' included: "CPU ms/chunk" compares
settings fairly within one run (between runs on a loaded machine it moves by ~20%), and "chunks per CPU-s"
times the cores estimates an idle machine (workers share no threads; not measured on an idle machine here).

Quality is dense-only file retrieval on the golden queries (recall of gold files in the top 10 files,
ranked by their best chunk, and MRR). It is computed once per model and window length from every window of
every chunk, then for each cap on windows per chunk (1 = truncation), so the cap's cost and benefit show
side by side. Last, the cost of storing vectors as int8 + scale (the store's format) against float32, and
the cosine of each chunk's vector now to its vector before (the whole text in at most 4 windows).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "engine"))

from codeloupe.embed import embedding_text, normalise_rows  # noqa: E402
from codeloupe.embed.local import (  # noqa: E402
    BATCH_TOKENS,
    MAX_WINDOWS,
    WINDOW_OVERLAP,
    EncoderOptions,
    load_local_provider,
    spread,
)
from codeloupe.settings import Settings  # noqa: E402
from codeloupe.store import quantize  # noqa: E402

CORPORA = Path(os.environ.get("CODELOUPE_CORPORA", "/work/corpora"))
GOLDEN = Path(os.environ.get("CODELOUPE_GOLDEN", "/work/shared/golden/public.json"))
TOP = 10
POOL = 128  # texts per provider call, as embed_pending hands them over
ALL_WINDOWS = 1000  # a cap no chunk reaches: the quality pass embeds every window once


@dataclass(frozen=True)
class Config:
    name: str
    requantize: bool = True
    window_tokens: int = 128
    batch_tokens: int = BATCH_TOKENS  # padded tokens per session run
    sort_by_length: bool = True
    max_windows: int = MAX_WINDOWS
    processes: bool = True  # False: one session split over the cores (main before the worker processes)
    distinct_words: bool = True  # False: the whole text (main before)
    overlap: int = WINDOW_OVERLAP  # tokens a window repeats from the one before
    unsigned: bool | None = None  # the re-quantised file's weight form (None: what this processor's kernel needs)


# What main did before this branch: the whole text in at most 4 windows, one session over every core.
BEFORE = Config("before: whole text x4, one session", processes=False, distinct_words=False, max_windows=4)
SPEED_GRID = [
    BEFORE,
    Config("after: distinct words x4, a process per core (default)"),
    Config("after, windows without overlap", overlap=0),
    Config("shipped int8 @128", requantize=False),
    Config("shipped int8 @256", requantize=False, window_tokens=256),
    Config("requantised @128 (default)"),
    Config("requantised @256", window_tokens=256),
    Config("requantised @128 unsorted", sort_by_length=False),
    Config("requantised @128 b256t", batch_tokens=256),
    Config("requantised @128 b1024t", batch_tokens=1024),
    Config("requantised @128 b4096t", batch_tokens=4096),
    Config("requantised @128 x1", max_windows=1),
    Config("requantised @128 x8", max_windows=8),
    # The same integers either way; int8 weights saturate on x86 without VNNI (vectors off there), uint8 ones
    # never do (onnxruntime's uint8 x uint8 kernel), at some cost on such processors.
    Config("requantised @128 int8 weights", unsigned=False),
    Config("requantised @128 uint8 weights", unsigned=True),
]
# The whole text's caps up to 4 (before) need only the windows spread() picks for 4: a quarter of the work.
WHOLE_TEXT = Config("requantised @128 whole text", distinct_words=False, max_windows=4)
QUALITY_GRID = [
    Config("requantised @128 distinct words", max_windows=ALL_WINDOWS),
    Config("requantised @128 distinct words without overlap", overlap=0, max_windows=ALL_WINDOWS),
    WHOLE_TEXT,
    Config("shipped int8 @128", requantize=False, max_windows=ALL_WINDOWS),
    Config("requantised @256", window_tokens=256, max_windows=ALL_WINDOWS),
]
CAPS = (1, 2, 3, 4, 8, ALL_WINDOWS)


# ---------------------------------------------------------------------- corpus


def chunks_of_tree(root: Path, limit_bytes: int = 1_000_000) -> list[tuple[str, str]]:
    """(path, embedding text) for every chunk of every UTF-8 file under root (dot-folders skipped)."""
    from codeloupe.chunk import chunk_file, detect_language

    out: list[tuple[str, str]] = []
    for path in sorted(root.rglob("*")):
        rel_parts = path.relative_to(root).parts
        if not path.is_file() or any(p.startswith(".") for p in rel_parts) or path.stat().st_size > limit_bytes:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        rel = "/".join(rel_parts)
        for chunk in chunk_file(rel, text, detect_language(rel, text[:200]), Settings().chunk_budget).chunks:
            out.append((rel, embedding_text(chunk.breadcrumb, chunk.text)))
    return out


def golden() -> tuple[list[str], list[str], list[str], list[list[str]]]:
    """(chunk paths, chunk texts, queries, gold files per query) over every fetched golden corpus."""
    paths, texts, queries, gold = [], [], [], []
    for corpus in json.loads(GOLDEN.read_text())["corpora"]:
        root = CORPORA / corpus["id"] / "repo"
        if not root.is_dir():
            continue
        prefix = f"{corpus['id']}/"
        for rel, text in chunks_of_tree(root):
            paths.append(prefix + rel)
            texts.append(text)
        for q in corpus["queries"]:
            queries.append(q["query"])
            gold.append([prefix + g for g in q["gold_files"]])
    return paths, texts, queries, gold


# ---------------------------------------------------------------------- worker (one configuration)


def worker(config: Config, texts_file: Path, queries_file: Path, out_dir: Path, model_cache: Path) -> None:
    texts = json.loads(texts_file.read_text())
    queries = json.loads(queries_file.read_text())
    options = EncoderOptions(window_tokens=config.window_tokens, batch_tokens=config.batch_tokens,
                             sort_by_length=config.sort_by_length, max_windows=config.max_windows,
                             processes=config.processes, distinct_words=config.distinct_words,
                             overlap=config.overlap)
    started = time.perf_counter()
    provider = load_local_provider(Settings(cache_dir=str(model_cache)), requantize=config.requantize,
                                   options=options, unsigned=config.unsigned)
    load_s = time.perf_counter() - started
    owners, vectors = [], []
    wall, cpu = time.perf_counter(), cpu_seconds()
    for start in range(0, len(texts), POOL):
        part_owners, part_vectors = provider.embed_windows(texts[start:start + POOL])
        owners.append(part_owners + start)
        vectors.append(part_vectors)
    provider.release_workers()  # joined workers' CPU time shows in RUSAGE_CHILDREN
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    provider.embed_query("warm up")  # the searcher's queries hit a warm session
    query_wall = time.perf_counter()
    query_vectors = np.stack([provider.embed_query(q) for q in queries])
    query_ms = (time.perf_counter() - query_wall) * 1000 / len(queries)
    np.save(out_dir / "owners.npy", np.concatenate(owners))
    np.save(out_dir / "windows.npy", np.concatenate(vectors))
    np.save(out_dir / "queries.npy", query_vectors)
    (out_dir / "result.json").write_text(json.dumps({
        "model_id": provider.model_id, "chunks": len(texts), "windows": int(sum(len(o) for o in owners)),
        "wall_s": wall, "cpu_s": cpu, "load_s": load_s, "query_ms": query_ms,
        "peak_rss_mb": peak_rss_mb(),
        "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }))


def cpu_seconds() -> float:
    """CPU time of this process and of its ended children (the worker processes, once joined)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def peak_rss_mb() -> float:
    """This process's own peak RSS (VmHWM; getrusage's maxrss would include the parent's from before exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_config(config: Config, texts_file: Path, queries_file: Path, out_dir: Path, model_cache: Path) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, __file__, "--worker", json.dumps(asdict(config)), str(texts_file),
                    str(queries_file), str(out_dir), str(model_cache)], check=True)
    return json.loads((out_dir / "result.json").read_text())


# ---------------------------------------------------------------------- quality


def pool_windows(owners: np.ndarray, windows: np.ndarray, n: int, cap: int) -> tuple[np.ndarray, int]:
    """Chunk vectors from per-window vectors keeping `cap` spread windows per chunk; and windows kept."""
    sums = np.zeros((n, windows.shape[1]), np.float32)
    starts = np.searchsorted(owners, np.arange(n + 1))
    kept = 0
    for i in range(n):
        picks = [starts[i] + k for k in spread(int(starts[i + 1] - starts[i]), cap)]
        sums[i] = windows[picks].sum(axis=0)
        kept += len(picks)
    return normalise_rows(sums), kept


def ranked_files(scores: np.ndarray, paths: list[str]) -> list[str]:
    best: list[str] = []
    for k in np.argsort(-scores):
        if paths[k] not in best:
            best.append(paths[k])
            if len(best) == TOP:
                break
    return best


def file_quality(chunks: np.ndarray, queries: np.ndarray, paths: list[str], gold: list[list[str]]) -> tuple[float, float]:
    recall, rr = [], []
    for q, wanted in zip(queries, gold):
        ranked = ranked_files(chunks @ q, paths)
        recall.append(len(set(ranked) & set(wanted)) / len(wanted))
        rr.append(next((1.0 / (i + 1) for i, p in enumerate(ranked) if p in wanted), 0.0))
    return float(np.mean(recall)), float(np.mean(rr))


def stored_int8(vectors: np.ndarray) -> np.ndarray:
    q8, scales = quantize(vectors)
    return q8.astype(np.float32) * scales[:, None]


def top_overlap(a: np.ndarray, b: np.ndarray, queries: np.ndarray) -> float:
    return float(np.mean([len(set(np.argsort(-(a @ q))[:TOP]) & set(np.argsort(-(b @ q))[:TOP])) / TOP
                          for q in queries]))


# ---------------------------------------------------------------------- main


def chosen(config: Config, only: str) -> bool:
    return any(part in config.name for part in only.split(","))



def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--speed-sample", type=int, default=120, help="chunks in the speed grid's sample")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--large", default=str(REPO / ".venv/lib/python3.11/site-packages/rich"),
                        help="a larger tree for the default configuration's throughput ('' to skip)")
    parser.add_argument("--only", default="", help="run only configurations whose name contains one of these"
                        " (comma-separated)")
    parser.add_argument("--out", default="", help="also write the speed rows (both trees) as JSON to this file")
    args = parser.parse_args()
    speed_rows: list[dict] = []

    paths, texts, queries, gold = golden()
    if not texts:
        sys.exit(f"no golden corpora under {CORPORA}")
    chars = np.array([len(t) for t in texts])
    print(f"golden corpora: {len(texts)} chunks (chars median {int(np.median(chars))}, p90"
          f" {int(np.percentile(chars, 90))}), {len(queries)} queries; {os.cpu_count()} cores,"
          f" load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        model_cache = tmp / "model-cache"  # shared, so re-quantisation (once per machine) is not timed
        load_local_provider(Settings(cache_dir=str(model_cache)))
        queries_file = tmp / "queries.json"
        queries_file.write_text(json.dumps(queries))

        sample_ids = sorted(np.random.default_rng(0).choice(len(texts), min(args.speed_sample, len(texts)),
                                                            replace=False))
        sample_file = tmp / "sample.json"
        sample_file.write_text(json.dumps([texts[k] for k in sample_ids]))
        print(f"\nspeed: {len(sample_ids)} sampled chunks, at most {MAX_WINDOWS} windows of each unless noted (xN)")
        print(f"{'configuration':54} {'windows':>7} {'chunks/s':>8} {'CPU ms/window':>13} {'CPU ms/chunk':>12}"
              f" {'chunks/CPU-s':>12} {'peak MB':>7} {'worker MB':>9} {'load s':>6} {'query ms':>8}")
        for k, config in enumerate(c for c in SPEED_GRID if chosen(c, args.only)):
            r = run_config(config, sample_file, queries_file, tmp / f"speed{k}", model_cache)
            speed_rows.append({"tree": "golden sample", "configuration": config.name, **r})
            print(f"{config.name:54} {r['windows']:7d} {r['chunks'] / r['wall_s']:8.1f}"
                  f" {1000 * r['cpu_s'] / r['windows']:13.1f} {1000 * r['cpu_s'] / r['chunks']:12.1f}"
                  f" {r['chunks'] / r['cpu_s']:12.2f} {r['peak_rss_mb']:7.0f} {r['worker_peak_rss_mb']:9.0f}"
                  f" {r['load_s']:6.2f} {r['query_ms']:8.2f}", flush=True)

        if not args.skip_quality:
            texts_file = tmp / "texts.json"
            texts_file.write_text(json.dumps(texts))
            print(f"\nquality: dense-only file retrieval over {len(texts)} chunks, {len(queries)} queries")
            print(f"{'model':32} {'windows/chunk cap':>17} {'windows/chunk':>13} {'recall@10':>9} {'MRR':>6}")
            pooled: dict[tuple[str, int], np.ndarray] = {}
            for k, config in enumerate(c for c in QUALITY_GRID if chosen(c, args.only)):
                out = tmp / f"quality{k}"
                run_config(config, texts_file, queries_file, out, model_cache)
                owners, windows = np.load(out / "owners.npy"), np.load(out / "windows.npy")
                query_vectors = np.load(out / "queries.npy")
                for cap in CAPS:
                    chunk_vectors, kept = pool_windows(owners, windows, len(texts), cap)
                    recall, mrr = file_quality(chunk_vectors, query_vectors, paths, gold)
                    label = "all" if cap == ALL_WINDOWS else str(cap)
                    print(f"{config.name:32} {label:>17} {kept / len(texts):13.2f} {recall:9.3f} {mrr:6.3f}",
                          flush=True)
                    pooled[config.name, cap] = chunk_vectors
                    if k == 0 and cap == MAX_WINDOWS:
                        default = (chunk_vectors, query_vectors)
            if chosen(QUALITY_GRID[0], args.only):
                exact, query_vectors = default
                stored = stored_int8(exact)
                print(f"\nint8 + scale storage vs float32 (default): top-{TOP} chunk overlap"
                      f" {top_overlap(exact, stored, query_vectors):.3f}; file recall@10"
                      f" {file_quality(exact, query_vectors, paths, gold)[0]:.3f} (float32) vs"
                      f" {file_quality(stored, query_vectors, paths, gold)[0]:.3f} (int8)")
            after, before = pooled.get((QUALITY_GRID[0].name, MAX_WINDOWS)), pooled.get((WHOLE_TEXT.name, 4))
            if after is not None and before is not None:
                cosines = (after * before).sum(axis=1)
                print(f"cosine of each chunk's vector to the one before (whole text x4): mean {cosines.mean():.3f},"
                      f" p10 {np.percentile(cosines, 10):.3f}, min {cosines.min():.3f}")

        if args.large and Path(args.large).is_dir():
            large = [t for _, t in chunks_of_tree(Path(args.large))]
            large_file = tmp / "large.json"
            large_file.write_text(json.dumps(large))
            print(f"\nlarger tree {args.large}: {len(large)} chunks")
            for k, config in enumerate((BEFORE, Config("after (default)"))):
                r = run_config(config, large_file, queries_file, tmp / f"large{k}", model_cache)
                speed_rows.append({"tree": args.large, "configuration": config.name, **r})
                print(f"{config.name:36} {r['windows']} windows in {r['wall_s']:.1f} s = {len(large) / r['wall_s']:.1f}"
                      f" chunks/s wall, {1000 * r['cpu_s'] / len(large):.1f} CPU ms/chunk, peak {r['peak_rss_mb']:.0f} MB"
                      f" (+ {r['worker_peak_rss_mb']:.0f} MB per worker)", flush=True)

    if args.out:
        for row in speed_rows:
            row["chunks_per_s_wall"] = row["chunks"] / row["wall_s"]
            row["cpu_ms_per_chunk"] = 1000 * row["cpu_s"] / row["chunks"]
        Path(args.out).write_text(json.dumps({"load_average": os.getloadavg()[0], "cores": os.cpu_count(),
                                              "rows": speed_rows}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(Config(**json.loads(sys.argv[2])), *(Path(a) for a in sys.argv[3:7]))
    else:
        main()
