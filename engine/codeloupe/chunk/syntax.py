"""cAST over a tree-sitter tree: find definitions, then split-then-merge the file into chunks.

The file is cut into units (sibling nodes grouped by the lines they share; comment and blank gaps join the
unit that follows). Small units merge greedily up to the budget of non-whitespace characters; a unit over
budget is split structurally (a class into its header and members, a function into statement-aligned
parts) and, when nothing structural is left, into line windows.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, replace
from typing import Any

from codeloupe.chunk.lines import Lines, line_windows
from codeloupe.chunk.specs import CONTAINER_KINDS, LangSpec

Node = Any  # tree_sitter.Node (the bindings ship no useful static types)

# Node types that hold a plain or qualified identifier, used when a definition has no name field.
_IDENT_TYPES = frozenset({
    "identifier", "type_identifier", "simple_identifier", "constant", "name", "word", "property_identifier",
    "field_identifier", "namespace_identifier", "qualified_identifier", "scoped_identifier",
    "scoped_type_identifier", "dot_index_expression", "method_index_expression", "member_expression",
    "operator_name", "destructor_name", "user_type", "attribute", "scope_resolution", "variable_name",
})
_GENERIC_BODY_TYPES = ("body", "block", "declaration_list", "compound_statement", "statement_block")
# Statement wrappers between an assignment and the block that holds it.
_STATEMENT_WRAPPERS = frozenset({"expression_statement", "lexical_declaration", "variable_declaration",
                                 "export_statement"})
_QUALIFIED = re.compile(r"^([\w$]+(?:(?:::|\.|:)[\w$]+)*)(?:::|\.|:)([\w$]+)$")
_FIRST_WORD = re.compile(r"[A-Za-z_]\w*")
_FUNCTION_KINDS = frozenset({"function", "method"})
_CHUNK_KIND = {"function": "function", "method": "method", "constant": "block", "variable": "block",
               "property": "method",
               "macro": "function", "type": "class"}
# Containers whose functions are methods (a function in a namespace or module is still a function).
_METHOD_OWNERS = CONTAINER_KINDS - {"namespace", "module"}
_MAX_DEPTH = 48  # nesting of structural splits before the chunker settles for line windows
_SIGNATURE_CHARS = 200


@dataclass(eq=False)
class Definition:
    node: Node
    outer: Node  # the node as it sits among its siblings: decorators / `export` / template included
    kind: str
    name: str
    parent: str  # qualified name of the semantic parent ("" at top level)
    signature: str
    body: Node | None
    owner: Definition | None  # the structurally enclosing definition
    start: int
    end: int
    transparent_label: str = ""  # set for containers that are no symbol (Ruby `class << self`)

    @property
    def qualname(self) -> str:
        return f"{self.parent}.{self.name}" if self.parent else self.name

    @property
    def is_symbol(self) -> bool:
        return not self.transparent_label

    @property
    def member_parent(self) -> str:
        """The qualified name this definition's members report as their parent."""
        if self.transparent_label:
            return self.parent
        if self.kind == "impl":
            return self.name.rsplit(" for ", 1)[-1].removeprefix("impl ").split("<", 1)[0].strip()
        return self.qualname

    @property
    def display_name(self) -> str:
        return self.parent if self.transparent_label else self.qualname

    @property
    def label(self) -> str:
        return self.transparent_label or self.signature

    @property
    def container(self) -> bool:
        return self.kind in CONTAINER_KINDS and self.body is not None


class DefinitionFinder:
    """Finds every definition of one parsed file (one tree-sitter query; nesting from byte ranges)."""

    def __init__(self, lines: Lines, spec: LangSpec) -> None:
        self.lines = lines
        self.spec = spec
        self.src = lines.source

    def text(self, node: Node) -> str:
        return self.src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def find(self, root: Node, grammar: Any) -> list[Definition]:
        candidates = _query_nodes(root, grammar, self.spec)
        candidates.sort(key=lambda n: (n.start_byte, -n.end_byte))
        found: list[Definition] = []
        open_defs: list[Definition] = []
        seen: set[tuple[int, int, str]] = set()
        for node in candidates:
            key = (node.start_byte, node.end_byte, node.type)
            if key in seen:
                continue
            seen.add(key)
            while open_defs and open_defs[-1].node.end_byte <= node.start_byte:
                open_defs.pop()
            owner = open_defs[-1] if open_defs else None
            definition = self._definition(node, owner, root)
            if definition is not None:
                found.append(definition)
                open_defs.append(definition)
        return found

    # ---- one candidate node -> a Definition or None

    def _definition(self, node: Node, owner: Definition | None, root: Node) -> Definition | None:
        spec = self.spec
        node_type = node.type  # read once: each read of a node's field crosses into tree-sitter
        kind = spec.kind_of(node_type)
        body: Node | None
        if node_type in spec.wrappers:
            return self._anonymous_export(node, owner)
        if kind is not None:
            name = self._name(node)
            body = self._body(node)
            if not name:
                return None
            outer = self._outer(node)
        elif node_type in spec.assignments or node_type in spec.declarators:
            fields = spec.assignments.get(node_type) or spec.declarators[node_type]
            target, value = node.child_by_field_name(fields[0]), node.child_by_field_name(fields[1])
            if target is None or value is None:
                return None
            value_type = value.type
            functional = value_type in spec.function_values or value_type in spec.class_values
            if owner is not None and not functional:
                # Inside a definition only a function or class value defines something: the assignments in
                # function bodies, most of what the query finds, end here before their text is read.
                return None
            name = " ".join(self.text(target).split())
            outer = self._statement(node)
            if value_type in spec.function_values:
                kind, body = "function", self._body(value)
            elif value_type in spec.class_values:
                kind, body = "class", self._body(value)
            elif owner is None and outer.parent == root and _is_constant_name(name):
                kind, body = "constant", None
            elif owner is None and value_type in spec.object_values and "." in name:
                kind, body = "variable", None  # `module.exports = {...}`
            else:
                return None
        else:
            return None
        parent = owner.member_parent if owner is not None else ""
        special = spec.special_names.get(node_type)
        if special == "go_receiver":
            parent = self._go_receiver(node) or parent
        elif special != "rust_impl":
            qualified = _QUALIFIED.match(name)
            if qualified:
                prefix, name = qualified.group(1).replace("::", ".").replace(":", "."), qualified.group(2)
                parent = f"{parent}.{prefix}" if parent else prefix
        kind = _normalise_kind(kind, owner, node_type, special)
        start, end = self.lines.span(outer)
        return Definition(
            node=node, outer=outer, kind=kind, name=name, parent=parent,
            signature=self._signature(node, body), body=body, owner=owner, start=start, end=end,
            transparent_label=spec.transparent.get(node_type, ""),
        )

    def _anonymous_export(self, node: Node, owner: Definition | None) -> Definition | None:
        """`export default function () {}` / `export default class {}`: a definition named "default"."""
        spec = self.spec
        for field_name in spec.wrappers[node.type]:
            value = node.child_by_field_name(field_name)
            if value is None or spec.kind_of(value.type) is not None:
                continue
            if value.type in spec.function_values or value.type in spec.class_values:
                kind = "function" if value.type in spec.function_values else "class"
                body = self._body(value)
                start, end = self.lines.span(node)
                return Definition(node=node, outer=node, kind=kind, name="default", parent="",
                                  signature=self._signature(node, body), body=body, owner=owner,
                                  start=start, end=end)
        return None

    def _outer(self, node: Node) -> Node:
        outer = node
        while outer.parent is not None and outer.parent.type in self.spec.wrappers:
            outer = outer.parent
        return outer

    def _statement(self, node: Node) -> Node:
        outer = node
        while outer.parent is not None and (outer.parent.type in _STATEMENT_WRAPPERS
                                            or outer.parent.type in self.spec.wrappers):
            outer = outer.parent
        return outer

    def _name(self, node: Node) -> str:
        if self.spec.special_names.get(node.type) == "rust_impl":
            impl_type = node.child_by_field_name("type")
            trait = node.child_by_field_name("trait")
            type_text = self.text(impl_type) if impl_type is not None else "?"
            return f"impl {self.text(trait)} for {type_text}" if trait is not None else f"impl {type_text}"
        if node.type in self.spec.transparent:
            return self.spec.transparent[node.type]
        for field_name in self.spec.name_fields:
            child = node.child_by_field_name(field_name)
            if child is not None and field_name == "declarator":
                child = _declared_identifier(child)
            if child is not None:
                return " ".join(self.text(child).split())[:120]
        for child in node.named_children:
            if child.type in _IDENT_TYPES:
                return " ".join(self.text(child).split())[:120]
        return ""

    def _body(self, node: Node) -> Node | None:
        for field_name in self.spec.body_fields:
            body = node.child_by_field_name(field_name)
            if body is not None:
                return body
        for child in node.named_children:
            if child.type in self.spec.body_types or child.type.endswith(_GENERIC_BODY_TYPES):
                return child
        return None

    def _signature(self, node: Node, body: Node | None) -> str:
        """The definition's head up to its body (comments before the body left out), one line."""
        start = node.start_byte
        if body is not None and body.parent == node:
            end = start
            for child in node.children:
                if child.start_byte >= body.start_byte:
                    break
                if "comment" not in child.type:
                    end = child.end_byte
        elif body is not None and body.start_byte > start:
            end = body.start_byte
        else:
            newline = self.src.find(b"\n", start, node.end_byte)
            end = node.end_byte if newline < 0 else newline
        raw = self.src[start:min(end, start + 4 * _SIGNATURE_CHARS)].decode("utf-8", "replace")
        return " ".join(raw.split()).rstrip(" {:")[:_SIGNATURE_CHARS]

    def _go_receiver(self, node: Node) -> str:
        receiver = node.child_by_field_name("receiver")
        for parameter in receiver.named_children if receiver is not None else ():
            receiver_type = parameter.child_by_field_name("type")
            if receiver_type is not None:
                word = _FIRST_WORD.search(self.text(receiver_type))
                return word.group(0) if word else ""
        return ""

    # ---- docs, for the skeleton

    def doc(self, definition: Definition) -> str:
        """The first paragraph of a definition's docstring or of the comment right above it."""
        if self.spec.docstrings and definition.body is not None:
            text = self._docstring(definition.body)
            if text:
                return text
        return self._comment_above(definition.outer)

    def module_doc(self, root: Node) -> str:
        if self.spec.docstrings:
            text = self._docstring(root)
            if text:
                return text
        first = root.named_children[0] if root.named_child_count else None
        if first is None or not _is_comment(first):
            return ""
        lines = []
        node = first
        while node is not None and _is_comment(node):
            lines.append(self.text(node))
            node = node.next_named_sibling
        return first_paragraph("\n".join(lines))

    def _docstring(self, block: Node) -> str:
        first = block.named_children[0] if block.named_child_count else None
        if first is not None and first.type == "expression_statement" and first.named_child_count:
            first = first.named_children[0]
        if first is None or first.type != "string":
            return ""
        return first_paragraph(self.text(first).strip("\"'rbuRBU"))

    def _comment_above(self, node: Node) -> str:
        lines: list[str] = []
        below = self.lines.span(node)[0]
        prev = node.prev_named_sibling
        while prev is not None and _is_comment(prev):
            start, end = self.lines.span(prev)
            if end < below - 1:
                break
            lines.append(self.text(prev))
            below = start
            prev = prev.prev_named_sibling
        return first_paragraph("\n".join(reversed(lines)))


_COMMENT_MARKERS = re.compile(r"^\s*(?:/\*+|\*+/|\*|///?|//!|#+|--+|;+|%+|=begin|=end)\s?")


def first_paragraph(text: str, limit: int = 240) -> str:
    """Comment markers stripped, up to the first blank line, whitespace collapsed, capped."""
    kept: list[str] = []
    for line in text.splitlines():
        cleaned = _COMMENT_MARKERS.sub("", line).rstrip().removesuffix("*/").strip()
        if not cleaned:
            if kept:
                break
            continue
        kept.append(cleaned)
    paragraph = " ".join(" ".join(kept).split())
    return paragraph if len(paragraph) <= limit else paragraph[:limit - 1] + "…"


def _is_comment(node: Node) -> bool:
    return "comment" in node.type


def _is_constant_name(name: str) -> bool:
    return name.isupper() and _FIRST_WORD.fullmatch(name) is not None


def _declared_identifier(node: Node) -> Node | None:
    """Follow C/C++ declarator chains (pointer -> function -> identifier) to the declared name."""
    for _ in range(16):
        if node.type in _IDENT_TYPES:
            return node
        inner = node.child_by_field_name("declarator")
        if inner is None:
            return None
        node = inner
    return None


def _normalise_kind(kind: str, owner: Definition | None, node_type: str, special: str | None) -> str:
    if kind not in _FUNCTION_KINDS:
        return kind
    if (owner is not None and owner.kind in _METHOD_OWNERS) or special == "go_receiver":
        return "method"
    return "function"


def _query_nodes(root: Node, grammar: Any, spec: LangSpec) -> list[Node]:
    """Every node whose type may start a definition, found by one query run in C."""
    query = _definition_query(grammar, spec)
    if query is None:
        return []
    from tree_sitter import QueryCursor

    captures = QueryCursor(query).captures(root)
    return [node for nodes in captures.values() for node in nodes]


_QUERIES: dict[str, Any] = {}  # grammar name -> compiled query (immutable, shared by threads)


def _definition_query(language: Any, spec: LangSpec) -> Any | None:
    key = spec.language
    if key not in _QUERIES:
        from tree_sitter import Query

        types = [*spec.definitions, *spec.wrappers, *spec.assignments, *spec.declarators]
        known = sorted({t for t in types if language.id_for_node_kind(t, True)})
        _QUERIES[key] = Query(language, "[" + " ".join(f"({t})" for t in known) + "] @d") if known else None
    return _QUERIES[key]


# ------------------------------------------------------------------------------------------ chunking


@dataclass
class Piece:
    """A chunk before its text is attached: a line range, what it is, where it sits."""

    start: int
    end: int
    kind: str
    name: str
    crumbs: tuple[str, ...]


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    natural: int  # first line of its own nodes (comments attached to it included), before gap lines
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class _Level:
    """Where a run of units sits: the enclosing definition and breadcrumb, and a forced kind if any."""

    owner: Definition | None
    crumbs: tuple[str, ...]
    kind: str = ""  # "header" / "part": every piece at this level is one
    name: str = ""
    depth: int = 0

    def below(self, **changes: Any) -> _Level:
        return replace(self, depth=self.depth + 1, **changes)


class SyntaxChunker:
    def __init__(self, lines: Lines, spec: LangSpec, definitions: list[Definition], budget: int) -> None:
        self.lines = lines
        self.spec = spec
        self.budget = budget
        self.attach_limit = max(1, budget // 4)
        self._by_owner: dict[int, tuple[list[int], list[Definition]]] = {}
        for definition in definitions:
            starts, defs = self._by_owner.setdefault(id(definition.owner), ([], []))
            starts.append(definition.start)
            defs.append(definition)

    def chunk(self, root: Node, path: str) -> list[Piece]:
        units = self.units(root.children, 1, self.lines.count)
        pieces = self._pack(units, _Level(owner=None, crumbs=(path,)))
        if len(pieces) == 1:
            pieces[0] = replace(pieces[0], kind="module")
        return pieces

    # ---- units

    def units(self, nodes: list[Node], lo: int, hi: int) -> list[_Unit]:
        """Group `nodes` by shared lines within lo..hi; gaps and small comment runs join what follows."""
        raw: list[list[Any]] = []  # [start, end, all-leading, nodes]
        for node in nodes:
            start, end = self.lines.span(node)
            if end < lo or start > hi:
                continue
            start, end = max(start, lo), min(end, hi)
            leading = "comment" in node.type or node.type in self.spec.leading
            if raw and start <= raw[-1][1]:
                last = raw[-1]
                last[1] = max(last[1], end)
                last[2] = last[2] and leading
                last[3].append(node)
            else:
                raw.append([start, end, leading, [node]])
        if not raw:
            return [_Unit(lo, hi, lo, ())]
        # A run of bare punctuation / keywords (a closing `}` or `end`) closes what precedes it.
        closed: list[list[Any]] = []
        for item in raw:
            if closed and not any(node.is_named for node in item[3]):
                closed[-1][1] = item[1]
                closed[-1][3].extend(item[3])
            else:
                closed.append(item)
        raw = closed
        kept: list[list[Any]] = []
        for item in reversed(raw):
            follower = kept[-1] if kept else None
            if (item[2] and follower is not None
                    and self.lines.size(item[0], follower[0] - 1) <= self.attach_limit):
                follower[0] = item[0]
                follower[3] = item[3] + follower[3]
            else:
                kept.append(item)
        kept.reverse()
        units = []
        previous_end = lo - 1
        for index, (start, end, _leading, unit_nodes) in enumerate(kept):
            last = index == len(kept) - 1
            units.append(_Unit(previous_end + 1, hi if last else end, start, tuple(unit_nodes)))
            previous_end = end
        return units

    # ---- merge

    def _pack(self, units: list[_Unit], level: _Level) -> list[Piece]:
        pieces: list[Piece] = []
        group_start, group_size = 0, 0
        for unit in units:
            size = self.lines.size(unit.start, unit.end)
            if size > self.budget:
                if group_start:
                    pieces.append(self._group(group_start, unit.start - 1, level))
                    group_start, group_size = 0, 0
                pieces.extend(self._split(unit, level))
                continue
            if group_start and group_size + size > self.budget:
                pieces.append(self._group(group_start, unit.start - 1, level))
                group_start, group_size = 0, 0
            if not group_start:
                group_start = unit.start
            group_size += size
        if group_start:
            pieces.append(self._group(group_start, units[-1].end, level))
        return pieces

    def _group(self, start: int, end: int, level: _Level) -> Piece:
        if level.kind:
            return Piece(start, end, level.kind, level.name, level.crumbs)
        main = self.main_definition(level.owner, start, end)
        if main is None:
            return Piece(start, end, "block", "", level.crumbs)
        kind = _CHUNK_KIND.get(main.kind, "class")
        return Piece(start, end, kind, main.display_name, (*level.crumbs, main.label))

    def main_definition(self, owner: Definition | None, start: int, end: int) -> Definition | None:
        """The largest definition directly under `owner` that starts in start..end (constants last)."""
        starts, defs = self._by_owner.get(id(owner), ((), ()))
        best = None
        for definition in defs[bisect_left(starts, start):bisect_right(starts, end)]:
            rank = (definition.kind != "constant", definition.end - definition.start)
            if best is None or rank > best[0]:
                best = (rank, definition)
        return best[1] if best else None

    # ---- split

    def _split(self, unit: _Unit, level: _Level) -> list[Piece]:
        if level.depth >= _MAX_DEPTH:
            return self._windows(unit.start, unit.end, level)
        main = self.main_definition(level.owner, unit.start, unit.end)
        if main is not None and self._covers(main, unit):
            if main.container:
                pieces = self._split_container(main, unit, level)
                if pieces:
                    return pieces
            return self._split_body(main, unit, level)
        children = [child for node in unit.nodes for child in node.children]
        return self._split_children(children, unit.start, unit.end, level.below())

    def _covers(self, definition: Definition, unit: _Unit) -> bool:
        """Whether the definition is the unit's substance (not a small thing nested in a larger statement)."""
        spans = [self.lines.span(node) for node in unit.nodes if node.is_named
                 and "comment" not in node.type and node.type not in self.spec.leading]
        if not spans:
            return False
        return definition.start <= min(s for s, _ in spans) and definition.end >= max(e for _, e in spans)

    def _split_container(self, owner: Definition, unit: _Unit, level: _Level) -> list[Piece]:
        """A class: a header chunk (class line, docstring, fields) then its members, merged up to budget."""
        assert owner.body is not None
        inner = level.below(owner=owner, crumbs=(*level.crumbs, owner.label))
        units = self.units(owner.body.children, unit.start, unit.end)
        first = next((i for i, u in enumerate(units) if self.main_definition(owner, u.start, u.end)), None)
        if first is None:
            return []
        header = units[:first]
        member = units[first]
        if member.natural > member.start:
            header.append(_Unit(member.start, member.natural - 1, member.start, ()))
            units[first] = replace(member, start=member.natural)
        pieces = self._pack(header, inner.below(kind="header", name=owner.display_name)) if header else []
        return pieces + self._pack(units[first:], inner)

    def _split_body(self, owner: Definition, unit: _Unit, level: _Level) -> list[Piece]:
        """A long function: `part k/n` blocks cut between the statements of its body."""
        body = owner.body if owner.body is not None else owner.node
        inner = level.below(owner=owner, crumbs=(*level.crumbs, owner.label), kind="part",
                            name=owner.display_name)
        pieces = self._split_children(body.children, unit.start, unit.end, inner)
        parts = [i for i, piece in enumerate(pieces) if piece.kind == "part" and piece.crumbs == inner.crumbs]
        for number, index in enumerate(parts, 1):
            piece = pieces[index]
            pieces[index] = replace(piece, crumbs=(*piece.crumbs, f"part {number}/{len(parts)}"))
        return pieces

    def _split_children(self, children: list[Node], lo: int, hi: int, level: _Level) -> list[Piece]:
        """Units of `children`; while they form a single unit, descend into the largest node's children."""
        for _ in range(_MAX_DEPTH):
            units = self.units(children, lo, hi)
            if len(units) >= 2:
                return self._pack(units, level)
            nodes = units[0].nodes
            children = [child for node in nodes for child in node.children]
            if not children:
                break
        return self._windows(lo, hi, level)

    def _windows(self, lo: int, hi: int, level: _Level) -> list[Piece]:
        return [Piece(w.start, w.end, "window", level.name, level.crumbs)
                for w in line_windows(self.lines, lo, hi, self.budget)]
