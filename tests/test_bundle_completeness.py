"""Rule 2 on a real index: the bundle keeps every lane's short list and the code CORE's matched chunks reach."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from codeloupe import ranking
from codeloupe.api import Workspace


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_every_file_a_lane_shortlists_stays_past_the_limit(tmp_path: Path,
                                                           lexical_workspace: Callable[[Path], Workspace]) -> None:
    files = {f"ledger/book_{i}.py": f"def ledger_total_{i}(rows):\n    return sum(rows) * {i}\n" for i in range(6)}
    ws = lexical_workspace(write(tmp_path / "repo", files))
    bundle = ws.search("ledger total", limit=2)
    assert sorted(h.path for h in bundle.files) == sorted(files)
    assert [h.rank for h in bundle.files] == list(range(1, 7))


def test_the_callee_of_a_matched_chunk_joins_related_however_many_neighbours(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace], monkeypatch: pytest.MonkeyPatch) -> None:
    # feedback would find the callee by its name in the matched chunk, and the summary lane by the name of its
    # caller (tests/test_graph_evidence.py); here only the graph may bring it
    monkeypatch.setitem(ranking.LANE_WEIGHTS_NATURAL, "feedback", 0.0)
    monkeypatch.setitem(ranking.LANE_WEIGHTS_NATURAL, "summary", 0.0)
    unrelated = {f"app/aux_{i}.py": f"def aux_{i}():\n    return {i}\n" for i in range(10)}
    imports = "\n".join(f"from app.aux_{i} import aux_{i}" for i in range(10))
    calls = " + ".join(f"aux_{i}()" for i in range(10))
    api = (f"from app.quantities import clamp_amounts\n{imports}\n\n\n"
           "def submit_order(order):\n    \"\"\"Submit an order to the warehouse.\"\"\"\n"
           "    return clamp_amounts(order)\n\n\n"
           f"def housekeeping():\n    return {calls}\n")
    ws = lexical_workspace(write(tmp_path / "repo", {
        **unrelated, "app/__init__.py": "", "app/api.py": api,
        "app/quantities.py": "def clamp_amounts(items):\n    return [max(0, n) for n in items]\n",
    }))
    bundle = ws.search("submit an order to the warehouse")
    assert bundle.core[0].path == "app/api.py"
    linked = {h.path: h for h in bundle.related if h.via == "graph"}
    assert "app/quantities.py" in linked
    assert linked["app/quantities.py"].why == "clamp_amounts called from app/api.py"


def test_a_question_about_versions_brings_the_docs_and_manifests(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    ws = lexical_workspace(write(tmp_path / "repo", {
        "README.md": "# Relay\n\n## Compatibility\n\nRelay runs on Node 18 and later; Node 16 is not supported.\n",
        "package.json": '{"name": "relay", "engines": {"node": ">=18"}, "dependencies": {"ws": "^8"}}\n',
        "lib/relay.js": "function relay(socket) {\n  return socket.pipe(socket);\n}\nmodule.exports = relay;\n",
        "lib/node.js": "function nodeOf(tree, id) {\n  return tree.nodes[id];\n}\nmodule.exports = nodeOf;\n",
    }))
    bundle = ws.search("which node versions are supported")
    found = {h.path: h.why for h in bundle.files}
    assert "docs & manifests" in found["README.md"] and "docs & manifests" in found["package.json"]
    assert bundle.core[0].path != "README.md"  # a candidate source, not a vote that outranks the code
    assert "README.md" not in {h.path for h in ws.search("how is a socket relayed").files}


def test_a_file_every_lane_ranks_past_its_short_list_stays_as_a_map_entry(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    # 24 files say "ledger total" in every line; the gold file says "ledger" once in a long body, so every lane
    # ranks it last, past its top BUNDLE_LANE_TOP_K and past the limit: the old bundle dropped it.
    files = {f"ledger/book_{i:02}.py": f"def ledger_total_{i}(rows):\n    # ledger total\n    return sum(rows) * {i}\n"
             for i in range(24)}
    body = "".join(f"    step_{i} = rows[{i}] * factor\n" for i in range(40))
    files["audit/reconcile.py"] = f"def reconcile(rows, factor):\n    # compare with the ledger\n{body}    return rows\n"
    ws = lexical_workspace(write(tmp_path / "repo", files))
    bundle = ws.search("ledger total")
    ranked = [h.path for h in bundle.files]
    assert sorted(ranked) == sorted(files)  # every candidate, none twice
    assert ranked.index("audit/reconcile.py") + 1 > ranking.BUNDLE_LANE_TOP_K + ranking.CANDIDATE_FILES - 1
    assert [h.rank for h in bundle.files] == list(range(1, len(files) + 1))
    entry = next(h for h in bundle.related if h.path == "audit/reconcile.py")
    assert entry.chunks == [] and "bm25" in entry.why  # a map line: where and why, no code read
    assert (entry.best_start_line, entry.best_end_line) == (1, 43)


def test_only_the_first_limit_files_carry_a_snippet(tmp_path: Path,
                                                    lexical_workspace: Callable[[Path], Workspace]) -> None:
    files = {f"ledger/book_{i:02}.py": f"def ledger_total_{i}(rows):\n    return sum(rows) * {i}\n" for i in range(9)}
    ws = lexical_workspace(write(tmp_path / "repo", files))
    bundle = ws.search("ledger total", limit=4)
    assert len(bundle.files) == 9
    assert all(h.chunks and h.chunks[0].snippet is not None for h in bundle.files[:4])
    assert all(h.chunks == [] for h in bundle.files[4:])


def test_a_budgeted_answer_keeps_the_code_and_lists_the_long_tail_last(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    from codeloupe_mcp.sized import bundle_text

    files = {f"ledger/book_{i:02}.py": f"def ledger_total_{i}(rows):\n    # ledger total\n    return sum(rows) * {i}\n"
             for i in range(60)}
    ws = lexical_workspace(write(tmp_path / "repo", files))
    bundle = ws.search("ledger total")
    tail = [h for h in bundle.related if h.tail]
    assert tail and all(h.rank > ranking.CANDIDATE_FILES for h in tail)
    text = bundle_text(bundle, max_bytes=2500)
    assert len(text.encode()) <= 2500
    assert "return sum(rows)" in text  # CORE code is not cut to list the tail
    assert all(f"{h.rank}. `{h.path}:" in text for h in bundle.related if not h.tail)
    assert "lower-ranked candidate files not listed" in text
    assert f"{tail[0].rank}. `{tail[0].path}:" in text  # the tail fills what the budget has left, best first
    assert len(bundle_text(bundle, max_bytes=200_000).splitlines()) > len(bundle.files)  # every map line fits


def test_an_answer_folds_the_long_tail_into_one_line(tmp_path: Path,
                                                      lexical_workspace: Callable[[Path], Workspace]) -> None:
    from codeloupe.ask.render import footer_parts

    files = {f"ledger/book_{i:02}.py": f"def ledger_total_{i}(rows):\n    # ledger total\n    return sum(rows) * {i}\n"
             for i in range(60)}
    ws = lexical_workspace(write(tmp_path / "repo", files))
    bundle = ws.search("ledger total")
    tail = [h for h in bundle.files if h.tail]
    markdown = "".join(part.markdown for part in footer_parts(bundle.files))
    assert all(f"{h.path}:" in markdown for h in bundle.files if not h.tail)
    assert not any(f"{h.path}:" in markdown for h in tail)
    assert f"and {len(tail)} lower-ranked candidate files" in markdown


def test_several_folders_keep_their_long_tails_after_the_rest(
        tmp_path: Path, lexical_workspace: Callable[[Path], Workspace]) -> None:
    """Several folders searched as one ranking (what the language server answers over a multi-root workspace):
    every candidate of each stays, every long tail after the short lists and graph links, ranks 1..n."""
    from codeloupe.api import search_repositories

    workspaces = []
    for name, size in (("one", 40), ("two", 3)):
        files = {f"{name}/book_{i:02}.py": f"def ledger_total_{i}(rows):\n    # ledger total\n    return rows\n"
                 for i in range(size)}
        files[f"{name}/main.py"] = "from book_00 import ledger_total_0\n\n\ndef run():\n    return ledger_total_0([])\n"
        workspaces.append(lexical_workspace(write(tmp_path / name, files)))
    alone = {ws.repository_name: {h.path for h in ws.search("ledger total").files} for ws in workspaces}
    merged = search_repositories(workspaces, "ledger total")
    tails = [h.tail for h in merged.related]
    assert any(tails) and tails == sorted(tails)  # no tail entry before a short-list or graph entry
    assert [h.rank for h in merged.files] == list(range(1, len(merged.files) + 1))
    assert {name: {h.path for h in merged.files if h.repository == name} for name in alone} == alone


def test_the_cli_lists_the_short_list_and_counts_the_tail(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    files = {f"ledger/book_{i:02}.py": f"def ledger_total_{i}(rows):\n    # ledger total\n    return sum(rows) * {i}\n"
             for i in range(60)}
    repo = write(tmp_path / "repo", files)
    env = {**os.environ, "CODELOUPE_CACHE_DIR": str(tmp_path / "cache")}

    def search(*flags: str) -> str:
        return subprocess.run([sys.executable, "-m", "codeloupe", "search", str(repo), "ledger total", *flags,
                               "--embed-provider", "none"], capture_output=True, text=True, check=True, env=env).stdout

    listed = json.loads(search("--json"))
    tail = [f["path"] for f in listed["related"] if f["tail"]]
    assert tail and len(listed["core"]) + len(listed["related"]) == len(files)
    text = search()
    assert f"and {len(tail)} lower-ranked candidate files" in text and not any(f"{p}:" in text for p in tail)


# A long question is read as a bug report (over ISSUE_MIN_IDENTIFIERS words); the file that answers it shares no
# word with it, so only the dense lane can bring it. The loopback model puts the report and that file's text on
# one direction and everything else on another.
_REPORT_TITLE = "the cache keeps handing back stale answers"
_REPORT = (f"{_REPORT_TITLE} after the upstream service changes its mind about what a customer may see, "
           "because nothing tells the local copy that its contents went old while people were still reading them")
_VAULT = {"billing/vault.py": "def expire_entries(pool, horizon):\n    return [e for e in pool if e.born > horizon]\n"}
_NOISE = {f"billing/cache_{i}.py": f"def cache_answers_{i}(customer):\n    return customer.answers[{i}]\n"
          for i in range(4)}


def _aligned(text: str) -> list[float]:
    near = "expire_entries" in text or _REPORT_TITLE in text
    return [1.0, 0.0, 0.0, 0.0] if near else [0.0, 1.0, 0.0, 0.0]


def _embedded_workspace(root: Path, server: object) -> Workspace:
    ws = Workspace(root, overrides={"embed_provider": "openai", "embed_base_url": server.base_url,
                                    "embed_model": "scripted-embed", "embed_dimensions": 4})
    ws.index()
    ws.embed()
    return ws


def test_a_one_line_report_still_goes_through_the_dense_lane(tmp_path: Path) -> None:
    from chat_server import ChatServer

    assert len(_REPORT.split()) > ranking.ISSUE_MIN_IDENTIFIERS and "\n" not in _REPORT
    with ChatServer(embedder=_aligned) as server:
        ws = _embedded_workspace(write(tmp_path / "repo", {**_VAULT, **_NOISE}), server)
        try:
            bundle = ws.search(_REPORT)
        finally:
            ws.close()
    assert bundle.issue_mode
    vault = next(h for h in bundle.files if h.path == "billing/vault.py")  # no dense vote before: not there
    assert "dense" in vault.why


def test_a_file_only_a_reports_title_vector_ranks_stays_in_the_bundle(tmp_path: Path) -> None:
    from chat_server import ChatServer

    report = f"{_REPORT_TITLE}\n\n{_REPORT}\n"  # the title is its own variant; the full text is not embedded
    with ChatServer(embedder=_aligned) as server:
        ws = _embedded_workspace(write(tmp_path / "repo", {**_VAULT, **_NOISE}), server)
        try:
            bundle = ws.search(report, limit=1)
        finally:
            ws.close()
    assert bundle.issue_mode
    assert "billing/vault.py" in {h.path for h in bundle.files}  # its score came from the title's vector


def test_a_query_the_model_cannot_embed_is_answered_by_the_word_lanes_and_says_so(tmp_path: Path) -> None:
    """The query is embedded on the dense lane's own thread, beside the word lanes: an embedding endpoint
    that answers garbage after indexing costs the dense lane, not the search, and the bundle says why."""
    from chat_server import ChatServer

    with ChatServer(embedder=_aligned) as server:
        ws = _embedded_workspace(write(tmp_path / "repo", {**_VAULT, **_NOISE}), server)
        try:
            embedded = ws.search(_REPORT_TITLE)  # its words are the noise's: only its vector finds the vault
            assert "dense #1" in next(h.why for h in embedded.files if h.path == "billing/vault.py")
            assert embedded.timing_ms["dense_embed"] > 0 and "embed" not in embedded.timing_ms
            server.embedder = lambda text: [1.0]  # vectors of another size from now on
            bundle = ws.search("expire_entries horizon")
        finally:
            ws.close()
    assert [h.path for h in bundle.files][:1] == ["billing/vault.py"]  # the word lanes still answer
    [dense] = [s for s in bundle.lanes if s.name == "dense"]
    assert not dense.ready and "could not be embedded" in dense.note and "1-dimensional" in dense.note, dense
    assert any("could not be embedded" in note for note in bundle.notes), bundle.notes
