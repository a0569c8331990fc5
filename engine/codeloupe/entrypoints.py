"""Entry points: where the workspace's programs start, found in the index (no disk walk, no code run).

Four signals, strongest first: a manifest names the file (package.json `bin` / `main` / `scripts`,
pyproject.toml `[project.scripts]` / `[tool.poetry.scripts]`), Python's `if __name__ == "__main__":`, a
definition named `main`, a shebang line. Tests are never entry points. The list is data for the tour and a
candidate source for location-shaped queries ("where does the CLI start"): it adds candidates, never scores.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from codeloupe.saved import load_arrays, pack_strings, save_arrays, unpack_strings
from codeloupe.search import Snapshot, is_test_path
from codeloupe.store import SymbolRow
from codeloupe.types import EntryPoint

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext

log = logging.getLogger("codeloupe.entrypoints")

# Bump when what is found, or how it is saved, changes: a file of another version is found again.
ENTRY_POINTS_FILE_VERSION = 1
# The order candidates are offered in: what a manifest declares is certain, a shebang is only a hint.
KINDS = ("manifest", "main guard", "main function", "shebang")
_MAIN_GUARD = re.compile(r"""^if\s+__name__\s*==\s*['"]__main__['"]\s*:""", re.M)
_WHERE = re.compile(r"\b(where|which|what file|entry ?points?)\b", re.I)
_START = re.compile(r"\b(start\w*|entry|entrypoints?|main|begin\w*|launch\w*|boot\w*|invok\w*|execut\w*|runs?|"
                    r"cli|command[- ]line|binary|script)\b", re.I)


def location_shaped(query: str) -> bool:
    """A question about where something starts ("where does the CLI start", "which file is the entry point")."""
    return bool(_WHERE.search(query) and _START.search(query))


def find_entry_points(snap: Snapshot, symbols: Iterable[SymbolRow]) -> list[EntryPoint]:
    """Every entry point of the indexed workspace, strongest signal first, then by path. `symbols` is read
    once, as it streams (every row at once is 1.35M objects at 200K chunks); only the rows an entry point
    needs are kept."""
    found: dict[tuple[str, str], EntryPoint] = {}

    def add(point: EntryPoint) -> None:
        if point.path in snap.path_to_file and not is_test_path(point.path):
            # Every manifest entry is its own fact; a file's other signals are one each (a class with three
            # `main` overloads is one entry point).
            found.setdefault((point.path, point.detail if point.kind == "manifest" else point.kind), point)

    scripts: list[tuple[EntryPoint, tuple[int, str]]] = []  # a manifest's script, its (file id, function)
    for file_id, text in snap.file_texts():
        path = snap.file_paths[file_id]
        base = posixpath.basename(path)
        if base == "package.json":
            for point in _package_json(path, text):
                add(point)
        elif base == "pyproject.toml":
            scripts.extend(_pyproject(path, text, snap))
        if snap.file_is_doc.get(file_id):
            continue
        if text.startswith("#!"):
            add(EntryPoint(path, 1, "shebang", text.split("\n", 1)[0].strip()))
        guard = _MAIN_GUARD.search(text)
        if guard:
            add(EntryPoint(path, text.count("\n", 0, guard.start()) + 1, "main guard", 'if __name__ == "__main__"'))
    wanted = {key for _, key in scripts}
    defined: dict[tuple[int, str], int] = {}
    for s in symbols:
        if (s.file_id, s.name) in wanted:
            defined[(s.file_id, s.name)] = s.start_line
        if s.name == "main" and s.file_id in snap.file_paths:
            add(EntryPoint(snap.file_paths[s.file_id], s.start_line, "main function", s.signature or "main"))
    for point, key in scripts:  # a manifest's key never meets another signal's: the order of adding is free
        point.line = defined.get(key, 1)
        add(point)
    return sorted(found.values(), key=lambda p: (KINDS.index(p.kind), p.path, p.line))


def _relative_to(manifest: str, target: str) -> str:
    return posixpath.normpath(posixpath.join(posixpath.dirname(manifest), target.strip()))


def _package_json(path: str, text: str) -> Iterator[EntryPoint]:
    try:
        manifest = json.loads(text)
    except ValueError:
        return
    if not isinstance(manifest, dict):
        return
    bins = manifest.get("bin")
    if isinstance(bins, str):
        bins = {manifest.get("name", "bin"): bins}
    for name, target in (bins.items() if isinstance(bins, dict) else ()):
        if isinstance(target, str):
            yield EntryPoint(_relative_to(path, target), 1, "manifest", f"{path} bin {name}")
    # Without `main`, Node loads the package's index.js.
    main = _relative_to(path, manifest["main"] if isinstance(manifest.get("main"), str) else "index.js")
    yield EntryPoint(main if posixpath.splitext(main)[1] else main + ".js", 1, "manifest", f"{path} main")
    scripts = manifest.get("scripts")
    for name, command in (scripts.items() if isinstance(scripts, dict) else ()):
        for word in str(command).split():
            if posixpath.splitext(word)[1] in (".js", ".mjs", ".cjs", ".ts", ".py", ".sh"):
                yield EntryPoint(_relative_to(path, word), 1, "manifest", f"{path} scripts.{name}")


def _pyproject(path: str, text: str, snap: Snapshot) -> Iterator[tuple[EntryPoint, tuple[int, str]]]:
    """The scripts a pyproject.toml declares, each with the (file id, function) whose line it starts at."""
    try:
        manifest = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return
    tables = [manifest.get("project", {}).get("scripts"), manifest.get("tool", {}).get("poetry", {}).get("scripts")]
    for table in tables:
        for name, target in (table.items() if isinstance(table, dict) else ()):
            if not isinstance(target, str) or ":" not in target:
                continue
            module, _, function = target.partition(":")
            found = _module_file(posixpath.dirname(path), module.strip().split("."), snap)
            if found is not None:
                yield (EntryPoint(found, 1, "manifest", f"{path} scripts {name} = {target}"),
                       (snap.path_to_file[found], function.strip().split(".")[0]))


def _module_file(here: str, parts: list[str], snap: Snapshot) -> str | None:
    """The indexed file of a dotted module under the manifest's folder, wherever the packages live (`src/`,
    or a folder the build configuration names): the shortest path ending in the module's own path."""
    for suffix in (posixpath.join(*parts) + ".py", posixpath.join(*parts, "__init__.py")):
        found = [p for p in snap.by_basename.get(posixpath.basename(suffix), [])
                 if (p == suffix or p.endswith("/" + suffix)) and (not here or p.startswith(here + "/"))]
        if found:
            return min(found, key=lambda p: (len(p), p))
    return None


def entry_points(ws: WorkspaceContext) -> list[EntryPoint]:
    """The workspace's entry points, saved beside its index for the next process that opens the same index
    state: finding them reads every file's text (1.2 s for a 2,510-file repository of the shared index, whose
    texts come from the database; 4-5 ms to read them saved), once per index state instead of once per
    process."""
    snap = ws.searcher().snapshot()
    store = ws.store
    path = store.path.with_name(store.path.name + ".entrypoints.npz")
    stamp = f"{ENTRY_POINTS_FILE_VERSION}:{store.index_id}:{snap.generation}"
    saved = _decoded(load_arrays(path, stamp), snap)
    if saved is not None:
        return saved
    found = find_entry_points(snap, store.iter_symbol_rows())
    if store.generation("content") == snap.generation:  # nothing was written while the texts were read
        try:
            save_arrays(path, stamp, _encoded(found))
        except OSError as exc:
            log.warning("could not save the entry points to %s: %s", path, exc)
    return found


def _encoded(points: list[EntryPoint]) -> dict[str, np.ndarray]:
    arrays = {"line": np.array([p.line for p in points], np.int64),
              "kind": np.array([KINDS.index(p.kind) for p in points], np.int8)}
    for name in ("path", "detail"):
        arrays[name], arrays[f"{name}_ends"] = pack_strings([getattr(p, name) for p in points])
    return arrays


def _decoded(arrays: dict[str, np.ndarray] | None, snap: Snapshot) -> list[EntryPoint] | None:
    """The saved entry points, or None where they do not fit the snapshot (found again then)."""
    if arrays is None:
        return None
    try:
        paths, details = (unpack_strings(arrays[name], arrays[f"{name}_ends"]) for name in ("path", "detail"))
        lines, kinds = arrays["line"].tolist(), arrays["kind"].tolist()
        rows = list(zip(paths, lines, kinds, details, strict=True))
    except (KeyError, ValueError, TypeError):  # arrays missing, of another shape, or bytes that are not UTF-8
        return None
    if not all(path in snap.path_to_file and line >= 1 and 0 <= kind < len(KINDS) for path, line, kind, _ in rows):
        return None
    return [EntryPoint(path, line, KINDS[kind], detail) for path, line, kind, detail in rows]
