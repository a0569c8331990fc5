"""The graph's typed results. `to_dict()` gives the `codeloupe/graph` JSON shapes of docs/protocol.md, with
workspace-relative POSIX paths and 1-based inclusive lines (the server adds URIs and converts ranges)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from codeloupe.types import Expansion, elided


@dataclass(frozen=True)
class Span:
    path: str
    start_line: int
    end_line: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "startLine": self.start_line, "endLine": self.end_line}


@dataclass(frozen=True)
class MapNode:
    path: str
    language: str
    community: int
    degree: int  # distinct structural neighbours, both directions
    in_degree: int
    out_degree: int
    god: bool

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "language": self.language, "community": self.community,
                "degree": self.degree, "inDegree": self.in_degree, "outDegree": self.out_degree, "god": self.god}


@dataclass(frozen=True)
class MapEdge:
    source: str
    target: str  # a path, or the raw specifier of an external edge
    kind: str  # import | call | semantic | external
    weight: float  # statements / call sites for structural kinds, the cosine for semantic ones

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "kind": self.kind, "weight": self.weight}


@dataclass(frozen=True)
class Community:
    id: int
    name: str
    members: list[str]

    @property
    def size(self) -> int:
        return len(self.members)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "size": self.size, "members": self.members}


@dataclass(frozen=True)
class GodNode:
    path: str
    degree: int
    in_degree: int
    out_degree: int
    community: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "degree": self.degree, "inDegree": self.in_degree,
                "outDegree": self.out_degree, "community": self.community}


@dataclass(frozen=True)
class Surprise:
    """Two files that read alike (skeleton cosine) yet share no edge and sit in different communities."""

    a: str
    b: str
    cosine: float

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "cosine": self.cosine}


@dataclass
class GraphMap:
    nodes: list[MapNode]
    edges: list[MapEdge]
    communities: list[Community]
    gods: list[GodNode]
    surprises: list[Surprise]

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": [n.to_dict() for n in self.nodes], "edges": [e.to_dict() for e in self.edges],
                "communities": [c.to_dict() for c in self.communities],
                "godNodes": [g.to_dict() for g in self.gods], "surprises": [s.to_dict() for s in self.surprises]}


@dataclass(frozen=True)
class Neighbour:
    path: str
    kind: str  # import | call (import when the file is imported at all)
    symbols: list[str]  # the carriers: names defined on one side and used on the other
    # Where the using file imports or first calls the other: a line of the node's (or the folder's inside) file
    # when that file uses `path`, of `path` when `path` uses it. The span names its file, so no reader has to
    # work out which side the line is on.
    use: Span

    @property
    def line(self) -> int:
        return self.use.start_line

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "symbols": self.symbols, "line": self.line,
                "use": self.use.to_dict()}


@dataclass
class GraphNode:
    path: str
    resolved_by: str  # path | filename | definition | embedding | lexical: how the request named this file
    community: int
    community_name: str
    god: bool
    imports: list[Neighbour]  # files this one uses
    importers: list[Neighbour]  # files that use this one
    external: list[str]  # raw specifiers of what it imports from outside the workspace
    semantic: list[tuple[str, float]]
    symbols: list[str]
    chunks: list[tuple[Span, str]] = field(default_factory=list)  # verbatim from disk

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "resolvedBy": self.resolved_by, "community": self.community,
                "communityName": self.community_name, "god": self.god,
                "imports": [n.to_dict() for n in self.imports], "importers": [n.to_dict() for n in self.importers],
                "external": self.external, "semantic": [{"path": p, "cosine": c} for p, c in self.semantic],
                "symbols": self.symbols,
                "chunks": [{**span.to_dict(), "text": text} for span, text in self.chunks]}


@dataclass
class GraphFolder:
    """A folder's part of the graph: its files, what they use outside it and what uses them from outside, and
    the communities they belong to (each listing only the folder's members)."""

    path: str  # the folder, relative to the workspace root
    files: list[MapNode]
    uses: list[tuple[str, Neighbour]]  # (a file inside, a file outside that it uses)
    used_by: list[tuple[str, Neighbour]]  # (a file inside, a file outside that uses it)
    communities: list[Community]

    def to_dict(self) -> dict[str, Any]:
        names = {c.id: c.name for c in self.communities}  # every file's community is among them
        return {"folder": self.path,
                "files": [{**f.to_dict(), "communityName": names[f.community]} for f in self.files],
                "uses": [{"from": inside, **n.to_dict()} for inside, n in self.uses],
                "usedBy": [{"to": inside, **n.to_dict()} for inside, n in self.used_by],
                "communities": [c.to_dict() for c in self.communities]}


@dataclass(frozen=True)
class Hop:
    source: str
    target: str
    kind: str  # import | call | semantic
    direction: str  # uses (source uses target) | used-by (target uses source) | similar
    carriers: list[str]
    use: Span | None = None  # where the using side imports or calls the first carrier
    definition: Span | None = None  # where the defining side defines it
    cosine: float = 0.0
    # The code of each side, verbatim from disk (`graph.splice`): the definition (or innermost chunk) around
    # the use line, and the definition; None when the file changed since it was indexed.
    use_code: Expansion | None = None
    definition_code: Expansion | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "target": self.target, "kind": self.kind,
                               "direction": self.direction, "carriers": self.carriers}
        if self.use is not None:
            out["use"] = self.use.to_dict()
        if self.definition is not None:
            out["definition"] = self.definition.to_dict()
        for key, code in (("useCode", self.use_code), ("definitionCode", self.definition_code)):
            if code is not None:
                out[key] = {**Span(code.path, code.start_line, code.end_line).to_dict(), "text": code.text,
                            "symbol": code.symbol}
        if self.kind == "semantic":
            out["cosine"] = self.cosine
        return out


@dataclass
class GraphPath:
    source: str
    target: str
    found: bool
    meets_in_middle: bool
    hops: list[Hop]
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "found": self.found,
                "meetsInMiddle": self.meets_in_middle, "hops": [h.to_dict() for h in self.hops], "note": self.note}


@dataclass(frozen=True)
class FileSummary:
    """What the editor's lens and hover show for one file."""

    path: str
    community: int
    community_name: str
    imports: int  # distinct files it uses
    importers: int  # distinct files that use it
    god: bool
    semantic: list[tuple[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "community": self.community, "communityName": self.community_name,
                "imports": self.imports, "importers": self.importers, "god": self.god,
                "semantic": [{"path": p, "cosine": c} for p, c in self.semantic]}


class GraphError(ValueError):
    """A graph request that names nothing in the workspace."""


class NotInGraph(GraphError):
    """A request named a file that is not a node of the graph (docs, config, a path that does not exist);
    `suggestions` are the graph files closest to it by name, best first."""

    def __init__(self, target: str, reason: str, suggestions: list[str]) -> None:
        super().__init__(f"{elided(target)} is not in the graph ({reason})")
        self.target = target
        self.suggestions = suggestions
