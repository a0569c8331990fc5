"""Initialization, settings, workspace folders and file changes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from codeloupe.api import (
    WORKSPACE_SETTINGS_FILES,
    SettingsError,
    WorkspaceError,
    process_started,
    still_running,
    trust_store_path,
)
from codeloupe_lsp.config import SECTION, read_options
from codeloupe_lsp.convert import uri_to_path
from codeloupe_lsp.folders import Folder
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import close_repositories, open_repositories

log = logging.getLogger("codeloupe_lsp.lifecycle")

WATCHER_ID = "codeloupe-watched-files"
# The longest the file watcher's registration waits for the folders' first progress to be shown.
PROGRESS_FIRST_S = 5.0
# How often the user's trust store is checked for a `codeloupe trust` / `--revoke` run since (one stat call).
TRUST_POLL_S = 1.0
# How often the editor's process (initialize's processId) is looked for: the server ends within this of its end.
EDITOR_POLL_S = 1.0


def register(server: CodeloupeServer) -> None:
    @server.feature(lsp.INITIALIZE)
    def on_initialize(ls: CodeloupeServer, params: lsp.InitializeParams) -> None:
        ls.options = read_options(params.initialization_options)
        ls.trusted = ls.options.trusted
        if params.process_id is not None:
            ls.editor_watch = asyncio.get_running_loop().create_task(_watch_editor(ls, params.process_id))

    @server.feature(lsp.INITIALIZED)
    async def on_initialized(ls: CodeloupeServer, params: lsp.InitializedParams) -> None:
        if problems := ls.options.problems():
            ls.warn(problems)
        folder_uris = [f.uri for f in ls.workspace.folders.values()] or (
            [ls.workspace.root_uri] if ls.workspace.root_uri else [])
        opened = [folder for folder in map(ls.open_folder, folder_uris) if folder is not None]
        await open_repositories(ls)
        # Neovim answers the registration by walking the whole tree with its event loop blocked (0.5 s at 40K
        # files, loaded): registering first held back the progress it would have shown meanwhile.
        try:
            await asyncio.wait_for(asyncio.gather(*(folder.progress_shown.wait() for folder in opened)),
                                   PROGRESS_FIRST_S)
        except TimeoutError:
            log.info("no progress shown within %.0f s; registering the file watcher anyway", PROGRESS_FIRST_S)
        await _watch_files(ls)
        ls.trust_watch = asyncio.get_running_loop().create_task(_watch_trust(ls, trust_store_path()))

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def on_folders_changed(ls: CodeloupeServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
        for removed in params.event.removed:
            folder = ls.folders.pop(removed.uri)
            if folder is not None:
                await folder.close()
        for added in params.event.added:
            if ls.folders.get(added.uri) is None:
                ls.open_folder(added.uri)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(ls: CodeloupeServer, params: lsp.DidChangeConfigurationParams) -> None:
        raw: Any = params.settings
        if raw is None and _can_pull_configuration(ls):
            pulled = await ls.workspace_configuration_async(
                lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section=SECTION)]))
            raw = pulled[0] if pulled else None
        options = read_options(raw)
        if problems := options.problems():
            ls.warn(problems)
        previous, ls.options = ls.options, options
        shared = (options.repositories, options.store_url, options.overrides)
        if shared != (previous.repositories, previous.store_url, previous.overrides):
            await open_repositories(ls)
        await _reopen_changed(ls)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    async def on_save(ls: CodeloupeServer, params: lsp.DidSaveTextDocumentParams) -> None:
        await _changed(ls, [params.text_document.uri])

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def on_watched(ls: CodeloupeServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        await _changed(ls, [change.uri for change in params.changes])

    @server.feature(lsp.SHUTDOWN)
    def on_shutdown(ls: CodeloupeServer, params: None) -> None:
        # Answer at once: waiting for an index in flight would stall the editor's shutdown.
        if ls.trust_watch is not None:
            ls.trust_watch.cancel()
        for folder in ls.folders:
            folder.stop()
        close_repositories(ls)


async def _reopen_changed(ls: CodeloupeServer, folders: Iterable[Folder] | None = None) -> None:
    """Reopen every folder (or each of `folders`) whose settings are not what its index was opened with (the
    editor's settings, the user's trust in the folder, or its own settings files changed). A folder whose settings
    files changed only what the user is told (a new unknown key, a key an untrusted workspace may not set) stays
    open, and the new warnings are shown."""
    for folder in list(ls.folders if folders is None else folders):
        if ls.folders.get(folder.uri) is not folder:
            continue  # reopened or removed meanwhile (by another settings push, trust change or settings file)
        try:
            settings = ls.settings_for(folder.root)
        except SettingsError as exc:  # e.g. a broken config.toml of the user's: keep the folder on its old settings
            ls.show_error(f"codeloupe: {exc}")
            continue
        if settings.effective() == folder.ws.settings.effective():
            ls.warn_notices(settings)  # the same index and answers: the folder stays open, warm
            continue
        # A new provider, model, budget or ignore list: reopen the folder on the new settings.
        ls.folders.pop(folder.uri)
        await folder.close()
        ls.open_folder(folder.uri)


async def _watch_trust(ls: CodeloupeServer, store: Path) -> None:
    """Honour `codeloupe trust` / `--revoke` run while the server runs: when the user's trust store changes, the
    folders whose settings that changes are reopened. Only the user's own file is watched (it lives in the user
    config dir, which no workspace setting can move): nothing a workspace holds can grant trust."""
    seen = _stamp(store)
    while True:
        await asyncio.sleep(TRUST_POLL_S)
        stamp = _stamp(store)
        if stamp != seen:
            seen = stamp
            log.info("the trust store %s changed; re-reading every folder's settings", store)
            try:
                await _reopen_changed(ls)
            except Exception:  # keep watching: the next change is tried again
                log.exception("reopening folders after a trust change failed")


async def _watch_editor(ls: CodeloupeServer, pid: int) -> None:
    """End the server as `exit` does once the editor's process (`pid`, initialize's processId) is gone, as LSP asks.
    An editor killed or crashed whose end of the pipes another process still holds (a wrapper, a UI that started
    `nvim --embed`, an SSH session, a child that inherited them) sends no end of input: the server ran on with its
    indexes open, its workers and its memory. Gone is ended, unreaped (a zombie) or its id now another process's
    (its start time differs). A `pid` not running here at initialize is no process of this machine's to watch (an
    editor outside the server's container or machine): the server then ends with its input, as without one."""
    started = process_started(pid)
    if not still_running(pid, started):
        log.warning("the editor's process %d (initialize's processId) is not running here; the server will not end"
                    " with it", pid)
        return
    while still_running(pid, started):
        await asyncio.sleep(EDITOR_POLL_S)
    log.warning("the editor's process %d has ended; the server exits", pid)
    # Raised here it ends the loop as pygls' `exit` does (a task's SystemExit leaves asyncio.run), with its status.
    raise SystemExit(0 if ls.protocol._shutdown else 1)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when the trust store is rewritten (it is replaced whole: a new inode), or None while absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


async def _changed(ls: CodeloupeServer, uris: list[str]) -> None:
    """Queue changed files on their folders; files outside every folder are ignored. A folder whose own settings
    file (`.codeloupe.toml`, `pyproject.toml` at its root) is among them has its settings re-read, as a settings
    push does: saved, the file applies at once rather than at the editor's next restart, still only as far as
    the user's trust in the folder lets it (trust kept for the file as it was does not cover its new tables)."""
    settings_changed: dict[str, Folder] = {}
    for uri in uris:
        path = uri_to_path(uri)
        folder = ls.folders.containing(path) if path is not None else None
        if folder is None or path is None:
            continue
        try:
            folder.request_paths([folder.ws.relative(path)])
        except WorkspaceError:  # a link out of the folder, or that leads to itself: nothing of it to index
            continue
        if path.name in WORKSPACE_SETTINGS_FILES and path.parent.resolve() == folder.root:
            settings_changed[folder.uri] = folder
    if settings_changed:
        await _reopen_changed(ls, settings_changed.values())


def _can_pull_configuration(ls: CodeloupeServer) -> bool:
    workspace = ls.client_capabilities.workspace
    return bool(workspace and workspace.configuration)


async def _watch_files(ls: CodeloupeServer) -> None:
    workspace = ls.client_capabilities.workspace
    watched = workspace.did_change_watched_files if workspace else None
    if not (watched and watched.dynamic_registration):
        return  # saves still re-index through textDocument/didSave
    options = lsp.DidChangeWatchedFilesRegistrationOptions(watchers=[lsp.FileSystemWatcher(glob_pattern="**/*")])
    try:
        await ls.client_register_capability_async(lsp.RegistrationParams(registrations=[lsp.Registration(
            id=WATCHER_ID, method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options)]))
    except Exception as exc:
        log.warning("client refused the file watcher registration: %s", exc)
