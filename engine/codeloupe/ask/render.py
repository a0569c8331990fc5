"""Markdown for what is not narrated: the plain bundle (every fallback) and the uncited-candidates footer."""

from __future__ import annotations

from codeloupe.ask.events import Citation
from codeloupe.ask.excerpts import Excerpt
from codeloupe.ask.splice import Dropped, SpanResolver, render_block
from codeloupe.types import Bundle, FileHit


def _file_line(hit: FileHit) -> str:
    symbols = f" ({', '.join(hit.symbols[:6])})" if hit.symbols else ""
    why = f": {hit.why}" if hit.why else ""
    return f"- `{hit.path}:{hit.best_start_line}-{hit.best_end_line}`{symbols}{why}"


def render_bundle(bundle: Bundle, resolver: SpanResolver) -> str:
    """CORE files with their chunks verbatim from disk, then RELATED files as a map."""
    if not bundle.files:
        return f"No code in the index matches {bundle.query!r}.\n"
    parts = []
    if bundle.core:
        parts.append("**Core files**\n")
    for hit in bundle.core:
        parts.append(f"\n#### `{hit.path}`\n{hit.why}\n" if hit.why else f"\n#### `{hit.path}`\n")
        for chunk in sorted(hit.chunks, key=lambda c: c.start_line):
            excerpt = Excerpt(0, hit.path, hit.language, chunk.start_line, chunk.end_line, chunk.text,
                              chunk.breadcrumb)
            shown = resolver.read_span(excerpt, chunk.start_line, chunk.end_line, requested=None)
            if isinstance(shown, Citation):
                parts.append(render_block(shown))
            elif isinstance(shown, Dropped) and shown.note:
                parts.append(f"\n{shown.note}\n")
    if bundle.related:
        parts.append("\n**Related files**\n\n" + "\n".join(_file_line(hit) for hit in bundle.related) + "\n")
    return "".join(parts)


def render_footer(uncited: list[FileHit]) -> str:
    if not uncited:
        return ""
    return "\n---\n**Also retrieved, not cited**\n\n" + "\n".join(_file_line(hit) for hit in uncited) + "\n"
