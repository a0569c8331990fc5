"""PHP: the namespace, `use` (plain, group, function, const), trait `use`, include/require of fixed paths,
declarations, and class-name uses (new, static calls, constants, extends/implements, function calls).

Class names are recorded as written (`User`, `Models\\User`, `\\App\\User`); resolution expands them through
the file's `use` aliases and namespace against the workspace's map of fully qualified names.
"""

from __future__ import annotations

import posixpath

from tree_sitter import Node

from codeloupe.graph.facts import FactsBuilder, FileFacts, ImportFact, UseFact
from codeloupe.graph.langs.common import enclosing, parse, string_value, walk
from codeloupe.graph.resolve import Binding, LanguageResolver, ResolveContext

_TYPES = frozenset({"class_declaration", "interface_declaration", "trait_declaration", "enum_declaration"})
_NAMES = frozenset({"name", "qualified_name"})
_INCLUDES = frozenset({"require_expression", "require_once_expression", "include_expression",
                       "include_once_expression"})


def extract(source: str) -> FileFacts:
    out = FactsBuilder("php", source)
    root = parse("php", out.source)
    for node in walk(root):
        kind = node.type
        if kind == "namespace_definition":
            if not out.facts.package:
                out.facts.package = out.text(node.child_by_field_name("name"))
        elif kind == "namespace_use_declaration":
            _use_declaration(out, node)
        elif kind in _INCLUDES:
            spec = _include_path(out, node.named_children[0] if node.named_children else None)
            if spec:
                out.imports("include", spec, out.line(node))
        elif kind in _TYPES:
            out.define(out.text(node.child_by_field_name("name")), "class", out.line(node), out.end_line(node))
        elif kind == "function_definition":
            out.define(out.text(node.child_by_field_name("name")), "function", out.line(node), out.end_line(node))
        elif kind == "method_declaration":
            out.define(out.text(node.child_by_field_name("name")), "method", out.line(node), out.end_line(node),
                       ".".join(enclosing(out, node, _TYPES)))
        elif kind == "object_creation_expression":
            _class_use(out, next((c for c in node.named_children if c.type in _NAMES), None), "call")
        elif kind in ("scoped_call_expression", "class_constant_access_expression"):
            scope = node.child_by_field_name("scope") or (node.named_children[0] if node.named_children else None)
            _class_use(out, scope, "call")
        elif kind == "function_call_expression":
            _class_use(out, node.child_by_field_name("function"), "call")
        elif kind in ("base_clause", "class_interface_clause", "use_declaration"):
            for name in node.named_children:
                _class_use(out, name, "ref")
    return out.facts


def _use_declaration(out: FactsBuilder, node: Node) -> None:
    group = node.child_by_field_name("body")
    prefix = ""
    if group is not None:
        prefix_node = next((c for c in node.named_children if c.type == "namespace_name"), None)
        prefix = out.text(prefix_node).strip("\\") + "\\"
    clauses = (group or node).named_children
    for clause in clauses:
        if clause.type != "namespace_use_clause":
            continue
        target = next((c for c in clause.named_children if c.type in _NAMES), None)
        alias = clause.child_by_field_name("alias")
        full = prefix + out.text(target).lstrip("\\")
        local = out.text(alias) if alias is not None else full.rsplit("\\", 1)[-1]
        out.imports("use", full, out.line(clause), [(full.rsplit("\\", 1)[-1], local)])


def _include_path(out: FactsBuilder, node: Node | None) -> str:
    """`'x.php'` or `__DIR__ . '/x.php'` (a path relative to this file, marked with a leading "./")."""
    if node is None:
        return ""
    if node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[0]
    if node.type == "string":
        return string_value(out, node)
    if node.type == "binary_expression":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if out.text(left) in ("__DIR__", "dirname(__FILE__)") and right is not None and right.type == "string":
            return "." + string_value(out, right)
    return ""


def _class_use(out: FactsBuilder, node: Node | None, kind: str) -> None:
    if node is None or node.type not in _NAMES:
        return
    name = out.text(node)
    if name.lower() in ("self", "static", "parent"):
        return
    out.use(name, out.line(node), kind=kind)


class PhpResolver(LanguageResolver):
    """Names resolve through a map of fully qualified names built from the workspace's own `namespace` and
    declarations: `use` clauses import from it, unqualified names fall back to the file's namespace, and an
    unqualified function call to the global namespace (PHP's own rule)."""

    family = "php"

    def _fqcn_map(self, ctx: ResolveContext) -> dict[str, list[str]]:
        table = ctx.cache.get("php.fqcn")
        if table is None:
            built: dict[str, list[str]] = {}
            for path in sorted(ctx.facts):
                facts = ctx.facts[path]
                if facts.language != "php":
                    continue
                for name in facts.top_level():
                    fqcn = f"{facts.package}\\{name}" if facts.package else name
                    built.setdefault(fqcn.lower(), []).append(path)  # PHP class names ignore case
            ctx.cache["php.fqcn"] = table = built
        return table  # type: ignore[return-value]

    def _lookup(self, ctx: ResolveContext, path: str, fqcn: str) -> str:
        return ctx.disambiguate(path, [p for p in self._fqcn_map(ctx).get(fqcn.lstrip("\\").lower(), [])])

    def bindings(self, ctx: ResolveContext, path: str, imp: ImportFact) -> list[Binding] | None:
        if imp.kind == "include":
            spec = imp.spec
            base = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec)) if spec.startswith(".") \
                else posixpath.normpath(spec)
            return [Binding((base,))] if ctx.exists(base) else None
        target = self._lookup(ctx, path, imp.spec)
        if target:
            return [Binding((target,), name, local) for name, local in imp.names]
        # `use App\Models;` then `Models\User`: a namespace alias, resolved when a name under it is used.
        return None if not self._is_namespace(ctx, imp.spec) else []

    def _is_namespace(self, ctx: ResolveContext, spec: str) -> bool:
        prefix = spec.lstrip("\\").lower() + "\\"
        return any(k.startswith(prefix) for k in self._fqcn_map(ctx))

    def resolve_bare(self, ctx: ResolveContext, path: str, use: UseFact) -> str:
        name = use.name
        if name.startswith("\\"):
            return self._lookup(ctx, path, name)
        facts = ctx.facts[path]
        head, _, rest = name.partition("\\")
        for imp in facts.imports:
            if imp.kind == "use" and rest and any(local.lower() == head.lower() for _, local in imp.names):
                return self._lookup(ctx, path, f"{imp.spec}\\{rest}")
        namespaced = f"{facts.package}\\{name}" if facts.package else name
        found = self._lookup(ctx, path, namespaced)
        if not found and not rest and use.kind == "call" and facts.package:
            found = self._lookup(ctx, path, name)  # functions fall back to the global namespace
        return found
