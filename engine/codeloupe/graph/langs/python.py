"""Python: import statements (absolute, relative, star), top-level definitions, call sites and bases."""

from __future__ import annotations

import posixpath

from tree_sitter import Node

from codeloupe.graph.facts import FactsBuilder, FileFacts, ImportFact
from codeloupe.graph.langs.common import enclosing, parse, walk
from codeloupe.graph.resolve import Binding, LanguageResolver, ResolveContext, nearest

_SCOPES = frozenset({"class_definition", "function_definition"})


def extract(source: str) -> FileFacts:
    out = FactsBuilder("python", source)
    root = parse("python", out.source)
    for node in walk(root):
        kind = node.type
        if kind == "import_statement":
            for name in node.children_by_field_name("name"):
                _plain_import(out, name)
        elif kind == "import_from_statement":
            _from_import(out, node)
        elif kind in ("function_definition", "class_definition"):
            parents = enclosing(out, node, _SCOPES)
            outer = node.parent if node.parent is not None and node.parent.type == "decorated_definition" else node
            out.define(out.text(node.child_by_field_name("name")),
                       ("method" if parents else "function") if kind == "function_definition" else "class",
                       out.line(outer), out.end_line(outer), ".".join(parents))
            if kind == "class_definition":
                for base in (node.child_by_field_name("superclasses") or node).named_children:
                    if base.type in ("identifier", "attribute"):
                        _use(out, base, "ref")
        elif kind == "assignment" and _at_top(node, root):
            target = node.child_by_field_name("left")
            if target is not None and target.type == "identifier":
                out.define(out.text(target), "constant", out.line(node), out.end_line(node))
        elif kind == "call":
            _use(out, node.child_by_field_name("function"), "call")
        elif kind == "decorator":
            inner = node.named_children[0] if node.named_children else None
            if inner is not None and inner.type in ("identifier", "attribute"):
                _use(out, inner, "ref")
    return out.facts


def _at_top(node: Node, root: Node) -> bool:
    parent = node.parent
    if parent is not None and parent.type == "expression_statement":
        parent = parent.parent
    return parent == root


def _plain_import(out: FactsBuilder, name: Node) -> None:
    if name.type == "aliased_import":
        module = out.text(name.child_by_field_name("name"))
        out.imports("import", module, out.line(name), [("", out.text(name.child_by_field_name("alias")))])
    else:
        module = out.text(name)
        out.imports("import", module, out.line(name), [("", module)])


def _from_import(out: FactsBuilder, node: Node) -> None:
    module_node = node.child_by_field_name("module_name")
    level = 0
    module = out.text(module_node)
    if module_node is not None and module_node.type == "relative_import":
        prefix = next((c for c in module_node.named_children if c.type == "import_prefix"), None)
        level = len(out.text(prefix).strip())
        dotted = next((c for c in module_node.named_children if c.type == "dotted_name"), None)
        module = out.text(dotted)
    names: list[tuple[str, str]] = []
    if any(c.type == "wildcard_import" for c in node.named_children):
        names.append(("*", "*"))
    for name in node.children_by_field_name("name"):
        if name.type == "aliased_import":
            names.append((out.text(name.child_by_field_name("name")), out.text(name.child_by_field_name("alias"))))
        else:
            names.append((out.text(name), out.text(name)))
    out.imports("from", module, out.line(node), names, level)


def _use(out: FactsBuilder, target: Node | None, kind: str) -> None:
    """Record `f(...)`, `mod.f(...)`, `a.b.f(...)`; a call on anything else (`x().f`, `self.f`) is not a use."""
    if target is None:
        return
    if target.type == "identifier":
        out.use(out.text(target), out.line(target), kind=kind)
    elif target.type == "attribute":
        obj = target.child_by_field_name("object")
        if obj is not None and _is_dotted(obj) and out.text(obj) not in ("self", "cls"):
            out.use(out.text(target.child_by_field_name("attribute")), out.line(target), receiver=out.text(obj), kind=kind)


def _is_dotted(node: Node) -> bool:
    while node.type == "attribute":
        node = node.child_by_field_name("object")
        if node is None:
            return False
    return node.type == "identifier"


class PythonResolver(LanguageResolver):
    """Modules resolve against the import roots of the repository: its top, every directory holding a
    top-level package (so `src/` layouts work), and, for a script outside any package, its own directory."""

    family = "python"
    reads_through_imports = True  # no bare name resolves globally; `bindings` reads paths only
    directory_stems = ("__init__",)
    path_tables = ("python.roots", "python.modules")
    layout_names = ("__init__.py", "__init__.pyi")  # a directory becomes or stops being a package

    def layout(self, ctx: ResolveContext) -> object:
        # The module table is built with the roots: a process that opens an index reads the layout while its
        # graph builds, so the first save after it finds the table ready instead of walking every path.
        self._modules(ctx)
        return self._roots(ctx)

    def _roots(self, ctx: ResolveContext) -> list[str]:
        roots = ctx.cache.get("python.roots")
        if roots is None:
            found = {""}
            for path in ctx.paths:
                if posixpath.basename(path) == "__init__.py":
                    package = posixpath.dirname(path)
                    parent = posixpath.dirname(package)
                    if not ctx.exists(posixpath.join(parent, "__init__.py") if parent else "__init__.py"):
                        found.add(parent)
            roots = sorted(found, key=lambda r: (r.count("/") + bool(r), r))
            ctx.cache["python.roots"] = roots
        return roots

    @staticmethod
    def _module_file(ctx: ResolveContext, base: str) -> str:
        for candidate in (f"{base}.py", f"{base}/__init__.py", f"{base}.pyi", f"{base}/__init__.pyi"):
            if ctx.exists(candidate.lstrip("/")):
                return candidate.lstrip("/")
        return ""

    def _modules(self, ctx: ResolveContext) -> dict[str, list[str]]:
        """Dotted module name -> its file under each import root that holds it, in root order; built once
        per resolution, so an import is one lookup instead of a probe under every root."""
        table = ctx.cache.get("python.modules")
        if table is None:
            roots = self._roots(ctx)
            rank = {root: k for k, root in enumerate(roots)}
            found: dict[str, dict[str, str]] = {}  # module -> root -> file
            for path in ctx.paths:
                for module, root in _module_names(path, rank):
                    file = self._module_file(ctx, posixpath.join(root, *module.split(".")))
                    if file:
                        found.setdefault(module, {}).setdefault(root, file)
            table = {module: [files[r] for r in sorted(files, key=rank.__getitem__)]
                     for module, files in found.items()}
            ctx.cache["python.modules"] = table
        return table  # type: ignore[return-value]

    def tables_after(self, tables: dict[str, object], ctx: ResolveContext, came_or_went: set[str]
                     ) -> dict[str, object]:
        # No `__init__.py` came or went, so the roots are the same; only the modules the files that came or went
        # can name may be held by other files now, each looked up again under every root (at 40K files the
        # table took 0.8 s to build, a file created or deleted in a session as much as a start).
        roots, modules = tables.get("python.roots"), tables.get("python.modules")
        if not isinstance(roots, list) or not isinstance(modules, dict):
            return {}
        rank = {root: k for k, root in enumerate(roots)}
        table = dict(modules)  # the earlier table stays as it was: a rebinding compares the two
        for module in {module for path in came_or_went for module, _ in _module_names(path, rank)}:
            files = [file for root in roots if (file := self._module_file(ctx, posixpath.join(root, *module.split("."))))]
            if files:
                table[module] = files
            else:
                table.pop(module, None)
        return {"python.roots": roots, "python.modules": table}

    def _absolute(self, ctx: ResolveContext, path: str, module: str) -> str:
        # Several roots hold the module (a vendored copy, a test helper): the nearest to the importer wins, and
        # a tie is not guessed. The candidates nearest to the importer's directory are worked out once per
        # directory and resolution (a process opening 40K files asks ~200K times); the file's own name can
        # then only single out itself, or a directory named like it, among them (`nearest`'s last step).
        own_dir = posixpath.dirname(path)
        known: dict[tuple[str, str], tuple[str, ...]] = ctx.cache.setdefault("python.near", {})  # type: ignore[assignment]
        near = known.get((own_dir, module))
        if near is None:
            near = known[own_dir, module] = tuple(nearest(self._held(ctx, own_dir, module), own_dir))
        if len(near) > 1:
            near = tuple(c for c in near if c == path or c.startswith(path + "/")) or near
        return near[0] if len(near) == 1 else ""

    def _held(self, ctx: ResolveContext, own_dir: str, module: str) -> list[str]:
        """The files that hold `module` for an importer in `own_dir`: one per import root, and first its
        sibling where the importer is a script (its directory neither a package nor a root)."""
        found = list(self._modules(ctx).get(module, ()))
        if not ctx.exists(posixpath.join(own_dir, "__init__.py")) and own_dir not in self._roots(ctx):
            own = self._module_file(ctx, posixpath.join(own_dir, module.replace(".", "/")))
            if own:
                found.insert(0, own)  # a script imports its siblings
        return found

    def _base(self, path: str, imp: ImportFact) -> str:
        """The directory a relative import starts from (`.` is the file's own package)."""
        base = posixpath.dirname(path)
        for _ in range(imp.level - 1):
            base = posixpath.dirname(base)
        return base

    def bindings(self, ctx: ResolveContext, path: str, imp: ImportFact) -> list[Binding] | None:
        if imp.kind == "import":
            target = self._absolute(ctx, path, imp.spec)
            return [Binding((target,), "", local) for _, local in imp.names] if target else None
        if imp.level:
            base = self._base(path, imp)
            module_dir = posixpath.join(base, imp.spec.replace(".", "/")) if imp.spec else base
            module = self._module_file(ctx, module_dir)
        else:
            module = self._absolute(ctx, path, imp.spec)
            module_dir = module[: -len("/__init__.py")] if module.endswith("/__init__.py") else ""
        out: list[Binding] = []
        for imported, local in imp.names:
            submodule = self._module_file(ctx, f"{module_dir}/{imported}") if module_dir and imported != "*" \
                else ""
            if submodule:
                out.append(Binding((submodule,), "", local))
            elif module:
                out.append(Binding((module,), star=True) if imported == "*" else Binding((module,), imported, local))
        return out or None


def _module_names(path: str, rank: dict[str, int]) -> list[tuple[str, str]]:
    """(dotted module name, import root) of each name `path` may be imported by: under every root above it
    whose rest holds no dot, as a module and, for a package's `__init__`, as the package too."""
    stem, dot, suffix = path.rpartition(".")
    if not dot or suffix not in ("py", "pyi"):
        return []
    stems = [stem]
    if stem.endswith("/__init__"):
        stems.append(stem[: -len("/__init__")])  # the package (`pkg.__init__` names the file too)
    out = []
    for parts in (s.split("/") for s in stems):
        for cut in range(len(parts)):
            root = "/".join(parts[:cut])
            if root in rank and not any("." in part for part in parts[cut:]):
                out.append((".".join(parts[cut:]), root))
    return out
