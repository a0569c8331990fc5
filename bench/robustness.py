"""Index every fetched registry package and report what broke: crashes, partition violations, skips by reason.

    python bench/robustness.py [--pkgs /work/corpora/pkgs] [--work /work/corpora/robustness] \
        [--embed-subset] [--timeout 600] [--out SUMMARY.json] [ID ...]

Each package (bench/packages.json, fetched by bench/packages.py) is indexed in its own child process with the
lexical lanes only (``embed_provider = "none"``); with --embed-subset the ten packages of `EMBED_SUBSET` are
indexed again and embedded with the default (embedded) model. Per package it reports files seen / indexed,
chunks, skips by reason, files decoded with a fallback encoding, time, and:
- a crash: any exception escaping `Workspace.index` / `Workspace.embed` (type, message, the innermost engine
  frame), a child that died (signal) or ran past --timeout;
- partition violations, counted twice: the indexer's own count (`IndexReport.partition_violations`) and an
  independent check that re-reads every indexed file from disk (decoded as discovery decodes it) and runs
  `validate_partition` on the chunks stored in the index.
The index and vector cache live under WORK/cache (indexes are removed first; downloaded models are kept).
Exit status 1 when anything crashed or violated the partition.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

from packages import DEFAULT_DIR, load_packages, repo_path

# Small packages across the six languages (plus one with odd test data): the embedded model runs ~80 chunks/s
# on two cores, so the subset is chosen to embed in a few minutes in all.
EMBED_SUBSET = ("py-pluggy", "py-chardet", "npm-ms", "npm-minimist", "rs-anyhow", "rs-walkdir", "go-pkg-errors",
                "go-google-uuid", "php-nikic-fast-route", "rb-slop")
DEFAULT_WORK = Path("/work/corpora/robustness")


def _crash(exc: BaseException) -> dict:
    frames = traceback.extract_tb(exc.__traceback__)
    engine = [f for f in frames if "/codeloupe/" in f.filename] or frames
    where = f"{engine[-1].filename.split('/codeloupe/')[-1]}:{engine[-1].lineno} in {engine[-1].name}" \
        if engine else ""
    # An exception re-raised from a worker process carries the worker's traceback as text in its cause.
    remote = str(exc.__cause__) if exc.__cause__ is not None and "Traceback" in str(exc.__cause__) else ""
    inner = re.findall(r'File "[^"]*/codeloupe/([^"]+)", line (\d+), in (\w+)', remote)
    if inner:
        where = f"{inner[-1][0]}:{inner[-1][1]} in {inner[-1][2]} (worker)"
    return {"type": type(exc).__name__, "message": str(exc)[:500], "where": where,
            "traceback": (remote + "".join(traceback.format_exception(exc)))[-4000:]}


def _check_partitions(ws) -> list[str]:
    """Re-read every indexed file and validate the stored chunks against it; return the failures."""
    from codeloupe.chunk import PartitionError, validate_partition
    from codeloupe.discover import decode_source
    from codeloupe.types import Chunk

    failures = []
    for path, row in sorted(ws.store.file_rows().items()):
        result = decode_source((ws.root / path).read_bytes(), ws.settings)
        if result.text is None:
            failures.append(f"{path}: indexed but now skipped ({result.skip_reason})")
            continue
        chunks = [Chunk(start, end, kind, name, "", text) for start, end, kind, name, text in ws.store.query(
            "SELECT start_line, end_line, kind, name, text FROM chunks WHERE file_id=? ORDER BY ord", (row.id,))]
        try:
            validate_partition(result.text, chunks)
        except PartitionError as exc:
            failures.append(f"{path}: {exc}")
    return failures


def run_one(package_id: str, pkgs_dir: Path, cache: Path, embed: bool) -> dict:
    """Index (and embed) one package in this process; never raises."""
    from codeloupe.api import Workspace

    package = next(p for p in load_packages() if p.id == package_id)
    repo = repo_path(package, pkgs_dir)
    row: dict = {"id": package.id, "language": package.language, "mode": "embedded" if embed else "lexical",
                 "crash": None}
    overrides = {"cache_dir": str(cache)} | ({} if embed else {"embed_provider": "none"})
    started = time.perf_counter()
    ws = None
    try:
        ws = Workspace(repo, overrides=overrides)
        report = ws.index()
        row.update(files_seen=report.files_seen, files_indexed=report.files_indexed, chunks=report.chunks,
                   skipped=dict(report.skipped), decoded_fallback=report.decoded_fallback,
                   partition_violations=report.partition_violations, index_s=round(report.elapsed_s, 2))
        if embed:
            embed_started = time.perf_counter()
            ws.embed()
            row["embed_s"] = round(time.perf_counter() - embed_started, 2)
        failures = _check_partitions(ws)
        row.update(partition_check_failures=len(failures), partition_failures=failures[:20])
    except BaseException as exc:  # the benchmark's point: anything escaping the engine is a finding
        row["crash"] = _crash(exc)
    finally:
        if ws is not None:
            try:
                ws.close()
            except BaseException as exc:
                row["crash"] = row["crash"] or _crash(exc)
    row["total_s"] = round(time.perf_counter() - started, 2)
    return row


def _child(package_id: str, args: argparse.Namespace, embed: bool) -> dict:
    command = [sys.executable, __file__, "--one", package_id, "--pkgs", str(args.pkgs), "--work", str(args.work)]
    if embed:
        command.append("--embed")
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=os.environ)
    except subprocess.TimeoutExpired:
        return {"id": package_id, "mode": "embedded" if embed else "lexical",
                "crash": {"type": "Timeout", "message": f"ran past {args.timeout}s", "where": ""},
                "total_s": round(time.perf_counter() - started, 2)}
    last = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
    if done.returncode == 0 and last:
        return json.loads(last[0])
    return {"id": package_id, "mode": "embedded" if embed else "lexical",
            "crash": {"type": f"exit {done.returncode}", "message": done.stderr.strip()[-500:], "where": ""},
            "total_s": round(time.perf_counter() - started, 2)}


def summarise(rows: list[dict]) -> dict:
    skipped: Counter[str] = Counter()
    for row in rows:
        skipped.update(row.get("skipped", {}))
    return {
        "packages": len(rows),
        "languages": dict(Counter(row.get("language", "?") for row in rows)),
        "crashes": sum(1 for row in rows if row["crash"]),
        "partition_violations": sum(row.get("partition_violations", 0) for row in rows),
        "partition_check_failures": sum(row.get("partition_check_failures", 0) for row in rows),
        "files_seen": sum(row.get("files_seen", 0) for row in rows),
        "files_indexed": sum(row.get("files_indexed", 0) for row in rows),
        "chunks": sum(row.get("chunks", 0) for row in rows),
        "decoded_fallback": sum(row.get("decoded_fallback", 0) for row in rows),
        "skipped": dict(skipped.most_common()),
        "index_s": round(sum(row.get("index_s", 0.0) for row in rows), 1),
        "embed_s": round(sum(row.get("embed_s", 0.0) for row in rows), 1),
    }


def _print_table(mode: str, rows: list[dict]) -> None:
    print(f"\n## {mode}: {len(rows)} packages")
    print(f"{'package':34s} {'lang':10s} {'files':>6s} {'chunks':>7s} {'skips':>6s} {'viol':>5s} "
          f"{'check':>5s} {'index s':>8s} {'embed s':>8s}  crash")
    for row in rows:
        crash = row["crash"]
        print(f"{row['id']:34s} {row.get('language', '?'):10s} {row.get('files_seen', 0):6d} "
              f"{row.get('chunks', 0):7d} {sum(row.get('skipped', {}).values()):6d} "
              f"{row.get('partition_violations', 0):5d} {row.get('partition_check_failures', 0):5d} "
              f"{row.get('index_s', 0.0):8.2f} {row.get('embed_s', 0.0):8.2f}  "
              + (f"{crash['type']}: {crash['message'][:80]} [{crash['where']}]" if crash else "-"))
    total = summarise(rows)
    print(f"TOTAL {mode}: {total['packages']} packages, {total['crashes']} crashes, "
          f"{total['partition_violations']} partition violations (index), "
          f"{total['partition_check_failures']} (re-check), {total['files_seen']} files, "
          f"{total['chunks']} chunks, index {total['index_s']} s, embed {total['embed_s']} s")
    print(f"skips by reason: {json.dumps(total['skipped'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help="only these package ids")
    parser.add_argument("--pkgs", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="index/vector cache and the summary")
    parser.add_argument("--embed-subset", action="store_true", help="also embed the ten EMBED_SUBSET packages")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per package")
    parser.add_argument("--out", type=Path, help="summary JSON (default: WORK/summary.json)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: index one package, print one JSON row
    parser.add_argument("--embed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cache = args.work / "cache"
    if args.one:
        print(json.dumps(run_one(args.one, args.pkgs, cache, args.embed)))
        return 0

    packages = [p for p in load_packages() if not args.ids or p.id in args.ids]
    missing = [p.id for p in packages if not repo_path(p, args.pkgs).is_dir()]
    if missing:
        print(f"not fetched (run bench/packages.py fetch): {', '.join(missing)}", file=sys.stderr)
        return 2
    for stale in (cache / "indexes", cache / "embeddings.sqlite"):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
    result: dict = {"lexical": [], "embedded": []}
    for package in packages:
        row = _child(package.id, args, embed=False)
        row.setdefault("language", package.language)
        result["lexical"].append(row)
        print(f"[lexical] {package.id}: {row.get('files_seen', 0)} files, {row.get('chunks', 0)} chunks, "
              f"{row.get('total_s', 0)} s" + (f", CRASH {row['crash']['type']}" if row["crash"] else ""),
              file=sys.stderr, flush=True)
    if args.embed_subset:
        for package in (p for p in packages if p.id in EMBED_SUBSET):
            shutil.rmtree(cache / "indexes", ignore_errors=True)
            row = _child(package.id, args, embed=True)
            row.setdefault("language", package.language)
            result["embedded"].append(row)
            print(f"[embedded] {package.id}: {row.get('chunks', 0)} chunks, embed {row.get('embed_s', 0)} s"
                  + (f", CRASH {row['crash']['type']}" if row["crash"] else ""), file=sys.stderr, flush=True)
    summary = {mode: summarise(rows) for mode, rows in result.items() if rows}
    out = args.out or args.work / "summary.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "packages": result}, indent=1) + "\n", encoding="utf-8")
    for mode, rows in result.items():
        if rows:
            _print_table(mode, rows)
    print(f"\nsummary written to {out}")
    bad = any(s["crashes"] or s["partition_violations"] or s["partition_check_failures"] for s in summary.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
