"""Retrieval metrics over one bundle, as plain functions of rankings (no engine needed to test them).

File-level metrics read the bundle's file ranking: CORE files then RELATED files, in the order the
engine emitted them (`Bundle.files`). Gold paths are compared as POSIX paths relative to the corpus root.

* R@1            the top file is a gold file.
* Acc@k          every gold file is in the top k files.
* bundle recall  every gold file is somewhere in the bundle (CORE or RELATED).
* MRR            1 / rank of the first gold file in the bundle, 0 when none is there.

Symbol hit@k (chunk level, only for queries that carry gold symbols) needs a precise definition because
the labels use each language's own notation (`Parameter.resolve_envvar_value`, `Base#route!`,
`Layer.prototype.match`, `Engine.handleHTTPRequest`, `exports.compileTrust`, `handle`):

1. A label is split into *segments* on ``.``, ``#`` and ``::``; parentheses, ``*`` and ``&`` are stripped
   from each segment (Go receivers such as ``(*Engine)``), and the segments ``prototype``, ``self``,
   ``exports`` and ``module`` are dropped (they say "method of" or "module level", not a name).
   So ``Layer.prototype.match`` -> (Layer, match) and ``Base.compile!`` -> (Base, compile!).
2. A chunk *holds* a label when, for one of its names (each entry of `ChunkHit.symbols`, and
   `ChunkHit.name`):
   - the name's segments end with the label's segments (``Parameter.resolve_envvar_value`` is held by
     ``click.core.Parameter.resolve_envvar_value`` and by ``Parameter.resolve_envvar_value``); or
   - no name of the chunk qualifies the label's last segment differently, one name is that last segment
     alone, and each of the label's qualifier segments occurs as a whole word in the chunk's breadcrumb (a
     chunker that records ``resolve_envvar_value`` under breadcrumb ``core.py > class Parameter > def
     resolve_envvar_value`` still counts; a chunk that also records ``Option.resolve_envvar_value`` does
     not, even under ``class Option(Parameter)``).
3. Only chunks of gold files count (the labels are defined in the gold files; a same-named helper in
   another file is not the answer).
4. The chunk ranking is every `ChunkHit` in the bundle ordered by its score, highest first (ties keep
   bundle order); symbol hit@k is true when one of the first k chunks holds any gold symbol.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from codeloupe.types import Bundle, ChunkHit

_SEGMENT_SPLIT = re.compile(r"::|[.#]")
_DROPPED_SEGMENTS = frozenset({"prototype", "self", "exports", "module"})


# ----------------------------------------------------------------------------------------- file level


def gold_ranks(ranked: Sequence[str], gold: Iterable[str]) -> dict[str, int | None]:
    """1-based rank of each gold file in `ranked`, None where it is absent."""
    position = {}
    for index, path in enumerate(ranked, 1):
        position.setdefault(path, index)
    return {g: position.get(g) for g in gold}


def first_gold_rank(ranked: Sequence[str], gold: Collection[str]) -> int | None:
    for index, path in enumerate(ranked, 1):
        if path in gold:
            return index
    return None


def hit_at_1(ranked: Sequence[str], gold: Collection[str]) -> bool:
    return bool(ranked) and ranked[0] in gold


def all_in_top_k(ranked: Sequence[str], gold: Collection[str], k: int) -> bool:
    top = set(ranked[:k])
    return all(g in top for g in gold)


def all_in_bundle(ranked: Sequence[str], gold: Collection[str]) -> bool:
    present = set(ranked)
    return all(g in present for g in gold)


def reciprocal_rank(ranked: Sequence[str], gold: Collection[str]) -> float:
    rank = first_gold_rank(ranked, gold)
    return 1.0 / rank if rank else 0.0


# ---------------------------------------------------------------------------------------- chunk level


def symbol_segments(name: str) -> tuple[str, ...]:
    """The comparable segments of a symbol label or a chunker's qualified name (see the module doc)."""
    segments = []
    for raw in _SEGMENT_SPLIT.split(name):
        segment = raw.strip().strip("()*& ")
        if segment and segment not in _DROPPED_SEGMENTS:
            segments.append(segment)
    return tuple(segments)


def _whole_word(word: str, text: str) -> bool:
    return re.search(rf"(?<![\w$]){re.escape(word)}(?![\w$])", text) is not None


def chunk_holds_symbol(chunk: ChunkHit, label: str) -> bool:
    wanted = symbol_segments(label)
    if not wanted:
        return False
    qualifiers, last = wanted[:-1], wanted[-1]
    names = [segments for segments in map(symbol_segments, (*chunk.symbols, chunk.name)) if segments]
    if any(segments[-len(wanted):] == wanted for segments in names):
        return True
    if any(len(segments) > 1 and segments[-1] == last for segments in names):
        return False  # the chunk qualifies this name itself, with other qualifiers
    return (last,) in names and all(_whole_word(q, chunk.breadcrumb) for q in qualifiers)


def ranked_chunks(bundle: Bundle) -> list[ChunkHit]:
    """Every chunk of the bundle, best score first; ties keep the bundle's order."""
    chunks = [chunk for file in bundle.files for chunk in file.chunks]
    return sorted(chunks, key=lambda c: -c.score)  # sorted() is stable


@dataclass(frozen=True)
class SymbolMatch:
    rank: int  # 1-based position in the chunk ranking
    symbol: str  # the gold label it holds
    path: str
    start_line: int
    end_line: int


def first_symbol_match(chunks: Sequence[ChunkHit], gold_files: Collection[str],
                       gold_symbols: Sequence[str]) -> SymbolMatch | None:
    """The best-ranked chunk of a gold file that holds a gold symbol, or None."""
    for rank, chunk in enumerate(chunks, 1):
        if chunk.path not in gold_files:
            continue
        for label in gold_symbols:
            if chunk_holds_symbol(chunk, label):
                return SymbolMatch(rank, label, chunk.path, chunk.start_line, chunk.end_line)
    return None


# ---------------------------------------------------------------------------------------- aggregates


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100), linear between closest ranks (numpy's default); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan
