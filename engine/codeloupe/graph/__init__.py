"""The workspace graph: import and call edges between real files, skeleton similarity, communities, hubs
and hub-tolled routes. It supplies candidates and annotations; it never changes a ranking score."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from codeloupe.graph.facts import EXTRACTOR_VERSION
from codeloupe.graph.model import (
    Community,
    FileSummary,
    GodNode,
    GraphError,
    GraphFolder,
    GraphMap,
    GraphNode,
    GraphPath,
    Hop,
    MapEdge,
    MapNode,
    Neighbour,
    NotInGraph,
    Span,
    Surprise,
)
from codeloupe.graph.render import (
    MAP_ASSETS,
    folder_sections,
    map_asset,
    render_html,
    render_html_shell,
    render_text,
)
from codeloupe.graph.request import GraphRequest, GraphRequestError

if TYPE_CHECKING:
    from codeloupe.graph.build import ensure_edges, update_edges
    from codeloupe.graph.query import (
        definition_users,
        file_summary,
        graph_map,
        graph_node,
        graph_path,
        neighbours,
    )

# Building and querying the graph (the language resolvers, the store's edges: ~0.1 s to import) are imported at
# their first use: `codeloupe.api` re-exports this package's types and errors, and what imports it (the language
# server before its first progress, the command line) needs no graph yet.
_AT_FIRST_USE = {
    **dict.fromkeys(("ensure_edges", "update_edges"), "codeloupe.graph.build"),
    **dict.fromkeys(("definition_users", "file_summary", "graph_map", "graph_node", "graph_path", "neighbours"),
                    "codeloupe.graph.query"),
}


def __getattr__(name: str) -> Any:
    module = _AT_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)


__all__ = [
    "EXTRACTOR_VERSION", "MAP_ASSETS", "Community", "FileSummary", "GodNode", "GraphError", "GraphFolder", "NotInGraph",
    "GraphMap", "GraphNode", "GraphRequest", "GraphRequestError",
    "GraphPath", "Hop", "MapEdge", "MapNode", "Neighbour", "Span", "Surprise", "definition_users",
    "ensure_edges", "file_summary", "folder_sections", "graph_map", "graph_node", "graph_path", "map_asset", "neighbours", "render_html",
    "render_html_shell", "render_text", "update_edges",
]
