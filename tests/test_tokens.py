"""The tokeniser splits words without a regular expression and counts a chunk's terms without listing them; both
must give exactly what the plain definitions give (the saved lexical indexes and the PostgreSQL store's term
statistics were built by those), word for word and in the same order."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from codeloupe.lanes.tokens import (
    document_counts,
    document_terms,
    path_tokens,
    term_set,
    tokenize,
    word_tokens,
)

# The definition of a word the lexical lanes were built on.
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")

# Word characters, digits that start runs, separators, and characters beyond ASCII (one and several bytes in
# UTF-8, a letter that is a word character to Python's \w but not here, and a lone surrogate).
ALPHABET = ["a", "Z", "q", "_", "0", "7", " ", ".", "-", "\t", "\n", "é", "ß", "€", "日", "\ud800", "$", "x", "3"]


def _plain_tokenize(text: str) -> list[str]:
    return [term for word in WORD.findall(text) if len(word) <= 64 for term in word_tokens(word)]


def _random_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30))) for _ in range(count)]
    # Words at the 64-character limit and past it, alone and behind digits.
    texts += ["a" * 64, "a" * 65, "12" + "b" * 64, "12" + "b" * 63, "3des 3DES des", "0x1F 1e10 2nd _9 9_"]
    return texts


def test_tokens_are_each_words_tokens_in_order() -> None:
    """The words are what the regular expression finds (a split in another place, or a character beyond ASCII
    read as nothing instead of a separator, gives other tokens), each word tokenised in order."""
    for text in _random_texts(20_000, seed=2):
        assert tokenize(text) == _plain_tokenize(text), text
        assert term_set(text) == set(_plain_tokenize(text)), text


def test_a_documents_counts_are_the_counter_of_its_terms_in_the_same_order() -> None:
    code = ("class HTTPServer(BaseServer):\n    def serve_forever(self, poll_interval=0.5):\n"
            "        # 3des and sha256 stay apart; 404 errors\n        self.__is_shut_down.clear()\n")
    texts = [code, *_random_texts(2_000, seed=3)]
    for text in texts:
        for path_terms in ([], path_tokens("lib/http/server.py")):
            counted = document_counts(path_terms, "HTTPServer.serve_forever", text)
            expected = Counter(document_terms(path_terms, "HTTPServer.serve_forever", text))
            assert list(counted.items()) == list(expected.items()), text


def test_the_run_cache_stays_within_its_bound_and_answers_alike_after_evicting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from codeloupe.lanes import tokens

    monkeypatch.setattr(tokens, "_RUNS_KEPT", 16)
    cache = tokens._run_terms.__self__
    cache.clear()
    for text in _random_texts(500, seed=4):
        assert tokenize(text) == _plain_tokenize(text), text
        assert len(cache) <= 16
    cache.clear()


def test_blobs_are_tokenised_but_never_kept() -> None:
    """A run over 64 characters (base64, a hash, minified data) is not remembered: a workspace full of distinct
    blobs would otherwise hold up to the cache's bound of them, text and all."""
    from codeloupe.lanes import tokens

    cache = tokens._run_terms.__self__
    cache.clear()
    blobs = [f"{i}" + "QUJD" * 40 for i in range(50)] + ["x" * 65 + f"y{i}" for i in range(50)]
    for blob in blobs:
        assert tokenize(f"{blob} short_name") == _plain_tokenize(f"{blob} short_name")
    assert max(map(len, cache)) <= 64 and "short_name" in cache
    cache.clear()

