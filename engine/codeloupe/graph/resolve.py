"""Turn every file's facts into edges between real files of this workspace.

Imports resolve to files, never to package names; a name imported from a package resolves through the
package's re-exports to the file that defines it. Call sites resolve by the file's own import bindings first,
then by the language's scoping rule (same Go package, PHP namespace, Ruby lexical nesting), then by a globally
unique definition where the language allows one. Whatever cannot be resolved is kept as an external edge with
its raw specifier; ambiguous names are left alone.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from codeloupe.graph.compact import PackedFacts
from codeloupe.graph.facts import FileFacts, ImportFact, UseFact

MAX_REEXPORT_DEPTH = 8


@dataclass(frozen=True, slots=True)
class Edge:
    """A directed structural edge: `source` imports or calls into `target` ("" for an external one)."""

    source: str
    kind: str  # import | call | external
    target: str
    raw: str
    symbols: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Binding:
    """What one import binds in the importing file.

    `targets` are the files of the imported module (several for a Go package, the representative first).
    `symbol` is the imported name ("" when the module itself is bound); `local` the name it is bound to
    ("" binds nothing: a side-effect import). `star` imports every name of the targets.
    """

    targets: tuple[str, ...]
    symbol: str = ""
    local: str = ""
    star: bool = False


class LanguageResolver:
    """The per-language rules; the defaults suit a language with explicit imports and nothing else."""

    family = ""
    # May a bare name resolve to the one file of the workspace that defines it at top level?
    global_names = False
    # Does a file's resolution read other files' facts only through the modules its imports bind (what they
    # define, and their imports where it follows a re-export: `find_definition`), never through a table of the
    # whole workspace (`unique_global`, a namespace's files)? Then a file changed in place can change the edges
    # of only the files within MAX_REEXPORT_DEPTH + 1 binding hops of it (`ResolveContext.import_targets`).
    # Such a language's `bindings` must read paths only, never facts: whom a file binds is worked out while
    # the stored facts are still being read (`_Resolution.learn_stored`).
    reads_through_imports = False
    # Keys of `ResolveContext.cache` derived from the set of paths alone (not from any file's facts): kept
    # between resolutions while no file is added or removed.
    path_tables: tuple[str, ...] = ()
    # A file of one of these names coming or going changes the workspace's layout for the language.
    layout_names: tuple[str, ...] = ()
    # File stems that stand for their directory (`__init__`, `index`); every file does for Go's packages.
    directory_stems: tuple[str, ...] = ()
    files_are_packages = False

    def layout(self, ctx: ResolveContext) -> object:
        """The workspace-wide tables every file's resolution reads (import roots, load paths): when they
        change, every file of the language is resolved again."""
        return None

    def tables_after(self, tables: dict[str, object], ctx: ResolveContext, came_or_went: set[str]
                     ) -> dict[str, object]:
        """Of this language's `path_tables`, those for `ctx`'s paths that can be had from `tables` (the ones of
        the paths before the files `came_or_went` came or went, none of them a `layout_names` file) without a
        pass over every path; the keys left out are built again when first asked for."""
        return {}

    def module_targets(self, ctx: ResolveContext, path: str, imp: ImportFact) -> tuple[str, ...]:
        """The file(s) the import's specifier names; () when it is outside the workspace."""
        return ()

    def bindings(self, ctx: ResolveContext, path: str, imp: ImportFact) -> list[Binding] | None:
        """What the import binds; None when it names nothing in this workspace (an external edge)."""
        targets = self.module_targets(ctx, path, imp)
        if not targets:
            return None
        out = [Binding(targets)] if not imp.names else []
        for imported, local in imp.names:
            if imported == "*":
                out.append(Binding(targets, star=True))
            elif imported == "":
                out.append(Binding(targets, "", local or self.package_name(ctx, targets, imp)))
            else:
                out.append(Binding(targets, imported, local))
        return out

    def package_name(self, ctx: ResolveContext, targets: tuple[str, ...], imp: ImportFact) -> str:
        return imp.spec.rsplit("/", 1)[-1]

    def resolve_bare(self, ctx: ResolveContext, path: str, use: UseFact) -> str:
        """A bare name the file neither defines nor imports: the language's own scoping rule."""
        return ctx.unique_global(self.family, path, use.name) if self.global_names else ""

    def resolve_qualified(self, ctx: ResolveContext, path: str, use: UseFact) -> str:
        """`receiver.name` whose receiver is not an import binding of the file (`crate::a::f()`)."""
        return ""


@dataclass
class _Bound:
    targets: tuple[str, ...]
    symbol: str


class ResolveContext:
    """The whole workspace as resolution sees it: every file's facts plus the set of indexed paths."""

    def __init__(self, root: Path, facts: PackedFacts, paths: set[str],
                 resolvers: dict[str, LanguageResolver], read: Callable[[str], bytes] | None = None) -> None:
        self.root = root
        self._read = read or (lambda rel: (root / rel).read_bytes())  # a remote index reads its own copy
        self.facts = facts
        self.paths = paths
        self.resolvers = resolvers  # language -> resolver
        self.cache: dict[str, object] = {}  # per-language derived tables (module maps, load paths, ...)
        self.configs_read: dict[str, str | None] = {}  # every configuration file consulted, as read
        self._definers: dict[tuple[tuple[str, ...], str], tuple[str, str]] = {}
        self._import_targets: dict[str, set[str]] = {}

    @cached_property
    def files_by_dir(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for path in sorted(self.paths):
            out[posixpath.dirname(path)].append(path)
        return out

    @cached_property
    def _global_definitions(self) -> dict[tuple[str, str], list[str]]:
        out: dict[tuple[str, str], list[str]] = defaultdict(list)
        for path in sorted(self.facts):
            resolver = self.resolvers.get(self.facts[path].language)
            if resolver is None:
                continue
            for name in self.facts[path].top_level():
                out[(resolver.family, name)].append(path)
        return out

    def resolver_for(self, path: str) -> LanguageResolver | None:
        return self.resolvers.get(self.facts.language(path)) if path in self.facts else None

    def exists(self, path: str) -> bool:
        return path in self.paths

    def read_config(self, rel: str) -> str | None:
        """A configuration file (go.mod, tsconfig.json, Cargo.toml) read from its source; None when absent."""
        if rel not in self.configs_read:
            self.configs_read[rel] = read_config(self._read, rel)
        return self.configs_read[rel]

    def unique_global(self, family: str, path: str, name: str) -> str:
        """The one other file of the language family that defines `name` at top level; when several do,
        the one among them this file imports; otherwise "" (ambiguous names are never guessed)."""
        candidates = [p for p in self._global_definitions.get((family, name), []) if p != path]
        return self.disambiguate(path, candidates)

    def disambiguate(self, path: str, candidates: list[str]) -> str:
        if len(candidates) == 1:
            return candidates[0]
        imported = [c for c in candidates if c in self.import_targets(path)]
        return imported[0] if len(imported) == 1 else ""

    def import_targets(self, path: str) -> set[str]:
        """Every file `path` imports directly (module files, not re-export definers): the files whose facts
        its resolution reads first. `resolve_file` notes them on its way; otherwise they are worked out here."""
        if path not in self._import_targets:
            self._import_targets[path] = set()  # guards against import cycles while computing
            self._import_targets[path] = self.bound_files(path, self.facts.imports(path))
        return self._import_targets[path]

    def bound_files(self, path: str, imports: list[ImportFact]) -> set[str]:
        """The files `path`'s `imports` bind, `path` itself left out (`import_targets`, not kept)."""
        resolver = self.resolver_for(path)
        found: set[str] = set()
        for imp in imports if resolver is not None else ():
            for binding in resolver.bindings(self, path, imp) or ():
                found.update(binding.targets)
        found.discard(path)
        return found

    def note_import_targets(self, path: str, targets: set[str]) -> None:
        """`import_targets(path)` as `resolve_file` found them."""
        targets.discard(path)
        self._import_targets[path] = targets

    def find_definer(self, targets: tuple[str, ...], name: str) -> str:
        """The file defining `name`, starting at `targets` and following re-exports; "" when none does."""
        return self.find_definition(targets, name)[0]

    def find_definition(self, targets: tuple[str, ...], name: str, depth: int = 0) -> tuple[str, str]:
        """(file, name there) defining `name`, starting at `targets` and following re-exports
        (`from .x import name` in a package `__init__`, `export {a as name} from`, `export * from`, a glob
        `pub use`); ("", "") when no file of the workspace defines it."""
        key = (targets, name)
        if key in self._definers:
            return self._definers[key]
        self._definers[key] = ("", "")  # a re-export cycle ends here
        found = ("", "")
        for target in targets:
            if self.facts.defines(target, name):
                found = (target, name)
                break
        if not found[0] and depth < MAX_REEXPORT_DEPTH:
            found = self._reexported(targets, name, depth)
        self._definers[key] = found
        return found

    def _reexported(self, targets: tuple[str, ...], name: str, depth: int) -> tuple[str, str]:
        for target in targets:
            resolver = self.resolver_for(target)
            if resolver is None or not self.facts.may_reexport(target, name):
                continue
            stars: list[tuple[str, ...]] = []
            for imp in self.facts.imports(target):
                if not imp.is_star and not any(local == name for _, local in imp.names):
                    continue
                for binding in resolver.bindings(self, target, imp) or ():
                    if binding.star:
                        stars.append(binding.targets)
                    elif binding.local == name:
                        if not binding.symbol:
                            return binding.targets[0], name
                        found = self.find_definition(binding.targets, binding.symbol, depth + 1)
                        return found if found[0] else (binding.targets[0], binding.symbol)
            for star in stars:
                found = self.find_definition(star, name, depth + 1)
                if found[0]:
                    return found
        return "", ""


def nearest(candidates: list[str], path: str) -> list[str]:
    """The candidates that share the most leading directories with `path`, in their order (several import roots
    hold a module: a vendored copy, a monorepo of packages; the importer's own tree wins). They rank as
    `len(posixpath.commonpath(...))` does: the candidates sharing `path`'s first component, of those the ones
    sharing its second too, and so on while any do. A prefix test per candidate and step, not each candidate
    split into components (the 40K-file tree holds most modules under 18 roots)."""
    group = candidates
    start = 0
    while True:
        cut = path.find("/", start)
        prefix = path[:cut] if cut >= 0 else path  # `path`'s components up to this step's
        narrowed = [c for c in group if c.startswith(prefix) and (len(c) == len(prefix) or c[len(prefix)] == "/")]
        if not narrowed:
            return group
        group = narrowed
        if cut < 0:
            return group
        start = cut + 1


def read_config(read: Callable[[str], bytes], rel: str) -> str | None:
    try:
        return read(rel).decode("utf-8", errors="replace")
    except (OSError, ValueError):  # ValueError: a path the workspace refuses
        return None


# ------------------------------------------------------------------------------------------ what a change reaches
#
# A file's edges depend on other files only through names: the module specifiers and imported names it
# writes, and the names it uses. A changed file can therefore change the edges of a file only if the two
# share a word: one the changed file provides (its file and directory name, what it defines or re-exports)
# and one the other file mentions. Tokens are compared as written, so the rule needs no per-language table.

_WORD = re.compile(r"[^\w$]+")


def provided_tokens(path: str, facts: FileFacts, resolver: LanguageResolver | None) -> set[str]:
    """Words through which other files can reach `path`: its file stem (and directory name where the file
    stands for its directory), every name it defines (nested types too: Ruby constants) and every symbol it
    imports (re-exports)."""
    return _reach_tokens(path, facts, resolver) | {name for name, _, _ in _looked_up(facts)}


def changed_tokens(path: str, old: FileFacts, new: FileFacts, resolver: LanguageResolver | None) -> set[str]:
    """`provided_tokens` of a file changed in place, less what both versions provide alike. Resolution asks
    only whether a file defines a name (of a kind, under a parent), never where, so a definition kept across
    the change answers every lookup as before; and it reads a file's imports only to follow its re-exports, and
    its package only to bind it, so while those are as they were no file naming it can resolve otherwise. A
    save that touches a body then reaches no other file; one that changes its imports reaches the files naming
    the file or what it re-exports, not every file that mentions one of its definitions."""
    changed = {name for name, _, _ in _looked_up(old) ^ _looked_up(new)}
    if old.package == new.package and _import_shape(old) == _import_shape(new):
        return changed
    return _reach_tokens(path, old, resolver) | _reach_tokens(path, new, resolver) | changed


def _import_shape(facts: FileFacts) -> list[tuple[str, str, tuple[tuple[str, str], ...], int]]:
    """The file's imports as resolution reads them, their lines left out (lines above them moved)."""
    return [(imp.kind, imp.spec, imp.names, imp.level) for imp in facts.imports]


def _looked_up(facts: FileFacts) -> set[tuple[str, str, str]]:
    """(name, parent, kind) of the definitions other files can look up by name. Methods are never looked up
    across files by name alone (only top-level names and nested types are)."""
    return {(d.name, d.parent, d.kind) for d in facts.definitions
            if d.name and (not d.parent or d.kind not in ("method", "function"))}


def _reach_tokens(path: str, facts: FileFacts, resolver: LanguageResolver | None) -> set[str]:
    """The file's own names (`module_tokens`) and what it re-exports."""
    return module_tokens(path, facts, resolver) | reexported_tokens(facts)


def reexported_tokens(facts: FileFacts) -> set[str]:
    """What a file binds to a symbol, which can be imported from it again (a re-export); a plain module import
    (`import re`) is reached only through the file's own name (`module_tokens`)."""
    out = {name for imp in facts.imports for imported, local in imp.names if imported for name in (imported, local)}
    out.discard("")
    return out


def module_tokens(path: str, facts: FileFacts, resolver: LanguageResolver | None) -> set[str]:
    """The words of an import that names the file itself: its stem, its package, its directory where the file
    stands for the directory."""
    stem = posixpath.basename(path).split(".")[0]
    out = {stem, facts.package}
    if resolver is not None and (resolver.files_are_packages or stem in resolver.directory_stems):
        out.add(posixpath.basename(posixpath.dirname(path)))
    out.discard("")
    return out


def mentioned_tokens(path: str, facts: FileFacts) -> set[str]:
    """Words of `path` through which resolution looks at other files: the parts of its import specifiers,
    the names it imports, the names and receivers of its uses, and for a relative import the directory it
    starts from."""
    out: set[str] = set()
    for imp in facts.imports:
        out.update(_WORD.split(imp.spec))
        out.update(name for pair in imp.names for name in pair)
        if imp.level:
            base = posixpath.dirname(path)
            for _ in range(imp.level - 1):
                base = posixpath.dirname(base)
            out.add(posixpath.basename(base))
    for use in facts.uses:
        out.update(_WORD.split(use.name))
        out.update(_WORD.split(use.receiver))
    out.discard("")
    return out


@dataclass
class _EdgeBag:
    """Edges of one file, merged: one import edge per (target, statement), one call edge per (target, name)."""

    source: str
    rows: dict[tuple[str, str, str], Edge] = field(default_factory=dict)

    def add(self, kind: str, target: str, raw: str, symbols: tuple[str, ...], line: int) -> None:
        if target == self.source:
            return
        key = (kind, target, raw if kind != "call" else ",".join(symbols))
        old = self.rows.get(key)
        if old is None:
            self.rows[key] = Edge(self.source, kind, target, raw, symbols, line)
        else:
            merged = tuple(dict.fromkeys(old.symbols + symbols))
            self.rows[key] = Edge(self.source, kind, target, raw, merged, min(old.line, line))


def resolve_file(ctx: ResolveContext, path: str) -> list[Edge]:
    """Every edge out of one file, in a deterministic order."""
    # Decoded afresh and let go when the file is done, not kept among the decoded facts: a file is resolved
    # once per resolution, and facts kept alive (hundreds of objects a file, ~1,000 files in a large save)
    # outlive the collector's young generations, so that each of its full passes walks them all.
    facts = ctx.facts.decode(path)
    resolver = ctx.resolvers.get(facts.language)
    if resolver is None:
        return []
    bag = _EdgeBag(path)
    bound: dict[str, _Bound] = {}
    stars: list[tuple[str, ...]] = []
    packages: dict[str, tuple[ImportFact, set[str]]] = {}  # multi-file module bindings -> files actually used
    imported: set[str] = set()
    for imp in facts.imports:
        bindings = resolver.bindings(ctx, path, imp)
        if bindings is None:
            bag.add("external", "", imp.written, (), imp.line)
            continue
        for binding in bindings:
            imported.update(binding.targets)
            if binding.star:
                stars.append(binding.targets)
                for target in binding.targets[:1]:
                    bag.add("import", target, imp.written, (), imp.line)
            elif binding.symbol:
                definer, defined_as = ctx.find_definition(binding.targets, binding.symbol)
                definer, defined_as = definer or binding.targets[0], defined_as or binding.symbol
                bag.add("import", definer, imp.written, (defined_as,), imp.line)
                if binding.local:
                    bound[binding.local] = _Bound((definer,), defined_as)
            else:
                if binding.local:
                    bound[binding.local] = _Bound(binding.targets, "")
                if len(binding.targets) > 1 and binding.local:
                    packages[binding.local] = (imp, set())
                else:
                    bag.add("import", binding.targets[0], imp.written, (), imp.line)
    ctx.note_import_targets(path, imported)

    local = facts.top_level()
    for use in facts.uses:
        target, symbol = _resolve_use(ctx, resolver, path, use, bound, stars, local)
        if not target:
            continue
        bag.add("call", target, use.name if not use.receiver else f"{use.receiver}.{use.name}", (symbol,),
                use.line)
        if use.receiver in packages and target in bound[use.receiver].targets:
            packages[use.receiver][1].add(target)

    for name, (imp, used) in packages.items():
        # A package import points at the files whose definitions the importer uses, or else at the
        # package's representative file.
        for target in sorted(used) or [bound[name].targets[0]]:
            bag.add("import", target, imp.written, (), imp.line)
    return sorted(bag.rows.values(), key=lambda e: (e.kind, e.target, e.line, e.raw, e.symbols))


def _resolve_use(ctx: ResolveContext, resolver: LanguageResolver, path: str, use: UseFact,
                 bound: dict[str, _Bound], stars: list[tuple[str, ...]], local: dict) -> tuple[str, str]:
    """(target file, carrier symbol) of one use, or ("", "")."""
    if not use.receiver:
        if use.name in bound:
            binding = bound[use.name]
            if binding.symbol:
                return binding.targets[0], binding.symbol
            if len(binding.targets) == 1:
                return binding.targets[0], use.name  # a module called or constructed (`Layer()`)
            return "", ""
        if use.name in local:
            return "", ""
        for star in stars:
            found = ctx.find_definition(star, use.name)
            if found[0]:
                return found
        target = resolver.resolve_bare(ctx, path, use)
        return (target, _short(use.name)) if target else ("", "")
    binding = bound.get(use.receiver)
    if binding is not None:
        if binding.symbol:
            return binding.targets[0], binding.symbol  # `Cls.method()` on an imported class
        return ctx.find_definition(binding.targets, use.name)
    return resolver.resolve_qualified(ctx, path, use), use.name


def _short(name: str) -> str:
    """The defined name inside a qualified one (Ruby `Shop::Cart` -> `Cart`, PHP `App\\User` -> `User`)."""
    return re.split(r"::|\\", name)[-1]
