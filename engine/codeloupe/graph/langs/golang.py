"""Go: the package clause, import specs (aliased, dot, blank), top-level declarations, and uses.

A bare call `f()` is recorded without a receiver (it may be a sibling file's function of the same package);
`x.F` is recorded with receiver `x` and is only ever resolved through an import of `x`, never as a bare `F`.
"""

from __future__ import annotations

import posixpath
import re

from tree_sitter import Node

from codeloupe.graph.facts import FactsBuilder, FileFacts, ImportFact, UseFact
from codeloupe.graph.langs.common import parse, walk
from codeloupe.graph.resolve import LanguageResolver, ResolveContext


def extract(source: str) -> FileFacts:
    out = FactsBuilder("go", source)
    root = parse("go", out.source)
    for node in walk(root):
        kind = node.type
        if kind == "package_clause":
            out.facts.package = out.text(node.named_children[0]) if node.named_children else ""
        elif kind == "import_spec":
            _import(out, node)
        elif kind == "function_declaration":
            out.define(out.text(node.child_by_field_name("name")), "function", out.line(node), out.end_line(node))
        elif kind == "method_declaration":
            out.define(out.text(node.child_by_field_name("name")), "method", out.line(node), out.end_line(node),
                       _receiver_type(out, node))
        elif kind == "type_spec" and _top_level(node):
            out.define(out.text(node.child_by_field_name("name")), "type", out.line(node), out.end_line(node))
        elif kind in ("const_spec", "var_spec") and _top_level(node):
            for name in node.children_by_field_name("name"):
                out.define(out.text(name), "constant", out.line(node), out.end_line(node))
        elif kind == "call_expression":
            function = node.child_by_field_name("function")
            if function is not None and function.type == "identifier":
                out.use(out.text(function), out.line(function))
        elif kind == "composite_literal":
            literal_type = node.child_by_field_name("type")
            if literal_type is not None and literal_type.type == "type_identifier":
                out.use(out.text(literal_type), out.line(literal_type), kind="ref")
        elif kind == "selector_expression":
            operand = node.child_by_field_name("operand")
            if operand is not None and operand.type == "identifier":
                out.use(out.text(node.child_by_field_name("field")), out.line(node), receiver=out.text(operand),
                        kind="call" if node.parent is not None and node.parent.type == "call_expression"
                        else "ref")
        elif kind == "qualified_type":
            out.use(out.text(node.child_by_field_name("name")), out.line(node),
                    receiver=out.text(node.child_by_field_name("package")), kind="ref")
    return out.facts


def _import(out: FactsBuilder, node: Node) -> None:
    path_node = node.child_by_field_name("path")
    spec = out.text(path_node).strip('"`')
    alias = node.child_by_field_name("name")
    if alias is None:
        names = [("", "")]  # binds the package under its own package-clause name, known once resolved
    elif alias.type == "dot":
        names = [("*", "*")]
    elif out.text(alias) == "_":
        names = []
    else:
        names = [("", out.text(alias))]
    out.imports("import", spec, out.line(node), names)


def _receiver_type(out: FactsBuilder, node: Node) -> str:
    receiver = node.child_by_field_name("receiver")
    for part in receiver.named_children if receiver is not None else ():
        type_node = part.child_by_field_name("type")
        while type_node is not None and type_node.type in ("pointer_type", "generic_type"):
            type_node = type_node.named_children[0] if type_node.named_children else None
        if type_node is not None:
            return out.text(type_node)
    return ""


def _top_level(node: Node) -> bool:
    current = node.parent
    while current is not None and current.type in ("type_declaration", "const_declaration", "var_declaration",
                                                    "var_spec_list", "const_spec_list"):
        current = current.parent
    return current is not None and current.type == "source_file"


class GoResolver(LanguageResolver):
    """Import paths under a `go.mod` module path map to package directories of the workspace; a bare call
    may name a function of a sibling file of the same package; nothing else is in scope in Go."""

    family = "go"
    files_are_packages = True  # a package is its directory

    def _module(self, ctx: ResolveContext, directory: str) -> tuple[str, str] | None:
        """(module path, module directory) of the nearest go.mod at or above `directory`."""
        key = f"go.mod:{directory}"
        if key not in ctx.cache:
            raw = ctx.read_config(posixpath.join(directory, "go.mod"))
            found = None
            if raw is not None:
                match = re.search(r"^\s*module\s+(\S+)", raw, re.MULTILINE)
                found = (match.group(1).strip('"'), directory) if match else None
            if found is None and directory:
                found = self._module(ctx, posixpath.dirname(directory))
            ctx.cache[key] = found
        return ctx.cache[key]  # type: ignore[return-value]

    def _package_files(self, ctx: ResolveContext, directory: str, package: str = "",
                       tests: bool = False) -> list[str]:
        files = [p for p in ctx.files_by_dir.get(directory, []) if p.endswith(".go")
                 and (tests or not p.endswith("_test.go"))]
        if package:
            files = [p for p in files if p in ctx.facts and ctx.facts[p].package == package]
        return files

    def module_targets(self, ctx: ResolveContext, path: str, imp: ImportFact) -> tuple[str, ...]:
        module = self._module(ctx, posixpath.dirname(path))
        if module is None:
            return ()
        module_path, module_dir = module
        if imp.spec != module_path and not imp.spec.startswith(module_path + "/"):
            return ()
        directory = posixpath.join(module_dir, imp.spec[len(module_path):].lstrip("/")).rstrip("/")
        files = self._package_files(ctx, directory)
        if not files:
            return ()
        # The representative file (first) is the one named after the package directory, if any.
        name = posixpath.basename(directory) if directory else posixpath.basename(str(ctx.root))
        files.sort(key=lambda p: (posixpath.basename(p) != f"{name}.go", p))
        return tuple(files)

    def package_name(self, ctx: ResolveContext, targets: tuple[str, ...], imp: ImportFact) -> str:
        facts = ctx.facts.get(targets[0])
        return facts.package if facts is not None and facts.package else imp.spec.rsplit("/", 1)[-1]

    def resolve_bare(self, ctx: ResolveContext, path: str, use: UseFact) -> str:
        package = ctx.facts[path].package
        siblings = [p for p in self._package_files(ctx, posixpath.dirname(path), package, tests=True)
                    if p != path and ctx.facts.defines(p, use.name)]
        return siblings[0] if len(siblings) == 1 else ""
