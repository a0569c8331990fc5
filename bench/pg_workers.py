"""Indexing workers on the shared index: the queue drained by 1 and by 2 `codeloupe worker` processes.

    flock /work/notes/heavy.lock timeout 900 nice .venv/bin/python bench/pg_workers.py \
        --corpora /work/corpora/golden --workers 1 2 --embed none local --out /tmp/pg_workers.json

Each run gets a fresh PostgreSQL + pgvector (`pg_server.running`) and a fresh CODELOUPE_CACHE_DIR (the
derived embedding model is copied in, nothing else: no local vector cache may serve a vector). The golden
corpora and the standard library (without site-packages, __pycache__ and the test packages, hard-linked
into a scratch folder) are queued with `codeloupe index PATH --store URL --queue --repo NAME`, then N
`codeloupe worker --store URL --exit-when-idle S` processes are started together and the drain is timed
from their start to the last batch's `done_at` (the idle wait before they exit is not counted); `startup_s`
is the part of it before the first batch was claimed (interpreter, imports, model load). CPU is the
workers' own (user + system, from the kernel's accounting of waited-for children) and PostgreSQL's (the
postmaster and its backends, from /proc).

With an embedding model, a second drain queues the same folders again under new repository names: every
text it needs is already in the database's shared embedding cache, so the workers should embed none of it.
Reported: texts embedded, and texts served from the shared cache (the vectors the copies hold, less the
texts embedded).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from codeloupe.shared_index import LEASE_S  # noqa: E402
from pg_server import running  # noqa: E402
from scale_tree import stdlib  # noqa: E402

GOLDEN = ("click", "express", "sinatra", "gin")
# Small enough that PostgreSQL fits beside the workers on a shared 2-core machine.
PG_SETTINGS = {"shared_buffers": "256MB", "max_wal_size": "2GB", "synchronous_commit": "off"}
IDLE_EXIT_S = 2.0


def prepare_trees(corpora: Path, scratch: Path, with_stdlib: bool, stdlib_tests: bool = False) -> dict[str, Path]:
    """Repository name -> folder: the golden corpora as they are, the standard library hard-linked (its test
    packages too with `stdlib_tests`: about 2.5x the chunks)."""
    trees = {name: (corpora / name / "repo").resolve() for name in GOLDEN}
    if not with_stdlib:
        return trees
    lib = scratch / "stdlib"
    tests = () if stdlib_tests else ("test", "tests", "idle_test")
    ignore = shutil.ignore_patterns("site-packages", "__pycache__", *tests)
    shutil.copytree(stdlib(), lib, copy_function=os.link, symlinks=True, ignore=ignore)
    trees["stdlib"] = lib
    return trees


def codeloupe(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codeloupe", *args], env=env, capture_output=True, text=True,
                          check=True)


def postgres_cpu_s(url: str) -> float:
    """CPU seconds of the postmaster, its exited backends (reaped into its children's times) and live ones."""
    pgdata = Path(url.split("host=", 1)[1].split("&", 1)[0])
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(proc.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
        elif ppid == postmaster:
            total += sum(int(v) for v in fields[11:13]) / tick
    return total


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def query(url: str, sql: str, params: tuple = ()) -> tuple:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchone()


def queue_all(url: str, trees: dict[str, Path], suffix: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    for name, root in trees.items():
        codeloupe(["index", str(root), "--store", url, "--queue", "--repo", name + suffix], env)
    return time.perf_counter() - start


def drain(url: str, workers: int, embed: str, suffix: str, env: dict[str, str]) -> dict:
    """Start `workers` processes on the queued batches and time them until the last batch is done."""
    files_before, chunks_before, vectors_before, cache_before = query(
        url, "SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM chunks),"
             " (SELECT count(*) FROM chunk_vectors) + (SELECT count(*) FROM skeleton_vectors),"
             " (SELECT count(*) FROM embeddings)")
    cpu_before, pg_before = children_cpu_s(), postgres_cpu_s(url)
    start_wall = time.time()
    procs = [subprocess.Popen([sys.executable, "-m", "codeloupe", "worker", "--store", url, "--embed-provider", embed,
                               "--exit-when-idle", str(IDLE_EXIT_S)], env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(workers)]
    reports = [proc.communicate()[1].strip().splitlines()[-1] for proc in procs]
    if any(proc.returncode for proc in procs):
        raise SystemExit(f"a worker failed: {reports}")
    cpu, pg_cpu = children_cpu_s() - cpu_before, postgres_cpu_s(url) - pg_before
    # A batch's lease runs LEASE_S from its claim: the first claim is when the first worker was ready.
    first_claim, last_done, pending, files, chunks, vectors, cache = query(
        url, "SELECT extract(epoch FROM min(lease_until) FILTER (WHERE done_at > to_timestamp(%s))) - %s,"
             " extract(epoch FROM max(done_at)), count(*) FILTER (WHERE done_at IS NULL),"
             " (SELECT count(*) FROM files), (SELECT count(*) FROM chunks),"
             " (SELECT count(*) FROM chunk_vectors) + (SELECT count(*) FROM skeleton_vectors),"
             " (SELECT count(*) FROM embeddings) FROM work_queue", (start_wall, LEASE_S))
    if pending:
        raise SystemExit(f"{pending} batches left undone: {reports}")
    wall = float(last_done) - start_wall
    embedded = sum(int(report.split(" texts embedded")[0].rsplit(" ", 1)[1]) for report in reports)
    files, chunks, vectors = files - files_before, chunks - chunks_before, vectors - vectors_before
    return {"workers": workers, "embed": embed, "repositories": suffix or "originals", "wall_s": round(wall, 2),
            "startup_s": round(float(first_claim) - start_wall, 2),
            "files": files, "chunks": chunks, "files_per_s": round(files / wall, 1),
            "chunks_per_s": round(chunks / wall, 1), "worker_cpu_s": round(cpu, 1),
            "postgres_cpu_s": round(pg_cpu, 1), "vectors_written": vectors, "texts_embedded": embedded,
            "texts_from_shared_cache": vectors - embedded if embed != "none" else 0,
            "cache_rows_added": cache - cache_before, "worker_reports": reports}


def run(trees: dict[str, Path], workers: int, embed: str, scratch: Path) -> list[dict]:
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=scratch))
    models = Path.home() / ".cache" / "codeloupe" / "models"
    if embed == "local" and models.is_dir():  # the derived model only, so no run pays for deriving it
        (cache / "models").mkdir()
        for model in models.glob("*.onnx"):
            shutil.copy2(model, cache / "models" / model.name)
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(cache)}
    rows = []
    try:
        with running(scratch, PG_SETTINGS) as url:
            queue_s = queue_all(url, trees, "", env)
            row = drain(url, workers, embed, "", env)
            rows.append({**row, "queue_s": round(queue_s, 2)})
            print(json.dumps(rows[-1]), flush=True)
            if embed != "none":  # the same content under new names: the shared cache should serve all of it
                queue_s = queue_all(url, trees, "-copy", env)
                row = drain(url, workers, embed, "-copy", env)
                rows.append({**row, "queue_s": round(queue_s, 2)})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", type=Path, default=Path("/work/corpora/golden"))
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--embed", nargs="+", default=["none", "local"], choices=["none", "local"])
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--no-stdlib", action="store_true", help="the golden corpora only (a quick check)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="pg_workers-", dir=args.scratch))
    rows: list[dict] = []
    try:
        trees = prepare_trees(args.corpora, scratch, not args.no_stdlib)
        load = os.getloadavg()
        for embed in args.embed:
            for workers in args.workers:
                rows.extend(run(trees, workers, embed, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = {"cpus": os.cpu_count(), "loadavg_at_start": load, "loadavg_at_end": os.getloadavg(), "runs": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
