"""Turn a model's cited prose into an answer whose code comes from disk.

The model writes prose with `[[k]]` (whole excerpt k) or `[[k:a-b]]` (lines a-b of the file, inside excerpt
k). `Splicer` consumes the text as it streams (a marker, a fence or the abstention sentinel may be split
across deltas) and emits pieces: the prose, an inline reference where each marker stood, and after the line
that cited them the verbatim blocks (`SpanResolver` reads them from disk). Code the model wrote itself is
removed; markers that resolve to nothing are removed; every removal is counted in `stats`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from codeloupe.ask.events import Citation
from codeloupe.ask.excerpts import Excerpt, Excerpts
from codeloupe.ask.sources import Sources
from codeloupe.store import SymbolRow

ABSTAIN = "<<ABSTAIN>>"
_MARKER_INNER_MAX = 40
_MARKER = re.compile(rf"\[\[([^\[\]\n]{{0,{_MARKER_INNER_MAX}}})\]\]")
_SPEC = re.compile(r"\s*(\d+)\s*(?::\s*(\d+)\s*(?:[-\u2013\u2014]\s*(\d+)\s*)?)?")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
_FENCE_MAYBE = re.compile(r" {0,3}(`{0,2}|~{0,2})")  # a line start that may still become a fence
_SPECIAL = re.compile(r"[\n\[<]")
SNAP_CONTEXT_LINES = 2  # either side of cited lines that no definition inside the excerpt encloses


@dataclass(frozen=True)
class Dropped:
    """A citation that shows nothing: `reason` is the stats key, `note` (optional) replaces the marker."""

    reason: str  # malformed | unknown | out_of_range | unreadable | stale
    note: str = ""


@dataclass(frozen=True)
class Piece:
    kind: str  # prose (the model's words) | ref (where a marker stood) | code (a spliced block) | note
    text: str
    citation: Citation | None = None


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
        a, b = min(a, b), max(a, b)
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
            return Dropped("unreadable", f"({source.problem})")
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
        old = excerpt.text.splitlines(keepends=True)[start - excerpt.start_line:end - excerpt.start_line + 1]
        at = relocate(old, source.lines, start)
        if at is None:
            return Dropped("stale", f"(`{excerpt.path}` changed since it was indexed; the cited lines are gone)")
        if source.changed:
            self.stats["relocated"] += 1
        new_end = at + len(old) - 1
        return Citation(excerpt.k, excerpt.path, at, new_end, "".join(source.lines[at - 1:new_end]),
                        excerpt.language, requested, False, changed=source.changed)


def inline_ref(c: Citation) -> str:
    return f"`{c.path}:{c.start_line}-{c.end_line}`"


def render_block(c: Citation) -> str:
    """A fenced block (the fence longer than any backtick run inside), captioned with the real location."""
    longest = max((len(run) for run in re.findall(r"`+", c.text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = c.text if c.text.endswith("\n") else c.text + "\n"
    note = " (changed on disk since indexing: lines re-located)" if c.changed else ""
    return f"\n{inline_ref(c)}{note}\n{fence}{c.language}\n{body}{fence}\n"


class Splicer:
    """Streamed prose in, grounded pieces out. `feed` each delta, then `finish` once."""

    def __init__(self, resolver: SpanResolver) -> None:
        self.resolver = resolver
        self.stats = resolver.stats
        self.citations: list[Citation] = []
        self.abstained = False
        self._buf = ""
        self._fence: str | None = None  # the fence of a code block the model wrote, while inside it
        self._line_start = True
        self._pending: list[Citation] = []  # cited on the current line; shown once the line ends

    def feed(self, delta: str) -> list[Piece]:
        self._buf += delta
        return self._drain(final=False)

    def finish(self) -> list[Piece]:
        out = self._drain(final=True)
        if self._pending:
            if not self._line_start:
                out.append(Piece("prose", "\n"))
            out.extend(self._flush())
        return out

    # --------------------------------------------------------------------------------------------

    def _prose(self, text: str, out: list[Piece], kind: str = "prose") -> None:
        if text:
            out.append(Piece(kind, text))
            if text.strip():
                self._line_start = False

    def _flush(self) -> list[Piece]:
        blocks = [Piece("code", render_block(c), c) for c in self._pending]
        self._pending = []
        return blocks

    def _drain(self, final: bool) -> list[Piece]:
        out: list[Piece] = []
        while self._buf:
            if self._fence is not None:
                if not self._skip_fenced_line(final):
                    break
                continue
            if self._line_start and self._at_fence(final, out):
                if self._fence is None:
                    break  # undecided: wait for more text
                continue
            at = _SPECIAL.search(self._buf)
            if at is None:
                self._prose(self._buf, out)
                self._buf = ""
                break
            self._prose(self._buf[:at.start()], out)
            self._buf = self._buf[at.start():]
            char = self._buf[0]
            if char == "\n":
                self._buf = self._buf[1:]
                out.append(Piece("prose", "\n"))
                self._line_start = True
                out.extend(self._flush())
            elif char == "[":
                if not self._marker(final, out):
                    break
            elif not self._sentinel(final, out):
                break
        return out

    def _skip_fenced_line(self, final: bool) -> bool:
        """Drop one line of model-written code; False when the line is not complete yet."""
        newline = self._buf.find("\n")
        if newline < 0:
            if final:
                self._buf = ""  # an unclosed fence runs to the end: all of it is dropped
                self._fence = None
            return final
        line, self._buf = self._buf[:newline + 1], self._buf[newline + 1:]
        self.stats["code_lines_removed"] += 1
        fence = self._fence or "```"
        if line.strip() and set(line.strip()) == {fence[0]} and len(line.strip()) >= len(fence) \
                and len(line) - len(line.lstrip(" ")) <= 3:
            self._fence = None
            self._line_start = True
        return True

    def _at_fence(self, final: bool, out: list[Piece]) -> bool:
        """At a line start: True when a fence opened (`_fence` set) or it is too early to tell."""
        head = self._buf.split("\n", 1)[0]
        complete = "\n" in self._buf or final
        opened = _FENCE_OPEN.match(head)
        if opened and (complete or opened.end() < len(head)):
            self._fence = opened.group(1)
            self.stats["code_blocks_removed"] += 1
            self._buf = self._buf[opened.end():]  # the rest of the opening line is dropped as a fenced line
            return True
        return not complete and bool(opened or _FENCE_MAYBE.fullmatch(head))

    def _marker(self, final: bool, out: list[Piece]) -> bool:
        """At '[': splice a marker, or pass the bracket through. False: wait for more text."""
        match = _MARKER.match(self._buf)
        if match is None:
            tail = self._buf
            could_grow = (tail == "[" or tail.startswith("[[")) and "]]" not in tail and "\n" not in tail \
                and len(tail) <= _MARKER_INNER_MAX + 4
            if could_grow and not final:
                return False
            self._prose("[", out)
            self._buf = self._buf[1:]
            return True
        self._buf = self._buf[match.end():]
        self.stats["markers"] += 1
        resolved = self.resolver.resolve(match.group(1))
        if isinstance(resolved, Dropped):
            self.stats[resolved.reason] += 1
            self._prose(resolved.note, out, "note")
            return True
        shown = next((c for c in self.citations if c.path == resolved.path
                      and c.start_line <= resolved.start_line and resolved.end_line <= c.end_line), None)
        if shown is not None:
            self.stats["repeated"] += 1
            self._prose(f"({inline_ref(shown)}, shown above)", out, "ref")
            return True
        if resolved.snapped:
            self.stats["snapped"] += 1
        self.citations.append(resolved)
        self._pending.append(resolved)
        self._prose(f"({inline_ref(resolved)})", out, "ref")
        return True

    def _sentinel(self, final: bool, out: list[Piece]) -> bool:
        """At '<': consume the abstention sentinel, or pass the bracket through. False: wait for more."""
        if self._buf.startswith(ABSTAIN):
            self.abstained = True
            self._buf = self._buf[len(ABSTAIN):]
            return True
        if ABSTAIN.startswith(self._buf) and not final:
            return False
        self._prose("<", out)
        self._buf = self._buf[1:]
        return True
