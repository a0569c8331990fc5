"""Identifier-aware tokens for the lexical lanes.

`getUserById` -> `getuserbyid get user by id`, `snake_case` likewise: the joined form matches a query that
names the identifier, the parts match a question written in words. A light suffix stemmer folds
`reads`/`reading`/`read` together; English stop words are dropped (a question's "how does the" carries no
signal and, being rare in code, would otherwise get a high IDF).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from itertools import chain, islice

# What a word is: `[A-Za-z_][A-Za-z0-9_]*|[0-9]+`, found as that regular expression finds it (`_runs`, `_pieces`).
_WORD_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
_SEPARATING = bytes(c if c in _WORD_BYTES else 0x20 for c in range(256))  # every other byte made a space
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

STOP_WORDS = frozenset("""
a an and are as at be been but by can could do does did doing for from had has have having how i if in into
is it its itself me my no nor not of off on once only or other our out over own same she should so some such
than that the their them then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours also just get gets got use used uses
using via each every any all both more most much many whether where's what's it's does doesn't don't
""".split())


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """A deliberately light stemmer: plural and verb suffixes only, never below four letters."""
    if len(word) <= 4 or not word.isalpha():
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) + len(repl) >= 4:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            if suffix == "es" and not word.endswith(("ches", "shes", "xes", "zes", "sses")):
                return word[:-1]
            return word[: len(word) - len(suffix)] + repl
    return word


def word_tokens(word: str) -> tuple[str, ...]:
    """The tokens one identifier contributes: its joined lower form plus its camel/snake parts (cached per run
    of word characters by `_run_terms`)."""
    if word.isascii() and word.isalpha() and word.islower():  # most words of code and prose: itself, one part
        return () if word in STOP_WORDS else (stem(word),)
    lower = word.lower()
    parts = [p.lower() for piece in word.split("_") if piece for p in _CAMEL.findall(piece)]
    out = []
    if lower.strip("_") and lower not in STOP_WORDS:
        out.append(stem(lower.strip("_")))
    if len(parts) > 1:
        out.extend(stem(p) for p in parts if p not in STOP_WORDS and len(p) > 1)
    return tuple(out)


def _runs(text: str) -> list[str]:
    """The runs of word characters of `text`: every other character becomes a space (one pass in C, a character
    beyond ASCII made "?" first) and the text is split on spaces."""
    return text.encode("ascii", "replace").translate(_SEPARATING).decode("ascii").split()


def _pieces(run: str) -> tuple[str, ...]:
    """The words of one run: a run that starts with digits and goes on ("3des") is two words."""
    if run[0] > "9":  # "_" and the letters sort after the digits
        return (run,)
    rest = run.lstrip("0123456789")
    return (run[:len(run) - len(rest)], rest) if rest else (run,)


class _RunTerms(dict[str, tuple[str, ...]]):
    """Each run of word characters' tokens, made once: a word over 64 characters (a hash, base64 or another
    blob) gives none. A plain dict read through `__getitem__` runs in C on a run seen before, where an
    `lru_cache`'s bookkeeping took longer than the lookup."""

    def __missing__(self, run: str) -> tuple[str, ...]:
        terms = tuple(term for word in _pieces(run) if len(word) <= 64 for term in word_tokens(word))
        if len(run) > 64:  # a blob is not kept: a workspace of them would fill the memory with their text
            return terms
        if len(self) >= _RUNS_KEPT:  # the older half goes (a dict keeps the order runs came in)
            for old in list(islice(self, _RUNS_KEPT // 2)):
                self.pop(old, None)  # another thread tokenising may be evicting too
        self[run] = terms
        return terms


# Distinct runs remembered (none over 64 characters), about 70 MB at most. The standard library has ~220,000; below its size, a lexical
# index of it tokenised chunks at half the speed, the runs evicted and made again.
_RUNS_KEPT = 300_000
_run_terms = _RunTerms().__getitem__


def _terms(text: str) -> Iterator[str]:
    """`tokenize(text)` as an iterator. Every step runs in C on a word seen before (the runs' split, the cached
    tokens of each, the chaining): tokenising every chunk is most of the work of a first lexical index, and
    counting 30,000 chunks' terms took 4.4-5.2 s of CPU this way against 11.3-12.6 s finding each word with the
    regular expression and tokenising it in Python."""
    return chain.from_iterable(map(_run_terms, _runs(text)))


def tokenize(text: str) -> list[str]:
    return list(_terms(text))


def whole_word_terms(text: str, *, all_runs: bool) -> set[str]:
    """The terms any text holding `text` is sure to be indexed with: the tokens of each run of word characters
    that stands whole in it (`all_runs`: every run, as when `text` is matched as a whole identifier; else only
    the runs with a separator on both sides inside `text`, since an end run may continue in the text around
    it: "son.lo" is found in "json.loads", whose runs are others)."""
    runs = text.encode("ascii", "replace").translate(_SEPARATING).decode("ascii").split(" ")
    whole = runs if all_runs else runs[1:-1]
    return set(chain.from_iterable(map(_run_terms, filter(None, whole))))


def term_set(text: str) -> set[str]:
    """The distinct terms of `tokenize(text)`, each distinct word tokenised once: a long chunk repeats its
    words, and pseudo-relevance feedback reads whole chunks on every question."""
    return set(chain.from_iterable(map(_run_terms, set(_runs(text)))))


def path_tokens(path: str) -> list[str]:
    """A file's path as search terms: the stem twice (it names the file), the last three directory names."""
    parts = path.split("/")
    stem_part = parts[-1].rsplit(".", 1)[0]
    dirs = parts[-4:-1]
    return tokenize(stem_part) * 2 + tokenize(" ".join(dirs))


def document_terms(path_terms: list[str], breadcrumb: str, text: str) -> list[str]:
    """A chunk's lexical document: its file's `path_tokens`, then its breadcrumb's and its text's tokens (the
    in-process lane's matrix and the PostgreSQL store's term statistics are both built from this)."""
    return path_terms + tokenize(breadcrumb) + tokenize(text)


def document_counts(path_terms: list[str], breadcrumb: str, text: str) -> Counter[str]:
    """`Counter(document_terms(...))`, counted without listing the terms first."""
    return Counter(chain(path_terms, _terms(breadcrumb), _terms(text)))


_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:(?:\.|::|#)[A-Za-z_$][A-Za-z0-9_$]*)*")


def identifiers(text: str) -> list[str]:
    """Identifier-shaped words of a query, dotted names kept whole (`Context.invoke`, `Foo::bar`)."""
    return [m.group(0) for m in _IDENTIFIER.finditer(text)]


def looks_like_identifier(word: str) -> bool:
    """camelCase, snake_case, dotted or ALLCAPS words: things a person types only when naming code."""
    if any(sep in word for sep in ("_", ".", "::", "#", "$")):
        return len(word) > 1
    inner = word[1:]
    return any(ch.isupper() for ch in inner) and any(ch.islower() for ch in word)
