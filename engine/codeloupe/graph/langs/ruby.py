"""Ruby: require / require_relative / load / autoload, class and module definitions with their lexical
nesting, methods, constants, constant references (with the nesting they appear in) and receiverless calls."""

from __future__ import annotations

import posixpath

from tree_sitter import Node

from codeloupe.graph.facts import FactsBuilder, FileFacts, ImportFact, UseFact
from codeloupe.graph.langs.common import parse, string_value, walk
from codeloupe.graph.resolve import LanguageResolver, ResolveContext, nearest

_NAMESPACES = frozenset({"class", "module"})
_LOADERS = frozenset({"require", "require_relative", "load", "autoload"})
_MIXINS = frozenset({"include", "extend", "prepend", "register", "helpers"})


def extract(source: str) -> FileFacts:
    out = FactsBuilder("ruby", source)
    root = parse("ruby", out.source)
    for node in walk(root):
        kind = node.type
        if kind in _NAMESPACES:
            name = out.text(node.child_by_field_name("name"))
            outer = _nesting(out, node)
            *scope, short = _anchor(outer, name).split("::")
            out.define(short, kind, out.line(node), out.end_line(node), "::".join(scope))
            superclass = node.child_by_field_name("superclass")
            if superclass is not None and superclass.named_children:
                _constant_use(out, superclass.named_children[0], outer, "ref")
        elif kind in ("method", "singleton_method"):
            out.define(out.text(node.child_by_field_name("name")), "method" if _nesting(out, node, True) else "function",
                       out.line(node), out.end_line(node), _nesting(out, node, True))
        elif kind == "assignment" and node.child_by_field_name("left") is not None \
                and node.child_by_field_name("left").type == "constant" and not _inside_method(node):
            out.define(out.text(node.child_by_field_name("left")), "constant", out.line(node), out.end_line(node),
                       _nesting(out, node, True))
        elif kind == "call":
            _call(out, node)
        elif kind in ("constant", "scope_resolution") and _is_reference(out, node):
            _constant_use(out, node, _nesting(out, node, True), "ref")
    return out.facts


def _nesting(out: FactsBuilder, node: Node, include_self: bool = False) -> str:
    """The lexical module nesting of `node` (`Sinatra::Base`); a class's own name is outside its nesting."""
    parts: list[str] = []
    current = node if include_self else node.parent
    while current is not None:
        if current.type in _NAMESPACES and (include_self or current != node):
            parts.append(out.text(current.child_by_field_name("name")))
        current = current.parent
    qualified = ""
    for name in reversed(parts):
        qualified = _anchor(qualified, name)
    return qualified


def _anchor(outer: str, name: str) -> str:
    """The qualified name a definition `class A::B` gets inside `outer`: Ruby looks `A` up lexically, so when
    an enclosing namespace is called `A` the name hangs below that one, not below the innermost."""
    if name.startswith("::"):
        return name[2:]
    parts = outer.split("::") if outer else []
    head = name.split("::", 1)[0]
    if "::" in name and head in parts:
        return "::".join([*parts[: parts.index(head)], name])
    return "::".join([*parts, name])


def _inside_method(node: Node) -> bool:
    current = node.parent
    while current is not None:
        if current.type in ("method", "singleton_method", "block", "do_block"):
            return True
        current = current.parent
    return False


def _call(out: FactsBuilder, node: Node) -> None:
    method = out.text(node.child_by_field_name("method"))
    receiver = node.child_by_field_name("receiver")
    args = node.child_by_field_name("arguments")
    strings = [string_value(out, a) or _plain_string(out, a) for a in (args.named_children if args is not None else ())]
    strings = [s for s in strings if s]
    if receiver is None and method in _LOADERS and strings:
        out.imports("require_relative" if method == "require_relative" else "require", strings[-1], out.line(node))
    elif receiver is None and method in _MIXINS:
        for arg in args.named_children if args is not None else ():
            _constant_use(out, arg, _nesting(out, node, True), "ref")
    elif receiver is None and method not in _LOADERS:
        out.use(method, out.line(node), scope=_nesting(out, node, True))


def _plain_string(out: FactsBuilder, node: Node) -> str:
    """A double-quoted string without interpolation (tree-sitter-ruby nests its content)."""
    if node.type == "string" and all(c.type == "string_content" for c in node.named_children):
        return "".join(out.text(c) for c in node.named_children)
    return ""


def _is_reference(out: FactsBuilder, node: Node) -> bool:
    parent = node.parent
    if parent is None or parent.type == "scope_resolution":
        return False  # only the outermost part of `A::B::C` is a reference
    if parent.type in _NAMESPACES and parent.child_by_field_name("name") == node:
        return False
    if parent.type == "assignment" and parent.child_by_field_name("left") == node:
        return False
    if parent.type == "superclass" or (parent.type == "argument_list" and parent.parent is not None
                                       and out.text(parent.parent.child_by_field_name("method"))
                                       in _MIXINS):
        return False  # recorded with their definition or call
    return True


def _constant_use(out: FactsBuilder, node: Node, scope: str, kind: str) -> None:
    if node.type not in ("constant", "scope_resolution"):
        return
    parent = node.parent
    if parent is not None and parent.type == "call" and parent.child_by_field_name("receiver") == node:
        kind = "call"
    out.use(out.text(node).lstrip(":"), out.line(node), scope=scope, kind=kind)


class RubyResolver(LanguageResolver):
    """`require_relative` resolves against the file, `require` against the repository's load path (every
    `lib/` directory, shallowest first, then the top); constants resolve through the lexical nesting of the
    use against the workspace's class/module definitions; a receiverless call to a top-level method may
    resolve to the one file that defines it."""

    family = "ruby"
    path_tables = ("ruby.load_path",)
    global_names = True

    def layout(self, ctx: ResolveContext) -> object:
        return self._load_path(ctx)

    def _load_path(self, ctx: ResolveContext) -> list[str]:
        found = ctx.cache.get("ruby.load_path")
        if found is None:
            libs = {d for d in ctx.files_by_dir for d in _ancestors(d) if posixpath.basename(d) == "lib"}
            found = sorted(libs, key=lambda d: (d.count("/"), d)) + [""]
            ctx.cache["ruby.load_path"] = found
        return found  # type: ignore[return-value]

    def _constants(self, ctx: ResolveContext) -> dict[str, list[str]]:
        table = ctx.cache.get("ruby.constants")
        if table is None:
            built: dict[str, list[str]] = {}
            for path in sorted(ctx.facts):
                facts = ctx.facts[path]
                if facts.language != "ruby":
                    continue
                for d in facts.definitions:
                    if d.kind in ("class", "module", "constant"):
                        qualified = f"{d.parent}::{d.name}" if d.parent else d.name
                        files = built.setdefault(qualified, [])
                        if path not in files:
                            files.append(path)
            ctx.cache["ruby.constants"] = table = built
        return table  # type: ignore[return-value]

    def module_targets(self, ctx: ResolveContext, path: str, imp: ImportFact) -> tuple[str, ...]:
        spec = imp.spec if imp.spec.endswith(".rb") else f"{imp.spec}.rb"
        if imp.kind == "require_relative":
            candidate = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
            return (candidate,) if ctx.exists(candidate) else ()
        found = [c for c in (posixpath.join(lib, spec) for lib in self._load_path(ctx)) if ctx.exists(c)]
        if len(found) > 1:
            # A monorepo of gems: the copy in the requiring gem's own tree wins over the others.
            found = nearest(found, path)
        return (found[0],) if found else ()

    def resolve_bare(self, ctx: ResolveContext, path: str, use: UseFact) -> str:
        if not use.name[:1].isupper():
            return ctx.unique_global(self.family, path, use.name)
        constants = self._constants(ctx)
        scope = use.scope.split("::") if use.scope else []
        for depth in range(len(scope), -1, -1):
            qualified = "::".join([*scope[:depth], use.name])
            files = constants.get(qualified)
            if files:
                if path in files:
                    return ""  # defined (or reopened) right here
                return ctx.disambiguate(path, files)
        return ""


def _ancestors(directory: str) -> list[str]:
    out = []
    while directory:
        out.append(directory)
        directory = posixpath.dirname(directory)
    return out
