"""Run a golden set through the real engine and return typed, auditable results.

Per corpus: open a `Workspace` on the fetched tree, index it, compute vectors (unless embedding is off),
run one warm-up query per search mode (model load, matrix load and first-call costs stay out of the
numbers), then time `Workspace.search` alone for each query. With `lanes_ablation` every query is run
again once per lane through `Searcher.search(..., lanes=(lane,))`, which restricts the fused lanes to the
one named. Printing lives in `codeloupe.eval.report`; nothing here writes to stdout.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codeloupe.api import Workspace
from codeloupe.eval import metrics
from codeloupe.eval.golden import GoldenCorpus, GoldenSet, SweInstance
from codeloupe.search import LANES  # the lanes `Searcher.search(lanes=...)` can be restricted to
from codeloupe.types import Bundle

ALL_LANES = "all"  # the label of the unrestricted engine in per-lane results
TOP_K = 5
# Synthetic warm-up text: never a golden query, long enough to touch every lane.
WARMUP_QUERY = "where is the request handler configured and how are its errors reported to the caller"
_API_LIMIT: int = inspect.signature(Workspace.search).parameters["limit"].default

LogFn = Callable[[str], None]


class EvalError(RuntimeError):
    """The evaluation cannot run: a corpus or an instance tree is missing."""


@dataclass
class EvalOptions:
    embed: bool = True  # False: no vectors, embed provider "none" (lexical lanes only)
    lanes_ablation: bool = False
    limit: int = _API_LIMIT
    code_mode: str = "code"
    docs_mode: str = "docs"  # the search mode for queries of kind "docs"
    kinds: tuple[str, ...] = ()  # empty: every kind
    overrides: dict[str, Any] = field(default_factory=dict)  # settings overrides for every Workspace

    def mode_for(self, kind: str) -> str:
        return self.docs_mode if kind == "docs" else self.code_mode

    def workspace_overrides(self) -> dict[str, Any]:
        return {**self.overrides, **({} if self.embed else {"embed_provider": "none"})}


@dataclass
class QueryOutcome:
    """One query's result, with everything needed to audit its scores."""

    corpus: str
    id: str
    kind: str
    query: str
    mode: str
    lane: str  # ALL_LANES, or the single lane the search was restricted to
    gold_files: list[str]
    gold_symbols: list[str]
    ranked_files: list[str]  # the bundle's file ranking: CORE then RELATED
    core_files: int
    gold_ranks: dict[str, int | None]
    symbol_match: metrics.SymbolMatch | None
    lanes_ready: list[str]
    latency_ms: float

    @property
    def top(self) -> list[str]:
        return self.ranked_files[:TOP_K]

    @property
    def r_at_1(self) -> bool:
        return metrics.hit_at_1(self.ranked_files, self.gold_files)

    @property
    def acc_at_5(self) -> bool:
        return metrics.all_in_top_k(self.ranked_files, self.gold_files, TOP_K)

    @property
    def bundle_recall(self) -> bool:
        return metrics.all_in_bundle(self.ranked_files, self.gold_files)

    @property
    def reciprocal_rank(self) -> float:
        return metrics.reciprocal_rank(self.ranked_files, self.gold_files)

    @property
    def symbol_hit(self) -> bool | None:
        """None when the query has no gold symbols (it does not count towards symbol hit@5)."""
        if not self.gold_symbols:
            return None
        return self.symbol_match is not None and self.symbol_match.rank <= TOP_K


@dataclass(frozen=True)
class Scores:
    n: int
    r_at_1: float
    acc_at_5: float
    bundle_recall: float
    mrr: float
    symbol_hit_at_5: float  # NaN when no query of the group has gold symbols
    symbol_n: int
    bundle_files_mean: float
    p50_ms: float
    p95_ms: float


def score(outcomes: Sequence[QueryOutcome]) -> Scores:
    symbol_hits = [o.symbol_hit for o in outcomes if o.symbol_hit is not None]
    latencies = [o.latency_ms for o in outcomes]
    return Scores(
        n=len(outcomes),
        r_at_1=metrics.mean([float(o.r_at_1) for o in outcomes]),
        acc_at_5=metrics.mean([float(o.acc_at_5) for o in outcomes]),
        bundle_recall=metrics.mean([float(o.bundle_recall) for o in outcomes]),
        mrr=metrics.mean([o.reciprocal_rank for o in outcomes]),
        symbol_hit_at_5=metrics.mean([float(h) for h in symbol_hits]),
        symbol_n=len(symbol_hits),
        bundle_files_mean=metrics.mean([float(len(o.ranked_files)) for o in outcomes]),
        p50_ms=metrics.percentile(latencies, 50),
        p95_ms=metrics.percentile(latencies, 95),
    )


@dataclass
class CorpusRun:
    corpus: str
    repo: str
    files: int
    chunks: int
    index_s: float
    embed_s: float
    outcomes: list[QueryOutcome]  # the unrestricted engine
    lane_outcomes: dict[str, list[QueryOutcome]] = field(default_factory=dict)  # lane -> outcomes


@dataclass
class EvalRun:
    source: str  # the golden-set or JSONL path
    options: EvalOptions
    runs: list[CorpusRun] = field(default_factory=list)

    def outcomes(self, lane: str = ALL_LANES) -> list[QueryOutcome]:
        if lane == ALL_LANES:
            return [o for run in self.runs for o in run.outcomes]
        return [o for run in self.runs for o in run.lane_outcomes.get(lane, [])]


# ------------------------------------------------------------------------------------------- running


def outcome_of(bundle: Bundle, *, corpus: str, query_id: str, kind: str, query: str, mode: str, lane: str,
               gold_files: Sequence[str], gold_symbols: Sequence[str], latency_ms: float) -> QueryOutcome:
    """Score one bundle against its labels."""
    ranked = [hit.path for hit in bundle.files]
    return QueryOutcome(
        corpus=corpus, id=query_id, kind=kind, query=query, mode=mode, lane=lane,
        gold_files=list(gold_files), gold_symbols=list(gold_symbols), ranked_files=ranked,
        core_files=len(bundle.core), gold_ranks=metrics.gold_ranks(ranked, gold_files),
        symbol_match=metrics.first_symbol_match(metrics.ranked_chunks(bundle), set(gold_files), gold_symbols),
        lanes_ready=[status.name for status in bundle.lanes if status.ready], latency_ms=latency_ms,
    )


def corpus_repo(corpora_dir: Path, corpus_id: str) -> Path:
    """Where `fetch_corpora.sh` put a corpus: DIR/<id>/repo."""
    repo = Path(corpora_dir) / corpus_id / "repo"
    if not repo.is_dir():
        raise EvalError(f"corpus {corpus_id!r} not found at {repo}")
    return repo


class _WarmWorkspace:
    """A workspace indexed, embedded and warmed up for `modes`; `search` times one query."""

    def __init__(self, repo: Path, options: EvalOptions, log: LogFn, modes: Iterable[str]) -> None:
        self.options = options
        self.ws = Workspace(repo, overrides=options.workspace_overrides())
        try:
            report = self.ws.index()
            self.files, self.chunks, self.index_s = report.files_seen, report.chunks, report.elapsed_s
            log(f"{repo}: {report.files_seen} files, {report.chunks} chunks indexed in {report.elapsed_s:.1f}s")
            started = time.perf_counter()
            if options.embed:
                self.ws.embed()
            self.embed_s = time.perf_counter() - started
            if options.embed:
                log(f"{repo}: vectors ready in {self.embed_s:.1f}s")
            for mode in sorted(set(modes)):
                self.search(WARMUP_QUERY, mode, ALL_LANES)
                if options.lanes_ablation:
                    for lane in LANES:
                        self.search(WARMUP_QUERY, mode, lane)
        except BaseException:
            self.ws.close()
            raise

    def search(self, query: str, mode: str, lane: str) -> tuple[Bundle, float]:
        if lane == ALL_LANES:
            started = time.perf_counter()
            bundle = self.ws.search(query, mode=mode, limit=self.options.limit)
            return bundle, (time.perf_counter() - started) * 1000.0
        searcher = self.ws.searcher()
        started = time.perf_counter()
        bundle = searcher.search(query, mode=mode, limit=self.options.limit, lanes=(lane,))
        return bundle, (time.perf_counter() - started) * 1000.0

    def close(self) -> None:
        self.ws.close()


def _lanes_to_run(options: EvalOptions) -> tuple[str, ...]:
    return (ALL_LANES, *LANES) if options.lanes_ablation else (ALL_LANES,)


def run_corpus(corpus: GoldenCorpus, repo: Path, options: EvalOptions, log: LogFn = lambda _: None) -> CorpusRun:
    queries = [q for q in corpus.queries if not options.kinds or q.kind in options.kinds]
    warm = _WarmWorkspace(repo, options, log, (options.mode_for(q.kind) for q in queries))
    try:
        by_lane: dict[str, list[QueryOutcome]] = {}
        for lane in _lanes_to_run(options):
            results = by_lane.setdefault(lane, [])
            for q in queries:
                mode = options.mode_for(q.kind)
                bundle, ms = warm.search(q.query, mode, lane)
                results.append(outcome_of(bundle, corpus=corpus.id, query_id=q.id, kind=q.kind, query=q.query,
                                          mode=mode, lane=lane, gold_files=q.gold_files,
                                          gold_symbols=q.gold_symbols, latency_ms=ms))
        run = CorpusRun(corpus=corpus.id, repo=str(repo), files=warm.files, chunks=warm.chunks,
                        index_s=warm.index_s, embed_s=warm.embed_s, outcomes=by_lane.pop(ALL_LANES),
                        lane_outcomes=by_lane)
    finally:
        warm.close()
    s = score(run.outcomes)
    log(f"{corpus.id}: R@1 {s.r_at_1:.3f}  Acc@5 {s.acc_at_5:.3f}  bundle {s.bundle_recall:.3f}  "
        f"p50 {s.p50_ms:.1f} ms")
    return run


def run_golden(golden: GoldenSet, corpora_dir: Path, options: EvalOptions, corpus_ids: Sequence[str] = (),
               log: LogFn = lambda _: None) -> EvalRun:
    """Every (selected) corpus of a golden set; missing corpora are reported before anything runs."""
    corpora = [golden.corpus(cid) for cid in corpus_ids] if corpus_ids else list(golden.corpora)
    repos = [corpus_repo(corpora_dir, c.id) for c in corpora]
    result = EvalRun(source=str(golden.path), options=options)
    for corpus, repo in zip(corpora, repos, strict=True):
        result.runs.append(run_corpus(corpus, repo, options, log))
    return result


def run_swebench(instances: Sequence[SweInstance], options: EvalOptions, source: str,
                 log: LogFn = lambda _: None) -> EvalRun:
    """SWE-bench style: each instance is searched in its own tree (indexed, embedded, warmed up first)."""
    missing = [str(i.repo) for i in instances if not i.repo.is_dir()]
    if missing:
        raise EvalError(f"instance tree(s) not found: {', '.join(missing[:5])}"
                        + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    result = EvalRun(source=source, options=options)
    for instance in instances:
        if options.kinds and instance.kind not in options.kinds:
            continue
        mode = options.mode_for(instance.kind)
        warm = _WarmWorkspace(instance.repo, options, log, [mode])
        try:
            by_lane = {}
            for lane in _lanes_to_run(options):
                bundle, ms = warm.search(instance.query, mode, lane)
                by_lane[lane] = [outcome_of(bundle, corpus=instance.id, query_id=instance.id, kind=instance.kind,
                                            query=instance.query, mode=mode, lane=lane,
                                            gold_files=instance.gold_files, gold_symbols=(), latency_ms=ms)]
            result.runs.append(CorpusRun(corpus=instance.id, repo=str(instance.repo), files=warm.files,
                                         chunks=warm.chunks, index_s=warm.index_s, embed_s=warm.embed_s,
                                         outcomes=by_lane.pop(ALL_LANES), lane_outcomes=by_lane))
        finally:
            warm.close()
    return result


def finite_or_none(value: float) -> float | None:
    """JSON has no NaN: an undefined metric (no latencies, no symbol labels) is written as null."""
    return None if math.isnan(value) else value
