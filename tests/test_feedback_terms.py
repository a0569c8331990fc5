"""The feedback lane's term sets: the same terms as tokenising the chunk, and never a previous index's."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

from codeloupe.api import Workspace
from codeloupe.lanes.tokens import term_set, tokenize


def test_a_term_set_is_the_set_of_the_tokens() -> None:
    text = ("def parseHTTPHeaders(raw_bytes, *, max_line=8190):\n    # Parse headers; parse them twice? parse_headers\n"
            "    blob = 'x" + "a" * 80 + "'\n    return HTTPHeaders.from_lines(raw_bytes.split(b'\\r\\n'))\n")
    assert term_set(text) == set(tokenize(text))


def test_feedback_reads_the_chunk_as_it_is_now(tmp_path: Path,
                                                lexical_workspace: Callable[[Path], Workspace]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "ledger.py").write_text("def ledger_total(rows):\n    return sum(rows)\n")
    ws = lexical_workspace(repo)
    searcher = ws.searcher()
    before = searcher.snapshot()
    row = before.file_chunk_rows[before.path_to_file["ledger.py"]][0]
    assert "ledger" in before.terms_of([row])[0] and before.terms_of([row])[0] is before.terms_of([row])[0]  # kept
    # Kept where the garbage collector does not walk them at every full pass of a long session.
    gc.collect()
    assert not gc.is_tracked(before.terms_of([row])[0])
    assert sorted(before.terms_of([row])[0]) == sorted(term_set("def ledger_total(rows):\n    return sum(rows)\n"))
    (repo / "ledger.py").write_text("def journal_total(rows):\n    return sum(rows)\n")
    ws.index()
    searcher.refresh()
    after = searcher.snapshot()
    row = after.file_chunk_rows[after.path_to_file["ledger.py"]][0]
    assert "journal" in after.terms_of([row])[0] and "ledger" not in after.terms_of([row])[0]
