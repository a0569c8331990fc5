"""JavaScript and TypeScript: ES imports and re-exports, CommonJS require, dynamic import(), definitions
(declarations, `exports.x =`, `X.prototype.y =`), call sites, constructors, class heritage and JSX tags."""

from __future__ import annotations

import json
import posixpath
import re

from tree_sitter import Node

from codeloupe.graph.facts import FactsBuilder, FileFacts, ImportFact, UseFact
from codeloupe.graph.langs.common import parse, string_value, walk
from codeloupe.graph.resolve import Binding, LanguageResolver, ResolveContext

_DECLARATIONS = {
    "function_declaration": "function", "generator_function_declaration": "function",
    "class_declaration": "class", "abstract_class_declaration": "class", "interface_declaration": "type",
    "type_alias_declaration": "type", "enum_declaration": "type",
}
_FUNCTION_VALUES = frozenset({"function_expression", "function", "arrow_function", "generator_function"})


def extract(source: str, grammar: str) -> FileFacts:
    out = FactsBuilder(grammar, source)
    root = parse(grammar, out.source)
    for node in walk(root):
        kind = node.type
        if kind == "import_statement":
            _import(out, node)
        elif kind == "export_statement" and node.child_by_field_name("source") is not None:
            _reexport(out, node)
        elif kind == "call_expression":
            _call(out, node)
        elif kind == "new_expression":
            _use(out, node.child_by_field_name("constructor"), "call")
        elif kind == "class_heritage":
            for clause in node.named_children:
                for value in clause.named_children:
                    _use(out, value, "ref")
        elif kind in ("jsx_opening_element", "jsx_self_closing_element"):
            name = node.child_by_field_name("name")
            if name is not None and out.text(name)[:1].isupper():
                _use(out, name, "ref")
        elif kind in _DECLARATIONS and _top_level(node):
            out.define(out.text(node.child_by_field_name("name")), _DECLARATIONS[kind], out.line(node), out.end_line(node))
        elif kind == "method_definition":
            owner = node.parent.parent if node.parent is not None else None
            if owner is not None and owner.type in _DECLARATIONS:
                out.define(out.text(node.child_by_field_name("name")), "method", out.line(node), out.end_line(node),
                           out.text(owner.child_by_field_name("name")))
        elif kind in ("lexical_declaration", "variable_declaration") and _top_level(node):
            for declarator in node.named_children:
                name = declarator.child_by_field_name("name")
                value = declarator.child_by_field_name("value")
                if out.text(value).startswith(("require(", "import(")):
                    continue  # a binding of another module, not a definition of this one
                if declarator.type == "variable_declarator" and name is not None and name.type == "identifier":
                    is_function = value is not None and value.type in _FUNCTION_VALUES
                    out.define(out.text(name), "function" if is_function else "constant", out.line(node),
                               out.end_line(node))
        elif kind == "assignment_expression" and _top_level(node.parent):
            _assigned_definition(out, node)
    return out.facts


def _top_level(node: Node | None) -> bool:
    parent = node.parent if node is not None else None
    if parent is not None and parent.type == "export_statement":
        parent = parent.parent
    return parent is not None and parent.type == "program"


def _import(out: FactsBuilder, node: Node) -> None:
    spec = string_value(out, node.child_by_field_name("source"))
    if not spec:
        return
    names: list[tuple[str, str]] = []
    clause = next((c for c in node.named_children if c.type == "import_clause"), None)
    for part in clause.named_children if clause is not None else ():
        if part.type == "identifier":
            names.append(("default", out.text(part)))
        elif part.type == "namespace_import":
            names.append(("", out.text(part.named_children[0]) if part.named_children else ""))
        elif part.type == "named_imports":
            for spec_node in part.named_children:
                if spec_node.type == "import_specifier":
                    imported = out.text(spec_node.child_by_field_name("name"))
                    alias = spec_node.child_by_field_name("alias")
                    names.append((imported, out.text(alias) if alias is not None else imported))
    out.imports("import" if names else "side", spec, out.line(node), names)


def _reexport(out: FactsBuilder, node: Node) -> None:
    spec = string_value(out, node.child_by_field_name("source"))
    if not spec:
        return
    names: list[tuple[str, str]] = []
    for part in node.named_children:
        if part.type == "export_clause":
            for spec_node in part.named_children:
                if spec_node.type == "export_specifier":
                    imported = out.text(spec_node.child_by_field_name("name"))
                    alias = spec_node.child_by_field_name("alias")
                    names.append((imported, out.text(alias) if alias is not None else imported))
        elif part.type == "namespace_export":
            names.append(("", out.text(part.named_children[0]) if part.named_children else ""))
    out.imports("reexport", spec, out.line(node), names or [("*", "*")])


def _call(out: FactsBuilder, node: Node) -> None:
    function = node.child_by_field_name("function")
    if function is None:
        return
    args = node.child_by_field_name("arguments")
    first = args.named_children[0] if args is not None and args.named_children else None
    if function.type == "import":
        spec = string_value(out, first)
        if spec:
            out.imports("dynamic", spec, out.line(node))
        return
    if function.type == "identifier" and out.text(function) == "require":
        spec = string_value(out, first)
        if spec:
            out.imports("require", spec, out.line(node), _require_bindings(out, node))
        return
    _use(out, function, "call")


def _require_bindings(out: FactsBuilder, call: Node) -> list[tuple[str, str]]:
    """What `require(...)` binds: `const x = require()`, `const {a, b: c} = require()`, `const x = require().a`."""
    parent = call.parent
    member = ""
    if parent is not None and parent.type == "member_expression":
        member = out.text(parent.child_by_field_name("property"))
        parent = parent.parent
    if parent is None or parent.type != "variable_declarator":
        return []
    name = parent.child_by_field_name("name")
    if name is None:
        return []
    if name.type == "identifier":
        return [(member, out.text(name))]
    if name.type == "object_pattern" and not member:
        names = []
        for part in name.named_children:
            if part.type == "shorthand_property_identifier_pattern":
                names.append((out.text(part), out.text(part)))
            elif part.type == "pair_pattern":
                names.append((out.text(part.child_by_field_name("key")), out.text(part.child_by_field_name("value"))))
        return names
    return []


def _assigned_definition(out: FactsBuilder, node: Node) -> None:
    """`exports.f = ...`, `module.exports.f = ...`, `Router.prototype.f = ...`, `app.f = ...` at top level."""
    left = node.child_by_field_name("left")
    if left is None or left.type != "member_expression":
        return
    name = out.text(left.child_by_field_name("property"))
    owner = out.text(left.child_by_field_name("object"))
    if owner in ("exports", "module.exports"):
        out.define(name, "function", out.line(node), out.end_line(node))
    elif owner.endswith(".prototype"):
        out.define(name, "method", out.line(node), out.end_line(node), owner[: -len(".prototype")])
    elif "." not in owner and owner != "module":
        out.define(name, "method", out.line(node), out.end_line(node), owner)


def _use(out: FactsBuilder, target: Node | None, kind: str) -> None:
    if target is None:
        return
    if target.type in ("identifier", "type_identifier"):
        out.use(out.text(target), out.line(target), kind=kind)
    elif target.type in ("member_expression", "nested_identifier"):
        obj = target.child_by_field_name("object")
        prop = target.child_by_field_name("property")
        if obj is not None and obj.type == "identifier" and prop is not None:
            out.use(out.text(prop), out.line(target), receiver=out.text(obj), kind=kind)


_EXTENSIONS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".json")
# TypeScript sources import their siblings by the extension they compile to.
_COMPILED = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}
_CONFIG_NAMES = ("tsconfig.json", "jsconfig.json")


class JavaScriptResolver(LanguageResolver):
    """Relative specifiers with extension and `index` resolution, and tsconfig `paths` / `baseUrl` for bare
    ones; anything else is a package. A file with no imports at all is a script that may call globals."""

    family = "javascript"
    directory_stems = ("index",)

    def _candidates(self, ctx: ResolveContext, base: str) -> str:
        base = posixpath.normpath(base).lstrip("/")
        if base.startswith(".."):
            return ""
        stem, ext = posixpath.splitext(base)
        options = [base] if ext else []
        options += [stem + alt for alt in _COMPILED.get(ext, ())]
        options += [base + e for e in _EXTENSIONS] + [f"{base}/index{e}" for e in _EXTENSIONS]
        return next((o for o in options if ctx.exists(o)), "")

    def module_targets(self, ctx: ResolveContext, path: str, imp: ImportFact) -> tuple[str, ...]:
        spec = imp.spec.split("?", 1)[0]
        if spec.startswith((".", "/")):
            base = spec.lstrip("/") if spec.startswith("/") else posixpath.join(posixpath.dirname(path), spec)
            found = self._candidates(ctx, base)
            return (found,) if found else ()
        for paths_base, base_url, paths in self._configs(ctx, path):
            for pattern, replacements in paths:
                head, star, tail = pattern.partition("*")
                if not (spec.startswith(head) and spec.endswith(tail) and len(spec) >= len(head) + len(tail)):
                    continue
                if not star and spec != pattern:
                    continue
                middle = spec[len(head): len(spec) - len(tail)] if star else ""
                for replacement in replacements:
                    found = self._candidates(ctx, posixpath.join(paths_base, replacement.replace("*", middle)))
                    if found:
                        return (found,)
            if base_url is not None:
                found = self._candidates(ctx, posixpath.join(base_url, spec))
                if found:
                    return (found,)
        return ()

    def _configs(self, ctx: ResolveContext, path: str) -> list[tuple[str, str | None, list[tuple[str, list[str]]]]]:
        """(dir `paths` are relative to, baseUrl dir or None, paths) of the nearest tsconfig/jsconfig above
        `path` that sets either."""
        directory = posixpath.dirname(path)
        while True:
            key = f"js.config:{directory}"
            if key not in ctx.cache:
                ctx.cache[key] = self._read_config(ctx, directory)
            if ctx.cache[key] is not None:
                return [ctx.cache[key]]  # type: ignore[list-item]
            if not directory:
                return []
            directory = posixpath.dirname(directory)

    def _read_config(self, ctx: ResolveContext, directory: str, names: tuple[str, ...] = _CONFIG_NAMES,
                     depth: int = 0) -> tuple[str, str | None, list[tuple[str, list[str]]]] | None:
        for name in names:
            raw = ctx.read_config(posixpath.join(directory, name))
            if raw is None:
                continue
            try:
                config = json.loads(_strip_jsonc(raw))
            except (ValueError, RecursionError):  # not JSON, or nested thousands deep
                return None
            options = config.get("compilerOptions", {}) if isinstance(config, dict) else {}
            extends = config.get("extends") if isinstance(config, dict) else None
            if not options.get("paths") and not options.get("baseUrl") and isinstance(extends, str) \
                    and extends.startswith(".") and depth < 3:
                parent = posixpath.normpath(posixpath.join(directory, extends))
                parent_name = posixpath.basename(parent)
                if not parent_name.endswith(".json"):
                    parent_name += ".json"
                parent_dir = posixpath.dirname(parent)
                return self._read_config(ctx, "" if parent_dir == "." else parent_dir, (parent_name,), depth + 1)
            if not options.get("paths") and not options.get("baseUrl"):
                return None
            base_url = None
            if options.get("baseUrl"):
                base_url = posixpath.normpath(posixpath.join(directory, str(options["baseUrl"])))
                base_url = "" if base_url == "." else base_url
            paths = [(k, [str(v) for v in vs]) for k, vs in sorted(options.get("paths", {}).items())
                     if isinstance(vs, list)]
            return (directory if base_url is None else base_url, base_url, paths)
        return None

    def bindings(self, ctx: ResolveContext, path: str, imp: ImportFact) -> list[Binding] | None:
        # A default import binds the module itself: `import Layer from './layer'` then `Layer()`.
        fixed = ImportFact(imp.kind, imp.spec, imp.line,
                           tuple(("" if a == "default" else a, b) for a, b in imp.names), imp.level)
        return super().bindings(ctx, path, fixed)

    def resolve_bare(self, ctx: ResolveContext, path: str, use: UseFact) -> str:
        if ctx.facts.imports(path):
            return ""  # a module sees only what it imports
        return ctx.unique_global(self.family, path, use.name)


def _strip_jsonc(raw: str) -> str:
    """JSON with comments and trailing commas (what tsconfig.json allows) -> JSON."""
    out: list[str] = []
    i, n = 0, len(raw)
    in_string = False
    while i < n:
        ch = raw[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(raw[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif raw.startswith("//", i):
            i = raw.find("\n", i)
            i = n if i < 0 else i
            continue
        elif raw.startswith("/*", i):
            i = raw.find("*/", i + 2)
            i = n if i < 0 else i + 2
            continue
        else:
            out.append(ch)
        i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))
