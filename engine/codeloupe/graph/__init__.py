"""The workspace graph: import and call edges between real files, skeleton similarity, communities, hubs
and hub-tolled routes. It supplies candidates and annotations; it never changes a ranking score."""

from codeloupe.graph.build import ensure_edges, update_edges
from codeloupe.graph.facts import EXTRACTOR_VERSION
from codeloupe.graph.model import (
    Community,
    FileSummary,
    GodNode,
    GraphFolder,
    GraphMap,
    GraphNode,
    GraphPath,
    Hop,
    MapEdge,
    MapNode,
    Neighbour,
    Span,
    Surprise,
)
from codeloupe.graph.query import (
    GraphError,
    NotInGraph,
    definition_users,
    file_summary,
    graph_map,
    graph_node,
    graph_path,
    neighbours,
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

__all__ = [
    "EXTRACTOR_VERSION", "MAP_ASSETS", "Community", "FileSummary", "GodNode", "GraphError", "GraphFolder", "NotInGraph",
    "GraphMap", "GraphNode", "GraphRequest", "GraphRequestError",
    "GraphPath", "Hop", "MapEdge", "MapNode", "Neighbour", "Span", "Surprise", "definition_users",
    "ensure_edges", "file_summary", "folder_sections", "graph_map", "graph_node", "graph_path", "map_asset", "neighbours", "render_html",
    "render_html_shell", "render_text", "update_edges",
]
