"""A corpus-learned word association lane for questions (issue 13, tried and not kept), through tune_ranking.py.

    .venv/bin/python bench/assoc_lane.py GOLDEN.json ... --corpora DIR ... [bench/tune_ranking.py's options]
        [--set 'ASSOC_GRAIN="file"'] --grid 'ASSOC_WEIGHT=.3;.6' --grid 'ASSOC_TOP=5;10' ...

No model call: each workspace's own chunks teach which words go with which names. Per chunk, the plain words of
its sentences (runs of three or more words: comments, docstrings, messages) are paired with the terms of the
compound identifiers it holds (snake_case and camelCase names, joined and split, as the lexical lane tokenises
them; ASSOC_SOURCE "chunks" pairs any term of the chunk with any other instead). A pair (q, b) is scored by
normalised PMI over chunks, npmi = log(p(q,b) / p(q)p(b)) / -log p(q,b), among the pairs sharing at least
ASSOC_MIN_CO chunks (ASSOC_SCORE "cond": p(b | q) instead, among the pairs npmi keeps). Each content term q of a
question brings its ASSOC_TOP best b (npmi above ASSOC_MIN_NPMI; a term held by more than ASSOC_MAX_DF of the
chunks neither asks nor answers), each weighted by its score (a b reached from several q keeps its best). The
expansion, and with ASSOC_WITH_QUERY the question's own terms at weight 1, is scored by BM25 as one more lane,
"assoc": over chunks, or with ASSOC_GRAIN "file" over one document per file (the file lane's index); fused at
ASSOC_WEIGHT for the questions that get the natural-language weights (code and docs mode; identifier-shaped
questions and bug reports keep theirs). ASSOC_IN_LEXICAL > 0 adds the expansion to the lexical lane's scores at
that factor instead of a lane of its own.

Leakage: docpairs' trees have the doc comment each query was made from stripped, and docs' trees the paragraph
(bench/devsets/doc_pairs.py, docs_pairs.py); the written sets' questions are in no tree. So what a question is
expanded with was learned from the rest of the code, never from its own text.

The model is made per snapshot at its first question (a Python pass over the chunks' texts: 7 s at 9,718
chunks) and each question reads the identifier rows of the chunks whose sentences hold its terms (np.bincount):
2.2 ms p50 at 9,718 chunks, over the 1 ms budget; an engine form would keep each prose term's top associations
from one sparse product at index time. This is the experiment, not the engine: it reads the lexical indexes'
matrices and patches the search module (docs/measurements.md has the figures).
"""

from __future__ import annotations

import importlib
import re
import sys
import weakref
from pathlib import Path

import numpy as np
from scipy import sparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codeloupe import ranking as R  # noqa: E402
from codeloupe.lanes.lexical import BM25Index  # noqa: E402
from codeloupe.lanes.tokens import tokenize  # noqa: E402

search = importlib.import_module("codeloupe.search")  # the module (the package's `search` is a function)

R.ASSOC_WEIGHT = 0.0  # the lane's weight among the natural-language question's lanes (0: off, today)
R.ASSOC_TOP = 5  # expansion terms per question term
R.ASSOC_MIN_CO = 2  # chunks a pair must share
R.ASSOC_MIN_NPMI = 0.2
R.ASSOC_MAX_DF = 0.2  # share of chunks above which a term neither expands nor is an expansion
R.ASSOC_WITH_QUERY = True  # the question's own terms scored in the lane beside the expansion
R.ASSOC_SOURCE = "prose"  # "prose": sentences' words -> compound identifiers' terms; "chunks": any term -> any
R.ASSOC_SCORE = "npmi"  # "cond" (prose model): rank and weigh an association by p(b | q) among the pairs npmi keeps
R.ASSOC_GRAIN = "chunk"  # "file": the lane ranks files by BM25 over one document per file (the file lane's)
R.ASSOC_IN_LEXICAL = 0.0  # > 0: the expansion joins the lexical lane's terms at this factor instead of a lane


class _Model:
    """ASSOC_SOURCE "chunks": any term of a chunk with any other (the lexical index's chunk x term matrix)."""

    def __init__(self, index: BM25Index) -> None:
        m = index._matrix
        self.n = m.shape[0]
        self.df = np.diff(m.indptr).astype(np.float64)
        self.rows = m.tocsr()  # only its structure is read: which terms each chunk holds
        self.vocab = index.vocab
        self.names = list(index.vocab)  # a column's term (the vocabulary is in column order)
        self.csc = m

    def expansion(self, terms: list[str]) -> dict[int, float]:
        """Column -> weight of the terms associated with `terms` (none of `terms` themselves)."""
        n, df = self.n, self.df
        cap = max(R.ASSOC_MAX_DF * n, R.ASSOC_MIN_CO)
        asked = {self.vocab[t] for t in terms if t in self.vocab}
        out: dict[int, float] = {}
        for q in asked:
            if df[q] < R.ASSOC_MIN_CO or df[q] > cap:
                continue
            chunks = self.csc.indices[self.csc.indptr[q]:self.csc.indptr[q + 1]]
            sub = self.rows[chunks]
            co = np.bincount(sub.indices, minlength=len(df)).astype(np.float64)
            co[list(asked)] = 0
            co[df > cap] = 0
            cand = np.flatnonzero(co >= R.ASSOC_MIN_CO)
            if not len(cand):
                continue
            joint = co[cand] / n
            npmi = np.log(joint / ((df[q] / n) * (df[cand] / n))) / -np.log(joint)
            keep = npmi > R.ASSOC_MIN_NPMI
            cand, npmi = cand[keep], npmi[keep]
            best = np.argsort(-npmi, kind="stable")[:R.ASSOC_TOP]
            for b, w in zip(cand[best].tolist(), npmi[best].tolist()):
                out[b] = max(out.get(b, 0.0), w)
        return out

    def file_scores(self, index: BM25Index, terms: list[str], expansion: dict[int, float]) -> np.ndarray:
        """BM25 over one document per file (the file lane's index) of the expansion, and of `terms` with
        ASSOC_WITH_QUERY."""
        names = self.names
        chosen = {index.vocab[names[c]]: w for c, w in expansion.items() if names[c] in index.vocab}
        if R.ASSOC_WITH_QUERY:
            chosen |= {index.vocab[t]: 1.0 for t in terms if t in index.vocab and index.vocab[t] not in chosen}
        if not chosen:
            return np.zeros(index.n_docs, np.float32)
        cols = list(chosen)
        return np.asarray(index._matrix[:, cols] @ np.array([chosen[c] for c in cols], np.float32),
                          dtype=np.float32).ravel()

    def scores(self, terms: list[str], expansion: dict[int, float], with_query: bool) -> np.ndarray:
        """BM25 over chunks of the expansion, and of `terms` at weight 1 `with_query`."""
        cols = list(expansion)
        weights = np.array([expansion[c] for c in cols], np.float32)
        if with_query:
            own = [self.vocab[t] for t in dict.fromkeys(terms) if t in self.vocab and self.vocab[t] not in expansion]
            cols += own
            weights = np.r_[weights, np.ones(len(own), np.float32)]
        if not cols:
            return np.zeros(self.n, np.float32)
        return np.asarray(self.csc[:, cols] @ weights, dtype=np.float32).ravel()


_SENTENCE = re.compile(r"(?:\b[A-Za-z][a-z]+\b[ ,;:]+){2,}\b[A-Za-z][a-z]+\b")
_COMPOUND = re.compile(r"\b[A-Za-z_$][A-Za-z0-9_$]*(?:_[A-Za-z0-9]|[a-z0-9][A-Z])[A-Za-z0-9_$]*\b")


class _ProseModel(_Model):
    """Pairs the plain words of each chunk's sentences (runs of three or more words: comments, docstrings,
    messages) with the terms of the compound identifiers (snake_case, camelCase) it holds: a question's words
    lead to the names the code gives what they describe. A Python pass over the chunks (the experiment)."""

    def __init__(self, index: BM25Index, texts: list[str]) -> None:
        super().__init__(index)
        prose_vocab: dict[str, int] = {}
        ident_vocab: dict[str, int] = {}
        p_rows, p_cols, i_rows, i_cols = [], [], [], []
        for row, text in enumerate(texts):
            prose = {t for m in _SENTENCE.finditer(text) for t in tokenize(m.group(0))}
            idents = {t for m in set(_COMPOUND.findall(text)) for t in tokenize(m)}
            # In sorted order: a column's number breaks ties between equal scores, and a set's order changes
            # with each process's hash seed (the same run gave docpairs dev R@1 .663 and .665).
            for t in sorted(prose):
                p_rows.append(row)
                p_cols.append(prose_vocab.setdefault(t, len(prose_vocab)))
            for t in sorted(idents):
                i_rows.append(row)
                i_cols.append(ident_vocab.setdefault(t, len(ident_vocab)))
        n = len(texts)
        self.prose = sparse.csc_matrix((np.ones(len(p_rows), np.float32), (p_rows, p_cols)),
                                       shape=(n, len(prose_vocab)))
        self.idents = sparse.csr_matrix((np.ones(len(i_rows), np.float32), (i_rows, i_cols)),
                                        shape=(n, len(ident_vocab)))
        self.prose_vocab = prose_vocab
        self.df_prose = np.diff(self.prose.indptr).astype(np.float64)
        self.df_ident = np.bincount(np.asarray(i_cols, np.int64), minlength=len(ident_vocab)).astype(np.float64)
        # an identifier term's column in the lexical index (-1: the index does not hold it)
        self.to_bm25 = np.array([index.vocab.get(t, -1) for t in ident_vocab], np.int64)

    def expansion(self, terms: list[str]) -> dict[int, float]:
        n = self.n
        cap = max(R.ASSOC_MAX_DF * n, R.ASSOC_MIN_CO)
        asked_bm25 = {self.vocab[t] for t in terms if t in self.vocab}
        out: dict[int, float] = {}
        for term in dict.fromkeys(terms):
            q = self.prose_vocab.get(term)
            if q is None or self.df_prose[q] < R.ASSOC_MIN_CO or self.df_prose[q] > cap:
                continue
            chunks = self.prose.indices[self.prose.indptr[q]:self.prose.indptr[q + 1]]
            co = np.bincount(self.idents[chunks].indices, minlength=len(self.df_ident)).astype(np.float64)
            co[(self.df_ident > cap) | (self.to_bm25 < 0)] = 0
            cand = np.flatnonzero(co >= R.ASSOC_MIN_CO)
            cand = cand[[int(self.to_bm25[c]) not in asked_bm25 for c in cand]] if len(cand) else cand
            if not len(cand):
                continue
            joint = co[cand] / n
            npmi = np.log(joint / ((self.df_prose[q] / n) * (self.df_ident[cand] / n))) / -np.log(joint)
            keep = npmi > R.ASSOC_MIN_NPMI
            cand, npmi = cand[keep], npmi[keep]
            if R.ASSOC_SCORE == "cond":  # p(b | q): how often a chunk whose prose holds q names b
                npmi = co[cand] / self.df_prose[q]
            best = np.argsort(-npmi, kind="stable")[:R.ASSOC_TOP]
            for b, w in zip(self.to_bm25[cand[best]].tolist(), npmi[best].tolist()):
                out[b] = max(out.get(b, 0.0), w)
        return out


_models: weakref.WeakKeyDictionary[BM25Index, _Model] = weakref.WeakKeyDictionary()


def _model(snap: search.Snapshot) -> _Model:
    """The snapshot's model, made at its first question."""
    index = snap.bm25
    if index not in _models:
        _models[index] = _ProseModel(index, list(snap.table.texts[0:len(snap.table.ids)])) \
            if R.ASSOC_SOURCE == "prose" else _Model(index)
    return _models[index]


_word_lane_scores = search.Searcher._word_lane_scores
_weights_for = search._weights_for


def _patched_weights(query: str) -> dict[str, float]:
    """The natural-language weights with the lane's (a token weight when the expansion joins the lexical lane)."""
    weights = _weights_for(query)
    if weights is R.LANE_WEIGHTS_NATURAL and (R.ASSOC_WEIGHT > 0 or R.ASSOC_IN_LEXICAL > 0):
        return {**weights, "assoc": R.ASSOC_WEIGHT or 1e-9}
    return weights


def _patched_lanes(self: search.Searcher, snap: search.Snapshot, text: str, terms: list[str],
                   weights: dict[str, float], fusion: search.Fusion) -> dict[str, np.ndarray]:
    """The word lanes, and the association lane beside them (a file-grain lane goes to `fusion` itself)."""
    out = _word_lane_scores(self, snap, text, terms, weights, fusion)
    if not weights.get("assoc") or not isinstance(snap.bm25, BM25Index):
        return out
    model = _model(snap)
    expansion = model.expansion(terms)
    if R.ASSOC_IN_LEXICAL > 0 and "lexical" in out:
        scaled = {c: w * R.ASSOC_IN_LEXICAL for c, w in expansion.items()}
        out["lexical"] = out["lexical"] + model.scores(terms, scaled, with_query=False)
    elif R.ASSOC_GRAIN == "file":  # one document per file: a file whose chunks together hold the names
        _, index = snap.file_index()
        if isinstance(index, BM25Index):
            scores = model.file_scores(index, terms, expansion)
            allowed = search._files_allowed(snap, *self._assoc_mask)
            rows = search._rank(scores, allowed, R.LANE_DEPTH)
            fusion.add_file_lane("assoc", snap.file_order()[rows].tolist(), weights["assoc"], scores=scores[rows])
    else:
        out["assoc"] = model.scores(terms, expansion, R.ASSOC_WITH_QUERY)
    return out


_mask = search.Searcher._mask


def _patched_mask(self: search.Searcher, snap: search.Snapshot, scope: str, mode: str) -> np.ndarray:
    """The query's mask and mode, kept for the file-grain lane (`_fuse` asks for them before the word lanes)."""
    mask = _mask(self, snap, scope, mode)
    if scope == "" and mode != "both":
        self._assoc_mask = (mask, "", mode)
    return mask


search.Searcher._word_lane_scores = _patched_lanes
search.Searcher._mask = _patched_mask
search._weights_for = _patched_weights

if __name__ == "__main__":
    import tune_ranking

    sys.exit(tune_ranking.main())
