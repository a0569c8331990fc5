"""The graph for people: the map as one self-contained HTML page (its own small SVG renderer, the data inline,
nothing fetched) or as the same page's shell for a server to fill, and any graph result as plain text (the CLI
and the agents' `graph` tool)."""

from __future__ import annotations

import html
import json
from collections import Counter
from importlib import resources

from codeloupe.graph.model import GraphFolder, GraphMap, GraphNode, GraphPath
from codeloupe.types import line_breaks_escaped, split_lines
from codeloupe.wording import amount

# The written page carries its style and code inline, so it opens from disk and in an editor's webview alone.
_INLINE_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
# visible.js (how a page shows a name or code) goes before map.js, which calls it; the search page loads it too.
MAP_ASSETS = ("visible.js", "map.js", "map.css")


def render_html(graph_map: GraphMap, root: str = "") -> str:
    """The page for `graph_map`, self-contained; with `root` (an absolute directory) file links are `file://`
    URLs, else paths relative to the page. Inside a VS Code webview a click posts `{type: "open", path}`
    instead."""
    payload = {**graph_map.to_dict(), "root": root}
    # Inside <script> a "<" of the data could end the element early ("</"), or keep it from ending ("<!--" then
    # "<script", as a file may be named): none is left; "\u003c" is the same string to JSON.parse.
    data = json.dumps(payload, ensure_ascii=False, sort_keys=True).replace("<", "\\u003c")
    head = f'<meta http-equiv="Content-Security-Policy" content="{_INLINE_CSP}">\n<style>\n{map_asset("map.css")}</style>'
    scripts = (f'<script id="graph-data" type="application/json">{data}</script>\n'
               f'<script>\n{map_asset("visible.js")}{map_asset("map.js")}</script>')
    return _page(head, scripts)


def render_html_shell(style_url: str, script_urls: list[str]) -> str:
    """The map page with no data in it and its style and code linked, for a server whose Content-Security-Policy
    refuses inline code: the scripts fetch the map, put it in the page as `render_html` does (a
    `<script id="graph-data" type="application/json">` element; `fileView`, a URL a file's path completes, then
    `fileViewFragment` if given, sets where file links lead) and then load map.js, visible.js loaded before."""
    head = f'<link rel="stylesheet" href="{html.escape(style_url)}">'
    scripts = "\n".join(f'<script src="{html.escape(url)}"></script>' for url in script_urls)
    return _page(head, scripts)


def map_asset(name: str) -> str:
    """The map page's style (`map.css`) or code (`visible.js`, `map.js`), one of `MAP_ASSETS`."""
    if name not in MAP_ASSETS:
        raise ValueError(f"{name}: not an asset of the map page")
    return resources.files("codeloupe.graph").joinpath(f"assets/{name}").read_text(encoding="utf-8")


def _page(head: str, scripts: str) -> str:
    template = resources.files("codeloupe.graph").joinpath("assets/map.html").read_text(encoding="utf-8")
    # The scripts go in last: the data they may hold is never searched for a placeholder.
    return template.replace("__MAP_HEAD__", head, 1).replace("__MAP_SCRIPTS__", scripts, 1)


def render_text(result: GraphMap | GraphNode | GraphFolder | GraphPath) -> str:
    """The map (communities, hubs, surprises), one node with its neighbours, a folder's part, or a route, as plain
    text; every name in it (a file's path, a symbol, a community) stays on its line, a line break in it shown
    escaped."""
    if isinstance(result, GraphMap):
        return _map_text(result)
    if isinstance(result, GraphNode):
        return _node_text(result)
    if isinstance(result, GraphFolder):
        return _folder_text(result)
    return _path_text(result)


def _map_text(m: GraphMap) -> str:
    if not m.nodes:  # an empty folder, or one of docs only: a row of zeros would not say why
        return "no code file is indexed in the workspace: the graph has no files"
    kinds = Counter(e.kind for e in m.edges)
    lines = [" · ".join([amount(len(m.nodes), "file"), *(f"{n} {k}" for k, n in sorted(kinds.items()))])]
    groups = [c for c in m.communities if c.size > 1]
    lines.append(f"\n{amount(len(groups), 'community', 'communities')} "
                 f"({amount(len(m.communities) - len(groups), 'unconnected file')})")
    for c in groups[:25]:
        lines.append(f"  [{c.id}] {_name(c.name)} · {c.size} files")
    if m.gods:
        lines.append("\nhubs (god nodes)")
        for g in m.gods:
            lines.append(f"  {_name(g.path)}  degree {g.degree} (in {g.in_degree}, out {g.out_degree}) · community {g.community}")
    if m.surprises:
        lines.append("\nsurprises (read alike, no edge, different communities)")
        for s in m.surprises[:15]:
            lines.append(f"  {_name(s.a)} ~ {_name(s.b)}  cosine {s.cosine:.2f}")
    return "\n".join(lines)


def _node_text(n: GraphNode) -> str:
    lines = [f"{_name(n.path)}  (community {n.community}: {_name(n.community_name)}{', hub' if n.god else ''};"
             f" matched by {n.resolved_by})"]
    # An edge's line is in the file that uses the other: this one's for what it uses, the other's for what uses it.
    lines.append(f"\nuses ({len(n.imports)})")
    lines += [f"  {_name(item.path)} {item.kind} (from line {item.line}){_carried(item.symbols)}" for item in n.imports]
    lines.append(f"\nused by ({len(n.importers)})")
    lines += [f"  {_name(item.path)}:{item.line} {item.kind}{_carried(item.symbols)}" for item in n.importers]
    if n.external:
        lines.append(f"\nexternal: {_names(n.external)}")
    if n.semantic:
        lines.append("\nreads like: " + ", ".join(f"{_name(p)} ({c:.2f})" for p, c in n.semantic))
    if n.symbols:
        lines.append(f"\ndefines: {_names(n.symbols)}")
    return "\n".join(lines)


def _folder_text(f: GraphFolder) -> str:
    title, sections = folder_sections(f)
    return "\n".join([title, *(line for heading, lines in sections for line in ("", heading, *lines))])


def folder_sections(f: GraphFolder) -> tuple[str, list[tuple[str, list[str]]]]:
    """A folder's part of the graph as its title line and its sections (heading, lines): what `render_text` joins,
    and what a reader with a byte budget cuts section by section. An edge's line is shown on the file that uses
    the other, where it is (the inside file for what the folder uses, the outside file for what uses it)."""
    names = {c.id: c.name for c in f.communities}
    communities = [f"  [{c.id}] {_name(c.name)} · {c.size} of its files" for c in f.communities]
    files = [f"  {_name(n.path)}  degree {n.degree} (in {n.in_degree}, out {n.out_degree}) · community "
             f"[{n.community}] {_name(names.get(n.community, ''))}{' · hub' if n.god else ''}" for n in f.files]
    uses = [f"  {_name(inside)}:{item.line} -> {_name(item.path)} {item.kind}{_carried(item.symbols)}"
            for inside, item in f.uses]
    used_by = [f"  {_name(inside)} <- {_name(item.path)}:{item.line} {item.kind}{_carried(item.symbols)}"
               for inside, item in f.used_by]
    return (f"{_name(f.path)}/  (folder: {amount(len(f.files), 'file')} of the graph)",
            [(f"communities ({len(communities)})", communities), (f"files ({len(files)})", files),
             (f"uses, outside the folder ({len(uses)})", uses), (f"used by, from outside ({len(used_by)})", used_by)])


def _carried(symbols: list[str]) -> str:
    return f"  [{_names(symbols)}]" if symbols else ""


def _path_text(p: GraphPath) -> str:
    lines = [f"{_name(p.source)} -> {_name(p.target)}: {_name(p.note)}"]
    for hop in p.hops:
        carried = f" [{_names(hop.carriers)}]" if hop.carriers else ""
        where = ""
        if hop.use is not None:
            where = f"  use {_name(hop.use.path)}:{hop.use.start_line}"
        if hop.definition is not None:
            where += f"  def {_name(hop.definition.path)}:{hop.definition.start_line}-{hop.definition.end_line}"
        cosine = f" cosine {hop.cosine:.2f}" if hop.kind == "semantic" else ""
        lines.append(f"  {_name(hop.source)} --{hop.kind}/{hop.direction}{cosine}--> {_name(hop.target)}{carried}{where}")
        for code in (hop.use_code, hop.definition_code):
            if code is not None:
                lines.append(f"    {_name(code.path)}:{code.start_line}-{code.end_line}")
                lines.extend(f"    {n:>5} | {text}" for n, text in
                             enumerate(split_lines(code.text, keepends=False), code.start_line))
    return "\n".join(lines)


def _name(text: str) -> str:
    """A name on its line: a line break in it would start a line of its own, a forged neighbour or hub in the list
    an agent or a terminal reads."""
    return line_breaks_escaped(text)


def _names(texts: list[str] | tuple[str, ...]) -> str:
    return ", ".join(_name(text) for text in texts)
