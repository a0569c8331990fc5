"""`codeloupe/graph`: the workspace map, one node with its neighbours, or a path between two concepts."""

from __future__ import annotations

from typing import Any

from codeloupe.api import GraphFolder, NotInGraph
from codeloupe_lsp import convert
from codeloupe_lsp.convert import JSON
from codeloupe_lsp.params import Params, invalid
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import SCHEME, Target, document, one_target, uris_of

METHOD = "codeloupe/graph"
MODES = ("map", "node", "path")


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_graph(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        mode = params.choice("mode", MODES, "")
        if not mode:
            raise invalid(f"{METHOD}: `mode` is required (one of {', '.join(MODES)})")
        folder_uri = params.text("folderUri")
        if mode == "map":
            want_html = bool(params.flag("html", False))
            target = await one_target(ls, folder_uri)
            graph = await ls.engine(target.ws.graph_map)
            html = await ls.engine(_render_html, graph) if want_html else None
            return convert.graph_map(await uris_of(ls, target), graph, html)
        if mode == "node":
            node = params.text("node", required=True, non_empty=True)
            target, [name] = await _resolve(ls, folder_uri, [("node", node)])
            uri_of = await uris_of(ls, target)
            try:
                found = await ls.engine(target.ws.graph_node, name)
            except NotInGraph as miss:
                return convert.node_miss(uri_of, miss)
            if isinstance(found, GraphFolder):
                return convert.graph_folder(uri_of, found)
            return convert.graph_node(uri_of, found)
        source = params.text("from", required=True, non_empty=True)
        goal = params.text("to", required=True, non_empty=True)
        target, [source_name, goal_name] = await _resolve(ls, folder_uri, [("from", source), ("to", goal)])
        try:
            route = await ls.engine(target.ws.graph_path, source_name, goal_name)
        except NotInGraph as miss:
            return convert.path_miss(source, goal, miss)
        return convert.graph_path(await uris_of(ls, target), route)


async def _resolve(ls: CodeloupeServer, folder_uri: str, nodes: list[tuple[str, str]]) -> tuple[Target, list[str]]:
    """The folder or repository to answer from, and each node as its name there. A node is a path, a concept, or
    a document URI (`file:` or `codeloupe-index:`), turned into its path; without `folderUri` the first URI's
    folder or repository answers (a shared document's graph is its repository's)."""
    documents = {field: await document(ls, node, field) for field, node in nodes if _is_uri(node)}
    if folder_uri or not documents:
        target = await one_target(ls, folder_uri)
    else:
        target = next(iter(documents.values()))[0]
        await target.ready()
    names = []
    for field, node in nodes:
        if field not in documents:
            names.append(node)
            continue
        holder, rel = documents[field]
        if holder.uri != target.uri:
            raise invalid(f"{METHOD}: `{field}` {node} is not in {target.uri}, which this request answers from")
        names.append(rel)
    return target, names


def _is_uri(node: str) -> bool:
    return node.startswith(("file:", f"{SCHEME}:"))


def _render_html(graph: Any) -> str:
    from codeloupe.api import render_html

    return render_html(graph)
