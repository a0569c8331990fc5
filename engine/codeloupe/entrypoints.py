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
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from codeloupe.arrays import absent_from
from codeloupe.saved import load_arrays, pack_strings, save_arrays, unpack_strings
from codeloupe.search import Snapshot, is_test_path
from codeloupe.store import SymbolRow
from codeloupe.types import EntryPoint, count_line_breaks

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

if TYPE_CHECKING:
    from codeloupe.context import WorkspaceContext
    from codeloupe.store.protocol import IndexStore

log = logging.getLogger("codeloupe.entrypoints")

# Bump when what is found, or how it is saved, changes: a file of another version is found again.
# 3: a main guard's line and a shebang's text by the editor's line breaks (a lone CR ends a line too).
# 4: a file under a `bench/` or `benchmarks/` folder is no test (f8bd53c's findings left them all out).
ENTRY_POINTS_FILE_VERSION = 4
# The order candidates are offered in: what a manifest declares is certain, a shebang is only a hint.
KINDS = ("manifest", "main guard", "main function", "shebang")
# Up to this many files indexed since the findings were saved, their definitions are read by file id; more
# (a re-index of the whole tree) stream every definition instead of holding them all at once.
READ_BY_FILE = 2000
# At a line's start: after a "\n" (`^` in MULTILINE) or a lone CR, which Python reads as a line break too.
_MAIN_GUARD = re.compile(r"""(?:^|(?<=\r))if\s+__name__\s*==\s*['"]__main__['"]\s*:""", re.M)
_FIRST_LINE = re.compile(r"[^\r\n]*")
_WHERE = re.compile(r"\b(where|which|what file|entry ?points?)\b", re.I)
_START = re.compile(r"\b(start\w*|entry|entrypoints?|main|begin\w*|launch\w*|boot\w*|invok\w*|execut\w*|runs?|"
                    r"cli|command[- ]line|binary|script)\b", re.I)


def location_shaped(query: str) -> bool:
    """A question about where something starts ("where does the CLI start", "which file is the entry point")."""
    return bool(_WHERE.search(query) and _START.search(query))


class Finding(NamedTuple):
    """What one version of one file says by itself (its text, its path, its own definitions), before the
    workspace is asked whether the file a manifest names exists. A file id names one version of a file (ids
    are never reused), so a finding holds for as long as its file id is indexed."""

    file_id: int  # the file that says so
    kind: int  # index into KINDS; SCRIPT: a pyproject script, resolved against the workspace when listed
    line: int
    path: str  # the entry point's file (a manifest's target); a pyproject script's "module:function"
    detail: str


MANIFEST = KINDS.index("manifest")
SCRIPT = len(KINDS)


def file_findings(snap: Snapshot, file_ids: Collection[int] | None, symbols: Iterable[SymbolRow]) -> list[Finding]:
    """The findings of `file_ids` (every file when None); `symbols` are at least those files' definitions,
    read once as they stream (every row at once is 1.35M objects at 200K chunks)."""
    found: list[Finding] = []
    for file_id, text in snap.file_texts(file_ids):
        path = snap.file_paths[file_id]
        base = posixpath.basename(path)
        if base == "package.json":
            found.extend(Finding(file_id, MANIFEST, 1, target, detail) for target, detail in _package_json(path, text))
        elif base == "pyproject.toml":
            found.extend(Finding(file_id, SCRIPT, 1, target, detail) for target, detail in _pyproject(path, text))
        if snap.file_is_doc.get(file_id):
            continue
        if text.startswith("#!"):
            found.append(Finding(file_id, KINDS.index("shebang"), 1, path, _FIRST_LINE.match(text).group().strip()))
        guard = _MAIN_GUARD.search(text)
        if guard:
            found.append(Finding(file_id, KINDS.index("main guard"), count_line_breaks(text, 0, guard.start()) + 1,
                                 path, 'if __name__ == "__main__"'))
    wanted = None if file_ids is None else set(file_ids)
    found.extend(Finding(s.file_id, KINDS.index("main function"), s.start_line, snap.file_paths[s.file_id],
                         s.signature or "main")
                 for s in symbols if s.name == "main" and s.file_id in snap.file_paths
                 and (wanted is None or s.file_id in wanted))
    # Tests are never entry points: what names one is not kept (a script's file is known only when listed).
    return [f for f in found if f.kind == SCRIPT or not is_test_path(f.path)]


def listed(findings: Iterable[Finding], snap: Snapshot, store: IndexStore) -> list[EntryPoint]:
    """The workspace's entry points from its files' findings, strongest signal first, then by path: a manifest's
    target must be indexed, tests never are entry points, and a file's other signals are one each (a class with
    three `main` overloads is one entry point, at the first)."""
    findings = list(findings)
    scripts = {f: _module_file(posixpath.dirname(snap.file_paths[f.file_id]), f.path.partition(":")[0], snap)
               for f in findings if f.kind == SCRIPT}
    lines: dict[tuple[int, str], int] = {}  # a script's (file id, function) -> the line it is defined at
    targets = {snap.path_to_file[path] for path in scripts.values() if path is not None}
    for s in store.symbol_rows(targets) if targets else ():
        key = (s.file_id, s.name)
        lines[key] = min(lines.get(key, s.start_line), s.start_line)
    found: dict[tuple[str, str], EntryPoint] = {}
    for finding in findings:
        kind, line, path = finding.kind, finding.line, finding.path
        if kind == SCRIPT:
            path = scripts[finding]
            if path is None:
                continue
            function = finding.path.partition(":")[2].strip().split(".")[0]
            kind, line = MANIFEST, lines.get((snap.path_to_file[path], function), 1)
            if is_test_path(path):
                continue
        if path not in snap.path_to_file:
            continue
        point = EntryPoint(path, line, KINDS[kind], finding.detail)
        key = (path, point.detail if kind == MANIFEST else point.kind)  # every manifest entry is its own fact
        if key not in found or (line, point.detail) < (found[key].line, found[key].detail):
            found[key] = point
    return sorted(found.values(), key=lambda p: (KINDS.index(p.kind), p.path, p.line))


def _relative_to(manifest: str, target: str) -> str:
    return posixpath.normpath(posixpath.join(posixpath.dirname(manifest), target.strip()))


def _package_json(path: str, text: str) -> Iterator[tuple[str, str]]:
    """(target file, detail) of every program a package.json declares."""
    try:
        manifest = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested thousands deep
        return
    if not isinstance(manifest, dict):
        return
    bins = manifest.get("bin")
    if isinstance(bins, str):
        bins = {manifest.get("name", "bin"): bins}
    for name, target in (bins.items() if isinstance(bins, dict) else ()):
        if isinstance(target, str):
            yield _relative_to(path, target), f"{path} bin {name}"
    # Without `main`, Node loads the package's index.js.
    main = _relative_to(path, manifest["main"] if isinstance(manifest.get("main"), str) else "index.js")
    yield main if posixpath.splitext(main)[1] else main + ".js", f"{path} main"
    scripts = manifest.get("scripts")
    for name, command in (scripts.items() if isinstance(scripts, dict) else ()):
        for word in str(command).split():
            if posixpath.splitext(word)[1] in (".js", ".mjs", ".cjs", ".ts", ".py", ".sh"):
                yield _relative_to(path, word), f"{path} scripts.{name}"


def _pyproject(path: str, text: str) -> Iterator[tuple[str, str]]:
    """("module:function", detail) of every script a pyproject.toml declares."""
    try:
        manifest = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return
    tables = [manifest.get("project", {}).get("scripts"), manifest.get("tool", {}).get("poetry", {}).get("scripts")]
    for table in tables:
        for name, target in (table.items() if isinstance(table, dict) else ()):
            if isinstance(target, str) and ":" in target:
                yield target, f"{path} scripts {name} = {target}"


def _module_file(here: str, module: str, snap: Snapshot) -> str | None:
    """The indexed file of a dotted module under the manifest's folder, wherever the packages live (`src/`,
    or a folder the build configuration names): the shortest path ending in the module's own path."""
    parts = module.strip().split(".")
    for suffix in (posixpath.join(*parts) + ".py", posixpath.join(*parts, "__init__.py")):
        found = [p for p in snap.by_basename.get(posixpath.basename(suffix), [])
                 if (p == suffix or p.endswith("/" + suffix)) and (not here or p.startswith(here + "/"))]
        if found:
            return min(found, key=lambda p: (len(p), p))
    return None


@dataclass(frozen=True)
class FileFindings:
    """What the files of one index say: the file ids read (ascending) and their findings. Kept by the open
    workspace between saves and saved beside the index for the next process."""

    index_id: str
    covered: np.ndarray
    findings: list[Finding]


def entry_points(ws: WorkspaceContext, known: FileFindings | None = None) -> tuple[list[EntryPoint], FileFindings]:
    """The workspace's entry points, and the findings they were listed from (pass them back as `known`). Only
    the files indexed since `known` (or since the findings saved beside the index) are read: every file's text
    is read once per index instead of after every save (40K files: 18 s)."""
    snap = ws.searcher().snapshot()
    store = ws.store
    path = store.path.with_name(store.path.name + ".entrypoints.npz")
    stamp = f"{ENTRY_POINTS_FILE_VERSION}:{store.index_id}"
    indexed = np.sort(np.fromiter(snap.file_chunk_rows, np.int64, len(snap.file_chunk_rows)))
    if known is None or known.index_id != store.index_id:
        known = _decoded(load_arrays(path, stamp), store.index_id)
    if known is None:
        findings = file_findings(snap, None, store.iter_symbol_rows())
    else:
        new = absent_from(indexed, known.covered).tolist()
        still = np.isin(np.fromiter((f.file_id for f in known.findings), np.int64, len(known.findings)), indexed)
        findings = [f for f, keep in zip(known.findings, still.tolist()) if keep]
        if not new and len(findings) == len(known.findings) and len(known.covered) == len(indexed):
            return listed(findings, snap, store), known
        if new:
            findings += file_findings(snap, new, store.symbol_rows(new) if len(new) <= READ_BY_FILE
                                      else store.iter_symbol_rows())
    found = FileFindings(store.index_id, indexed, findings)
    if store.generation("content") == snap.generation:  # nothing was written while the texts were read
        try:
            save_arrays(path, stamp, _encoded(found))
        except OSError as exc:
            log.warning("could not save the entry points to %s: %s", path, exc)
    return listed(findings, snap, store), found


def _encoded(found: FileFindings) -> dict[str, np.ndarray]:
    findings = found.findings
    arrays = {"files": found.covered, "file_id": np.array([f.file_id for f in findings], np.int64),
              "line": np.array([f.line for f in findings], np.int64),
              "kind": np.array([f.kind for f in findings], np.int8)}
    for name in ("path", "detail"):
        arrays[name], arrays[f"{name}_ends"] = pack_strings([getattr(f, name) for f in findings])
    return arrays


def _decoded(arrays: dict[str, np.ndarray] | None, index_id: str) -> FileFindings | None:
    """The saved findings of index `index_id`, or None where they do not fit together (every file read again
    then)."""
    if arrays is None:
        return None
    try:
        files, file_ids, kinds, lines = (arrays[name] for name in ("files", "file_id", "kind", "line"))
        paths, details = (unpack_strings(arrays[name], arrays[f"{name}_ends"]) for name in ("path", "detail"))
        columns = (files, file_ids, kinds, lines)
        # Integer columns only: a float kind would pass the range check and then fail as an index into KINDS.
        if any(column.ndim != 1 or column.dtype.kind not in "iu" for column in columns) or \
                bool(np.any(np.diff(files) <= 0)) or not bool(np.isin(file_ids, files).all()
                                                            and np.all((kinds >= 0) & (kinds <= SCRIPT))
                                                            and np.all(lines >= 1)):
            return None
        rows = zip(file_ids.tolist(), kinds.tolist(), lines.tolist(), paths, details, strict=True)
        return FileFindings(index_id, files, [Finding(*row) for row in rows])
    except (KeyError, ValueError, TypeError):  # arrays missing, of another shape, or bytes that are not UTF-8
        return None
