"""The engine's public boundary: a warm `Workspace` and one-shot functions over it.

Everything the CLI, the language server and the tests use is here, and returns dataclasses from
`codeloupe.types` (or the graph/ask result types). Nothing above this module touches the store or the lanes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from codeloupe.index import ProgressFn, index_paths, index_workspace
from codeloupe.settings import Settings, load_settings
from codeloupe.store import Store
from codeloupe.types import Bundle, IndexReport, IndexStatus, Symbol, UsedDefinition


class WorkspaceError(ValueError):
    """A request the engine refuses: a path outside the workspace, a line range outside a file, ..."""


class Workspace:
    """One indexed workspace folder, kept warm: the store plus the lanes' in-memory matrices.

    Safe to share between threads: writes to the store are serialised by the store, and the searcher
    reloads its matrices when the store's generation counters move.
    """

    def __init__(self, root: Path | str, settings: Settings | None = None,
                 overrides: dict[str, Any] | None = None) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise WorkspaceError(f"{root}: not a directory")
        self.settings = settings if settings is not None else load_settings(self.root, overrides)
        self.store = Store(self.settings.index_path(self.root))
        self._lock = threading.RLock()
        self._searcher = None
        self._provider = None

    # ------------------------------------------------------------------ paths

    def relative(self, path: Path | str) -> str:
        """The POSIX path of `path` relative to the root; refuses anything that escapes the workspace."""
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = candidate.resolve()
        try:
            rel = resolved.relative_to(self.root)
        except ValueError:
            raise WorkspaceError(f"{path}: outside the workspace {self.root}") from None
        return rel.as_posix()

    # ------------------------------------------------------------------ indexing

    def index(self, progress: ProgressFn | None = None) -> IndexReport:
        """Chunk and store everything that changed, then refresh graph edges (derived data, no vectors).

        Lexical and symbol lanes are ready when this returns; vectors come from `embed`.
        """
        from codeloupe.graph import ensure_edges

        report = index_workspace(self.root, self.store, self.settings, progress)
        ensure_edges(self)  # a no-op when nothing changed since the edges were last resolved
        return report

    def update_files(self, paths: Iterable[Path | str]) -> IndexReport:
        """Re-index files that were saved, created or deleted (the editor's fast path).

        Search sees the change at once (a delta view); graph edges follow at the next fresh graph read or
        `refresh_graph()`, re-resolving only the files the change can reach.
        """
        return index_paths(self.root, self.store, self.settings, [self.relative(p) for p in paths])

    def embedding_provider(self):
        """The configured embedding provider, created once (loading a model is the slow part)."""
        from codeloupe.embed import make_provider

        with self._lock:
            if self._provider is None:
                self._provider = make_provider(self.settings)
            return self._provider

    def embed(self, progress: ProgressFn | None = None, prefer_paths: Iterable[str] = (),
              should_stop: Callable[[], bool] | None = None):
        """Compute missing vectors: skeletons first, then chunks of `prefer_paths`, then the rest."""
        from codeloupe.embed.background import embed_pending

        return embed_pending(self.store, self.embedding_provider(), self.settings, progress=progress,
                             prefer_paths=list(prefer_paths), should_stop=should_stop)

    # ------------------------------------------------------------------ queries

    def searcher(self):
        from codeloupe.search import Searcher

        with self._lock:
            if self._searcher is None:
                self._searcher = Searcher(self)
            return self._searcher

    def search(self, query: str, *, scope: str = "", mode: str = "code", limit: int = 12) -> Bundle:
        return self.searcher().search(query, scope=scope, mode=mode, limit=limit)

    def symbols(self, paths: Iterable[str]) -> dict[str, list[Symbol]]:
        """The definitions of each indexed file among `paths` (files not in the index are left out)."""
        rows = self.store.file_rows()
        return {path: [Symbol(s.name, s.kind, s.start_line, s.end_line, s.parent, s.signature)
                       for s in self.store.symbols_of_file(rows[path].id)]
                for path in paths if path in rows}

    def warm(self) -> None:
        """Bring every reader up to date with the index: the full search snapshot, graph edges and graph.

        Whoever writes the index calls this afterwards, so no query, hover or lens pays for the rebuild.
        """
        self.searcher().refresh()
        self.refresh_graph()

    def refresh_graph(self) -> None:
        """Re-resolve edges of changed files and rebuild the graph, so hovers and lenses read it fresh."""
        from codeloupe.graph import graph_map

        graph_map(self)

    def status(self) -> IndexStatus:
        from codeloupe.embed import describe_provider

        counts = self.store.counts()
        provider, model = describe_provider(self.settings)
        done = self.store.vector_counts(model) if model else {"chunks_done": 0, "skeletons_done": 0}
        return IndexStatus(
            root=str(self.root), index_path=str(self.store.path), files=counts["files"], chunks=counts["chunks"],
            symbols=counts["symbols"], languages=self.store.language_counts(),
            vectors_done=done["chunks_done"], vectors_total=counts["chunks"],
            skeleton_vectors_done=done["skeletons_done"], provider=provider, model=model,
            schema_version=int(self.store.get_meta("schema_version", "0")),
        )

    def read_lines(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """Lines `start_line..end_line` (1-based, inclusive) of a workspace file, verbatim from disk."""
        rel = self.relative(path)
        file = self.root / rel
        if not file.is_file():
            raise WorkspaceError(f"{rel}: no such file in the workspace (deleted since it was indexed?)")
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        if start_line is None:
            return "".join(lines)
        end_line = len(lines) if end_line is None else end_line
        if start_line < 1 or end_line < start_line or start_line > max(len(lines), 1):
            raise WorkspaceError(f"{rel}: lines {start_line}-{end_line} are outside the file (1-{len(lines)})")
        return "".join(lines[start_line - 1:end_line])

    # ------------------------------------------------------------------ graph and ask (their own packages)

    def graph_map(self):
        """Nodes, edges and communities of the workspace graph (`codeloupe.graph.GraphMap`)."""
        from codeloupe.graph import graph_map

        return graph_map(self)

    def graph_node(self, target: str, *, allow_stale: bool = False):
        """One file or concept with its neighbours, carriers and chunks (`codeloupe.graph.GraphNode`).

        `allow_stale` answers from the last graph built instead of rebuilding after a change (for hovers and
        lenses, which must not wait; whoever writes the index refreshes the graph afterwards).
        """
        from codeloupe.graph import graph_node

        return graph_node(self, target, allow_stale=allow_stale)

    def file_summary(self, path: str, *, allow_stale: bool = False):
        """Community, import/importer counts, god-node flag, semantic neighbours (`codeloupe.graph.FileSummary`)."""
        from codeloupe.graph import file_summary

        return file_summary(self, path, allow_stale=allow_stale)

    def used_definitions(self, path: str, *, allow_stale: bool = False) -> list[UsedDefinition]:
        """The definitions of `path` that other files use, at their own line, with each use (path, line)."""
        from codeloupe.graph import definition_users

        rel = self.relative(path)
        symbols = self.symbols([rel]).get(rel, [])
        out = []
        for name, users in definition_users(self, rel, allow_stale=allow_stale).items():
            # The graph names top-level definitions; a bare name also matches a top-level symbol.
            found = next((s for s in symbols if s.qualified_name == name), None) or \
                next((s for s in symbols if not s.parent and s.name == name), None)
            if users and found is not None:
                out.append(UsedDefinition(name, found.start_line, users))
        return out

    def search_symbols(self, query: str, *, limit: int = 30) -> list[tuple[str, Symbol]]:
        """(path, definition) of every symbol named by a matching chunk, in rank order: the search behind an
        editor's workspace-symbol picker."""
        bundle = self.search(query, limit=limit)
        by_path = self.symbols([hit.path for hit in bundle.files])
        found: list[tuple[str, Symbol]] = []
        for hit in bundle.files:
            named = {q for chunk in hit.chunks for q in chunk.symbols}
            found.extend((hit.path, s) for s in by_path.get(hit.path, []) if s.qualified_name in named)
        return found

    def graph_path(self, source: str, target: str):
        """A hub-tolled route between two concepts (`codeloupe.graph.GraphPath`)."""
        from codeloupe.graph import graph_path

        return graph_path(self, source, target)

    def ask(self, question: str, *, mode: str = "code", agents: bool | None = None, best: bool = False):
        """A generator of `codeloupe.ask.AskEvent`s; the last one is `done` and carries the `AskResult`."""
        from codeloupe.ask import run_ask

        return run_ask(self, question, mode=mode, agents=agents, best=best)

    def close(self) -> None:
        self.store.close()


# ---------------------------------------------------------------------- one-shot functions


def index_repo(root: Path | str, progress: ProgressFn | None = None, *, embed: bool = True,
               overrides: dict[str, Any] | None = None) -> IndexReport:
    ws = Workspace(root, overrides=overrides)
    try:
        report = ws.index(progress)
        if embed:
            ws.embed(progress)
        return report
    finally:
        ws.close()


def search(root: Path | str, query: str, *, scope: str = "", mode: str = "code", limit: int = 12,
           overrides: dict[str, Any] | None = None) -> Bundle:
    """Index what changed (lexical lanes first, then vectors), then search. The one-call API."""
    ws = Workspace(root, overrides=overrides)
    try:
        ws.index()
        ws.embed()
        return ws.search(query, scope=scope, mode=mode, limit=limit)
    finally:
        ws.close()


def status(root: Path | str, overrides: dict[str, Any] | None = None) -> IndexStatus:
    ws = Workspace(root, overrides=overrides)
    try:
        return ws.status()
    finally:
        ws.close()
