"""A docs bridge lane for code-mode questions (issue 13, tried and not kept), through tune_ranking.py.

    .venv/bin/python bench/docs_lane.py GOLDEN.json ... --corpora DIR ... [bench/tune_ranking.py's options]
        [--set DOCS_CHUNKS=5 --set DOCS_NAME_FILES=2 --set 'DOCS_GRAIN="chunk"' --set DOCS_FILE_IDF=True]
        --grid 'DOCS_WEIGHT=.15;.3'

No model call. In code mode documentation chunks are no candidates, but a page that describes a behaviour in a
question's plain words often names the code that does it (`stop_after_attempt`, `Template.render`, a path). The
question's BM25 and cosine over every row are already computed before the code-mode mask; here the doc chunks are
ranked by them (fused as the lexical and dense lanes are, with those lanes' weights) and the DOCS_CHUNKS best vote
for the code files they name: a path (resolved as a report's paths are: one file or none) or a code name
(identifier-shaped, dotted, or any word in backticks; a dotted name no definition has whole falls back to its last
part) defined in at most DOCS_NAME_FILES code files (a common name names no file in particular). With DOCS_GRAIN
"paragraph" a chunk votes paragraph by paragraph, each paragraph only if it holds a query term, and a file is ranked
by the IDF sum of the query terms in the best paragraph naming it, then by that chunk's fused score ("chunk": by the
best chunk naming it; DOCS_FILE_IDF multiplies the paragraph's sum by log(1 + doc chunks / doc chunks naming the
file), so an entry point named all over the docs weighs less). The files are one more file-level lane, "docs", fused
at DOCS_WEIGHT for the questions that get the natural-language weights in code mode (identifier-shaped questions,
bug reports and docs mode keep theirs). The bundle keeps every candidate, as for every lane.

Leakage: docpairs' trees have the doc comment each query was made from stripped, and docs' trees the paragraph
(bench/devsets/doc_pairs.py, docs_pairs.py); the written sets' questions are in no tree.

Cost: two chunks' texts read from the store and scanned for names per question, a symbol lookup per name. This is
the experiment, not the engine: it patches the search module (docs/measurements.md has the figures).
"""

from __future__ import annotations

import importlib
import re
import sys
import weakref
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codeloupe import ranking as R  # noqa: E402
from codeloupe.issue import resolve_suffix  # noqa: E402
from codeloupe.lanes.tokens import identifiers, looks_like_identifier, term_set  # noqa: E402

search = importlib.import_module("codeloupe.search")  # the module (the package's `search` is a function)

R.DOCS_WEIGHT = 0.0  # the lane's weight among a natural-language question's lanes (0: off, today)
R.DOCS_CHUNKS = 2  # doc chunks that vote (every fold chose 2 of {2, 5})
R.DOCS_NAME_FILES = 1  # a name defined in more code files than this does not vote (folds: 1 of {1, 2})
R.DOCS_GRAIN = "paragraph"  # "chunk": a chunk's every name votes, files ranked by the chunk's fused score
R.DOCS_FILE_IDF = False  # a file's paragraph score times log(doc chunks / doc chunks naming it): hubs weigh less

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_PATH_MENTION = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+\.[A-Za-z][A-Za-z0-9]*")


def files_named(snap: search.Snapshot, text: str, mask: np.ndarray) -> set[int]:
    """The files with a chunk under `mask` that a documentation text names by path or by a rare code name."""
    named: set[int] = set()
    for mention in _PATH_MENTION.findall(text):
        path = resolve_suffix(mention, snap.by_basename)
        file_id = snap.path_to_file.get(path) if path is not None else None
        if file_id is not None and mask[snap.file_chunk_rows.get(file_id, [])].any():
            named.add(file_id)
    names = {w for w in identifiers(text) if looks_like_identifier(w)}
    names.update(w for span in _BACKTICKED.findall(text) for w in identifiers(span))
    for name in names:
        rows = snap.symbols.definitions(name)
        last = re.split(r"\.|::|#", name)[-1]
        if not rows and last != name and (looks_like_identifier(last) or len(last) >= 3):
            rows = snap.symbols.definitions(last)
        rows = [row for row in rows if mask[row]]
        files = set(snap.table.file_ids[rows].tolist()) if rows else set()
        if 0 < len(files) <= R.DOCS_NAME_FILES:
            named |= files
    return named


_named_counts: weakref.WeakKeyDictionary[object, tuple[int, Counter[int]]] = weakref.WeakKeyDictionary()


def named_counts(searcher: search.Searcher, snap: search.Snapshot) -> tuple[int, Counter[int]]:
    """(the workspace's doc chunks, how many of them name each code file), made at the snapshot's first question:
    an entry point (`fastify.js`, click's `core.py`) is named all over the documentation."""
    if snap.bm25 not in _named_counts:
        rows = np.flatnonzero(searcher._mask(snap, "", "docs")).tolist()
        code = searcher._mask(snap, "", "code")
        counts: Counter[int] = Counter()
        for text in snap.table.texts.many(rows):
            counts.update(files_named(snap, text, code))
        _named_counts[snap.bm25] = len(rows), counts
    return _named_counts[snap.bm25]


def docs_lane(searcher: search.Searcher, snap: search.Snapshot, terms: list[str], lexical: np.ndarray | None,
              cosines: np.ndarray | None, scope: str, mask: np.ndarray, fusion: search.Fusion) -> None:
    """The "docs" file lane: the code files the question's best doc chunks name, best first."""
    docs = searcher._mask(snap, scope, "docs")
    if not docs.any():
        return
    if lexical is None:
        lexical = snap.bm25.scores(terms)
    weights = R.LANE_WEIGHTS_NATURAL
    chunk_score: dict[int, float] = defaultdict(float)
    for scores, weight, positive in ((lexical, weights["lexical"], True), (cosines, weights["dense"], False)):
        if scores is not None and weight > 0:
            for rank, row in enumerate(search._rank(scores, docs, R.LANE_DEPTH, positive_only=positive), 1):
                chunk_score[row] += weight / (R.RRF_K + rank)
    top = sorted(chunk_score, key=lambda row: (-chunk_score[row], row))[: R.DOCS_CHUNKS]
    asked = set(terms)
    stats = snap.bm25.term_stats(sorted(asked))
    best: dict[int, tuple[float, float]] = {}
    n_docs, naming = named_counts(searcher, snap) if R.DOCS_FILE_IDF else (0, Counter())
    for row, text in zip(top, snap.table.texts.many(top)):
        by_paragraph = R.DOCS_GRAIN == "paragraph"
        for part in _PARAGRAPH_BREAK.split(text) if by_paragraph else [text]:
            # A long page names much; the paragraph around a name says whether it is the question's.
            words = sum(stats.idf(t) for t in term_set(part) & asked) if by_paragraph else 0.0
            if by_paragraph and words <= 0:
                continue
            for file_id in files_named(snap, part, mask):
                rare = float(np.log1p(n_docs / max(naming[file_id], 1))) if R.DOCS_FILE_IDF else 1.0
                best[file_id] = max(best.get(file_id, (0.0, 0.0)), (words * rare, chunk_score[row]))
    files = sorted(best, key=lambda f: (-best[f][0], -best[f][1], snap.file_paths[f]))
    fusion.add_file_lane("docs", files, R.DOCS_WEIGHT)


_add_lane = search.Fusion.add_lane
_mask = search.Searcher._mask
_feedback_lane = search.Searcher._feedback_lane


def _patched_add_lane(self: search.Fusion, name: str, rows: list[int], weight: float, *, record: bool,
                      scores: np.ndarray | None = None) -> None:
    """A lane added, its scores of every row kept for the docs lane (the question's own: the first call's)."""
    if record and scores is not None and name in ("lexical", "dense"):
        self.__dict__.setdefault("question_scores", {}).setdefault(name, scores)
    _add_lane(self, name, rows, weight, record=record, scores=scores)


def _patched_mask(self: search.Searcher, snap: search.Snapshot, scope: str, mode: str) -> np.ndarray:
    """The query's mask, its scope and mode kept for the docs lane (`_fuse` asks for them first)."""
    if mode != "docs" or not getattr(self, "_docs_asking", False):
        self._docs_query = (scope, mode)
    return _mask(self, snap, scope, mode)


def _patched_feedback(self: search.Searcher, snap: search.Snapshot, terms: list[str], terms_scores: np.ndarray | None,
                      weight: float, mask: np.ndarray, fusion: search.Fusion) -> None:
    """The feedback lane (questions with the natural-language weights only), then the docs lane in code mode."""
    _feedback_lane(self, snap, terms, terms_scores, weight, mask, fusion)
    scope, mode = self._docs_query
    if R.DOCS_WEIGHT > 0 and mode == "code":
        scores = fusion.__dict__.get("question_scores", {})
        self._docs_asking = True
        try:
            docs_lane(self, snap, terms, scores.get("lexical"), scores.get("dense"), scope, mask, fusion)
        finally:
            self._docs_asking = False


search.Fusion.add_lane = _patched_add_lane
search.Searcher._mask = _patched_mask
search.Searcher._feedback_lane = _patched_feedback

if __name__ == "__main__":
    import tune_ranking

    sys.exit(tune_ranking.main())
