"""The evaluation metrics on hand-made rankings and bundles (no index needed)."""

from __future__ import annotations

import math

import pytest

from codeloupe.eval import metrics
from codeloupe.eval.runner import QueryOutcome, outcome_of, score
from codeloupe.types import Bundle, ChunkHit, FileHit, LaneStatus


def chunk(path: str, score: float, *, name: str = "", symbols: tuple[str, ...] = (), breadcrumb: str = "",
          start: int = 1, end: int = 10) -> ChunkHit:
    return ChunkHit(chunk_id=hash((path, start)) & 0xFFFF, path=path, start_line=start, end_line=end,
                    kind="function", name=name, breadcrumb=breadcrumb or path, symbols=list(symbols),
                    score=score, lanes={}, text="")


def file_hit(path: str, rank: int, chunks: list[ChunkHit]) -> FileHit:
    return FileHit(path=path, language="python", rank=rank, score=1.0 / rank, best_start_line=1,
                   best_end_line=10, symbols=[], why="", chunks=chunks)


RANKED = ["a.py", "b.py", "c.py", "d.py", "e.py", "f.py", "g.py"]


def test_file_level_metrics_on_a_hand_made_ranking():
    assert metrics.hit_at_1(RANKED, {"a.py"})
    assert not metrics.hit_at_1(RANKED, {"b.py"})
    assert not metrics.hit_at_1([], {"a.py"})
    assert metrics.all_in_top_k(RANKED, {"a.py", "e.py"}, 5)
    assert not metrics.all_in_top_k(RANKED, {"a.py", "f.py"}, 5)  # f.py is 6th
    assert metrics.all_in_bundle(RANKED, {"a.py", "g.py"})
    assert not metrics.all_in_bundle(RANKED, {"a.py", "z.py"})
    assert metrics.reciprocal_rank(RANKED, {"c.py", "f.py"}) == pytest.approx(1 / 3)
    assert metrics.reciprocal_rank(RANKED, {"z.py"}) == 0.0
    assert metrics.gold_ranks(RANKED, ["f.py", "z.py"]) == {"f.py": 6, "z.py": None}


def test_a_path_listed_twice_keeps_its_first_rank():
    assert metrics.gold_ranks(["a.py", "b.py", "a.py"], ["a.py"]) == {"a.py": 1}


@pytest.mark.parametrize(("label", "segments"), [
    ("Parameter.resolve_envvar_value", ("Parameter", "resolve_envvar_value")),
    ("Base#route!", ("Base", "route!")),
    ("Base.compile!", ("Base", "compile!")),
    ("Layer.prototype.match", ("Layer", "match")),
    ("exports.compileTrust", ("compileTrust",)),
    ("(*Engine).handleHTTPRequest", ("Engine", "handleHTTPRequest")),
    ("Sinatra::Base", ("Sinatra", "Base")),
    ("IndifferentHash#[]", ("IndifferentHash", "[]")),
    ("handle", ("handle",)),
])
def test_symbol_segments_normalise_each_languages_notation(label, segments):
    assert metrics.symbol_segments(label) == segments


def test_a_qualified_chunk_symbol_holds_a_label_it_ends_with():
    c = chunk("core.py", 1.0, name="resolve_envvar_value", symbols=("click.core.Parameter.resolve_envvar_value",))
    assert metrics.chunk_holds_symbol(c, "Parameter.resolve_envvar_value")
    assert metrics.chunk_holds_symbol(c, "resolve_envvar_value")
    assert not metrics.chunk_holds_symbol(c, "Option.resolve_envvar_value")


def test_a_different_qualifier_never_counts_even_if_the_breadcrumb_names_the_wanted_class():
    c = chunk("core.py", 1.0, name="resolve_envvar_value", symbols=("Option.resolve_envvar_value",),
              breadcrumb="core.py > class Option(Parameter) > def resolve_envvar_value(self, ctx)")
    assert not metrics.chunk_holds_symbol(c, "Parameter.resolve_envvar_value")


def test_an_unqualified_name_counts_when_the_breadcrumb_carries_the_qualifiers():
    c = chunk("base.rb", 1.0, name="route!", breadcrumb="lib/sinatra/base.rb > class Base > def route!(base)")
    assert metrics.chunk_holds_symbol(c, "Base#route!")
    assert not metrics.chunk_holds_symbol(c, "Helpers#route!")
    # whole words only: "Base" inside "BaseHelpers" is not the class Base
    c2 = chunk("base.rb", 1.0, name="route!", breadcrumb="base.rb > module BaseHelpers > def route!")
    assert not metrics.chunk_holds_symbol(c2, "Base#route!")


def test_js_prototype_methods_match_either_spelling():
    c = chunk("lib/router/layer.js", 1.0, name="Layer.prototype.match", symbols=("Layer.prototype.match",))
    assert metrics.chunk_holds_symbol(c, "Layer.prototype.match")
    c2 = chunk("lib/router/layer.js", 1.0, name="match", symbols=("Layer.match",))
    assert metrics.chunk_holds_symbol(c2, "Layer.prototype.match")


def test_ranked_chunks_order_by_score_and_keep_bundle_order_on_ties():
    first = chunk("a.py", 0.5, name="low", start=1)
    second = chunk("a.py", 0.9, name="high", start=20)
    tie = chunk("b.py", 0.5, name="tie", start=1)
    bundle = Bundle(query="q", root="/r", mode="code", issue_mode=False,
                    core=[file_hit("a.py", 1, [first, second])], related=[file_hit("b.py", 2, [tie])],
                    lanes=[], timing_ms={})
    assert [c.name for c in metrics.ranked_chunks(bundle)] == ["high", "low", "tie"]


def test_first_symbol_match_only_counts_chunks_of_gold_files():
    decoy = chunk("other.py", 0.9, name="convert", symbols=("BoolParamType.convert",))
    real = chunk("types.py", 0.5, name="convert", symbols=("BoolParamType.convert",), start=40, end=60)
    match = metrics.first_symbol_match([decoy, real], {"types.py"}, ["BoolParamType.convert"])
    assert match == metrics.SymbolMatch(rank=2, symbol="BoolParamType.convert", path="types.py",
                                        start_line=40, end_line=60)
    assert metrics.first_symbol_match([decoy], {"types.py"}, ["BoolParamType.convert"]) is None


def test_percentile_interpolates_like_numpy():
    assert metrics.percentile([10.0, 20.0, 30.0, 40.0], 50) == 25.0
    assert metrics.percentile([10.0, 20.0, 30.0, 40.0], 95) == pytest.approx(38.5)
    assert metrics.percentile([7.0], 95) == 7.0
    assert math.isnan(metrics.percentile([], 50))


def outcome(ranked: list[str], gold: list[str], *, symbols: tuple[str, ...] = (), match_rank: int | None = None,
            latency: float = 1.0, kind: str = "short") -> QueryOutcome:
    match = metrics.SymbolMatch(match_rank, symbols[0], gold[0], 1, 2) if match_rank else None
    return QueryOutcome(corpus="c", id=str(id(ranked)), kind=kind, query="q", mode="code", lane="all",
                        gold_files=gold, gold_symbols=list(symbols), ranked_files=ranked, core_files=1,
                        gold_ranks=metrics.gold_ranks(ranked, gold), symbol_match=match,
                        lanes_ready=["lexical"], latency_ms=latency)


def test_score_aggregates_a_group_of_outcomes():
    outcomes = [
        outcome(["a", "b"], ["a"], symbols=["f"], match_rank=1, latency=10.0),  # R@1, Acc@5, symbol hit
        outcome(["x", "a", "b"], ["a", "b"], symbols=["g"], match_rank=6, latency=20.0),  # symbol 6th: miss
        outcome(["x", "y", "z", "w", "v", "a"], ["a"], latency=30.0),  # bundle only; no symbol labels
        outcome(["x"], ["a"], latency=40.0),  # missed
    ]
    s = score(outcomes)
    assert s.n == 4
    assert s.r_at_1 == 0.25
    assert s.acc_at_5 == 0.5
    assert s.bundle_recall == 0.75
    assert s.mrr == pytest.approx((1 + 1 / 2 + 1 / 6 + 0) / 4)
    assert s.symbol_n == 2 and s.symbol_hit_at_5 == 0.5
    assert s.p50_ms == 25.0
    assert s.bundle_files_mean == pytest.approx((2 + 3 + 6 + 1) / 4)


def test_score_of_a_group_without_symbol_labels_leaves_symbol_hit_undefined():
    s = score([outcome(["a"], ["a"], kind="docs")])
    assert s.symbol_n == 0 and math.isnan(s.symbol_hit_at_5)


def test_lanes_ready_are_read_from_the_bundle():
    bundle = Bundle(query="q", root="/r", mode="code", issue_mode=False,
                    core=[file_hit("a.py", 1, [chunk("a.py", 0.9, name="f", symbols=("f",))])], related=[],
                    lanes=[LaneStatus("dense", False, 0.0), LaneStatus("lexical", True, 1.0)], timing_ms={})
    o = outcome_of(bundle, corpus="c", query_id="1", kind="short", query="q", mode="code", lane="all",
                   gold_files=["a.py"], gold_symbols=["f"], latency_ms=3.0)
    assert o.lanes_ready == ["lexical"]
    assert o.r_at_1 and o.symbol_hit and o.top == ["a.py"]
