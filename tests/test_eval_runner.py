"""The evaluation runner and `codeloupe eval` end to end: the real indexer and search over a tiny repo.

Embedding is off (provider "none"), so the run is fast and deterministic; the golden set below is written
so that lexical and symbol lanes alone must answer it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeloupe.cli import main
from codeloupe.eval import EvalOptions, GoldenSetError, load_golden, load_swebench, run_golden, run_swebench
from codeloupe.eval.report import render_text, summary_json

FILES = {
    "shop/payments.py": '''\
"""Card payments: charge a card and refund a charge."""


class PaymentGateway:
    def charge_card(self, card_number, amount_cents):
        """Charge a credit card; raises DeclinedError when the issuer refuses."""
        if amount_cents <= 0:
            raise ValueError("amount must be positive")
        return {"card": card_number[-4:], "amount": amount_cents}

    def refund_charge(self, charge_id):
        return {"refunded": charge_id}
''',
    "shop/inventory.py": '''\
"""Warehouse stock levels."""

STOCK = {}


def reserve_stock(sku, quantity):
    """Take quantity units of sku out of the warehouse stock."""
    available = STOCK.get(sku, 0)
    if available < quantity:
        raise LookupError(f"only {available} of {sku} left")
    STOCK[sku] = available - quantity


def restock(sku, quantity):
    STOCK[sku] = STOCK.get(sku, 0) + quantity
''',
    "shop/emails.py": '''\
"""Customer e-mails."""


def send_receipt(address, order):
    body = f"Thanks for order {order}"
    return address, body
''',
    "docs/deploying.md": '''\
# Deploying the shop

Run the shop behind a reverse proxy. Set SHOP_SECRET before starting the server,
and run database migrations with `shop migrate`.
''',
}

GOLDEN = {
    "corpora": [{
        "id": "tiny", "registry": "pypi", "name": "tiny", "version": "0", "root": "tiny", "sha256": "0" * 64,
        "queries": [
            {"id": "tiny-1", "kind": "short", "query": "where is a credit card charged and refunded",
             "gold_files": ["shop/payments.py"], "gold_symbols": ["PaymentGateway.charge_card"], "note": ""},
            {"id": "tiny-2", "kind": "symbol", "query": "reserve_stock",
             "gold_files": ["shop/inventory.py"], "gold_symbols": ["reserve_stock"], "note": ""},
            {"id": "tiny-3", "kind": "docs", "query": "how to deploy the shop behind a reverse proxy",
             "gold_files": ["docs/deploying.md"], "gold_symbols": [], "note": ""},
        ],
    }],
}


@pytest.fixture()
def corpora(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODELOUPE_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "corpora" / "tiny" / "repo"
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    return tmp_path / "corpora"


@pytest.fixture()
def golden_file(tmp_path: Path) -> Path:
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(GOLDEN), encoding="utf-8")
    return path


def test_runner_scores_a_tiny_golden_set_with_the_real_engine(corpora: Path, golden_file: Path):
    run = run_golden(load_golden(golden_file), corpora, EvalOptions(embed=False))
    (corpus_run,) = run.runs
    assert corpus_run.corpus == "tiny" and corpus_run.files == len(FILES)
    by_id = {o.id: o for o in run.outcomes()}
    assert set(by_id) == {"tiny-1", "tiny-2", "tiny-3"}
    assert by_id["tiny-1"].gold_ranks == {"shop/payments.py": 1}
    assert by_id["tiny-1"].symbol_hit is True
    assert by_id["tiny-1"].symbol_match.symbol == "PaymentGateway.charge_card"
    assert by_id["tiny-2"].ranked_files[0] == "shop/inventory.py" and by_id["tiny-2"].symbol_hit
    assert by_id["tiny-3"].mode == "docs" and by_id["tiny-3"].top[0] == "docs/deploying.md"
    assert by_id["tiny-3"].symbol_hit is None  # no symbol labels: not counted
    assert all("dense" not in o.lanes_ready and "lexical" in o.lanes_ready for o in by_id.values())
    assert all(o.latency_ms > 0 for o in by_id.values())
    table = render_text(run)
    assert "| tiny" in table and "R@1" in table


def test_kind_filter_and_lane_ablation(corpora: Path, golden_file: Path):
    run = run_golden(load_golden(golden_file), corpora,
                     EvalOptions(embed=False, lanes_ablation=True, kinds=("symbol",)))
    assert [o.id for o in run.outcomes()] == ["tiny-2"]
    lexical = run.outcomes("lexical")
    assert [o.lane for o in lexical] == ["lexical"] and lexical[0].ranked_files[0] == "shop/inventory.py"
    summary = summary_json(run)
    assert "lexical" in summary["lanes"] and summary["lanes"]["lexical"][0]["r_at_1"] == 1.0


def test_cli_writes_auditable_per_query_results(corpora: Path, golden_file: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "results" / "tiny.json"
    status = main(["eval", str(golden_file), "--corpora", str(corpora), "--no-embed", "--json",
                   "--out", str(out)])
    assert status == 0
    printed = json.loads(capsys.readouterr().out)
    overall = [row for row in printed["scores"] if row["corpus"] == "tiny" and row["kind"] == "all"]
    assert overall[0]["n"] == 3 and overall[0]["bundle_recall"] == 1.0
    saved = json.loads(out.read_text(encoding="utf-8"))
    first = next(q for q in saved["queries"] if q["id"] == "tiny-1")
    assert first["gold_ranks"] == {"shop/payments.py": 1}
    assert first["top5"][0] == "shop/payments.py" and first["symbol_match"]["path"] == "shop/payments.py"
    assert "lexical" in first["lanes_ready"] and first["latency_ms"] > 0


def test_cli_names_the_fetch_script_when_a_corpus_is_missing(tmp_path: Path, golden_file: Path,
                                                             capsys: pytest.CaptureFixture[str]):
    (golden_file.parent / "fetch_corpora.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    status = main(["eval", str(golden_file), "--corpora", str(tmp_path / "nowhere"), "--no-embed"])
    assert status == 2
    err = capsys.readouterr().err
    assert "corpus 'tiny' not found" in err and "fetch_corpora.sh" in err and "tiny" in err


def test_cli_rejects_an_unknown_corpus_and_kind(corpora: Path, golden_file: Path,
                                               capsys: pytest.CaptureFixture[str]):
    assert main(["eval", str(golden_file), "--corpora", str(corpora), "--corpus", "nope"]) == 2
    assert "no corpus 'nope'" in capsys.readouterr().err
    assert main(["eval", str(golden_file), "--corpora", str(corpora), "--kinds", "vague"]) == 2
    assert "unknown kind" in capsys.readouterr().err


def test_malformed_golden_sets_name_the_entry(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"corpora": [{"id": "x", "queries": [{"id": "q", "kind": "vague", "query": "?",
                                                                     "gold_files": ["a.py"]}]}]}))
    with pytest.raises(GoldenSetError, match=r"corpora\[0\] \(x\) query 0: kind 'vague'"):
        load_golden(bad)
    bad.write_text(json.dumps({"corpora": [{"id": "x", "queries": [{"id": "q", "kind": "short", "query": "?",
                                                                     "gold_files": []}]}]}))
    with pytest.raises(GoldenSetError, match="'gold_files' is empty"):
        load_golden(bad)
    bad.write_text("{not json")
    with pytest.raises(GoldenSetError, match="cannot read as JSON"):
        load_golden(bad)


def test_swebench_mode_searches_each_instance_in_its_own_tree(corpora: Path, tmp_path: Path):
    jsonl = tmp_path / "instances.jsonl"
    jsonl.write_text("\n".join([
        "# one tree, two issues",
        json.dumps({"id": "inst-1", "query": "LookupError: only 0 of sku-9 left when reserving stock",
                    "gold_files": ["shop/inventory.py"], "repo": "corpora/tiny/repo"}),
        "",
        json.dumps({"id": "inst-2", "query": "receipt e-mail body is missing the order number",
                    "gold_files": ["shop/emails.py"], "repo": str(corpora / "tiny" / "repo")}),
    ]), encoding="utf-8")
    instances = load_swebench(jsonl)
    assert [i.id for i in instances] == ["inst-1", "inst-2"]
    assert instances[0].repo == corpora / "tiny" / "repo"  # relative to the JSONL file's folder
    run = run_swebench(instances, EvalOptions(embed=False), str(jsonl))
    assert [r.corpus for r in run.runs] == ["inst-1", "inst-2"]
    assert {o.id: o.ranked_files[0] for o in run.outcomes()} == {"inst-1": "shop/inventory.py",
                                                                 "inst-2": "shop/emails.py"}


def test_swebench_lines_without_gold_files_are_refused(tmp_path: Path):
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text(json.dumps({"id": "x", "query": "q", "repo": "."}) + "\n", encoding="utf-8")
    with pytest.raises(GoldenSetError, match=r"bad.jsonl:1: 'gold_files'"):
        load_swebench(jsonl)


def test_the_gate_fails_below_its_thresholds_and_still_prints_the_table(corpora: Path, golden_file: Path,
                                                                         capsys: pytest.CaptureFixture[str]):
    args = ["eval", str(golden_file), "--corpora", str(corpora), "--no-embed"]
    assert main([*args, "--min-r1", "1.0", "--min-bundle-recall", "1.0"]) == 0
    assert "gate failed" not in capsys.readouterr().err
    wrong = json.loads(golden_file.read_text(encoding="utf-8"))
    wrong["corpora"][0]["queries"][1]["gold_files"] = ["shop/missing.py"]  # no engine can find it
    golden_file.write_text(json.dumps(wrong), encoding="utf-8")
    assert main([*args, "--min-r1", "0.88", "--min-bundle-recall", "1.0"]) == 1
    captured = capsys.readouterr()
    assert "| all" in captured.out
    assert "R@1 0.667 is below 0.880" in captured.err and "bundle recall 0.667 is below 1.000" in captured.err


def test_the_gate_refuses_a_run_that_lost_the_dense_lane(corpora: Path, golden_file: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("CODELOUPE_EMBED_PROVIDER", "none")  # vectors asked for, none can be computed
    assert main(["eval", str(golden_file), "--corpora", str(corpora), "--min-r1", "0.5"]) == 1
    assert "3 of 3 queries ran without the dense lane" in capsys.readouterr().err
