"""The map as one self-contained HTML page: its own small SVG renderer, the data inline, nothing fetched."""

from __future__ import annotations

import json
from importlib import resources

from codeloupe.graph.model import GraphMap

_PLACEHOLDER = "__GRAPH_JSON__"


def render_html(graph_map: GraphMap, root: str = "") -> str:
    """The page for `graph_map`; with `root` (an absolute directory) file links are `file://` URLs, else
    paths relative to the page. Inside a VS Code webview a click posts `{type: "open", path}` instead."""
    template = resources.files("codeloupe.graph").joinpath("assets/map.html").read_text(encoding="utf-8")
    payload = {**graph_map.to_dict(), "root": root}
    # Inside <script> only "</" can end the element early; "<\/" is the same string to JSON.parse.
    data = json.dumps(payload, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
    return template.replace(_PLACEHOLDER, data, 1)
