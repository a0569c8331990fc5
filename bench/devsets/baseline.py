"""Score the engine on development/test sets: one table row per set, and per language within each set.

    python bench/devsets/baseline.py SET.json=TREES [SET.json=TREES ...] [SET.jsonl ...] [--no-embed] \
        [--corpora-per-set N] [--queries-per-corpus N] [--out RESULTS.json]

Each argument pairs a set (golden-set format) with the directory its corpora are under (TREES/<id>/repo), e.g.
``/work/corpora/devsets/docpairs.dev.json=/work/corpora/devsets/trees/docpairs`` or
``/work/shared/golden/public.json=/work/corpora/golden``; a SWE-bench-style .jsonl names its own trees. The sampling options keep an embedded run bounded
(the default model embeds a chunk in ~30 ms of CPU): a deterministic sample of corpora per set and of
queries per corpus, ordered by a hash of the id; --max-files leaves out large trees (a bias towards small
packages: say so when quoting such a run). Scores are `codeloupe eval`'s (R@1, Acc@5, bundle recall, MRR).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

from codeloupe.eval.golden import GoldenSet, load_golden, load_swebench
from codeloupe.eval.runner import EvalOptions, EvalRun, QueryOutcome, run_golden, run_swebench, score
from codeloupe.search import LANES


def _by_hash(items: list, key) -> list:
    return sorted(items, key=lambda item: hashlib.sha1(key(item).encode()).hexdigest())


def _file_count(repo: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(repo))


def sample(golden: GoldenSet, trees: Path, corpora: int, queries: int, max_files: int = 0) -> GoldenSet:
    chosen = _by_hash(golden.corpora, lambda c: c.id)
    if max_files:
        chosen = [c for c in chosen if _file_count(trees / c.id / "repo") <= max_files]
    chosen = chosen[:corpora] if corpora else chosen
    if queries:
        chosen = [dataclasses.replace(c, queries=tuple(_by_hash(list(c.queries), lambda q: q.id)[:queries]))
                  for c in chosen]
    return GoldenSet(path=golden.path, corpora=list(chosen))


def _languages(path: Path) -> dict[str, str]:
    """corpus (or instance) id -> language, from the set's own `language` fields."""
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return {row["id"]: row.get("language", "?") for row in rows}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {c["id"]: c.get("language", c.get("registry", "?")) for c in data["corpora"]}


def _run(set_path: Path, trees: str, options: EvalOptions, args: argparse.Namespace) -> EvalRun:
    def log(message: str) -> None:
        print(f"[baseline] {message}", file=sys.stderr, flush=True)

    if set_path.suffix == ".jsonl":  # one tree per instance: --corpora-per-set samples instances
        instances = load_swebench(set_path)
        if args.corpora_per_set:
            instances = _by_hash(instances, lambda i: i.id)[:args.corpora_per_set]
        return run_swebench(instances, options, str(set_path), log)
    golden = sample(load_golden(set_path), Path(trees), args.corpora_per_set, args.queries_per_corpus,
                    args.max_files)
    return run_golden(golden, Path(trees), options, log=log)


def _row(label: str, outcomes: list[QueryOutcome]) -> str:
    s = score(outcomes)
    return (f"| {label:28s} | {s.n:5d} | {s.r_at_1:.3f} | {s.acc_at_5:.3f} | {s.bundle_recall:.3f} | "
            f"{s.mrr:.3f} | {s.p50_ms:6.1f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="+", metavar="SET.json=TREES")
    parser.add_argument("--no-embed", action="store_true", help="lexical and symbol lanes only")
    parser.add_argument("--corpora-per-set", type=int, default=0, help="sample this many corpora (0: all)")
    parser.add_argument("--queries-per-corpus", type=int, default=0, help="sample this many queries (0: all)")
    parser.add_argument("--max-files", type=int, default=0,
                        help="sample only corpora with at most this many files (bounds embedding time)")
    parser.add_argument("--cache-dir", default="/work/corpora/evalcache", help="index and vector cache")
    parser.add_argument("--out", type=Path, help="every query's outcome as JSON")
    parser.add_argument("--lanes", action="store_true",
                        help="also run every query on each lane alone and add a row per lane to each set")
    args = parser.parse_args(argv)

    options = EvalOptions(embed=not args.no_embed, lanes_ablation=args.lanes, overrides={"cache_dir": args.cache_dir})
    lines = [f"| {'set':28s} | {'n':>5s} | R@1   | Acc@5 | bundle | MRR   | p50 ms |",
             f"|{'-' * 30}|{'-' * 7}|{'-' * 7}|{'-' * 7}|{'-' * 8}|{'-' * 7}|{'-' * 8}|"]
    dump: dict[str, list] = {}
    for spec in args.sets:
        set_name, _, trees = spec.partition("=")
        set_path = Path(set_name)
        started = time.perf_counter()
        run = _run(set_path, trees, options, args)
        outcomes = run.outcomes()
        name = set_path.name.removesuffix(".json")
        print(f"[baseline] {name}: {len(outcomes)} queries in {time.perf_counter() - started:.0f}s",
              file=sys.stderr, flush=True)
        lines.append(_row(f"**{name}**", outcomes))
        language = _languages(set_path)
        by_language: dict[str, list[QueryOutcome]] = defaultdict(list)
        for outcome in outcomes:
            by_language[language.get(outcome.corpus, "?")].append(outcome)
        if len(by_language) > 1:
            lines.extend(_row(f"  {lang}", members) for lang, members in sorted(by_language.items()))
        kinds = sorted({o.kind for o in outcomes})
        if len(kinds) > 1:
            lines.extend(_row(f"  kind {kind}", [o for o in outcomes if o.kind == kind]) for kind in kinds)
        if args.lanes:
            lines.extend(_row(f"  lane {lane} alone", run.outcomes(lane)) for lane in LANES
                         if run.outcomes(lane))
        dump[name] = [dataclasses.asdict(o) | {"language": language.get(o.corpus, "?")} for o in outcomes]
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps(dump, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
