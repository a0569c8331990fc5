"""Initialization, settings, workspace folders and file changes."""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types as lsp

from codeloupe.api import SettingsError
from codeloupe_lsp.config import SECTION, read_options
from codeloupe_lsp.convert import uri_to_path
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import close_repositories, open_repositories

log = logging.getLogger("codeloupe_lsp.lifecycle")

WATCHER_ID = "codeloupe-watched-files"


def register(server: CodeloupeServer) -> None:
    @server.feature(lsp.INITIALIZE)
    def on_initialize(ls: CodeloupeServer, params: lsp.InitializeParams) -> None:
        ls.options = read_options(params.initialization_options)
        ls.trusted = ls.options.trusted

    @server.feature(lsp.INITIALIZED)
    async def on_initialized(ls: CodeloupeServer, params: lsp.InitializedParams) -> None:
        if problems := ls.options.problems():
            ls.warn(problems)
        folder_uris = [f.uri for f in ls.workspace.folders.values()] or (
            [ls.workspace.root_uri] if ls.workspace.root_uri else [])
        for uri in folder_uris:
            ls.open_folder(uri)
        await open_repositories(ls)
        await _watch_files(ls)

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
        for folder in list(ls.folders):
            try:
                changed = ls.settings_for(folder.root) != folder.ws.settings
            except SettingsError as exc:  # e.g. a broken .codeloupe.toml: keep the folder on its old settings
                ls.show_error(f"codeloupe: {exc}")
                continue
            if changed:
                # A new provider, model, budget or ignore list: reopen the folder on the new settings.
                ls.folders.pop(folder.uri)
                await folder.close()
                ls.open_folder(folder.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def on_save(ls: CodeloupeServer, params: lsp.DidSaveTextDocumentParams) -> None:
        _changed(ls, [params.text_document.uri])

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def on_watched(ls: CodeloupeServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        _changed(ls, [change.uri for change in params.changes])

    @server.feature(lsp.SHUTDOWN)
    def on_shutdown(ls: CodeloupeServer, params: None) -> None:
        # Answer at once: waiting for an index in flight would stall the editor's shutdown.
        for folder in ls.folders:
            folder.stop()
        close_repositories(ls)


def _changed(ls: CodeloupeServer, uris: list[str]) -> None:
    """Queue changed files on their folders; files outside every folder are ignored."""
    for uri in uris:
        path = uri_to_path(uri)
        folder = ls.folders.containing(path) if path is not None else None
        if folder is not None and path is not None:
            folder.request_paths([folder.ws.relative(path)])


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
