"""Turn a model's cited prose into an answer whose code comes from disk.

The model writes prose with `[[k]]` (whole excerpt k) or `[[k:a-b]]` (lines a-b of the file, inside excerpt
k). `Splicer` consumes the text as it streams (a marker or the abstention sentinel may be split across
deltas), first through `ProseFilter` (code, HTML and links the model wrote are removed: its words become
plain text), and emits answer parts: the prose, an inline reference where each marker stood, and after the
line that cited them the verbatim blocks (`SpanResolver` reads them from disk). A marker that resolves to
nothing (no such excerpt, lines outside it, a reversed range, anything else) shows nothing: a plain-text
placeholder stands where it was, the answer ends with a line counting the dropped markers, and every drop is
counted in `stats`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from codeloupe.ask.events import AnswerPart, Citation
from codeloupe.ask.excerpts import Excerpt, Excerpts
from codeloupe.ask.prose import ABSTAIN, CITATION_MARKER, ProseFilter, markdown_text
from codeloupe.ask.sources import Sources
from codeloupe.store import SymbolRow
from codeloupe.types import code_fence, code_span, one_line, split_lines, visible_lines

_SPEC = re.compile(r"\s*(\d+)\s*(?::\s*(\d+)\s*(?:[-\u2013\u2014]\s*(\d+)\s*)?)?")
_SPECIAL = re.compile(r"[\n\[<]")
SNAP_CONTEXT_LINES = 2  # either side of cited lines that no definition inside the excerpt encloses


# Why a marker was dropped (the stats key), in the words the answer uses: fixed text, nothing the model wrote.
DROPPED_WHY = {"malformed": "malformed", "unknown": "no such excerpt", "out_of_range": "lines outside the excerpt",
               "unreadable": "file unreadable", "stale": "lines gone from the file"}


@dataclass(frozen=True)
class Dropped:
    """A citation that shows nothing: `reason` is the stats key, `note` (optional, plain text) says why in
    place of the marker, naming the file on one line (`one_line`: a line break in its name began a line of the
    answer's own) (else the placeholder `(citation dropped: why)` stands there)."""

    reason: str  # malformed | unknown | out_of_range | unreadable | stale
    note: str = ""

    @property
    def placeholder(self) -> str:
        return self.note or f"(citation dropped: {DROPPED_WHY[self.reason]})"


def dropped_summary(dropped: Counter[str]) -> str:
    """`3 citations dropped: malformed 2, no such excerpt 1` (reasons in a fixed order), `2 citations dropped:
    malformed` (one reason), or "" (none)."""
    total = sum(dropped.values())
    counts = [(why, dropped[reason]) for reason, why in DROPPED_WHY.items() if dropped[reason]]
    if not total:
        return ""
    reasons = counts[0][0] if len(counts) == 1 else ", ".join(f"{why} {n}" for why, n in counts)
    return f"{total} citation{'' if total == 1 else 's'} dropped: {reasons}"


def snap_to_symbols(start: int, end: int, symbols: list[SymbolRow],
                    within: tuple[int, int] | None = None) -> tuple[int, int]:
    """Widen `start..end` so neither edge falls inside a symbol it does not begin/end (innermost first).

    `within` (the excerpt the model was shown) bounds the snap: only definitions inside it count, so two
    cited lines of a huge class's docstring never become the whole class. When the cited lines sit inside a
    definition larger than that, they are kept with `SNAP_CONTEXT_LINES` either side instead.
    """
    lo, hi = within if within is not None else (1, max((s.end_line for s in symbols), default=end))
    bounded = _widen(start, end, [s for s in symbols if lo <= s.start_line and s.end_line <= hi])
    if bounded != (start, end) or _widen(start, end, symbols) == (start, end):
        return bounded
    return max(lo, start - SNAP_CONTEXT_LINES), min(hi, end + SNAP_CONTEXT_LINES)


def _widen(start: int, end: int, symbols: list[SymbolRow]) -> tuple[int, int]:
    while True:
        widened = (_innermost_edge(start, symbols, "start", start), _innermost_edge(end, symbols, "end", end))
        if widened == (start, end):
            return start, end
        start, end = widened


def _innermost_edge(line: int, symbols: list[SymbolRow], edge: str, default: int) -> int:
    inside = [s for s in symbols if s.start_line <= line <= s.end_line]
    if not inside:
        return default
    innermost = min(inside, key=lambda s: (s.end_line - s.start_line, -s.start_line))
    return innermost.start_line if edge == "start" else innermost.end_line


def relocate(old_lines: list[str], lines: list[str], near: int) -> int | None:
    """The 1-based line where `old_lines` occur verbatim in `lines` (nearest to `near`), or None."""
    n = len(old_lines)
    if n == 0 or not "".join(old_lines).strip():
        return None
    hits = [i + 1 for i in range(len(lines) - n + 1) if lines[i] == old_lines[0] and lines[i:i + n] == old_lines]
    return min(hits, key=lambda at: (abs(at - near), at)) if hits else None


class SpanResolver:
    """Marker text -> a `Citation` read from disk, or a `Dropped` saying why not."""

    def __init__(self, excerpts: Excerpts, sources: Sources, *, whole_sections: bool = False) -> None:
        self.excerpts = excerpts
        self.sources = sources
        self.whole_sections = whole_sections  # docs walkthroughs: a sub-range widens to its whole section
        self.stats: Counter[str] = Counter()

    def resolve(self, inner: str) -> Citation | Dropped:
        spec = _SPEC.fullmatch(inner)
        if spec is None:
            return Dropped("malformed")
        excerpt = self.excerpts.get(int(spec.group(1)))
        if excerpt is None:
            return Dropped("unknown")
        if spec.group(2) is None or self.whole_sections:
            return self.read_span(excerpt, excerpt.start_line, excerpt.end_line, requested=None)
        a = int(spec.group(2))
        b = int(spec.group(3)) if spec.group(3) else a
        if b < a:  # a reversed range is refused, not guessed at
            return Dropped("malformed")
        lo, hi = max(a, excerpt.start_line), min(b, excerpt.end_line)
        if lo > hi:
            return Dropped("out_of_range")
        if (lo, hi) != (a, b):
            self.stats["clamped"] += 1
        return self.read_span(excerpt, lo, hi, requested=(a, b))

    def read_span(self, excerpt: Excerpt, start: int, end: int, *,
                  requested: tuple[int, int] | None) -> Citation | Dropped:
        """Lines `start..end` of the excerpt's file as they are on disk now (snapped when a sub-range)."""
        source = self.sources.get(excerpt.path)
        if source.lines is None:
            return Dropped("unreadable", f"({source.problem})")  # `problem` names its file on one line
        if source.verified:
            snapped = False
            if requested is not None:
                new = snap_to_symbols(start, end, self.sources.symbols(excerpt.path),
                                      within=(excerpt.start_line, excerpt.end_line))
                snapped = new != (start, end)
                start, end = new
            if end > len(source.lines):
                return Dropped("out_of_range")
            return Citation(excerpt.k, excerpt.path, start, end, "".join(source.lines[start - 1:end]),
                            excerpt.language, requested, snapped, changed=False)
        # Changed (or never indexed): find the cited lines by content; the old numbers mean nothing now.
        old = split_lines(excerpt.text)[start - excerpt.start_line:end - excerpt.start_line + 1]
        at = relocate(old, source.lines, start)
        if at is None:
            return Dropped("stale", f"({one_line(excerpt.path)} changed since it was indexed; the cited lines are gone)")
        if source.changed:
            self.stats["relocated"] += 1
        new_end = at + len(old) - 1
        return Citation(excerpt.k, excerpt.path, at, new_end, "".join(source.lines[at - 1:new_end]),
                        excerpt.language, requested, False, changed=source.changed)


def location(c: Citation) -> str:
    return f"{c.path}:{c.start_line}-{c.end_line}"


def render_block(c: Citation) -> str:
    """A fenced block (`code_fence`), captioned with the real location. The markdown is what a person is shown
    (an editor's answer view, an agent's reply): its lines are the CLI's (`visible_lines`), so a bidi override in
    the code cannot make it read otherwise than it runs; the citation and the part's text keep the bytes."""
    body = "".join(f"{line}\n" for line in visible_lines(c.text))
    fence = code_fence(body)
    note = " (changed on disk since indexing: lines re-located)" if c.changed else ""
    return f"\n{code_span(location(c))}{note}\n{fence}{c.language}\n{body}{fence}\n"


def prose_part(text: str) -> AnswerPart:
    return AnswerPart("prose", text, markdown_text(text))


def note_part(text: str) -> AnswerPart:
    """A note of the engine's (a file gone, changed, unreadable): it names a workspace's file, whose name may hold
    backticks, so none may open a code span there (prose keeps its identifier spans: `markdown_text`)."""
    return AnswerPart("note", text, markdown_text(text).replace("`", "\\`"))


def code_part(c: Citation) -> AnswerPart:
    return AnswerPart("code", c.text, render_block(c), c)


def ref_part(c: Citation, suffix: str = "") -> AnswerPart:
    """Where a marker stood: `(path:a-b)`, linked to the span; the path on one line (`one_line`), as in the markdown."""
    return AnswerPart("ref", f"({one_line(location(c))}{suffix})", f"({code_span(location(c))}{suffix})", c)


class Splicer:
    """Streamed model text in, grounded answer parts out. `feed` each delta, then `finish` once."""

    def __init__(self, resolver: SpanResolver) -> None:
        self.resolver = resolver
        self.stats = resolver.stats
        self.prose = ProseFilter(resolver.stats)
        self.citations: list[Citation] = []
        self.dropped: Counter[str] = Counter()  # the markers that showed nothing, by reason
        self.abstained = False
        self._buf = ""
        self._line_start = True
        self._pending: list[Citation] = []  # cited on the current line; shown once the line ends

    def feed(self, delta: str) -> list[AnswerPart]:
        self._buf += self.prose.feed(delta)
        return self._drain()

    def finish(self) -> list[AnswerPart]:
        self._buf += self.prose.finish()
        out = self._drain()
        if self._pending:
            if not self._line_start:
                out.append(prose_part("\n"))
                self._line_start = True
            out.extend(self._flush())
        summary = dropped_summary(self.dropped)
        if summary:  # one line after the answer: how many citations showed nothing, and why
            lead = "" if self._line_start else "\n"
            out.append(note_part(f"{lead}\n({summary})\n"))
        return out

    # --------------------------------------------------------------------------------------------

    def _emit(self, part: AnswerPart, out: list[AnswerPart]) -> None:
        if part.text:
            out.append(part)
            if part.text.strip():
                self._line_start = False

    def _flush(self) -> list[AnswerPart]:
        blocks = [code_part(c) for c in self._pending]
        self._pending = []
        return blocks

    def _drain(self) -> list[AnswerPart]:
        out: list[AnswerPart] = []
        while self._buf:
            at = _SPECIAL.search(self._buf)
            if at is None:
                self._emit(prose_part(self._buf), out)
                self._buf = ""
                break
            self._emit(prose_part(self._buf[:at.start()]), out)
            self._buf = self._buf[at.start():]
            char = self._buf[0]
            if char == "\n":
                self._buf = self._buf[1:]
                out.append(prose_part("\n"))
                self._line_start = True
                out.extend(self._flush())
            elif char == "[":
                self._marker(out)
            else:
                self._sentinel(out)
        return out

    def _marker(self, out: list[AnswerPart]) -> None:
        """At '[': splice a marker, or pass the bracket through (the prose filter emits markers whole)."""
        match = CITATION_MARKER.match(self._buf)
        if match is None:
            self._emit(prose_part("["), out)
            self._buf = self._buf[1:]
            return
        self._buf = self._buf[match.end():]
        self.stats["markers"] += 1
        resolved = self.resolver.resolve(match.group(1))
        if isinstance(resolved, Dropped):
            self.stats[resolved.reason] += 1
            self.dropped[resolved.reason] += 1
            self._emit(note_part(resolved.placeholder), out)
            return
        shown = next((c for c in self.citations if c.path == resolved.path
                      and c.start_line <= resolved.start_line and resolved.end_line <= c.end_line), None)
        if shown is not None:
            self.stats["repeated"] += 1
            self._emit(ref_part(shown, ", shown above"), out)
            return
        if resolved.snapped:
            self.stats["snapped"] += 1
        self.citations.append(resolved)
        self._pending.append(resolved)
        self._emit(ref_part(resolved), out)

    def _sentinel(self, out: list[AnswerPart]) -> None:
        """At '<': consume the abstention sentinel (emitted whole by the prose filter), or pass it through."""
        if self._buf.startswith(ABSTAIN):
            self.abstained = True
            self._buf = self._buf[len(ABSTAIN):]
            return
        self._emit(prose_part("<"), out)
        self._buf = self._buf[1:]
