"""`codeloupe/graph`: the workspace map, one node with its neighbours, or a path between two concepts."""

from __future__ import annotations

from typing import Any

from codeloupe.api import NotInGraph
from codeloupe_lsp import convert
from codeloupe_lsp.convert import JSON
from codeloupe_lsp.params import Params, invalid
from codeloupe_lsp.server import CodeloupeServer

METHOD = "codeloupe/graph"
MODES = ("map", "node", "path")


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_graph(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        mode = params.choice("mode", MODES, "")
        if not mode:
            raise invalid(f"{METHOD}: `mode` is required (one of {', '.join(MODES)})")
        folder = ls.folders_for(params.text("folderUri"))[0]
        root = folder.root
        if mode == "map":
            want_html = bool(params.flag("html", False))
            graph = await ls.engine(folder.ws.graph_map)
            html = await ls.engine(_render_html, graph) if want_html else None
            return convert.graph_map(root, graph, html)
        if mode == "node":
            node = params.text("node", required=True, non_empty=True)
            try:
                return convert.graph_node(root, await ls.engine(folder.ws.graph_node, _target(ls, node)))
            except NotInGraph as miss:
                return convert.node_miss(root, miss)
        source = params.text("from", required=True, non_empty=True)
        target = params.text("to", required=True, non_empty=True)
        try:
            return convert.graph_path(root, await ls.engine(folder.ws.graph_path, _target(ls, source),
                                                            _target(ls, target)))
        except NotInGraph as miss:
            return convert.path_miss(source, target, miss)


def _target(ls: CodeloupeServer, node: str) -> str:
    """A node is a workspace path, a concept, or a file URI (turned into its workspace path)."""
    if node.startswith("file:"):
        return ls.folder_for(node, "node")[1]
    return node


def _render_html(graph: Any) -> str:
    from codeloupe.api import render_html

    return render_html(graph)
