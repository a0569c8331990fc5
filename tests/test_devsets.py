"""The mechanical query-set builders (bench/devsets) and the package fetcher's unpacking rules, on small trees."""

from __future__ import annotations

import ast
import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "devsets"))
import commit_pairs  # noqa: E402
import doc_pairs  # noqa: E402
import docs_pairs  # noqa: E402
from common import split_of  # noqa: E402

import packages  # noqa: E402  (bench/ is on the path through devsets/common)
from codeloupe.eval import EvalOptions, load_golden, run_golden  # noqa: E402

PY = '''import os


class Store:
    """Keeps every record in memory and flushes them to disk on demand."""

    def flush(self):
        """Write the pending records to the journal file, oldest first, and forget them."""
        return os.sync()

    def stub(self):
        """Placeholder that subclasses replace with a network transport of their own."""
'''

RUST = '''/// Parses a duration written with unit suffixes such as minutes and seconds.
#[inline]
pub fn parse_span(text: &str) -> u64 {
    text.len() as u64
}
'''

GO = '''package clock

// Advance moves the fake clock forward and fires every timer that became due meanwhile.
func Advance(d int) int {
	return d
}
'''


def _package(tmp_path: Path, files: dict[str, str]) -> tuple[packages.Package, Path]:
    package = packages.Package(id="py-demo", registry="pypi", name="demo", language="python", version="1.0",
                               sha256="0" * 64, root="demo-1.0")
    repo = tmp_path / "pkgs" / package.id / "repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    return package, tmp_path / "pkgs"


def test_doc_comments_are_found_above_or_inside_definitions_in_each_language():
    python = {s.symbol: (s.first, s.last) for s in doc_pairs.doc_sites("pkg/store.py", PY)}
    assert python["Store.flush"] == (7, 7)  # 0-based line of the method's docstring
    rust = doc_pairs.doc_sites("src/span.rs", RUST)
    assert [(s.symbol, s.first, s.last) for s in rust] == [("parse_span", 0, 0)]  # above the #[inline]
    go = doc_pairs.doc_sites("clock.go", GO)
    assert [(s.symbol, s.first) for s in go] == [("Advance", 2)]
    assert doc_pairs.query_text(go[0].raw, "Advance").startswith("moves the fake clock forward")
    assert doc_pairs.doc_sites("tests/test_store.py", PY) == []  # tests are never gold


def test_the_indexed_copy_has_the_queried_comments_blanked_with_lines_kept(tmp_path: Path):
    package, pkgs = _package(tmp_path, {"pkg/store.py": PY, "README.md": "# demo\n"})
    corpus = doc_pairs.build_corpus(package, pkgs, tmp_path / "trees", per_package=10)
    queries = {q["gold_symbols"][0]: q for q in corpus.queries}
    assert set(queries) == {"Store", "Store.flush", "Store.stub"}
    assert queries["Store.flush"]["gold_files"] == ["pkg/store.py"]
    stripped = (tmp_path / "trees" / package.id / "repo" / "pkg" / "store.py").read_text()
    assert len(stripped.split("\n")) == len(PY.split("\n"))
    for q in corpus.queries:
        assert q["query"].split(",")[0] not in stripped
    ast.parse(stripped)  # a body that was only a docstring keeps a statement


def test_a_comment_still_present_elsewhere_in_the_tree_is_no_query(tmp_path: Path):
    copy = "Write the pending records to the journal file, oldest first, and forget them.\n"
    package, pkgs = _package(tmp_path, {"pkg/store.py": PY, "docs/api.md": copy})
    corpus = doc_pairs.build_corpus(package, pkgs, tmp_path / "trees", per_package=10)
    assert "Store.flush" not in {q["gold_symbols"][0] for q in corpus.queries}


def test_a_built_corpus_runs_through_codeloupe_eval(tmp_path: Path):
    package, pkgs = _package(tmp_path, {"pkg/store.py": PY, "pkg/other.py": "def unrelated():\n    return 1\n"})
    corpus = doc_pairs.build_corpus(package, pkgs, tmp_path / "trees", per_package=10)
    golden = tmp_path / "set.json"
    golden.write_text(json.dumps({"corpora": [corpus.as_json()]}))
    run = run_golden(load_golden(golden), tmp_path / "trees", EvalOptions(embed=False,
                     overrides={"cache_dir": str(tmp_path / "cache")}))
    assert len(run.outcomes()) == len(corpus.queries) == 3
    assert run.runs[0].files == 2  # the stripped copy is what was indexed
    assert all((tmp_path / "trees" / package.id / "repo" / o.gold_files[0]).is_file() for o in run.outcomes())


def test_a_docs_question_loses_the_names_it_was_built_from_or_has_them_as_words():
    """docs_pairs' short questions drop the spans that name the gold file's definitions; docs_words' write them
    as the words a person would use, other code spans kept as they are either way."""
    defined = {"FileStorage": {("src/datastructures.py", "FileStorage")},
               "save_to": {("src/datastructures.py", "FileStorage.save_to")},
               "Request": {("src/wrappers.py", "Request")}}
    paragraph = docs_pairs.Paragraph("docs/files.rst", 3, 4, "Uploaded files are represented as `FileStorage` "
                                     "objects on the `Request`, and `save_to` writes one to a path you choose.")
    assert docs_pairs.short_query(paragraph, defined) is None  # two files' names: no single gold file
    one_file = docs_pairs.Paragraph(paragraph.path, 3, 4, paragraph.text.replace("on the `Request`", "of a form"))
    dropped = docs_pairs.short_query(one_file, defined)
    worded = docs_pairs.short_query(one_file, defined, names_as_words=True)
    assert dropped == ("Uploaded files are represented as objects of a form, and writes one to a path you choose.",
                       "src/datastructures.py", "FileStorage")
    assert worded == ("Uploaded files are represented as file storage objects of a form, and save to writes one to "
                      "a path you choose.", "src/datastructures.py", "FileStorage")
    assert docs_pairs.name_words("HTTPServer_v2") == "httpserver v2"
    assert docs_pairs.name_words("ContentRange.to_header") == "to header"


def test_the_split_is_by_repository_name_and_stable():
    a = packages.Package(id="py-x", registry="pypi", name="Jinja2", language="python")
    b = packages.Package(id="other-id", registry="npm", name="jinja2", language="javascript")
    assert split_of(a) == split_of(b) in ("dev", "test")


def test_commit_messages_lose_trailers_file_names_and_the_fixed_definitions_written_as_code():
    message = ("Fix crash in `parse_span` when the input is empty (#123)\n\n"
               "src/span.rs called parse_span() before checking the length; see span.rs.\n\n"
               "Signed-off-by: A Person <a@example.org>\nFixes #99\n")
    query = commit_pairs.clean_message(message, ["src/span.rs"], {"parse_span"})
    assert "parse_span" not in query and "span.rs" not in query and "#123" not in query
    assert "Signed-off-by" not in query and "Fixes" not in query
    assert query.startswith("Fix crash in when the input is empty")
    assert "before checking the length" in query


def test_debian_source_root_skips_compatibility_link_directories(tmp_path: Path):
    src = tmp_path / "src"
    real = src / "usr/share/gocode/src/github.com/acme/widget"
    real.mkdir(parents=True)
    (real / "widget.go").write_text("package widget\n")
    alias = src / "usr/share/gocode/src/github.com/Acme"
    alias.mkdir()
    (alias / "widget").symlink_to(real)
    package = packages.Package(id="go-widget", registry="debian", name="golang-acme-widget-dev", language="go")
    assert packages._source_root(package, src) == "usr/share/gocode/src/github.com/acme/widget"


def test_an_archive_member_that_escapes_the_tree_is_refused(tmp_path: Path):
    archive = tmp_path / "evil-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"x"
        info = tarfile.TarInfo("../escaped.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (tmp_path / "out").mkdir()
    with pytest.raises(tarfile.TarError):
        packages._unpack(archive, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()


def test_tune_ranking_scores_a_large_tree_with_the_lanes_a_warm_server_has(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 2,000 files the graph and the summary lane are built on threads of their own: bench/tune_ranking.py
    scored a large tree's first queries without them, where a warm server (the ranking it tunes) has them."""
    import tune_ranking  # bench/, on the path through devsets/common
    from codeloupe.graph import build

    monkeypatch.setattr(build, "QUERY_BUILD_MAX_FILES", 0)  # every tree counts as large
    repo = tmp_path / "trees" / "helper" / "repo"
    for rel, text in {"app/pacing.py": "def wait_before(attempt):\n    return min(2 ** attempt, 60)\n",
                      "app/client.py": "from app.pacing import wait_before\n\n\ndef retry_with_backoff(request):\n"
                                       "    request.sleep(wait_before(1))\n"}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    golden = tmp_path / "set.json"
    golden.write_text(json.dumps({"corpora": [{"id": "helper", "queries": [
        {"id": "q1", "kind": "short", "query": "retry backoff delay", "gold_files": ["app/pacing.py"]}]}]}))
    ready = []
    scored = tune_ranking.score_cases

    def recording(ws, cases):  # the summary lane as the first scored search finds it
        ready.append(ws.searcher().snapshot().summaries(ws).ready)
        return scored(ws, cases)

    monkeypatch.setattr(tune_ranking, "score_cases", recording)
    monkeypatch.setattr(sys, "argv", ["tune_ranking.py", str(golden), "--corpora", str(tmp_path / "trees"),
                                      "--no-embed"])
    assert tune_ranking.main() == 0
    assert ready[:1] == [True]  # the baseline's (then each combination's, on the same workspace)
