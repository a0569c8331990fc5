"""`codeloupe graph PATH [--node X] [--path A B] [--json] [--html out.html]`: the workspace graph."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from codeloupe.graph import GraphMap, GraphNode, GraphPath, graph_map, graph_node, graph_path, render_html

from . import CliError
from .common import add_workspace_args, index_workspace, open_workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("graph", help="import/call graph: communities, hubs, one file, a route")
    add_workspace_args(parser)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--node", metavar="X", help="one file (a path, a file name or a concept) and its neighbours")
    what.add_argument("--path", nargs=2, metavar=("A", "B"), dest="route", help="a hub-tolled route between two concepts")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--html", metavar="OUT", help="write the map as a self-contained HTML page")
    parser.add_argument("--no-embed", action="store_true",
                        help="do not compute missing skeleton vectors first (the semantic lane stays as it is)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.html and (args.node or args.route):
        raise CliError("--html renders the whole map; it cannot be combined with --node or --path")
    ws = open_workspace(args)
    try:
        index_workspace(ws, embed=not args.no_embed, quiet=args.json, answer_stale=True)
        if args.node:
            result: GraphMap | GraphNode | GraphPath = graph_node(ws, args.node)
        elif args.route:
            result = graph_path(ws, args.route[0], args.route[1])
        else:
            result = graph_map(ws)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    finally:
        ws.close()
    if args.html:
        assert isinstance(result, GraphMap)
        out = Path(args.html)
        try:
            out.write_text(render_html(result, str(ws.root)), encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot write {out}: {exc.strerror or exc}") from exc
        if not args.json:
            print(f"wrote {out} ({len(result.communities)} communities, {len(result.nodes)} files)")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    elif not args.html:
        print(_text(result))
    return 0


def _text(result: GraphMap | GraphNode | GraphPath) -> str:
    if isinstance(result, GraphMap):
        return _map_text(result)
    if isinstance(result, GraphNode):
        return _node_text(result)
    return _path_text(result)


def _map_text(m: GraphMap) -> str:
    kinds = Counter(e.kind for e in m.edges)
    lines = [f"{len(m.nodes)} files · " + " · ".join(f"{n} {k}" for k, n in sorted(kinds.items()))]
    groups = [c for c in m.communities if c.size > 1]
    lines.append(f"\n{len(groups)} communities ({len(m.communities) - len(groups)} unconnected files)")
    for c in groups[:25]:
        lines.append(f"  [{c.id}] {c.name} · {c.size} files")
    if m.gods:
        lines.append("\nhubs (god nodes)")
        for g in m.gods:
            lines.append(f"  {g.path}  degree {g.degree} (in {g.in_degree}, out {g.out_degree}) · community {g.community}")
    if m.surprises:
        lines.append("\nsurprises (read alike, no edge, different communities)")
        for s in m.surprises[:15]:
            lines.append(f"  {s.a} ~ {s.b}  cosine {s.cosine:.2f}")
    return "\n".join(lines)


def _node_text(n: GraphNode) -> str:
    lines = [f"{n.path}  (community {n.community}: {n.community_name}{', hub' if n.god else ''};"
             f" matched by {n.resolved_by})"]
    for title, items in (("uses", n.imports), ("used by", n.importers)):
        lines.append(f"\n{title} ({len(items)})")
        for item in items:
            carried = f"  [{', '.join(item.symbols)}]" if item.symbols else ""
            lines.append(f"  {item.path}:{item.line} {item.kind}{carried}")
    if n.external:
        lines.append(f"\nexternal: {', '.join(n.external)}")
    if n.semantic:
        lines.append("\nreads like: " + ", ".join(f"{p} ({c:.2f})" for p, c in n.semantic))
    if n.symbols:
        lines.append(f"\ndefines: {', '.join(n.symbols)}")
    return "\n".join(lines)


def _path_text(p: GraphPath) -> str:
    lines = [f"{p.source} -> {p.target}: {p.note}"]
    for hop in p.hops:
        carried = f" [{', '.join(hop.carriers)}]" if hop.carriers else ""
        where = ""
        if hop.use is not None:
            where = f"  use {hop.use.path}:{hop.use.start_line}"
        if hop.definition is not None:
            where += f"  def {hop.definition.path}:{hop.definition.start_line}-{hop.definition.end_line}"
        cosine = f" cosine {hop.cosine:.2f}" if hop.kind == "semantic" else ""
        lines.append(f"  {hop.source} --{hop.kind}/{hop.direction}{cosine}--> {hop.target}{carried}{where}")
    return "\n".join(lines)
