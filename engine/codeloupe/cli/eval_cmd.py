"""`codeloupe eval`: score the engine on a golden set (or a SWE-bench-style JSONL) and print the tables."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from codeloupe.cli import CliError
from codeloupe.cli.arguments import positive_count
from codeloupe.constants import QUERY_KINDS as KINDS

if TYPE_CHECKING:
    from codeloupe.eval.runner import EvalOptions, EvalRun


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval", help="score retrieval on a golden set: R@1, Acc@5, bundle recall, symbol hit@5, MRR, latency",
        description="Index each corpus, then run every labelled query through the engine and score it. "
                    "GOLDEN is a golden set (.json, the format of public.json; corpora at DIR/<id>/repo) or a "
                    "SWE-bench-style .jsonl of {id, query, gold_files, repo}, one tree per line.")
    parser.add_argument("golden", metavar="GOLDEN", type=Path, help="golden set .json or SWE-bench-style .jsonl")
    parser.add_argument("--corpora", metavar="DIR", type=Path,
                        help="where fetch_corpora.sh put the corpora (needed for a .json golden set)")
    parser.add_argument("--corpus", metavar="ID", action="append", default=[],
                        help="only this corpus (repeatable)")
    parser.add_argument("--kinds", metavar="K[,K]", default="",
                        help=f"only these query kinds ({', '.join(KINDS)})")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON instead of tables")
    parser.add_argument("--lanes", action="store_true",
                        help="also score each lane alone (the ablation table)")
    parser.add_argument("--out", metavar="FILE", type=Path,
                        help="write every query's result (gold ranks, top 5, lanes ready, latency) as JSON")
    parser.add_argument("--no-embed", action="store_true", help="no vectors: lexical and symbol lanes only")
    parser.add_argument("--limit", type=positive_count, default=None, help="bundle limit passed to search")
    parser.add_argument("--docs-mode", choices=("docs", "both", "code"), default="docs",
                        help="search mode for queries of kind 'docs' (default: docs)")
    gate = parser.add_argument_group("gate (exit status 1 when the whole set scores below; CI runs this)")
    gate.add_argument("--min-r1", type=float, metavar="X", help="fail when R@1 over all queries is below X")
    gate.add_argument("--min-bundle-recall", type=float, metavar="X",
                      help="fail when bundle recall over all queries is below X")
    parser.add_argument("--cache-dir", metavar="DIR", help="index and vector cache (default: the user cache)")
    parser.set_defaults(func=run)


def _fetch_hint(golden: Path, corpora: Path, corpus_id: str) -> str:
    script = golden.resolve().parent / "fetch_corpora.sh"
    name = str(script) if script.is_file() else "fetch_corpora.sh (beside the golden set)"
    return f"fetch it with: {name} {golden} {corpora} {corpus_id}"


def _options(args: argparse.Namespace) -> EvalOptions:
    from codeloupe.eval.runner import EvalOptions

    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise CliError(f"--kinds: unknown kind(s) {', '.join(unknown)} (known: {', '.join(KINDS)})")
    if args.limit is not None and args.limit < 1:
        raise CliError("--limit must be at least 1")
    options = EvalOptions(embed=not args.no_embed, lanes_ablation=args.lanes, docs_mode=args.docs_mode,
                          kinds=kinds, overrides={"cache_dir": args.cache_dir} if args.cache_dir else {})
    if args.limit is not None:
        options.limit = args.limit
    return options


def _progress(message: str) -> None:
    print(f"[eval] {message}", file=sys.stderr, flush=True)


def _evaluate(args: argparse.Namespace, options: EvalOptions) -> EvalRun:
    from codeloupe.eval.golden import load_golden, load_swebench
    from codeloupe.eval.runner import EvalError, corpus_repo, run_golden, run_swebench

    if args.golden.suffix == ".jsonl":
        instances = load_swebench(args.golden)
        if args.corpus:
            instances = [i for i in instances if i.id in set(args.corpus)]
        return run_swebench(instances, options, str(args.golden), _progress)
    if args.corpora is None:
        raise CliError("--corpora DIR is needed for a golden set (where fetch_corpora.sh put the corpora)")
    golden = load_golden(args.golden)
    selected = [golden.corpus(cid).id for cid in args.corpus] or [c.id for c in golden.corpora]
    for corpus_id in selected:
        try:
            corpus_repo(args.corpora, corpus_id)
        except EvalError as exc:
            raise CliError(f"{exc}; {_fetch_hint(args.golden, args.corpora, corpus_id)}") from None
    return run_golden(golden, args.corpora, options, selected, _progress)


def run(args: argparse.Namespace) -> int:
    from codeloupe.eval import report
    from codeloupe.eval.golden import GoldenSetError
    from codeloupe.eval.runner import EvalError
    from codeloupe.settings import SettingsError

    options = _options(args)
    try:
        result = _evaluate(args, options)
    except (GoldenSetError, EvalError, SettingsError) as exc:
        raise CliError(str(exc)) from None
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report.full_json(result), indent=1) + "\n", encoding="utf-8")
        _progress(f"per-query results written to {args.out}")
    if args.json:
        print(json.dumps(report.summary_json(result), indent=1))
    else:
        print(report.render_text(result))
    failures = gate_failures(result, args.min_r1, args.min_bundle_recall)
    for failure in failures:
        print(f"codeloupe eval: gate failed: {failure}", file=sys.stderr)
    return 1 if failures else 0


def gate_failures(result: EvalRun, min_r1: float | None, min_bundle_recall: float | None) -> list[str]:
    """Why the run misses the gate; empty when it passes (or no threshold was given)."""
    from codeloupe.eval.runner import score

    if min_r1 is None and min_bundle_recall is None:
        return []
    outcomes = result.outcomes()
    total = score(outcomes)
    out = []
    if min_r1 is not None and not total.r_at_1 >= min_r1:
        out.append(f"R@1 {total.r_at_1:.3f} is below {min_r1:.3f}")
    if min_bundle_recall is not None and not total.bundle_recall >= min_bundle_recall:
        out.append(f"bundle recall {total.bundle_recall:.3f} is below {min_bundle_recall:.3f}")
    if result.options.embed:  # a gate that silently lost the dense lane measures a different engine
        blind = sum(1 for o in outcomes if "dense" not in o.lanes_ready)
        if blind:
            out.append(f"{blind} of {len(outcomes)} queries ran without the dense lane")
    return out
