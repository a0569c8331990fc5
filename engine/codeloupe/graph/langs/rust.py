"""Rust: `mod name;` declarations, `use` trees (flattened, with aliases, `self` and globs), items, impl
methods, and uses (bare calls, `path::name` calls, struct literals)."""

from __future__ import annotations

import posixpath

from tree_sitter import Node

from codeloupe.graph.facts import FactsBuilder, FileFacts, ImportFact, UseFact
from codeloupe.graph.langs.common import parse, walk
from codeloupe.graph.resolve import Binding, LanguageResolver, ResolveContext

_ITEMS = {
    "function_item": "function", "struct_item": "type", "enum_item": "type", "trait_item": "type",
    "type_item": "type", "union_item": "type", "const_item": "constant", "static_item": "constant",
    "macro_definition": "function",
}


def extract(source: str) -> FileFacts:
    out = FactsBuilder("rust", source)
    root = parse("rust", out.source)
    for node in walk(root):
        kind = node.type
        if kind == "mod_item" and node.child_by_field_name("body") is None:
            name = out.text(node.child_by_field_name("name"))
            out.imports("mod", name, out.line(node), [("", name)])
        elif kind == "use_declaration":
            argument = node.child_by_field_name("argument")
            for path, local in _flatten(out, argument, ""):
                names = [("*", "*")] if local == "*" else [(path.rsplit("::", 1)[-1], local)]
                out.imports("use", path, out.line(node), names)
        elif kind in _ITEMS and node.parent is not None:
            parent = node.parent
            if parent == root:
                out.define(out.text(node.child_by_field_name("name")), _ITEMS[kind], out.line(node), out.end_line(node))
            elif kind == "function_item" and parent.parent is not None and parent.parent.type == "impl_item":
                owner = parent.parent.child_by_field_name("type")
                out.define(out.text(node.child_by_field_name("name")), "method", out.line(node), out.end_line(node),
                           out.text(owner).split("<", 1)[0])
        elif kind == "call_expression":
            _use(out, node.child_by_field_name("function"), "call")
        elif kind == "struct_expression":
            _use(out, node.child_by_field_name("name"), "ref")
    return out.facts


def _flatten(out: FactsBuilder, node: Node | None, prefix: str) -> list[tuple[str, str]]:
    """(full path, local name) for every leaf of a use tree; local "*" marks a glob."""
    if node is None:
        return []
    join = (lambda tail: f"{prefix}::{tail}" if prefix else tail)  # noqa: E731
    kind = node.type
    if kind in ("identifier", "scoped_identifier", "crate", "super", "self"):
        path = join(out.text(node))
        if kind == "self" and prefix:
            path = prefix
        return [(path, path.rsplit("::", 1)[-1])]
    if kind == "use_as_clause":
        return [(join(out.text(node.child_by_field_name("path"))), out.text(node.child_by_field_name("alias")))]
    if kind == "use_wildcard":
        inner = node.named_children[0] if node.named_children else None
        return [(join(out.text(inner)) if inner is not None else prefix, "*")]
    if kind == "scoped_use_list":
        path = node.child_by_field_name("path")
        return _flatten(out, node.child_by_field_name("list"), join(out.text(path)) if path is not None else prefix)
    if kind == "use_list":
        return [leaf for child in node.named_children for leaf in _flatten(out, child, prefix)]
    return []


def _use(out: FactsBuilder, target: Node | None, kind: str) -> None:
    if target is None:
        return
    if target.type in ("identifier", "type_identifier"):
        out.use(out.text(target), out.line(target), kind=kind)
    elif target.type in ("scoped_identifier", "scoped_type_identifier"):
        path = target.child_by_field_name("path")
        if path is not None:
            out.use(out.text(target.child_by_field_name("name")), out.line(target), receiver=out.text(path), kind=kind)


class RustResolver(LanguageResolver):
    """Module paths follow the file layout under the crate's `src/` (`a/b.rs` or `a/b/mod.rs`, the crate root
    `lib.rs` / `main.rs`): `crate::`, `self::`, `super::` and child-module paths resolve to files; a path that
    names an item resolves to the file of its module. Anything else is another crate."""

    family = "rust"
    directory_stems = ("mod", "lib", "main")

    def _crate_src(self, ctx: ResolveContext, path: str) -> str | None:
        directory = posixpath.dirname(path)
        while True:
            key = f"rust.cargo:{directory}"
            if key not in ctx.cache:
                ctx.cache[key] = ctx.read_config(posixpath.join(directory, "Cargo.toml")) is not None
            if ctx.cache[key]:
                return posixpath.join(directory, "src") if directory else "src"
            if not directory:
                return None
            directory = posixpath.dirname(directory)

    def _module_path(self, src: str, path: str) -> list[str]:
        rel = posixpath.relpath(path, src)
        parts = rel[: -len(".rs")].split("/")
        if parts[-1] in ("mod", "lib", "main") and (parts[-1] == "mod" or len(parts) == 1):
            parts = parts[:-1]
        return parts

    def _module_file(self, ctx: ResolveContext, src: str, segments: list[str]) -> str:
        if not segments:
            return next((f for f in (f"{src}/lib.rs", f"{src}/main.rs") if ctx.exists(f)), "")
        base = posixpath.join(src, *segments)
        return next((f for f in (f"{base}.rs", f"{base}/mod.rs") if ctx.exists(f)), "")

    def _resolve_path(self, ctx: ResolveContext, path: str, full: str) -> tuple[str, list[str]] | None:
        """(module file, item segments left over) for a `::` path, or None outside this crate."""
        src = self._crate_src(ctx, path)
        if src is None or not path.startswith(src + "/"):
            return None
        segments = full.split("::")
        here = self._module_path(src, path)
        if segments[0] == "crate":
            absolute, rest = [], segments[1:]
        elif segments[0] in ("self", "super"):
            absolute = list(here)
            rest = segments
            while rest and rest[0] in ("self", "super"):
                if rest[0] == "super":
                    absolute = absolute[:-1]
                rest = rest[1:]
        elif self._module_file(ctx, src, [*here, segments[0]]):
            absolute, rest = list(here), segments  # a child module of this one
        else:
            return None
        # The longest prefix of the path that is a module file; the remainder names items inside it.
        for cut in range(len(rest), -1, -1):
            found = self._module_file(ctx, src, [*absolute, *rest[:cut]])
            if found:
                return found, rest[cut:]
        return None

    def bindings(self, ctx: ResolveContext, path: str, imp: ImportFact) -> list[Binding] | None:
        if imp.kind == "mod":
            src = self._crate_src(ctx, path)
            if src is None:
                return None
            found = self._module_file(ctx, src, [*self._module_path(src, path), imp.spec])
            return [Binding((found,), "", imp.spec)] if found else None
        resolved = self._resolve_path(ctx, path, imp.spec)
        if resolved is None:
            return None
        module, items = resolved
        if imp.is_star:
            return [Binding((module,), star=True)] if not items else None
        local = imp.names[0][1] if imp.names else ""
        if not items:
            return [Binding((module,), "", local)]
        return [Binding((module,), items[0], local)]

    def resolve_qualified(self, ctx: ResolveContext, path: str, use: UseFact) -> str:
        # `util::fmt::width()` after `use super::util;`: the path continues from what `util` names.
        head, _, rest = use.receiver.partition("::")
        full = use.receiver
        for imp in ctx.facts[path].imports:
            if rest and imp.kind == "use" and any(local == head for _, local in imp.names):
                full = f"{imp.spec}::{rest}"
                break
        resolved = self._resolve_path(ctx, path, full)
        if resolved is None:
            return ""
        module, items = resolved
        return ctx.find_definer((module,), items[0] if items else use.name)
