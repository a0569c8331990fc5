"""Answer parts for what is not narrated: the plain bundle (every fallback) and the uncited-candidates footer."""

from __future__ import annotations

from codeloupe.ask.events import AnswerPart, Citation
from codeloupe.ask.excerpts import Excerpt
from codeloupe.ask.splice import Dropped, SpanResolver, code_part, note_part
from codeloupe.types import Bundle, FileHit, code_span, one_line


def heading_part(text: str, markdown: str) -> AnswerPart:
    return AnswerPart("heading", text, markdown)


def map_line(hit: FileHit) -> list[AnswerPart]:
    """`- path:a-b (symbols): why`, the location linked to the file's best span; each on one line (a why names other
    files: `called from PATH`)."""
    span = f"{hit.path}:{hit.best_start_line}-{hit.best_end_line}"
    symbols = f" ({one_line(', '.join(hit.symbols[:6]))})" if hit.symbols else ""
    why = f": {one_line(hit.why)}" if hit.why else ""
    where = Citation(0, hit.path, hit.best_start_line, hit.best_end_line, "", hit.language)
    return [note_part("- "), AnswerPart("ref", one_line(span), code_span(span), where), note_part(f"{symbols}{why}\n")]


def bundle_parts(bundle: Bundle, resolver: SpanResolver) -> list[AnswerPart]:
    """CORE files with their chunks verbatim from disk, then RELATED files as a map."""
    if not bundle.files:
        return [note_part(f"No code in the index matches {bundle.query!r}.\n")]
    parts = [heading_part("Core files", "**Core files**\n")] if bundle.core else []
    for hit in bundle.core:
        parts.append(heading_part(one_line(hit.path), f"\n#### {code_span(hit.path)}\n"))
        if hit.why:
            parts.append(note_part(f"{one_line(hit.why)}\n"))
        for chunk in sorted(hit.chunks, key=lambda c: c.start_line):
            excerpt = Excerpt(0, hit.path, hit.language, chunk.start_line, chunk.end_line, chunk.text,
                              chunk.breadcrumb)
            shown = resolver.read_span(excerpt, chunk.start_line, chunk.end_line, requested=None)
            if isinstance(shown, Citation):
                parts.append(code_part(shown))
            elif isinstance(shown, Dropped) and shown.note:
                parts.append(note_part(f"\n{shown.note}\n"))
    if bundle.related:
        parts.append(heading_part("Related files", "\n**Related files**\n\n"))
        parts.extend(map_parts(bundle.related))
    return parts


def footer_parts(uncited: list[FileHit]) -> list[AnswerPart]:
    if not uncited:
        return []
    heading = heading_part("Also retrieved, not cited", "\n---\n**Also retrieved, not cited**\n\n")
    return [heading, *map_parts(uncited)]


def map_parts(hits: list[FileHit]) -> list[AnswerPart]:
    """A map line per file, the long tail (`FileHit.tail`) folded into one count: it stays in the result's
    structured lists, and an answer that listed a hundred weak candidates would bury the ones that matter."""
    parts = [part for hit in hits if not hit.tail for part in map_line(hit)]
    tail = sum(hit.tail for hit in hits)
    if tail:
        parts.append(note_part(f"- and {tail} lower-ranked candidate files, listed with the search results\n"))
    return parts
