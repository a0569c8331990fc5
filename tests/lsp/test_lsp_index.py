"""The warm index over the protocol: progress, search, saves, deletions, status, settings."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsp_helpers import Client, expect_error, location_paths, start_server, stop_server, uri, write_project
from lsprotocol import types as lsp

from codeloupe.api import Workspace, search_repositories

INVALID_PARAMS = -32602


async def test_initial_index_reports_progress_and_search_finds_the_right_files(project: Path) -> None:
    client = await start_server([project])
    try:
        capabilities = client.init_result.capabilities
        assert capabilities.text_document_sync.save
        assert capabilities.code_lens_provider.resolve_provider is True
        assert capabilities.hover_provider and capabilities.workspace_symbol_provider
        assert set(capabilities.execute_command_provider.commands) == {"codeloupe.reindex",
                                                                      "codeloupe.openLocation"}
        folders = await client.wait_ready()
        assert folders[0]["root"] == str(project.resolve())
        assert folders[0]["files"] == 5  # node_modules is never indexed
        assert folders[0]["state"] == "ready"

        (token, reports), = client.progress_reports.items()
        kinds = [r.kind for r in reports]
        assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds
        assert any(r.kind == "report" and r.message.startswith("files ") for r in reports)
        messages = [r.message for r in reports if r.kind == "report"]
        # after the last file counted, the search snapshot's build is named, then the counts
        preparing = messages.index("preparing search")
        assert not any(m.startswith("files ") for m in messages[preparing:])
        assert any(m.startswith("indexed ") for m in messages[preparing:])
        assert all(0 <= r.percentage <= 100 for r in reports if r.kind == "report" and r.percentage is not None)
        assert any(reg.method == lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES for reg in client.registrations)

        result = await client.request("codeloupe/search", {"query": "hash_password salted password"})
        assert result["query"] == "hash_password salted password"
        top = result["core"][0]
        assert top["path"] == "app/auth.py"
        assert top["uri"] == uri(project / "app/auth.py")
        chunk = next(c for c in top["chunks"] if "hash_password" in c["text"])
        start, end = chunk["location"]["range"]["start"], chunk["location"]["range"]["end"]
        lines = (project / "app/auth.py").read_text().splitlines(keepends=True)
        assert "".join(lines[start["line"]:end["line"]]) == chunk["text"]
        assert start["character"] == 0 and end["character"] == 0
        assert {lane["name"] for lane in result["lanes"]} >= {"lexical", "symbol"}
        assert "node_modules/dep/index.js" not in location_paths(result)
    finally:
        await stop_server(client)


async def test_saved_file_is_found_by_its_new_content_and_a_deleted_one_is_gone(client: Client,
                                                                             project: Path) -> None:
    path = project / "app/billing.py"
    path.write_text("def refund_invoice(invoice_id):\n    return 'zanzibar-refund'\n", encoding="utf-8")
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri(path))))
    found = await client.search_until("zanzibar refund invoice", lambda r: "app/billing.py" in location_paths(r),
                                      "the saved file")
    assert found["core"][0]["path"] == "app/billing.py"

    path.unlink()
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[
        lsp.FileEvent(uri=uri(path), type=lsp.FileChangeType.Deleted)]))
    await client.search_until("zanzibar refund invoice", lambda r: "app/billing.py" not in location_paths(r),
                              "the deleted file to leave the index")


async def test_a_symbolic_link_that_leads_to_itself_leaves_the_rest_of_a_watched_change_indexed(
        client: Client, project: Path) -> None:
    """A repository may hold a link that leads to itself (`loop -> loop`): the watcher's change naming it (a
    checkout, a pull) raised Python's 'Symlink loop' in the server, and every file after it in the same change was
    never indexed again."""
    (project / "loop").symlink_to("loop")
    changed = project / "app/billing.py"
    changed.write_text("def refund_invoice(invoice_id):\n    return 'zanzibar-refund'\n", encoding="utf-8")
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[
        lsp.FileEvent(uri=uri(project / "loop"), type=lsp.FileChangeType.Created),
        lsp.FileEvent(uri=uri(changed), type=lsp.FileChangeType.Changed)]))
    await client.search_until("zanzibar refund invoice", lambda r: "app/billing.py" in location_paths(r),
                              "the changed file after the link")


async def test_deleting_a_directory_drops_every_file_under_it(client: Client, project: Path) -> None:
    for rel in ("app/store.py", "app/auth.py", "app/web.py", "app/__init__.py"):
        (project / rel).unlink()
    (project / "app").rmdir()
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[
        lsp.FileEvent(uri=uri(project / "app"), type=lsp.FileChangeType.Deleted)]))
    await client.search_until("load_user", lambda r: not any(p.startswith("app/") for p in location_paths(r)),
                              "the deleted directory to leave the index")


async def test_reindex_command_reports_counts(client: Client, project: Path) -> None:
    (project / "app/extra.py").write_text("def extra():\n    return 1\n", encoding="utf-8")
    result = await client.command("codeloupe.reindex")
    assert result["files"] == 6
    assert result["chunks"] >= 5
    one = await client.command("codeloupe.reindex", uri(project))
    assert one["files"] == 6


async def test_status_shape(client: Client, project: Path) -> None:
    (project / "app/models_pb2.py").write_text("# Generated by the protocol buffer compiler.  DO NOT EDIT!\nX = 1\n")
    await client.command("codeloupe.reindex")
    (folder,) = await client.status()
    assert folder["skipped"] == {"generated": 1}  # files skipped for their content, by reason
    assert folder["uri"] == uri(project)
    assert folder["languages"]["python"] == 4
    assert folder["vectors"] == {"done": 0, "total": folder["chunks"]}
    assert folder["provider"] == "none"
    assert Path(folder["indexPath"]).is_file()
    assert folder["trusted"] is False  # neither the client nor the user's trust store trusts it
    assert folder["settingsFiles"] == []  # the project has no codeloupe settings: nothing to trust
    assert set(folder) == {"uri", "root", "state", "trusted", "settingsFiles", "files", "chunks", "symbols",
                           "vectors", "languages", "provider", "model", "indexPath", "skipped", "message"}
    assert (await client.request("codeloupe/status", {}))["repositories"] == []


async def test_two_workspace_folders_are_indexed_and_searched_together(tmp_path: Path) -> None:
    first = write_project(tmp_path / "first")
    second = write_project(tmp_path / "second", {"lib/parser.py": "def parse_yaml_frontmatter(text):\n    ...\n"})
    client = await start_server([first, second])
    try:
        folders = await client.wait_ready(count=2)
        assert {f["root"] for f in folders} == {str(first.resolve()), str(second.resolve())}
        both = await client.request("codeloupe/search", {"query": "parse_yaml_frontmatter"})
        assert both["core"][0]["uri"] == uri(second / "lib/parser.py")
        # One ranking across the folders, the engine's (lanes ranked across them, BM25 statistics pooled), not
        # each folder's own scores side by side; each file names its folder and opens there.
        engines = [Workspace(root, overrides={"embed_provider": "none", "cache_dir": str(tmp_path / "engine")})
                   for root in (first, second)]
        try:
            for ws in engines:
                ws.index()
            question = "parse the yaml frontmatter text of a login session"
            engine = search_repositories(engines, question)
        finally:
            for ws in engines:
                ws.close()
        answer = await client.request("codeloupe/search", {"query": question})
        answered = [*answer["core"], *answer["related"]]
        assert [(f["repository"], f["path"]) for f in answered] == [(h.repository, h.path) for h in engine.files]
        assert all(f["uri"] == uri((first if f["repository"] == "first" else second) / f["path"]) for f in answered)
        assert {f["repository"] for f in answered} == {"first", "second"}
        scoped = await client.request("codeloupe/search", {"query": "parse_yaml_frontmatter", "scope": "lib"})
        assert scoped["core"] and all(f["path"].startswith("lib/") for f in [*scoped["core"], *scoped["related"]])
        only_first = await client.request("codeloupe/search",
                                          {"query": "parse_yaml_frontmatter", "folderUri": uri(first)})
        assert all(f["uri"].startswith(uri(first)) for f in [*only_first["core"], *only_first["related"]])

        client.workspace_did_change_workspace_folders(lsp.DidChangeWorkspaceFoldersParams(
            event=lsp.WorkspaceFoldersChangeEvent(added=[], removed=[lsp.WorkspaceFolder(uri=uri(second),
                                                                                          name="second")])))
        await client.wait_ready(count=1)
        gone = await client.request("codeloupe/search", {"query": "parse_yaml_frontmatter"})
        assert "lib/parser.py" not in location_paths(gone)
    finally:
        await stop_server(client)


async def test_a_relative_scope_is_read_as_a_path_with_two_folders_as_with_one(tmp_path: Path) -> None:
    """`./lib` and `lib/../lib` are `lib` inside each folder searched, as with one folder open; they were passed
    to the engine as typed with two, and matched nothing. A scope that leaves a folder is still refused naming
    `scope`."""
    first = write_project(tmp_path / "first")
    second = write_project(tmp_path / "second", {"lib/parser.py": "def parse_yaml_frontmatter(text):\n    ...\n"})
    client = await start_server([first, second])
    try:
        await client.wait_ready(count=2)
        query = {"query": "parse_yaml_frontmatter", "docs": "both"}
        scoped = location_paths(await client.request("codeloupe/search", {**query, "scope": "lib"}))
        assert scoped == ["lib/parser.py"]
        for scope in ("./lib", "lib/../lib", "./lib/", "app/../lib"):
            answer = await client.request("codeloupe/search", {**query, "scope": scope})
            assert location_paths(answer) == scoped, scope
        everything = location_paths(await client.request("codeloupe/search", query))
        for scope in (".", "./", "lib/.."):
            assert location_paths(await client.request("codeloupe/search", {**query, "scope": scope})) == everything
        for scope in ("../x", "lib/../../x", "/etc"):
            message = await expect_error(client.request("codeloupe/search", {**query, "scope": scope}),
                                         INVALID_PARAMS)
            assert "`scope`" in message, (scope, message)
        # A link in one folder makes `lib` another path there than in the other: no one scope to search.
        (first / "lib").symlink_to("app", target_is_directory=True)
        message = await expect_error(client.request("codeloupe/search", {**query, "scope": "./lib"}), INVALID_PARAMS)
        assert "`scope`" in message and "'app', 'lib' in different folders" in message, message
    finally:
        await stop_server(client)


async def test_a_blank_scope_is_refused_and_an_empty_one_searches_every_folder(tmp_path: Path) -> None:
    """A scope of spaces searched every folder whole, as no scope does, where MCP and HTTP refuse it: a client that
    meant a folder and sent nothing was answered from all of them without a word. It is refused with -32602 naming
    `scope`; "" (what clients send for no scope) still searches everything."""
    client = await start_server([write_project(tmp_path / "first"), write_project(tmp_path / "second")])
    try:
        await client.wait_ready(count=2)
        query = {"query": "session token store"}
        for blank in ("  ", "\t", " \n "):
            message = await expect_error(client.request("codeloupe/search", {**query, "scope": blank}), INVALID_PARAMS)
            assert message == ("codeloupe/search: `scope` is blank: name a folder or file of the workspace, or leave "
                               "it out to search all of it"), (blank, message)
        everything = location_paths(await client.request("codeloupe/search", query))
        assert everything and location_paths(await client.request("codeloupe/search", {**query, "scope": ""})) == \
            everything
    finally:
        await stop_server(client)


async def test_unknown_settings_warn_once_and_the_rest_apply(project: Path) -> None:
    client = await start_server([project], options={"chunkBudget": 900, "noSuchSetting": 1, "colour": "red"})
    try:
        await client.wait_ready()
        warnings = [m.message for m in client.messages if m.type == lsp.MessageType.Warning]
        assert len(warnings) == 1
        assert "colour" in warnings[0] and "noSuchSetting" in warnings[0]
    finally:
        await stop_server(client)


async def test_requests_are_answered_while_a_large_index_runs(tmp_path: Path) -> None:
    """Hover and status answer between the index's progress begin and end, not after it; a search sent during
    the first index waits for it (never an empty bundle from an empty index)."""
    files = {f"pkg/mod{i:03}.py": "\n\n".join(
        f"def handler_{i}_{j}(request):\n    '''Handle request kind {j} of module {i}.'''\n"
        f"    return request.get('field_{j}') or {i * j}\n" for j in range(40)) for i in range(300)}
    root = write_project(tmp_path / "large", files)
    client = await start_server([root])
    try:
        await client.wait_until(lambda: any(client.progress_reports.values()), "the index to begin")
        (token,) = client.progress_reports
        answered_while_indexing = []
        first_search = asyncio.ensure_future(client.request("codeloupe/search", {"query": "handler_299_39"}))
        while not any(r.kind == "end" for r in client.progress_reports[token]):
            (folder,) = await client.status()
            await client.text_document_hover_async(lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri(root / "pkg/mod000.py")),
                position=lsp.Position(line=0, character=0)))
            if not any(r.kind == "end" for r in client.progress_reports[token]):
                answered_while_indexing.append(folder["state"])
        assert answered_while_indexing and set(answered_while_indexing) == {"indexing"}
        assert (await first_search)["core"][0]["path"] == "pkg/mod299.py"
        (folder,) = await client.wait_ready()
        assert folder["files"] == 300
    finally:
        await stop_server(client)


async def test_changed_configuration_reopens_the_folder_on_the_new_settings(client: Client,
                                                                            project: Path) -> None:
    query = {"query": "log in with a password session token", "docs": "both"}
    assert "docs/guide.md" in location_paths(await client.request("codeloupe/search", query))
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        settings={"codeloupe": {"embedProvider": "none", "ignore": ["docs/"], "bogus": True}}))
    await client.wait_until(lambda: any("bogus" in m.message for m in client.messages), "the unknown-key warning")
    (folder,) = await client.wait_ready()
    assert folder["files"] == 4
    assert "docs/guide.md" not in location_paths(await client.request("codeloupe/search", query))


async def test_an_unknown_editor_setting_is_told_with_the_setting_it_is_closest_to(project: Path) -> None:
    """A misspelt key in the editor's settings was listed as ignored with no hint, where the same typo in a
    settings file named the setting meant; the editor's now does too (none when nothing is close)."""
    client = await start_server([project], options={"chunkBudgett": 900, "bogus": True})
    try:
        await client.wait_ready()
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
            settings={"codeloupe": {"embedProvider": "none", "ignroe": ["docs/"]}}))
        pushed = "codeloupe: unknown setting(s) ignored: ignroe (did you mean 'ignore'?)"
        await client.wait_until(lambda: any(m.message == pushed for m in client.messages), "the settings push")
        assert [m.message for m in client.messages if m.type == lsp.MessageType.Warning] == [
            "codeloupe: unknown setting(s) ignored: bogus, chunkBudgett (did you mean 'chunk_budget'?)", pushed]
    finally:
        await stop_server(client)


async def test_a_bad_editor_setting_is_named_as_the_editor_names_it(project: Path) -> None:
    """VS Code's `codeloupe.chunkBudget: 5` was warned of as `setting 'chunk_budget'`, a name no VS Code user typed.
    The client sends its names (`settingNames`, as VS Code's engineOptions does) and each warning of a bad value
    uses them, at initialize and on a settings push; a client that names none (Neovim's options are the engine's
    names) still reads the engine's name."""
    names = {"chunkBudget": "codeloupe.chunkBudget", "embedProvider": "codeloupe.embed.provider",
             "repositories": "codeloupe.store.repositories"}
    client = await start_server([project], options={"chunkBudget": 5, "settingNames": names})
    try:
        await client.wait_ready()
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"codeloupe": {
            "embedProvider": "bogus", "repositories": "acme/shop", "maxLineChars": 5, "settingNames": names}}))
        pushed = ("codeloupe: `codeloupe.store.repositories` must be a list of repository names, got 'acme/shop'; "
                  "ignored; setting 'codeloupe.embed.provider' from the editor settings: 'bogus' is not one of local, "
                  "onnx, openai, none; ignored; setting 'max_line_chars' from the editor settings: 5 is outside "
                  "100..1000000; ignored")
        await client.wait_until(lambda: any(m.message == pushed for m in client.messages), "the settings push")
        assert [m.message for m in client.messages if m.type == lsp.MessageType.Warning] == [
            "codeloupe: setting 'codeloupe.chunkBudget' from the editor settings: 5 is outside 100..100000; ignored",
            pushed]
    finally:
        await stop_server(client)


async def test_a_settings_file_that_gains_only_a_warning_is_told_without_reopening_the_folder(project: Path) -> None:
    """The workspace's .codeloupe.toml gaining an unknown key changes what the user is told, not what is indexed
    or searched: the folder was closed and indexed again (a new progress bar) on the next settings push. It now
    stays open, and the new warning is shown."""
    settings_file = project / ".codeloupe.toml"
    settings_file.write_text('ignore = ["docs/"]\n', encoding="utf-8")
    client = await start_server([project])
    try:
        (opened,) = await client.wait_ready()
        assert len(client.progress_reports) == 1
        settings_file.write_text('ignore = ["docs/"]\nchunk_budgett = 900\n', encoding="utf-8")
        client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[lsp.FileEvent(
            uri=uri(settings_file), type=lsp.FileChangeType.Changed)]))
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
            settings={"codeloupe": {"embedProvider": "none"}}))
        warning = (f"codeloupe: unknown setting 'chunk_budgett' in {settings_file.resolve()} "
                   "(did you mean 'chunk_budget'?); ignored")
        await client.wait_until(lambda: any(m.message == warning for m in client.messages), "the new warning")
        (folder,) = await client.wait_ready()
        assert folder["files"] == opened["files"]
        assert len(client.progress_reports) == 1, client.progress_reports  # no second index of the folder
    finally:
        await stop_server(client)


async def test_a_saved_settings_file_applies_without_a_settings_push(project: Path) -> None:
    """A `.codeloupe.toml` edited and saved in the running editor (a watched-file change, no settings push) was
    re-indexed as a document only: its new `ignore` pattern applied at the editor's next restart. The folder's
    settings are now re-read and it reopens on them, the ignored files leaving the index."""
    settings_file = project / ".codeloupe.toml"
    settings_file.write_text("chunk_budget = 1200\n", encoding="utf-8")
    query = {"query": "log in with a password session token", "docs": "both"}
    client = await start_server([project], options={"trusted": True})
    try:
        (opened,) = await client.wait_ready()
        assert "docs/guide.md" in location_paths(await client.request("codeloupe/search", query))
        settings_file.write_text('chunk_budget = 1200\nignore = ["docs/"]\n', encoding="utf-8")
        client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(changes=[lsp.FileEvent(
            uri=uri(settings_file), type=lsp.FileChangeType.Changed)]))
        for _ in range(1200):  # not a speed check: the folder reopens in the background
            (folder,) = await client.wait_ready()
            if folder["files"] != opened["files"]:
                break
            await asyncio.sleep(0.05)
        assert folder["files"] == opened["files"] - 1
        assert "docs/guide.md" not in location_paths(await client.request("codeloupe/search", query))
    finally:
        await stop_server(client)


async def test_settings_changed_in_quick_succession_show_no_error(client: Client, project: Path) -> None:
    """Each change reopens the folder; a folder closed while its refresh walked the tree reported that run's
    end (its writer shut down) as an indexing failure, in a pop-up."""
    await client.wait_ready()
    for i in range(2000):  # the reopened folder's walk then lasts long enough to be closed under it
        (project / "gen" / f"d{i % 40}").mkdir(parents=True, exist_ok=True)
        (project / "gen" / f"d{i % 40}" / f"m{i}.txt").write_text(f"note {i}\n")
    for budget in range(3):
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
            settings={"codeloupe": {"embedProvider": "none", "chunkBudget": 3000 + budget}}))
        if budget < 2:  # the next change comes while the reopened folder refreshes
            async def indexing() -> bool:
                return any(f["state"] == "indexing" for f in await client.status())
            for _ in range(2000):
                if await indexing():
                    break
    (folder,) = await client.wait_ready()
    await asyncio.sleep(1)  # what the replaced folders' runs would report comes as they end
    errors = [m.message for m in client.messages if m.type == lsp.MessageType.Error]
    assert not errors, errors
    assert folder["state"] == "ready" and folder["files"] == 2005


async def test_local_embeddings_stream_in_after_the_index(project: Path) -> None:
    client = await start_server([project], options={"embedProvider": "local"})
    try:
        (folder,) = await client.wait_ready()
        assert folder["provider"] == "local" and folder["model"]
        assert folder["vectors"]["total"] > 0 and folder["vectors"]["done"] == folder["vectors"]["total"]
        (reports,) = client.progress_reports.values()
        vectors = [r for r in reports if r.kind == "report" and r.message.startswith("vectors ")]
        assert vectors and vectors[-1].percentage == 100
        assert vectors[-1].message.endswith("(chunks and files)")  # more than the status's chunk count says
        files = [r for r in reports if r.kind == "report" and r.message.startswith("files ")]
        assert reports.index(files[0]) < reports.index(vectors[0])  # lexical lanes first, then vectors
        result = await client.request("codeloupe/search", {"query": "check a user's credentials"})
        dense = next(lane for lane in result["lanes"] if lane["name"] == "dense")
        assert dense["ready"] and dense["coverage"] == 1.0
        assert "app/auth.py" in [f["path"] for f in result["core"]]
    finally:
        await stop_server(client)
