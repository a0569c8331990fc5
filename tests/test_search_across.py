"""One ranking across repositories (`api.search_repositories`) on real SQLite indexes: every repository searched
together is scaled by one total, so a repository where fewer lanes found anything is not scaled up."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codeloupe import ranking
from codeloupe.api import Workspace, search_repositories

# Every lane finds both billing files, but for the symbol lane, which finds the first by the name the question
# names; the cli file shares no word with the question, so only the dense lane (third, below both billing files)
# and the feedback lane (which ranks each repository's rows by themselves) find it.
QUERY = "where does round_invoice_totals round the invoice totals"
BILLING = {
    "billing/rounding.py": "def round_invoice_totals(invoice):\n"
                           "    # invoice totals are rounded to cents here\n"
                           "    return round(invoice.total, 2)\n",
    "billing/totals.py": "def sum_lines(invoice):\n"
                         "    # invoice totals: the lines summed before they are rounded\n"
                         "    return sum(invoice.lines)\n",
}
CLI = {"cli/wrap.py": "def wrap_text(text, width):\n    return textwrap.fill(text, width)\n"}


def _vector(text: str) -> list[float]:
    """The question and the rounding code on one direction, the totals near it, the cli's wrapping further off."""
    if text == QUERY or "round_invoice_totals" in text:
        return [1.0, 0.0, 0.0, 0.0]
    if "sum_lines" in text:
        return [0.9, 0.436, 0.0, 0.0]
    if "wrap_text" in text:
        return [0.8, 0.6, 0.0, 0.0]
    return [0.0, 1.0, 0.0, 0.0]


def _indexed(root: Path, files: dict[str, str], server_url: str) -> Workspace:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    ws = Workspace(root, overrides={"embed_provider": "openai", "embed_base_url": server_url,
                                    "embed_model": "scripted-embed", "embed_dimensions": 4})
    ws.index()
    ws.embed()
    return ws


def test_a_repository_fewer_lanes_answer_in_is_not_scaled_above_one_every_lane_ranks_first(tmp_path: Path) -> None:
    """Each repository's scores were divided by the weight of the lanes that found rows in it: the cli file,
    third in the dense lane and first in its own feedback lane, came out at 0.98 of a perfect score and
    outranked billing's totals file, which every lane but the symbol lane ranks second (click's files above
    express's router for `router`, found walking the README)."""
    from chat_server import ChatServer

    with ChatServer(embedder=_vector) as server:
        billing = _indexed(tmp_path / "billing", BILLING, server.base_url)
        cli = _indexed(tmp_path / "cli", CLI, server.base_url)
        try:
            bundle = search_repositories([billing, cli], QUERY)
        finally:
            billing.close()
            cli.close()
    ranked = [(h.repository, h.path) for h in bundle.files]
    assert ranked == [("billing", "billing/rounding.py"), ("billing", "billing/totals.py"), ("cli", "cli/wrap.py")]
    wrap = bundle.files[2]
    assert "dense #3" in wrap.why and "feedback #1" in wrap.why and "bm25" not in wrap.why


def test_a_lane_call_that_found_nothing_keeps_the_peers_next_calls_matched() -> None:
    """An issue's variants call each lane once each, and a peer's calls are matched to ours by their order. A call
    that found nothing here was not recorded, so the next variant's rows were ranked among the peer's rows of the
    variant before: here billing's match of the title, above the cli's, was ranked second, below the cli's match
    of the report's full text."""
    from codeloupe.search import Fusion

    cli = Fusion(np.array([0, 1]))
    cli.add_lane("symbol", [0], 1.0, record=True, scores=np.array([5.0, 0.0]))  # the full text: a strong match
    cli.add_lane("symbol", [1], 1.0, record=True, scores=np.array([0.0, 1.0]))  # the title: a weak one
    billing = Fusion(np.array([7]), peers=[cli.scores])
    billing.add_lane("symbol", [], 1.0, record=True, scores=np.array([0.0]))  # the full text: nothing
    billing.add_lane("symbol", [0], 1.0, record=True, scores=np.array([3.0]))  # the title: above the cli's 1.0
    assert billing.chunk_ranks["symbol"] == {0: 1} and billing.file_ranks["symbol"] == {7: 1}
    assert billing.chunk[0] == np.float32(1.0 / (ranking.RRF_K + 1))
