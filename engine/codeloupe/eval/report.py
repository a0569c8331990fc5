"""Turn an `EvalRun` into tables (Markdown, readable in a terminal and pasteable into a README) and JSON."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from codeloupe.eval.golden import KINDS
from codeloupe.eval.runner import ALL_LANES, LANES, EvalRun, QueryOutcome, Scores, finite_or_none, score

ALL = "all"  # the label of a row that pools every corpus or every kind


@dataclasses.dataclass(frozen=True)
class Row:
    corpus: str
    kind: str
    scores: Scores


def _kinds_in(outcomes: Sequence[QueryOutcome]) -> list[str]:
    present = {o.kind for o in outcomes}
    return [k for k in KINDS if k in present] + sorted(present - set(KINDS))


def summary_rows(outcomes: Sequence[QueryOutcome]) -> list[Row]:
    """Per corpus: one row per kind, then its `all` row; then the same pooled over every corpus."""
    corpora = list(dict.fromkeys(o.corpus for o in outcomes))
    rows = []
    groups = [(c, [o for o in outcomes if o.corpus == c]) for c in corpora]
    if len(corpora) > 1:
        groups.append((ALL, list(outcomes)))
    for corpus, members in groups:
        for kind in _kinds_in(members):
            rows.append(Row(corpus, kind, score([o for o in members if o.kind == kind])))
        rows.append(Row(corpus, ALL, score(members)))
    return rows


def _num(value: float, digits: int = 3) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def _markdown(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *body, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body)])


_SCORE_HEADER = ("n", "R@1", "Acc@5", "bundle recall", "symbol hit@5", "MRR", "p50 ms", "p95 ms")


def _score_cells(s: Scores) -> list[str]:
    return [str(s.n), _num(s.r_at_1), _num(s.acc_at_5), _num(s.bundle_recall),
            _num(s.symbol_hit_at_5) + (f" ({s.symbol_n})" if s.symbol_n and s.symbol_n != s.n else ""),
            _num(s.mrr), _num(s.p50_ms, 1), _num(s.p95_ms, 1)]


def summary_table(outcomes: Sequence[QueryOutcome]) -> str:
    """The per corpus / per kind table (symbol hit@5 shows its own n when fewer queries carry symbols)."""
    return _markdown(("corpus", "kind", *_SCORE_HEADER),
                     [[r.corpus, r.kind, *_score_cells(r.scores)] for r in summary_rows(outcomes)])


def lanes_table(run: EvalRun) -> str:
    """The ablation: each lane alone against the fused engine, pooled over every corpus, with R@1 per corpus."""
    corpora = [r.corpus for r in run.runs]
    header = ("lanes", *_SCORE_HEADER, *(f"R@1 {c}" for c in corpora))
    body = []
    for lane in (ALL_LANES, *LANES):
        outcomes = run.outcomes(lane)
        if not outcomes:
            continue
        per_corpus = [_num(score([o for o in outcomes if o.corpus == c]).r_at_1) for c in corpora]
        body.append([lane if lane != ALL_LANES else "fused (all)", *_score_cells(score(outcomes)), *per_corpus])
    return _markdown(header, body)


def index_table(run: EvalRun) -> str:
    return _markdown(("corpus", "files", "chunks", "index s", "embed s"),
                     [[r.corpus, str(r.files), str(r.chunks), f"{r.index_s:.1f}", f"{r.embed_s:.1f}"]
                      for r in run.runs])


def render_text(run: EvalRun) -> str:
    parts = [f"golden set: {run.source}", "", index_table(run), "", summary_table(run.outcomes())]
    if run.options.lanes_ablation:
        parts += ["", "lane ablation (each lane alone):", "", lanes_table(run)]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------- JSON


def scores_json(s: Scores) -> dict[str, Any]:
    return {k: finite_or_none(v) if isinstance(v, float) else v for k, v in dataclasses.asdict(s).items()}


def outcome_json(o: QueryOutcome) -> dict[str, Any]:
    return {
        "corpus": o.corpus, "id": o.id, "kind": o.kind, "lane": o.lane, "mode": o.mode, "query": o.query,
        "gold_files": o.gold_files, "gold_ranks": o.gold_ranks, "top5": o.top,
        "r_at_1": o.r_at_1, "acc_at_5": o.acc_at_5, "bundle_recall": o.bundle_recall,
        "reciprocal_rank": o.reciprocal_rank, "symbol_hit_at_5": o.symbol_hit, "gold_symbols": o.gold_symbols,
        "symbol_match": dataclasses.asdict(o.symbol_match) if o.symbol_match else None,
        "bundle_files": o.ranked_files, "core_files": o.core_files, "lanes_ready": o.lanes_ready,
        "latency_ms": round(o.latency_ms, 3),
    }


def summary_json(run: EvalRun) -> dict[str, Any]:
    result: dict[str, Any] = {
        "source": run.source,
        "options": {k: v for k, v in dataclasses.asdict(run.options).items() if k != "overrides"},
        "corpora": [{"corpus": r.corpus, "repo": r.repo, "files": r.files, "chunks": r.chunks,
                     "index_s": round(r.index_s, 3), "embed_s": round(r.embed_s, 3)} for r in run.runs],
        "scores": [{"corpus": row.corpus, "kind": row.kind, **scores_json(row.scores)}
                   for row in summary_rows(run.outcomes())],
    }
    if run.options.lanes_ablation:
        result["lanes"] = {lane: [{"corpus": row.corpus, "kind": row.kind, **scores_json(row.scores)}
                                  for row in summary_rows(run.outcomes(lane)) if row.kind == ALL]
                           for lane in (ALL_LANES, *LANES) if run.outcomes(lane)}
    return result


def full_json(run: EvalRun) -> dict[str, Any]:
    """The summary plus every query's outcome (every lane), so each score can be audited."""
    queries = [outcome_json(o) for lane in (ALL_LANES, *LANES) for o in run.outcomes(lane)]
    return {**summary_json(run), "queries": queries}
