"""The numbered excerpts every model call cites into: `[k]` -> a path and a line range.

The bundle's chunks are numbered first (files in rank order, each file's chunks in reading order); tools
used by agents add more as they read code, under the same lock, so partial answers written by parallel
agents share one numbering and one splice grounds the merged answer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from codeloupe.ask.sources import Sources
from codeloupe.secrets import looks_secret
from codeloupe.types import Bundle, ChunkHit, one_line, split_lines

# The bundle's chunks shown to the model, in characters (~12k tokens): enough for a CORE set in full plus the
# RELATED map; chunks past it stay candidates (listed as uncited) but get no number.
PROMPT_BUDGET_CHARS = 48_000


@dataclass(frozen=True)
class Excerpt:
    k: int
    path: str
    language: str
    start_line: int
    end_line: int
    text: str  # the lines as indexed (bundle) or as read by a tool; used to re-locate a changed file's span
    label: str  # breadcrumb or what a tool read
    origin: str = "bundle"  # bundle | search_more | get_file | get_symbol

    def header(self) -> str:
        """`[k] PATH lines a-b (label)` on one line, the path (and a tool's label naming it) `one_line`'d: the model
        finds a file's excerpt by this line and cites its number, which maps back to `path` as it is on disk. A raw
        newline in a file's name split the header, its second line a forged `[k] ... lines a-b` of its own."""
        return one_line(f"[{self.k}] {self.path} lines {self.start_line}-{self.end_line}" + (
            f" ({self.label})" if self.label else ""))

    def render(self) -> str:
        """The header, then every line prefixed with its real line number (what sub-range citations use)."""
        width = len(str(self.end_line))
        lines = split_lines(self.text, keepends=False)
        body = "\n".join(f"{self.start_line + i:>{width}} | {line}" for i, line in enumerate(lines))
        return f"{self.header()}\n{body}"


def chunk_text(path: str, chunk: ChunkHit, sources: Sources) -> str | None:
    """The chunk's full text: as the bundle carries it (CORE), else from disk when the file is unchanged
    (RELATED chunks travel without text). None when neither is trustworthy."""
    if chunk.text and len(split_lines(chunk.text)) == chunk.end_line - chunk.start_line + 1:
        return chunk.text
    source = sources.get(path)
    if source.verified and source.lines is not None and chunk.end_line <= len(source.lines):
        return "".join(source.lines[chunk.start_line - 1:chunk.end_line])
    return None


class Excerpts:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_k: dict[int, Excerpt] = {}
        self._by_span: dict[tuple[str, int, int], int] = {}
        self.omitted = 0  # bundle chunks left out of the prompt by the budget
        self.withheld = 0  # bundle files never shown to a model because they look like secrets

    @classmethod
    def from_bundle(cls, bundle: Bundle, sources: Sources, budget_chars: int = PROMPT_BUDGET_CHARS) -> Excerpts:
        excerpts = cls()
        used = 0
        for hit in bundle.files:
            if looks_secret(hit.path):  # indexed (not ignored) but still never shown to a model
                excerpts.withheld += 1
                continue
            for chunk in sorted(hit.chunks, key=lambda c: c.start_line):
                text = chunk_text(hit.path, chunk, sources)
                if text is None or used + len(text) > budget_chars:
                    excerpts.omitted += 1
                    continue
                used += len(text)
                excerpts.add(hit.path, hit.language, chunk.start_line, chunk.end_line, text,
                             chunk.breadcrumb or chunk.name)
        return excerpts

    def add(self, path: str, language: str, start_line: int, end_line: int, text: str, label: str,
            origin: str = "bundle") -> Excerpt:
        """Number a span (or return the number it already has)."""
        with self._lock:
            known = self._by_span.get((path, start_line, end_line))
            if known is not None:
                return self._by_k[known]
            excerpt = Excerpt(len(self._by_k) + 1, path, language, start_line, end_line, text, label, origin)
            self._by_k[excerpt.k] = excerpt
            self._by_span[(path, start_line, end_line)] = excerpt.k
            return excerpt

    def get(self, k: int) -> Excerpt | None:
        with self._lock:
            return self._by_k.get(k)

    def all(self) -> list[Excerpt]:
        with self._lock:
            return [self._by_k[k] for k in sorted(self._by_k)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_k)

    def render(self, ks: list[int] | None = None) -> str:
        wanted = None if ks is None else set(ks)
        chosen = [e for e in self.all() if wanted is None or e.k in wanted]
        return "\n\n".join(e.render() for e in chosen)
