"""Every conversion between LSP shapes and engine shapes, in one place.

Engine lines are 1-based and inclusive; LSP lines are 0-based. A span of lines a..b is sent as
`{start: {line: a-1, character: 0}, end: {line: b, character: 0}}` (docs/protocol.md). Results of the custom
`codeloupe/*` requests are plain JSON dicts in the protocol's camelCase shapes; standard features use
lsprotocol types.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.uris import from_fs_path, to_fs_path

from codeloupe.ask.events import AskEvent, AskResult, Citation
from codeloupe.types import Bundle, ChunkHit, FileHit, IndexStatus, LaneStatus, Snippet

JSON = dict[str, Any]

# ------------------------------------------------------------------------------------------ uris, lines


def uri_to_path(uri: str) -> Path | None:
    """The filesystem path of a `file:` URI, or None for any other scheme."""
    if not uri.startswith("file:"):
        return None
    fs_path = to_fs_path(uri)
    return Path(fs_path) if fs_path else None


def path_to_uri(path: Path | str) -> str:
    uri = from_fs_path(str(path))
    if uri is None:  # only for non-absolute input, which the callers never pass
        raise ValueError(f"{path}: not an absolute path")
    return uri


def file_uri(root: Path, rel_path: str) -> str:
    return path_to_uri(root / rel_path)


def lines_to_range(start_line: int, end_line: int) -> JSON:
    """1-based inclusive lines a..b -> the LSP range covering those whole lines."""
    return {"start": {"line": start_line - 1, "character": 0}, "end": {"line": end_line, "character": 0}}


def lines_to_lsp_range(start_line: int, end_line: int) -> lsp.Range:
    return lsp.Range(start=lsp.Position(line=start_line - 1, character=0),
                     end=lsp.Position(line=end_line, character=0))


def range_to_lines(start: tuple[int, int], end: tuple[int, int]) -> tuple[int, int]:
    """An LSP range ((line, character), (line, character)) -> the 1-based inclusive lines it touches.

    An end at character 0 of a later line does not touch that line (the shape `lines_to_range` produces).
    """
    first = start[0] + 1
    last = end[0] if end[1] == 0 and end[0] > start[0] else end[0] + 1
    return first, max(first, last)


def location(root: Path, rel_path: str, start_line: int, end_line: int) -> JSON:
    return {"uri": file_uri(root, rel_path), "range": lines_to_range(start_line, end_line)}


def lsp_location(root: Path, rel_path: str, start_line: int, end_line: int) -> lsp.Location:
    return lsp.Location(uri=file_uri(root, rel_path), range=lines_to_lsp_range(start_line, end_line))


def position(line0: int, character: int = 0) -> JSON:
    return {"line": line0, "character": character}


# ------------------------------------------------------------------------------------------ search


def _snippet(snippet: Snippet | None) -> JSON | None:
    if snippet is None:
        return None
    return {"text": snippet.text, "startLine": snippet.start_line - 1, "anchorLine": snippet.anchor_line - 1,
            "truncated": snippet.truncated}


def _chunk(root: Path, chunk: ChunkHit, in_core: bool) -> JSON:
    return {
        "location": location(root, chunk.path, chunk.start_line, chunk.end_line),
        "score": chunk.score, "kind": chunk.kind, "name": chunk.name, "breadcrumb": chunk.breadcrumb,
        "symbols": list(chunk.symbols), "lanes": dict(chunk.lanes),
        "text": chunk.text if in_core else "",
        "snippet": _snippet(chunk.snippet),
    }


def file_result(root: Path, hit: FileHit, in_core: bool) -> JSON:
    return {
        "uri": file_uri(root, hit.path), "path": hit.path, "rank": hit.rank, "score": hit.score,
        "language": hit.language, "why": hit.why, "via": hit.via, "symbols": list(hit.symbols),
        "location": location(root, hit.path, hit.best_start_line, hit.best_end_line),
        "chunks": [_chunk(root, c, in_core) for c in hit.chunks],
    }


def lane(status: LaneStatus) -> JSON:
    return {"name": status.name, "ready": status.ready, "coverage": status.coverage, "note": status.note}


def search_result(bundle: Bundle) -> JSON:
    root = Path(bundle.root)
    return {
        "query": bundle.query, "issueMode": bundle.issue_mode, "mode": bundle.mode,
        "core": [file_result(root, hit, True) for hit in bundle.core],
        "related": [file_result(root, hit, False) for hit in bundle.related],
        "lanes": [lane(s) for s in bundle.lanes],
        "timingMs": dict(bundle.timing_ms),
    }


# ------------------------------------------------------------------------------------------ symbols

_SYMBOL_KINDS = {
    "function": lsp.SymbolKind.Function, "method": lsp.SymbolKind.Method, "class": lsp.SymbolKind.Class,
    "struct": lsp.SymbolKind.Struct, "interface": lsp.SymbolKind.Interface, "trait": lsp.SymbolKind.Interface,
    "enum": lsp.SymbolKind.Enum, "constant": lsp.SymbolKind.Constant, "const": lsp.SymbolKind.Constant,
    "variable": lsp.SymbolKind.Variable, "type": lsp.SymbolKind.TypeParameter, "module": lsp.SymbolKind.Module,
    "namespace": lsp.SymbolKind.Namespace, "property": lsp.SymbolKind.Property, "field": lsp.SymbolKind.Field,
    "constructor": lsp.SymbolKind.Constructor, "section": lsp.SymbolKind.String,
    "header": lsp.SymbolKind.Namespace,
}


def symbol_kind(kind: str) -> lsp.SymbolKind:
    return _SYMBOL_KINDS.get(kind, lsp.SymbolKind.Object)


# ------------------------------------------------------------------------------------------ status


def folder_status(uri: str, status: IndexStatus, state: str, message: str) -> JSON:
    return {
        "uri": uri, "root": status.root, "state": state, "files": status.files, "chunks": status.chunks,
        "symbols": status.symbols, "vectors": {"done": status.vectors_done, "total": status.vectors_total},
        "languages": dict(status.languages), "provider": status.provider, "model": status.model,
        "indexPath": status.index_path, "message": message,
    }


# ------------------------------------------------------------------------------------------ ask


def citation(root: Path, cited: Citation) -> JSON:
    return {"k": cited.k, "location": location(root, cited.path, cited.start_line, cited.end_line),
            "path": cited.path, "startLine": cited.start_line, "endLine": cited.end_line, "text": cited.text}


def ask_result(result: AskResult) -> JSON:
    root = Path(result.bundle.root)
    core_paths = {hit.path for hit in result.bundle.core}
    return {
        "answer": result.answer,
        "citations": [citation(root, c) for c in result.citations],
        "uncited": [file_result(root, hit, hit.path in core_paths) for hit in result.uncited],
        "abstained": result.abstained, "fallback": result.fallback,
        "bundle": search_result(result.bundle),
    }


def ask_event(event: AskEvent) -> JSON:
    """One streamed event; `done` goes without its result, which is the request's response."""
    return {"type": event.type, **event.data}


def fallback_answer(bundle: JSON, reason: str) -> JSON:
    """The ask result when no narrated answer is possible: the bundle itself, rendered as markdown."""
    lines = [f"_No walkthrough ({reason}); the ranked files for_ **{bundle['query']}**:_", ""]
    for file in bundle["core"]:
        lines.append(f"### {file['rank']}. [{file['path']}]({_link(file['location'])})  ")
        lines.append(file["why"])
        for chunk in file["chunks"]:
            lines += ["", f"`{chunk['breadcrumb']}`", "", f"```{file['language']}", chunk["text"].rstrip("\n"),
                      "```"]
        lines.append("")
    if bundle["related"]:
        lines.append("**Related**")
        lines += [f"- [{f['path']}]({_link(f['location'])}): {f['why']}" for f in bundle["related"]]
    return {"answer": "\n".join(lines).rstrip() + "\n", "citations": [],
            "uncited": [*bundle["core"], *bundle["related"]], "abstained": False, "fallback": reason,
            "bundle": bundle}


def _link(loc: JSON) -> str:
    return f"{loc['uri']}#L{loc['range']['start']['line'] + 1}"


def _definition_line(chunk: ChunkHit, bare_name: str) -> int:
    """The 1-based line in the chunk that first names `bare_name` as a whole word (its definition line)."""
    pattern = re.compile(rf"(?<![\w$]){re.escape(bare_name)}(?![\w$])")
    for offset, line in enumerate(chunk.text.splitlines()):
        if pattern.search(line):
            return chunk.start_line + offset
    return chunk.start_line


def workspace_symbols(bundle: Bundle) -> list[lsp.WorkspaceSymbol]:
    """One WorkspaceSymbol per symbol of every matching chunk, in rank order.

    A symbol that the chunk is named after spans the chunk (the chunker cuts at definitions); any other
    symbol in it spans the line that defines it.
    """
    root = Path(bundle.root)
    out: list[lsp.WorkspaceSymbol] = []
    seen: set[tuple[str, str]] = set()
    for hit in bundle.files:
        for chunk in hit.chunks:
            for qualified in chunk.symbols or ([chunk.name] if chunk.name else []):
                if (hit.path, qualified) in seen:
                    continue
                seen.add((hit.path, qualified))
                container, _, bare = qualified.rpartition(".")
                if bare == chunk.name:
                    start, end = chunk.start_line, chunk.end_line
                else:
                    start = end = _definition_line(chunk, bare)
                out.append(lsp.WorkspaceSymbol(
                    name=bare, kind=symbol_kind(chunk.kind if bare == chunk.name else ""),
                    location=lsp_location(root, hit.path, start, end), container_name=container or hit.path))
    return out
