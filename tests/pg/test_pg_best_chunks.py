"""The best chunks of many repositories at once (`best_chunks_across`): BM25 with IDF pooled over them, read
with top-k pruning, equal to the full answer of every repository merged, bit for bit, with fewer postings."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeloupe import ranking as R
from codeloupe.api import Workspace
from codeloupe.lanes.lexical import TermStats
from codeloupe.lanes.tokens import tokenize
from codeloupe.store import postgres
from codeloupe.store.postgres import FilesSearched, PgStore, best_chunks_across, term_scores_across

# Words of one syllable pattern each, so the tokeniser keeps them whole; drawn with Zipf's law, so a few are in
# most chunks and most are in a few (the postings a real question's common and rare words have).
_LETTERS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: list[str] = []
    while len(words) < size:
        word = "".join(rng.choice(_LETTERS) + rng.choice(_VOWELS) for _ in range(3)) + rng.choice(_LETTERS)
        if word not in words:
            words.append(word)
    return words


def _repository(root: Path, rng: random.Random, vocabulary: list[str], files: int) -> Path:
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    root.mkdir(parents=True)
    for f in range(files):
        functions = []
        for g in range(rng.randint(1, 4)):
            words = rng.choices(vocabulary, weights, k=rng.randint(3, 40))
            functions.append(f'def fn{f}x{g}():\n    """{" ".join(words)}"""\n    return {g}\n')
        # Some under a folder, some documentation: what a search's scope and mode keep or leave.
        (root / ("pkg" if f % 3 == 0 else ".")).mkdir(exist_ok=True)
        (root / ("pkg" if f % 3 == 0 else ".") / f"mod{f}.py").write_text("\n\n".join(functions))
        if f % 5 == 0:
            (root / f"notes{f}.md").write_text(f"# Notes {f}\n\n{' '.join(rng.choices(vocabulary, weights, k=30))}\n")
    return root


@pytest.fixture
def repositories(tmp_path: Path, pg_url: str) -> Iterator[tuple[list[PgStore], list[str]]]:
    rng = random.Random(11)
    vocabulary = _vocabulary(rng, 300)
    opened = []
    try:
        for n in range(6):
            root = _repository(tmp_path / f"repo{n}", rng, vocabulary, files=rng.randint(10, 60))
            ws = Workspace(root, overrides={"embed_provider": "none", "store_url": pg_url,
                                            "store_repository": f"repo{n}"})
            ws.index()
            opened.append(ws)
        yield [ws.store for ws in opened], vocabulary
    finally:
        for ws in opened:
            ws.close()


def _merged(stores: list[PgStore], terms: list[str], limit: int) -> list[tuple[int, int, float]]:
    """Every repository's full answer with the pooled IDF, merged: what the pruned reading must equal."""
    pooled = TermStats()
    for store in stores:
        total, frequency = store.chunk_frequencies(terms)
        pooled = pooled + TermStats(total, frequency)
    idf = {t: pooled.idf(t) for t in set(terms)}
    every = term_scores_across(stores, terms, 10**9, R.BM25_K1, R.BM25_B, chunk_idf=idf)
    merged = [(repo_id, chunk, score) for repo_id, found in every.items() for chunk, score in found.chunks]
    return sorted(merged, key=lambda hit: (-hit[2], hit[1]))[:limit]


@pytest.mark.parametrize("per_round", [1, 20_000])
def test_the_best_chunks_of_every_repository_equal_their_full_answers_merged(
        repositories: tuple[list[PgStore], list[str]], per_round: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read a term a round (these repositories are small: one round of the default budget reads them whole),
    and with the default: the same chunks and scores as every repository's full answer merged."""
    monkeypatch.setattr(postgres, "_POSTINGS_PER_ROUND", per_round)
    stores, vocabulary = repositories
    rng = random.Random(5)
    pruned = 0
    for trial in range(40):
        # Common words (the head of the vocabulary) with rarer ones, some repeated, some nowhere.
        words = rng.sample(vocabulary[:8], rng.randint(0, 3)) + rng.sample(vocabulary[8:], rng.randint(1, 4))
        words += rng.sample(words, rng.randint(0, 2)) + (["zzzunseen"] if trial % 7 == 0 else [])
        terms = tokenize(" ".join(words))
        for limit in (1, 5, 40, 5000):
            subset = stores if trial % 3 else stores[:2]
            found = best_chunks_across(subset, terms, limit, R.BM25_K1, R.BM25_B)
            assert found.chunks == _merged(subset, terms, limit), (words, limit)
            assert found.postings_read <= found.postings_held
            pruned += found.postings_read < found.postings_held
    if per_round == 1:  # the common words' postings were left unread where few chunks were asked for
        assert pruned >= 40, pruned


def test_nothing_to_find_reads_nothing(repositories: tuple[list[PgStore], list[str]]) -> None:
    stores, _ = repositories
    assert best_chunks_across(stores, tokenize("zzzunseen qqqnever"), 10, R.BM25_K1, R.BM25_B).chunks == []
    assert best_chunks_across(stores, [], 10, R.BM25_K1, R.BM25_B).chunks == []
    assert best_chunks_across([], ["word"], 10, R.BM25_K1, R.BM25_B).chunks == []


def test_the_rarest_terms_alone_score_as_a_query_of_those_terms(
        repositories: tuple[list[PgStore], list[str]]) -> None:
    """`rarest`: the terms fewest chunks hold, the others dropped, as if the query had asked those alone."""
    stores, vocabulary = repositories
    terms = tokenize(" ".join(vocabulary[:6] + vocabulary[40:44]))
    pooled = {t: sum(store.chunk_frequencies([t])[1].get(t, 0) for store in stores) for t in terms}
    kept = sorted((t for t in terms if pooled[t]), key=lambda t: (pooled[t], terms.index(t)))[:3]
    found = best_chunks_across(stores, terms, 20, R.BM25_K1, R.BM25_B, rarest=3)
    assert found.chunks == _merged(stores, kept, 20)
    assert found.postings_held == sum(pooled[t] for t in kept) < sum(pooled.values())


@pytest.mark.parametrize("files", [FilesSearched(mode="code"), FilesSearched(mode="docs"),
                                   FilesSearched("pkg", "code"), FilesSearched("/pkg/", "both")])
def test_only_the_chunks_of_the_files_searched_rank(repositories: tuple[list[PgStore], list[str]],
                                                    files: FilesSearched, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search's scope and mode: the best chunks among those files' chunks, scored as before (the IDF of
    every chunk), read a term a round so that the pruning decides on the kept chunks alone."""
    monkeypatch.setattr(postgres, "_POSTINGS_PER_ROUND", 1)
    stores, vocabulary = repositories
    kept = set()
    for store in stores:
        with store._session():
            rows = {row.id: row for row in store.file_rows().values()}
            table = store.chunk_table()
        for chunk, file_id in zip(table.ids.tolist(), table.file_ids.tolist(), strict=True):
            row = rows[file_id]
            under = not files.scope.strip("/") or row.path.startswith(files.scope.strip("/") + "/")
            if under and (files.mode == "both" or bool(row.is_doc) == (files.mode == "docs")):
                kept.add(chunk)
    assert 0 < len(kept) < len(_merged(stores, tokenize(' '.join(vocabulary)), 10**9))
    rng = random.Random(9)
    for _ in range(15):
        words = rng.sample(vocabulary[:8], rng.randint(0, 3)) + rng.sample(vocabulary[8:], rng.randint(1, 4))
        terms = tokenize(" ".join(words))
        every = [hit for hit in _merged(stores, terms, 10**9) if hit[1] in kept]
        for limit in (1, 5, 40):
            assert best_chunks_across(stores, terms, limit, R.BM25_K1, R.BM25_B, files=files).chunks == \
                every[:limit], (words, limit)
