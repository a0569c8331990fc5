"""Every conversion between LSP shapes and engine shapes, in one place.

Engine lines are 1-based and inclusive; LSP lines are 0-based. A span of lines a..b is sent as
`{start: {line: a-1, character: 0}, end: {line: b, character: 0}}` (docs/protocol.md). Results of the custom
`codeloupe/*` requests are plain JSON dicts in the protocol's camelCase shapes; standard features use
lsprotocol types.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.uris import from_fs_path, to_fs_path

from codeloupe.types import (
    Bundle,
    ChunkHit,
    FileHit,
    Flow,
    IndexStatus,
    LaneStatus,
    Located,
    PrunedChunk,
    PrunedFile,
    Related,
    Snippet,
    Symbol,
    Tour,
    UsedDefinition,
    code_fence,
    code_span,
    one_line,
    visible,
    visible_lines,
)

if TYPE_CHECKING:  # imported lazily: `codeloupe.ask` pulls in the openai client, seconds of start-up
    from codeloupe.api import (
        AnswerPart,
        AskEvent,
        AskResult,
        Citation,
        FileSummary,
        GraphFolder,
        GraphMap,
        GraphNode,
        GraphPath,
        Neighbour,
        NotInGraph,
    )

JSON = dict[str, Any]
# A workspace path -> its URI: a `file:` URI under a folder, or a shared-index URI (`codeloupe_lsp.shared`).
UriOf = Callable[[str], str]
# A workspace path and the revision it was read at ("" for a folder's file) -> its URI.
UriAt = Callable[[str, str], str]

# ------------------------------------------------------------------------------------------ uris, lines


def uri_to_path(uri: str) -> Path | None:
    """The filesystem path of a `file:` URI, or None for any other scheme or for a path no file can have (a NUL
    byte, `%00`: every use of it would raise)."""
    if not uri.startswith("file:"):
        return None
    fs_path = to_fs_path(uri)
    return Path(fs_path) if fs_path and "\x00" not in fs_path else None


def path_to_uri(path: Path | str) -> str:
    uri = from_fs_path(str(path))
    if uri is None:  # only for non-absolute input, which the callers never pass
        raise ValueError(f"{path}: not an absolute path")
    return uri


@lru_cache(maxsize=65_536)
def file_uri(root: Path, rel_path: str) -> str:
    """Kept per path: a search answer names every candidate file in two or three places, and the same files
    come back query after query; the conversion is most of rendering a long RELATED map."""
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


def location(uri_of: UriOf, rel_path: str, start_line: int, end_line: int) -> JSON:
    return span_location(uri_of(rel_path), start_line, end_line)


def span_location(uri: str, start_line: int, end_line: int) -> JSON:
    return {"uri": uri, "range": lines_to_range(start_line, end_line)}


def position(line0: int, character: int = 0) -> JSON:
    return {"line": line0, "character": character}


# ------------------------------------------------------------------------------------------ markdown

# A repository's text (a file's or a symbol's name, a signature, a docstring) is never markdown: every hover and
# rendered answer shows it as written. Read as markdown, a name or a doc line made links and images (an image is
# fetched as soon as the hover shows: `![](https://host/?leak)`), raw HTML, emphasis, headings and lists, and an
# HTML entity (`&#x202e;`) a character `visible` would have escaped.
# Markdown's syntax characters, CommonMark's and GitHub's (emphasis, code, links and images, raw HTML, entities,
# headings, lists, quotes, tables, strikethrough), each shown as itself by a backslash escape ...
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&])")
# ... and those that mean something only at the start of a line: a list's `-` and `1.`, a rule's `---`, a
# heading's `===` underline (a `-` inside a line, as in "non-blocking", is left as it is).
_LINE_START_SPECIAL = re.compile(r"^([ \t]*\d{0,9})([-.=])", re.MULTILINE)


def md_text(text: str) -> str:
    """Prose from elsewhere (a query, a reason, a doc line) shown as written: its control and bidi characters
    escaped (`visible`), every markdown syntax character escaped."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", visible(text))
    return _LINE_START_SPECIAL.sub(r"\1\\\2", escaped)


# ------------------------------------------------------------------------------------------ search


def _snippet(snippet: Snippet | None) -> JSON | None:
    if snippet is None:
        return None
    return {"text": snippet.text, "startLine": snippet.start_line - 1, "anchorLine": snippet.anchor_line - 1,
            "truncated": snippet.truncated, "anchorSymbol": snippet.anchor_symbol}


def _chunk(uri_of: UriOf, chunk: ChunkHit, in_core: bool) -> JSON:
    return {
        "location": span_location(uri_of(chunk.path), chunk.start_line, chunk.end_line),
        "score": chunk.score, "kind": chunk.kind, "name": chunk.name, "breadcrumb": chunk.breadcrumb,
        "symbols": list(chunk.symbols), "lanes": dict(chunk.lanes),
        "text": chunk.text if in_core else "",
        "snippet": _snippet(chunk.snippet),
    }


def file_result(uri_of: UriOf, hit: FileHit, in_core: bool) -> JSON:
    return {
        "uri": uri_of(hit.path), "path": hit.path, "rank": hit.rank, "score": hit.score,
        "language": hit.language, "why": hit.why, "via": hit.via, "symbols": list(hit.symbols),
        "location": span_location(uri_of(hit.path), hit.best_start_line, hit.best_end_line),
        "chunks": [_chunk(uri_of, c, in_core) for c in hit.chunks], "tail": hit.tail,
        "repository": hit.repository,
    }


def lane(status: LaneStatus) -> JSON:
    return {"name": status.name, "ready": status.ready, "coverage": status.coverage, "note": status.note,
            "off": status.off}




def pruned_chunk(uri_of: UriOf, chunk: PrunedChunk) -> JSON:
    """One chunk of `codeloupe/search` with `prune`: the CLI's `--prune` entry in camelCase and 0-based lines
    (as everywhere in the protocol), plus its URI and location."""
    return {"rank": chunk.rank, "path": chunk.path, "uri": uri_of(chunk.path),
            "location": span_location(uri_of(chunk.path), chunk.start_line, chunk.end_line),
            "startLine": chunk.start_line - 1, "endLine": chunk.end_line - 1, "anchorLine": chunk.anchor_line - 1,
            "breadcrumb": chunk.breadcrumb, "text": chunk.text, "truncated": chunk.truncated,
            "textStartLine": chunk.text_start_line - 1, "repository": chunk.repository, "revision": chunk.revision}


def pruned_file(uri_of: UriOf, pruned: PrunedFile) -> JSON:
    """One candidate with no chunk in `codeloupe/search` with `prune`: where it matched best, 0-based."""
    return {"rank": pruned.rank, "path": pruned.path, "uri": uri_of(pruned.path),
            "location": span_location(uri_of(pruned.path), pruned.start_line, pruned.end_line),
            "startLine": pruned.start_line - 1, "endLine": pruned.end_line - 1, "repository": pruned.repository,
            "revision": pruned.revision}


def pruned_result(bundle: Bundle, uri_of: UriOf | None = None) -> JSON:
    """`uri_of`: how the bundle's paths become URIs (default: `file:` URIs under the bundle's root)."""
    uri_of = uri_of or partial(file_uri, Path(bundle.root))
    return {"query": bundle.query, "chunks": [pruned_chunk(uri_of, c) for c in bundle.pruned()],
            "tail": [pruned_file(uri_of, f) for f in bundle.pruned_files()]}


def search_result(bundle: Bundle, uri_of: UriOf | None = None, *,
                  uri_for: Callable[[FileHit], UriOf] | None = None) -> JSON:
    """`uri_of`: how the bundle's paths become URIs (default: `file:` URIs under the bundle's root); `uri_for`,
    for a bundle of several folders or repositories: each hit's own (by its `repository`)."""
    uri_of = uri_of or partial(file_uri, Path(bundle.root))
    per_hit = uri_for or (lambda hit: uri_of)
    return {
        "query": bundle.query, "issueMode": bundle.issue_mode, "mode": bundle.mode,
        "core": [file_result(per_hit(hit), hit, True) for hit in bundle.core],
        "related": [file_result(per_hit(hit), hit, False) for hit in bundle.related],
        "lanes": [lane(s) for s in bundle.lanes],
        "notes": bundle.notes,
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


def workspace_symbols(uri_of: UriOf, found: list[tuple[str, Symbol]]) -> list[lsp.WorkspaceSymbol]:
    """(path, definition) pairs -> WorkspaceSymbols spanning each definition's lines."""
    return [lsp.WorkspaceSymbol(name=symbol.name, kind=symbol_kind(symbol.kind),
                                location=lsp.Location(uri=uri_of(path),
                                                      range=lines_to_lsp_range(symbol.start_line, symbol.end_line)),
                                container_name=symbol.parent or path)
            for path, symbol in found]


# ------------------------------------------------------------------------------------------ status


def _index_counts(status: IndexStatus) -> JSON:
    return {
        "files": status.files, "chunks": status.chunks, "symbols": status.symbols,
        "vectors": {"done": status.vectors_done, "total": status.vectors_total},
        "languages": dict(status.languages), "provider": status.provider, "model": status.model,
        "indexPath": status.index_path, "skipped": dict(status.skipped),
    }


def folder_status(uri: str, status: IndexStatus, state: str, message: str, trusted: bool,
                  settings_files: list[str]) -> JSON:
    return {"uri": uri, "root": status.root, "state": state, "trusted": trusted, "settingsFiles": settings_files,
            **_index_counts(status), "message": message}


def repository_status(uri: str, repository: str, commit: str, status: IndexStatus) -> JSON:
    """A shared repository's `codeloupe/status` entry: what the shared index holds for it, at which commit."""
    return {"uri": uri, "repository": repository, "commit": commit, **_index_counts(status)}


def status_result(folders: list[JSON], repositories: list[JSON], repositories_message: str) -> JSON:
    """The `codeloupe/status` response with every text in it `one_line`'d, keys included (`languages`, `skipped`),
    but its URIs: the clients show its root, index file, messages and repository names as they are (Neovim joins
    them into the lines of `:Codeloupe status`, VS Code into its status bar's tooltip), and a clone's folder
    name or a database's error can hold a newline, an escape sequence or a bidi override.
    A URI stays as it is (percent-encoded already): a client matches it to its folders."""
    return _shown({"folders": folders, "repositories": repositories, "repositoriesMessage": repositories_message})


def _shown(value: Any, key: str = "") -> Any:
    if isinstance(value, str):
        return value if key == "uri" else one_line(value)
    if isinstance(value, dict):
        return {one_line(k): _shown(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(item, key) for item in value]
    return value


# ------------------------------------------------------------------------------------------ ask


def citation(uri_of: UriOf, cited: Citation) -> JSON:
    return {"k": cited.k, "location": location(uri_of, cited.path, cited.start_line, cited.end_line),
            "path": cited.path, "startLine": cited.start_line, "endLine": cited.end_line, "text": cited.text}


def answer_part(uri_of: UriOf, part: AnswerPart) -> JSON:
    """Plain text, or (ref and code) a span with its location: clients render only code parts as code, and say under
    a code part whose file changed on disk since indexing that its lines were re-located (`changed`)."""
    out: JSON = {"kind": part.kind, "text": part.text}
    if part.citation is not None:
        c = part.citation
        out.update(path=c.path, startLine=c.start_line, endLine=c.end_line, language=c.language,
                   location=location(uri_of, c.path, c.start_line, c.end_line))
        if part.kind == "code":
            out["changed"] = c.changed
    return out


def ask_result(result: AskResult, uri_of: UriOf | None = None) -> JSON:
    """`uri_of`: how the answer's paths become URIs (default: `file:` URIs under the bundle's root)."""
    uri_of = uri_of or partial(file_uri, Path(result.bundle.root))
    core_paths = {hit.path for hit in result.bundle.core}
    return {
        "answer": result.answer,
        "parts": [answer_part(uri_of, p) for p in result.parts],
        "citations": [citation(uri_of, c) for c in result.citations],
        "uncited": [file_result(uri_of, hit, hit.path in core_paths) for hit in result.uncited],
        "abstained": result.abstained, "fallback": result.fallback,
        "bundle": search_result(result.bundle, uri_of),
        "flow": dataclasses.asdict(result.flow) if result.flow is not None else None,
    }


def ask_event(event: AskEvent, uri_at: UriAt) -> JSON:
    """One streamed event; `done` goes without its result, which is the request's response. A `delta` naming a span
    (a ref or code part) gets its `location`, the document the result's part names: an editor that keeps the draft
    without its code (a reloaded window's) reads the span from it again, as it does the answer's."""
    out: JSON = {"type": event.type, **event.data}
    if event.type == "delta" and isinstance(out.get("path"), str):
        uri = uri_at(out["path"], str(out.get("revision", "")))
        out["location"] = span_location(uri, out["start_line"], out["end_line"])
    return out


def fallback_answer(bundle: JSON, reason: str) -> JSON:
    """The ask result when no narrated answer is possible: the bundle itself, rendered as markdown."""
    lines = [f"_No walkthrough ({md_text(reason)}); the ranked files for_ **{md_text(bundle['query'])}**", ""]
    for file in bundle["core"]:
        lines.append(f"### {file['rank']}. [{code_span(file['path'])}]({_link(file['location'])})  ")
        lines.append(md_text(one_line(file["why"])))  # it names files ("called from PATH"): on one line
        for chunk in file["chunks"]:
            text = "\n".join(visible_lines(chunk["text"]))  # shown as the CLI shows code; `bundle` keeps the bytes
            fence = code_fence(text)
            lines += ["", code_span(chunk["breadcrumb"]), "", f"{fence}{file['language']}", text, fence]
        lines.append("")
    if bundle["related"]:
        lines.append("**Related**")
        lines += [f"- [{code_span(f['path'])}]({_link(f['location'])}): {md_text(one_line(f['why']))}" for f in bundle["related"]
                  if not f["tail"]]
        tail = sum(f["tail"] for f in bundle["related"])
        if tail:
            lines.append(f"- and {tail} lower-ranked candidate files, listed with the search results")
    return {"answer": "\n".join(lines).rstrip() + "\n", "parts": [], "citations": [],
            "uncited": [*bundle["core"], *bundle["related"]], "abstained": False, "fallback": reason,
            "bundle": bundle, "flow": None}


def _link(loc: JSON) -> str:
    return f"{loc['uri']}#L{loc['range']['start']['line'] + 1}"


# ------------------------------------------------------------------------------------------ graph


def _span_location(uri_of: UriOf, span: JSON) -> JSON:
    return location(uri_of, span["path"], span["startLine"], span["endLine"])


def _with_uri(uri_of: UriOf, entry: JSON) -> JSON:
    return {**entry, "uri": uri_of(entry["path"])}


def graph_map(uri_of: UriOf, graph: GraphMap, html: str | None) -> JSON:
    """Communities are groups of two or more files; a file alone in its group is listed once in `unconnected`
    (the counts of docs/protocol.md)."""
    out = graph.to_dict()
    names = {c.id: c.name for c in graph.communities}
    out["nodes"] = [{**_with_uri(uri_of, node), "communityName": names.get(node["community"], "")}
                    for node in out["nodes"]]
    out["communities"] = [c for c in out["communities"] if c["size"] > 1]
    out["unconnected"] = sorted(m for c in graph.communities if c.size == 1 for m in c.members)
    if html is not None:
        out["html"] = html
    return out


def node_miss(uri_of: UriOf, miss: NotInGraph) -> JSON:
    return {"found": False, "node": miss.target, "message": str(miss),
            "suggestions": [{"path": p, "uri": uri_of(p)} for p in miss.suggestions]}


def path_miss(source: str, target: str, miss: NotInGraph) -> JSON:
    offer = f"; closest by name: {', '.join(miss.suggestions)}" if miss.suggestions else ""
    return {"from": source, "to": target, "found": False, "meetsInMiddle": False, "hops": [],
            "note": f"{miss}{offer}"}


def graph_node(uri_of: UriOf, node: GraphNode) -> JSON:
    out = {"found": True, **_with_uri(uri_of, node.to_dict())}
    out["imports"] = [_edge(uri_of, n) for n in out["imports"]]
    out["importers"] = [_edge(uri_of, n) for n in out["importers"]]
    out["semantic"] = [_with_uri(uri_of, s) for s in out["semantic"]]
    out["chunks"] = [{"location": _span_location(uri_of, c), "text": c["text"]} for c in out["chunks"]]
    return out


def graph_folder(uri_of: UriOf, folder: GraphFolder) -> JSON:
    """A folder's part of the graph."""
    out = {"found": True, **folder.to_dict(), "uri": uri_of(folder.path)}
    out["files"] = [_with_uri(uri_of, f) for f in out["files"]]
    out["uses"] = [_edge(uri_of, e) for e in out["uses"]]
    out["usedBy"] = [_edge(uri_of, e) for e in out["usedBy"]]
    return out


def _edge(uri_of: UriOf, edge: JSON) -> JSON:
    """A graph edge with its neighbour's `uri`, and its `use` (the engine's span, in the file that uses the other,
    which `uri` does not always name) as a Location."""
    return {**_with_uri(uri_of, edge), "use": _span_location(uri_of, edge["use"])}


def graph_path(uri_of: UriOf, path: GraphPath) -> JSON:
    out = path.to_dict()
    for hop in out["hops"]:
        for key in ("use", "definition"):
            if key in hop:
                hop[key] = _span_location(uri_of, hop[key])
        for key in ("useCode", "definitionCode"):  # the code read from disk: its location plus the text
            if key in hop:
                hop[key] = {"location": _span_location(uri_of, hop[key]), "text": hop[key]["text"],
                            "symbol": hop[key]["symbol"]}
    return out


# ------------------------------------------------------------------------------------------ lenses, hover

def line_location(uri_of: UriOf, rel_path: str, line: int) -> JSON:
    return location(uri_of, rel_path, line, line)


def _md_link(uri_of: UriOf, rel_path: str, line: int = 1) -> str:
    return f"[{code_span(rel_path)}]({uri_of(rel_path)}#L{line})"


def file_lens_title(summary: FileSummary) -> str:
    """One line of plain text over the file: its community's name (the repository's folders') escaped."""
    return f"{one_line(summary.community_name)} · {summary.imports} imports · {summary.importers} importers"


def users_lens_title(users: list[tuple[str, int]]) -> str:
    return f"used in {len(users)} file{'s' if len(users) != 1 else ''}"


def show_locations(title: str, uri: str, line0: int, locations: list[JSON]) -> lsp.Command:
    return lsp.Command(title=title, command="codeloupe.showLocations",
                       arguments=[uri, position(line0), locations])


def file_hover(uri_of: UriOf, node: GraphNode) -> str:
    """Markdown for a file: community, hub status, and every neighbour as a link."""
    status = " · **god node** (a hub: many files depend on it)" if node.god else ""
    out = [f"{code_span(node.path)} · community {code_span(node.community_name)}{status}"]
    # A neighbour opens where it uses this file (an importer), else at its top (an import's use is in this file).
    for title, group in (("Imports", node.imports), ("Imported by", node.importers)):
        if group:
            out += ["", f"{title}:"]
            out += [f"- {_md_link(uri_of, n.path, n.line if n.use.path == n.path else 1)} "
                    f"({n.kind}{': ' + ', '.join(code_span(s) for s in n.symbols[:5]) if n.symbols else ''})"
                    for n in group]
    if node.semantic:
        out += ["", "Reads like:"]
        out += [f"- {_md_link(uri_of, path)} (cosine {cosine:.2f})" for path, cosine in node.semantic]
    return "\n".join(out)


def import_hover(uri_of: UriOf, neighbour: Neighbour, summary: FileSummary) -> str:
    carriers = f" — uses {', '.join(code_span(s) for s in neighbour.symbols[:8])}" if neighbour.symbols else ""
    hub = " · **god node**" if summary.god else ""
    return (f"{_md_link(uri_of, neighbour.path)}{carriers}\n\n"
            f"community {code_span(summary.community_name)} · {summary.imports} imports · "
            f"{summary.importers} importers{hub}")


def users_hover(uri_of: UriOf, definition: UsedDefinition) -> str:
    """What the definition is (its signature, the first line of its docs), then where it is used."""
    lines = [code_span(definition.signature or definition.qualified_name)]
    if definition.doc:
        # A code span, not escaped prose: Neovim's hover shows markdown's backslash escapes as written
        # ("the user\'s name \(or None\)"), and hides a code span's backticks as VS Code does.
        lines += ["", code_span(definition.doc)]
    lines += ["", f"{code_span(definition.qualified_name)} is {users_lens_title(definition.users)}:", ""]
    lines += [f"- {_md_link(uri_of, path, line)} line {line}" for path, line in definition.users]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ flows, tour


def flow(uri_of: UriOf, cached: Flow) -> JSON:
    return {"id": cached.id, "question": cached.question, "mode": cached.mode, "created": cached.created,
            "served": cached.served, "stale": cached.stale,
            "files": [{"path": p, "uri": uri_of(p)} for p in cached.files]}


def tour(uri_of: UriOf, found: Tour) -> JSON:
    return {
        "entryPoints": [{"path": p.path, "kind": p.kind, "detail": p.detail,
                         "location": line_location(uri_of, p.path, p.line)} for p in found.entry_points],
        "stops": [{"name": s.name, "kind": s.kind, "path": s.path, "mentions": s.mentions,
                   "definitions": s.definitions, "location": line_location(uri_of, s.path, s.line)}
                  for s in found.stops],
        "names": found.names,
        "entryPointsNotShown": found.entry_points_not_shown,
    }


def related(uri_of: UriOf, found: Related) -> JSON:
    return {"uri": uri_of(found.path), "range": lines_to_range(found.start_line, found.end_line),
            "language": found.language, "lane": found.lane,
            "chunks": [{"location": location(uri_of, c.path, c.start_line, c.end_line), "path": c.path,
                        "score": c.score, "kind": c.kind, "name": c.name, "breadcrumb": c.breadcrumb,
                        "text": c.text} for c in found.chunks]}


def utf16_column(line: str, column0: int) -> int:
    """A 0-based column in code points -> in UTF-16 code units (LSP's default position encoding)."""
    return len(line[:column0].encode("utf-16-le")) // 2


def located(uri_of: UriOf, found: Located) -> JSON:
    """`codeloupe/locate`: each occurrence as an LSP Location of the matched text, with its whole line."""
    def text_range(line_text: str, line: int, column: int) -> JSON:
        start = column - 1
        return {"start": position(line - 1, utf16_column(line_text, start)),
                "end": position(line - 1, utf16_column(line_text, start + len(found.text)))}

    return {"text": found.text, "identifier": found.identifier, "total": found.total,
            "locations": [{"uri": uri_of(hit.path), "path": hit.path, "lineText": hit.text,
                           "breadcrumb": hit.breadcrumb, "symbol": hit.symbol,
                           "range": text_range(hit.text, hit.line, hit.column)}
                          for hit in found.locations]}


def merge_located(results: list[JSON], limit: int) -> JSON:
    """One `codeloupe/locate` answer over several folders: folder by folder, the first `limit` in all."""
    first = results[0]
    return {**first, "total": sum(r["total"] for r in results),
            "locations": [hit for r in results for hit in r["locations"]][:limit]}
