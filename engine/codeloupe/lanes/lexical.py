"""Okapi BM25 as one sparse matrix: a query is a column slice and a row sum, never a loop over documents."""

from __future__ import annotations

import copy
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import count, filterfalse
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from codeloupe.arrays import made_consecutive
from codeloupe.lanes.tokens import document_counts
from codeloupe.ranking import BM25_B, BM25_K1
from codeloupe.saved import (
    load_arrays,
    pack_strings,
    release_pages,
    save_arrays,
    saved_generation,
    saved_stamp,
    unpack_strings,
)

if TYPE_CHECKING:  # imported where a matrix is made: ~0.1 s that the store's importers (the server's start) skip
    from scipy import sparse

# Bump when tokenisation, the BM25 weighting or the saved arrays change: a saved index of another version is
# rebuilt, and the term counts indexing kept under another version are not read (each chunk is tokenised
# again when the lexical index is built, until its file is indexed again).
TOKENS_VERSION = 3


@dataclass
class TermStats:
    """How many documents an index has and how many hold each of some terms: indexes of several repositories
    pool these to score a query's terms with one IDF (a term common in one repository and rare in another
    would otherwise weigh most where it means least)."""

    n_docs: int = 0
    df: dict[str, int] = field(default_factory=dict)

    def __add__(self, other: TermStats) -> TermStats:
        return TermStats(self.n_docs + other.n_docs,
                         {t: self.df.get(t, 0) + other.df.get(t, 0) for t in self.df.keys() | other.df.keys()})

    def idf(self, term: str) -> float:
        df = self.df.get(term, 0)
        return float(np.log1p((self.n_docs - df + 0.5) / (df + 0.5)))


def texts_in_pages(file_ids: list[int], read: Callable[[list[int]], dict[int, str]],
                   page: int) -> Iterator[tuple[int, str]]:
    """(file id, its text, "" if none) for each of `file_ids` in order, `read` asked for `page` files at a time:
    a lane built over a whole workspace never holds every file's text at once (40K files: tens of MB)."""
    for start in range(0, len(file_ids), page):
        part = file_ids[start:start + page]
        texts = read(part)
        for file_id in part:
            yield file_id, texts.get(file_id, "")


# Entries of an index's counts taken at a time where a whole-index step would copy them all (grouping chunks
# into files, documents' lengths): ~1/12 of them at 200K chunks, so each step's temporaries are a few tens of MB.
_ENTRIES_AT_ONCE = 2_000_000


def _row_sums(matrix: sparse.csc_matrix, rows: int) -> np.ndarray:
    """float32 [rows]: the sum of each row's entries (a document's length), a slice of the entries at a time:
    `np.bincount` makes its row numbers int64 and its weights float64 first, two temporaries of twice the
    entries' size (~400 MB at 200K chunks). Whole numbers, summed in float64: exact in any order."""
    sums = np.zeros(rows, np.float64)
    for start in range(0, matrix.nnz, _ENTRIES_AT_ONCE):
        part = slice(start, start + _ENTRIES_AT_ONCE)
        sums += np.bincount(matrix.indices[part], weights=matrix.data[part], minlength=rows)
    return sums.astype(np.float32)


def _summed_in_runs(counts: sparse.csc_matrix, first: int, stop: int, groups: np.ndarray,
                    n_groups: int) -> sparse.csc_matrix:
    """Columns `first` to `stop` of `counts` with each group's rows summed into one (`groups[row]`, never
    decreasing, and each column's rows ascending): within a column a group's entries are then neighbours, so
    each run of them is one `reduceat` sum. What the product with a membership matrix gives, to the bit (sums
    of whole numbers below 2**24 are exact in float32), without the product's temporaries or its conversion to
    columns: at 200K chunks the file lane took 1.5 s that way, on a first answer."""
    from scipy import sparse
    low, high = int(counts.indptr[first]), int(counts.indptr[stop])
    group = groups[counts.indices[low:high]]
    column = np.repeat(np.arange(stop - first), np.diff(counts.indptr[first:stop + 1]))
    starts = np.ones(high - low, bool)
    starts[1:] = (group[1:] != group[:-1]) | (column[1:] != column[:-1])
    at = np.flatnonzero(starts)
    data = np.add.reduceat(counts.data[low:high].astype(np.float32), at) if len(at) else np.zeros(0, np.float32)
    indptr = np.r_[0, np.cumsum(np.bincount(column[at], minlength=stop - first))]
    return sparse.csc_matrix((data, group[at], indptr), shape=(n_groups, stop - first))


def _joined_columns(blocks: list[sparse.csc_matrix], rows: int, columns: int) -> sparse.csc_matrix:
    """`blocks` (consecutive column ranges, float32) side by side as one matrix, emptying the list: each block
    is let go as soon as it is copied, where a concatenation holds every block and the whole result at once
    (the joined arrays' pages are touched only as they are written)."""
    from scipy import sparse
    entries = sum(block.nnz for block in blocks)
    index_type = np.int32 if entries < 2**31 else np.int64
    data, indices = np.empty(entries, np.float32), np.empty(entries, index_type)
    indptr = np.zeros(columns + 1, index_type)
    at = column = 0
    while blocks:
        block = blocks.pop(0)
        width, size = block.shape[1], block.nnz
        data[at:at + size], indices[at:at + size] = block.data, block.indices
        indptr[column + 1:column + 1 + width] = block.indptr[1:] + at
        at, column = at + size, column + width
        del block
    return sparse.csc_matrix((data, indices, indptr), shape=(rows, columns))


@dataclass
class TermCounts:
    """Some documents' term counts, row-major: document i's terms are `columns[ends[i-1]:ends[i]]` (numbers
    into `terms`, in the order each term first appears) with `counts` beside them. Typed arrays, not lists: at
    200K chunks a list of Python ints per entry peaked at gigabytes."""

    terms: list[str]
    columns: array  # "i"
    counts: array  # "f": float32 as the matrix holds them, no converted copy of every count
    ends: array  # "q"

    @classmethod
    def joined(cls, parts: Iterable[TermCounts]) -> TermCounts:
        """The documents of `parts`, in order, as one part, its terms numbered as counting them all at once
        would. A part may itself be parts joined (in another process): joins of joins number every term as one
        join does.

        A part numbers its terms in the order they first appear in it, and the parts come in order: numbering
        them again in that order gives each term the column one pass over all would. Each term of each part is
        given the next of `numbers` unless it has one (one `setdefault` a term, iterated in C: 14.5M terms when
        40K files' kept counts are joined), so a term's number grows with its first appearance, with gaps where
        a part repeated known terms; the numbers are made consecutive once, at the end."""
        vocab: dict[str, int] = {}
        numbers = count()
        ends, indices, counts = array("q"), array("i"), array("f")
        for part in parts:
            if not vocab:  # the first part's numbering is the join's: its arrays are taken over, not copied
                vocab.update(zip(part.terms, numbers))
                indices, counts = part.columns, part.counts
            else:
                numbered = np.fromiter(map(vocab.setdefault, part.terms, numbers), np.int32, len(part.terms))
                indices.frombytes(numbered[np.frombuffer(part.columns, np.int32)].tobytes())
                counts.extend(part.counts)
            ends.frombytes((np.frombuffer(part.ends, np.int64) + (ends[-1] if ends else 0)).tobytes())
            part = None  # the parts are let go as they are joined (the first one's arrays are now the join's)
        renumbering = made_consecutive(vocab, next(numbers))  # at most one number an entry: within `indices`' size
        if renumbering is not None:
            column, vocab = renumbering
            entries = np.frombuffer(indices, np.int32)  # written over, a slice at a time
            for start in range(0, len(entries), _ENTRIES_AT_ONCE):
                entries[start:start + _ENTRIES_AT_ONCE] = column[entries[start:start + _ENTRIES_AT_ONCE]]
            del renumbering, column, entries
        return cls(list(vocab), indices, counts, ends)

    def kept(self) -> KeptCounts:
        """These counts packed to keep in an index (`unpacked` reads them back); an indexing worker packs
        them, so the process writing the index only stores them."""
        columns = np.frombuffer(self.columns, np.int32)
        counts = np.frombuffer(self.counts, np.float32)
        narrow_columns = len(self.terms) <= 1 << 16
        narrow_counts = not len(counts) or float(counts.max()) < 1 << 16
        return KeptCounts(zlib.compress("\n".join(self.terms).encode(), 1),
                          columns.astype(np.uint16 if narrow_columns else np.uint32).tobytes(),
                          zlib.compress(counts.astype(np.uint16 if narrow_counts else np.uint32).tobytes(), 1),
                          np.frombuffer(self.ends, np.int64).astype(np.uint32).tobytes())

    @classmethod
    def unpacked(cls, terms: bytes, columns: bytes, counts: bytes, ends: bytes) -> TermCounts | None:
        """The counts `kept` packed, or None when the four do not fit together (a damaged row: the caller
        counts that file's terms again)."""
        try:
            bounds = np.frombuffer(ends, np.uint32).astype(np.int64)
            entries = int(bounds[-1]) if len(bounds) else 0
            # What a file's counts inflate to is bounded by its entries (a damaged or planted row cannot make
            # this allocate more): a term is at most 64 characters and a newline; a count, four bytes.
            words_text, counts = _inflated(terms, 65 * entries), _inflated(counts, 4 * entries)
            if words_text is None or counts is None:
                return None
            words = words_text.decode().split("\n") if words_text else []
            per_entry = max(entries, 1)  # no entries: no columns or counts either
            if bool((np.diff(bounds) < 0).any()) or len(columns) % per_entry or len(counts) % per_entry:
                return None
            width = {2: np.uint16, 4: np.uint32}  # bytes an entry; any other is a damaged row (KeyError)
            column_type = width[len(columns) // entries] if entries else np.uint16
            count_type = width[len(counts) // entries] if entries else np.uint16
            if not entries and (columns or counts):
                return None
            cols = np.frombuffer(columns, column_type).astype(np.int32)
            if len(cols) and int(cols.max()) >= len(words):
                return None
            values = np.frombuffer(counts, count_type).astype(np.float32)
        except (UnicodeDecodeError, ValueError, KeyError):
            return None
        return cls(words, array("i", cols.tobytes()), array("f", values.tobytes()), array("q", bounds.tobytes()))


@dataclass
class KeptCounts:
    """One file's chunks' term counts as an index keeps them (`TermCounts.kept`): its distinct terms joined by
    newlines (a term is word characters, never a newline), and for each entry the number of its term among
    them and its count, two bytes each where they fit (almost always: a file holds fewer than 65,536 distinct
    terms) or four, with each chunk's end (four bytes); the terms and the counts deflated at the fastest level
    (2.2 and 3.6 times smaller), the columns plain (they barely shrink). About 5 bytes an entry: ~115 MB at
    200K chunks, a tenth of the index."""

    terms: bytes
    columns: bytes
    counts: bytes
    ends: bytes

    @property
    def chunks(self) -> int:
        """How many chunks these are the counts of (each chunk's end is four bytes): a row of another file's
        chunk count does not fit the file it is stored with."""
        return len(self.ends) // 4 if len(self.ends) % 4 == 0 else -1

    def unpacked(self) -> TermCounts | None:
        """The counts read back, or None from a damaged row (`TermCounts.unpacked`)."""
        return TermCounts.unpacked(self.terms, self.columns, self.counts, self.ends)


def _inflated(data: bytes, limit: int) -> bytes | None:
    """`data` inflated, or None when it is not deflated data or inflates to more than `limit` bytes."""
    inflating = zlib.decompressobj()
    try:
        out = inflating.decompress(data, limit + 1)
    except zlib.error:
        return None
    whole = inflating.eof and not inflating.unconsumed_tail and not inflating.unused_data
    return out if whole and len(out) <= limit else None


def count_terms(documents: Iterable[list[str]]) -> TermCounts:
    """Each document's distinct terms and how often each occurs in it (the work of building an index that
    takes time: worker processes can count parts of a workspace's documents, `BM25Index.from_counts` joins
    them)."""
    return _counted(Counter(tokens) for tokens in documents)


def count_chunk_terms(chunks: list[tuple[list[str], str, str]]) -> TermCounts:
    """`count_terms` of chunks given as (their file's path terms, breadcrumb, text): tokenising is most of
    building a workspace's index, and this is the part worker processes do (`parallel.map_in_workers`)."""
    return _counted(document_counts(*chunk) for chunk in chunks)


def _counted(documents: Iterable[dict[str, int]]) -> TermCounts:
    vocab: dict[str, int] = {}
    columns, counts, ends = array("i"), array("f"), array("q")
    column = vocab.setdefault
    for tf in documents:
        columns.extend([column(term, len(vocab)) for term in tf])
        counts.extend(tf.values())
        ends.append(len(columns))
    return TermCounts(list(vocab), columns, counts, ends)


def _numbered(vocab: dict[str, int], terms: list[str]) -> np.ndarray:
    """int32 [terms]: each of `terms` (distinct) numbered by `vocab`, those it lacks added first, numbered on
    from its size in the order given, each step iterating in C (`filterfalse`, `map`)."""
    vocab.update(zip(filterfalse(vocab.__contains__, terms), count(len(vocab))))
    return np.fromiter(map(vocab.__getitem__, terms), np.int32, len(terms))


class BM25Index:
    """Documents are token lists; `scores(terms)` returns one BM25 score per document.

    Held as one CSC matrix of BM25 weights (documents x vocabulary); the raw term counts, which only grouping
    into files and saving need, share its structure (indices and pointers) and keep only a uint16 per entry.
    """

    def __init__(self, documents: Iterable[list[str]], stats_from: BM25Index | None = None, *,
                 keep_counts: bool = True) -> None:
        """`stats_from`: score these documents with another index's IDF and average length, so their scores
        line up with that index's (a small batch of changed files searched beside the full index).
        `keep_counts`: keep the raw counts (for `grouped` and `save`); an index that is neither grouped nor
        saved drops them."""
        # One part, handed over by a generator rather than a list, so that nothing holds it once it is joined.
        self._from_parts((count_terms(documents) for _ in range(1)), stats_from, keep_counts)

    @classmethod
    def from_counts(cls, parts: Iterable[TermCounts]) -> BM25Index:
        """The index of the documents of `parts`, in order (each part counted on its own, perhaps in another
        process): the same matrix, to the bit, as indexing every document at once."""
        index = cls.__new__(cls)
        index._from_parts(parts, None, keep_counts=True)
        return index

    def _from_parts(self, parts: Iterable[TermCounts], stats_from: BM25Index | None, keep_counts: bool) -> None:
        from scipy import sparse
        joined = TermCounts.joined(parts)
        vocab = dict(zip(joined.terms, range(len(joined.terms))))
        tf = sparse.csr_matrix(
            (np.frombuffer(joined.counts, np.float32), np.frombuffer(joined.columns, np.int32),
             np.r_[0, np.frombuffer(joined.ends, np.int64)]),
            shape=(len(joined.ends), len(vocab)),
        ).tocsc()
        del joined  # the row-major copy is gone with it: only the CSC matrix is held while weighing
        self._weigh(tf, vocab, stats_from, keep_counts)

    def compacted(self, rows: np.ndarray, more: Iterable[list[str]]) -> BM25Index | None:
        """The index of this one's documents `rows` (ascending), then the documents `more`: what indexing those
        documents anew makes, weight for weight, from the counts this index kept (only `more` is tokenised).
        Its columns are numbered otherwise, which no score depends on; terms no document holds any more are
        left out, as a new index never has them. None when this index kept no counts, or one saturated (a term
        65,535 times in one document: the kept count is not the real one).

        Made a block of terms at a time, each block's rows taken and the new documents' counts put under them,
        then the blocks moved into one matrix in turn (`grouped`'s way): stacking the whole matrices held
        three copies of every entry at once (~600 MB above the index at 200K chunks)."""
        from scipy import sparse
        counts = self._counts
        if counts is None or (counts.nnz and int(counts.data.max()) >= 65535):
            return None
        vocab = dict(self.vocab)
        part = count_terms(more)
        renumbered = _numbered(vocab, part.terms)
        added = sparse.csr_matrix(
            (np.frombuffer(part.counts, np.float32), renumbered[np.frombuffer(part.columns, np.int32)],
             np.r_[0, np.frombuffer(part.ends, np.int64)]), shape=(len(part.ends), len(vocab))).tocsc()
        rows = np.asarray(rows, np.int64)
        n_docs, n_terms = len(rows) + added.shape[0], counts.shape[1]
        starts = np.searchsorted(counts.indptr, np.arange(0, counts.nnz, _ENTRIES_AT_ONCE), side="right") - 1
        bounds = np.unique(np.r_[0, starts, n_terms, len(vocab)])
        blocks, present = [], []
        for a, b in zip(bounds, bounds[1:]):
            kept = counts[:, a:b][rows] if b <= n_terms else sparse.csc_matrix((len(rows), b - a), dtype=np.uint16)
            block = sparse.vstack([kept.astype(np.float32), added[:, a:b]], format="csc", dtype=np.float32)
            held = np.flatnonzero(np.diff(block.indptr))  # terms no document holds any more: left out
            blocks.append(block[:, held] if len(held) < block.shape[1] else block)
            present.append(held + a)
        release_pages(counts.data)  # read whole, once: a saved index's counts need not stay in memory
        columns = np.concatenate(present) if present else np.zeros(0, np.int64)
        tf = _joined_columns(blocks, n_docs, len(columns))
        tf.sort_indices()
        terms = list(vocab)  # in column order
        out = BM25Index.__new__(BM25Index)
        out._weigh(tf, {terms[c]: i for i, c in enumerate(columns.tolist())}, None, keep_counts=True)
        return out

    @classmethod
    def grouped(cls, index: BM25Index, groups: np.ndarray, n_groups: int, *,
                stats_from: BM25Index | None = None) -> BM25Index:
        """One document per group of `index`'s documents (`groups[i]`: the group of document i), its terms
        the sum of theirs: a file-level index from the chunk-level one, with no tokenising. `stats_from` as
        the constructor takes it.

        Summed a block of terms at a time (each block's counts made float32 and multiplied), the blocks then
        moved into one matrix each in turn: the whole product's temporaries (every count as float32, a
        row-major copy of them, the product and its column-major copy) took 436 MB above the index at 200K
        chunks, on the query that first asks for the file lane. The sums are of whole numbers below 2**24,
        exact in float32 in any order."""
        from scipy import sparse
        assert index._counts is not None, "grouping needs an index that kept its counts"
        counts = index._counts
        # Column ranges of about that many entries each, from the first column to the last.
        starts = np.searchsorted(counts.indptr, np.arange(0, counts.nnz, _ENTRIES_AT_ONCE), side="right") - 1
        bounds = np.unique(np.r_[0, starts, counts.shape[1]])
        if not bool((np.diff(groups) < 0).any()) and counts.has_sorted_indices:
            # Each group a run of documents (a file's chunks lie together): summed in place, column by column.
            blocks = [_summed_in_runs(counts, a, b, groups, n_groups) for a, b in zip(bounds, bounds[1:])]
        else:
            member = sparse.csr_matrix((np.ones(len(groups), np.float32), (groups, np.arange(len(groups)))),
                                       shape=(n_groups, index.n_docs))
            blocks = [(member @ counts[:, a:b].astype(np.float32)).tocsc() for a, b in zip(bounds, bounds[1:])]
        release_pages(counts.data)  # read whole, once: a saved index's counts need not stay in memory
        summed = _joined_columns(blocks, n_groups, counts.shape[1])
        summed.sort_indices()
        out = cls.__new__(cls)
        out._weigh(summed, index.vocab, stats_from, keep_counts=False)
        return out

    def _weigh(self, tf: sparse.csc_matrix, vocab: dict[str, int], stats_from: BM25Index | None,
               keep_counts: bool) -> None:
        """Turn raw term counts (documents x vocab, CSC, float32: taken over, its values become the weights)
        into the BM25 weight of every entry, with one temporary of the entries' size at a time (the weights
        written over the counts): at 200K chunks each such array is ~100 MB."""
        from scipy import sparse
        n_docs = tf.shape[0]
        self.vocab = vocab
        self.n_docs = n_docs
        self._idf = np.zeros(len(vocab), np.float32)
        self.avg_len = 1.0
        self._counts: sparse.csc_matrix | None = None
        if n_docs == 0 or not vocab:
            self._matrix = sparse.csc_matrix((n_docs, len(vocab)), dtype=np.float32)
            if keep_counts:
                self._counts = sparse.csc_matrix((n_docs, len(vocab)), dtype=np.uint16)
            return
        doc_len = _row_sums(tf, n_docs)
        if stats_from is None or stats_from.n_docs == 0:
            avg = float(doc_len.mean()) or 1.0
            df = np.diff(tf.indptr).astype(np.float32)
            idf = np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
        else:
            avg = stats_from.avg_len
            unseen = float(np.log1p((stats_from.n_docs + 0.5) / 0.5))  # a term the big index never saw
            idf = np.array([stats_from.idf_of(term, unseen) for term in vocab], np.float32)
        self.avg_len = avg
        self._idf = idf
        if keep_counts:  # a term more than 65,535 times in one chunk counts as 65,535 (BM25 saturated long before)
            self._counts = sparse.csc_matrix((np.minimum(tf.data, 65535).astype(np.uint16), tf.indices, tf.indptr),
                                             shape=tf.shape)
        # Per-entry BM25 weight, precomputed once: tf*(k1+1) / (tf + k1*(1-b+b*len/avg)) * idf, each step in
        # place and in the order of the plain expression (the same float32 bits).
        denominator = doc_len[tf.indices]
        denominator *= np.float32(BM25_B)
        denominator /= np.float32(avg)
        denominator += np.float32(1.0 - BM25_B)
        denominator *= np.float32(BM25_K1)
        denominator += tf.data
        weights = tf.data.astype(np.float32, copy=False)
        weights *= np.float32(BM25_K1 + 1.0)
        weights /= denominator
        del denominator
        weights *= np.repeat(idf, np.diff(tf.indptr))
        self._matrix = sparse.csc_matrix((weights, tf.indices, tf.indptr), shape=tf.shape)

    def idf_of(self, term: str, default: float) -> float:
        col = self.vocab.get(term)
        return default if col is None else float(self._idf[col])

    def rarest(self, terms: list[str], k: int) -> list[str]:
        """The `k` known terms with the highest IDF (what a snippet should centre on)."""
        known = {t for t in terms if t in self.vocab}
        return sorted(known, key=lambda t: (-float(self._idf[self.vocab[t]]), t))[:k]

    snippet_terms = rarest  # one index: nothing newer than its own rows (see `StackedBM25.snippet_terms`)

    def term_stats(self, terms: Iterable[str]) -> TermStats:
        starts = self._matrix.indptr  # CSC: a column's entries are the documents holding its term
        return TermStats(self.n_docs, {t: int(starts[c + 1] - starts[c]) if (c := self.vocab.get(t)) is not None
                                       else 0 for t in terms})

    def scores(self, terms: list[str], pooled: TermStats | None = None) -> np.ndarray:
        """`pooled`: score each term with the IDF of these statistics instead of this index's own."""
        cols = Counter(self.vocab[t] for t in terms if t in self.vocab)
        if not cols:
            return np.zeros(self.n_docs, np.float32)
        keys = list(cols)
        weights = np.asarray([cols[k] for k in keys], np.float32)
        if pooled is not None:
            names = {self.vocab[t]: t for t in terms if t in self.vocab}
            own = self._idf[keys]
            weights *= np.array([pooled.idf(names[k]) for k in keys], np.float32) / np.where(own > 0, own, 1.0)
        sub = self._matrix[:, keys]
        return np.asarray(sub @ weights, dtype=np.float32).ravel()

    def rows_holding(self, terms: set[str]) -> np.ndarray:
        """Which documents hold every one of `terms` (a column's entries are the documents holding its term)."""
        held = np.ones(self.n_docs, bool)
        m = self._matrix
        for term in terms:
            column = self.vocab.get(term)
            if column is None:
                return np.zeros(self.n_docs, bool)
            this = np.zeros(self.n_docs, bool)
            this[m.indices[m.indptr[column]:m.indptr[column + 1]]] = True
            held &= this
        return held

    def scores_adding(self, scores: np.ndarray, asked: list[str], terms: list[str]) -> np.ndarray:
        """`scores(asked + terms)` from `scores`, which are `scores(asked)`: only the columns of `terms` (none
        of them among `asked`) are read, each added in turn in float32, as the sparse product adds a column at
        a time, so the result is the same to the bit (feedback's expansion: a few rare terms, their columns
        short, where the question's own words can match half the chunks)."""
        out = scores.copy()
        m = self._matrix
        for column in dict.fromkeys(self.vocab[t] for t in terms if t in self.vocab):
            start, end = m.indptr[column], m.indptr[column + 1]
            out[m.indices[start:end]] += m.data[start:end]
        return out

    # ---------------------------------------------------------------- persistence

    def save(self, path: Path, row_ids: np.ndarray, stamp: str) -> BM25Index:
        """Write the index beside the store, tagged with what it was built from (atomic replace), and return it
        reading its entries in place from the file written, as `load` does: the same index, whose pages are the
        system's to drop. The file is not read back (`save_arrays` maps the writer's own bytes), and the terms
        are this index's own."""
        from scipy import sparse
        m = self._matrix
        vocab, vocab_ends = pack_strings(list(self.vocab))  # dict order is column order
        # An index that kept no counts (the file lane's, grouped from the chunk one) is saved without them.
        counts = {} if self._counts is None else {"counts": self._counts.data}
        in_place = save_arrays(path, f"{TOKENS_VERSION}:{stamp}", {
            "data": m.data, **counts, "indices": m.indices, "indptr": m.indptr,
            "shape": np.array(m.shape), "idf": self._idf, "vocab": vocab, "vocab_ends": vocab_ends,
            "row_ids": row_ids, "n_docs": np.array([self.n_docs], np.int64),
            "avg_len": np.array([self.avg_len], np.float64)}, mapped=("data", "indices", "counts"))
        if "data" not in in_place or "indices" not in in_place:  # not mappable (an empty index): kept as it is
            return self
        index = copy.copy(self)
        indices = in_place["indices"]
        index._matrix = sparse.csc_matrix((in_place["data"], indices, m.indptr), shape=m.shape, copy=False)
        if self._counts is not None and "counts" in in_place:
            index._counts = sparse.csc_matrix((in_place["counts"], indices, m.indptr), shape=m.shape, copy=False)
        return index

    @staticmethod
    def saved_for(path: Path, stamp: str) -> bool:
        """Whether the index saved at `path` was saved for exactly `stamp` (only the stamp is read)."""
        return saved_stamp(path) == f"{TOKENS_VERSION}:{stamp}"

    @staticmethod
    def saved_generation(path: Path, index_id: str) -> int | None:
        """The content generation of the index `index_id` the index saved at `path` was built for, if any (saved
        with the stamp "`index_id`:generation")."""
        return saved_generation(path, f"{TOKENS_VERSION}:{index_id}:")

    @classmethod
    def load(cls, path: Path, row_ids: np.ndarray, stamp: str) -> BM25Index | None:
        """The saved index if it was built from exactly these rows of the same index state, else None (also
        when it is damaged: `codeloupe.saved`).

        Its entries (weights, rows, counts: ~250 MB at 200K chunks) are read in place from the file, mapped,
        not copied: a query reads only its terms' columns, so a warm process holds those pages and the system
        keeps the rest in its cache, to drop under pressure and read again."""
        from scipy import sparse
        z = load_arrays(path, f"{TOKENS_VERSION}:{stamp}", mapped=("data", "indices", "counts"))
        if z is None or not np.array_equal(z.get("row_ids"), row_ids):
            return None
        try:
            index = cls.__new__(cls)
            shape = tuple(int(x) for x in z["shape"])
            indices, indptr = z["indices"], z["indptr"]  # both matrices share them
            index._matrix = sparse.csc_matrix((z["data"], indices, indptr), shape=shape)
            index._matrix.check_format(full_check=True)  # every row number in range: read whole, then let go
            release_pages(indices)
            index._counts = None
            if "counts" in z:
                counts = z["counts"]
                if counts.dtype != np.uint16 or len(counts) != len(indices):
                    return None
                index._counts = sparse.csc_matrix((counts, indices, indptr), shape=shape)
            index._idf = z["idf"]
            index.avg_len = float(z["avg_len"][0])
            index.n_docs = int(z["n_docs"][0])
            words = unpack_strings(z["vocab"], z["vocab_ends"])
            if len(words) != shape[1] or len(index._idf) != shape[1] or index.n_docs != shape[0]:
                return None
            index.vocab = {w: i for i, w in enumerate(words)}
            return index
        except (KeyError, ValueError, IndexError, TypeError):  # arrays that do not fit together: rebuild
            return None


class StackedBM25:
    """Several BM25 indexes over consecutive row ranges, scored as one (the first one's IDF picks snippets; a
    term only the later ones hold is rarer than any)."""

    def __init__(self, parts: list[BM25Index]) -> None:
        self.parts = parts

    def term_stats(self, terms: Iterable[str]) -> TermStats:
        terms = list(terms)
        return sum((part.term_stats(terms) for part in self.parts), TermStats())

    def scores(self, terms: list[str], pooled: TermStats | None = None) -> np.ndarray:
        return np.concatenate([part.scores(terms, pooled) for part in self.parts])

    def scores_adding(self, scores: np.ndarray, asked: list[str], terms: list[str]) -> np.ndarray:
        bounds = np.cumsum([0] + [part.n_docs for part in self.parts])
        return np.concatenate([part.scores_adding(scores[a:b], asked, terms)
                               for part, a, b in zip(self.parts, bounds, bounds[1:])])

    def rarest(self, terms: list[str], k: int) -> list[str]:
        return self.parts[0].rarest(terms, k)

    def snippet_terms(self, terms: list[str], k: int) -> list[str]:
        """What a snippet centres on: `rarest`, after the words only files saved since the base was built hold
        (in none of its rows: the rarest of all). Without them a snippet of such a file had none of the query's
        words to centre on and opened at the chunk's first line. Feedback keeps `rarest`: it picks terms to score,
        and must pick what the full snapshot the view stands for would."""
        base = self.parts[0]
        newer = sorted({t for t in terms if t not in base.vocab and any(t in part.vocab for part in self.parts[1:])})
        return (newer + base.rarest(terms, k))[:k]

    def rows_holding(self, terms: set[str]) -> np.ndarray:
        return np.concatenate([part.rows_holding(terms) for part in self.parts])

