'use strict';
// A repository the user has not cloned, from a real shared index (PostgreSQL, started by tests/pg/test_pg_lsp.py,
// which indexed it and deleted its checkout): the search picker offers its files, accepting one opens it through
// the codeloupe-index: content provider (codeloupe/read) at the matching line with the indexed text.
// Run by that test only (it needs the database): CODELOUPE_TEST_STORE_URL, CODELOUPE_TEST_EXPECTED.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const vscode = require('vscode');
const extension = require('../out/extension.js');
const { makeWorkspace, serverCommand, waitFor } = require('./helpers');

const probe = vscode.__test;
const QUERY = 'charge the card total price';

describe('shared-index documents', function () {
    let workspace;
    let context;
    let client;

    before(async function () {
        workspace = makeWorkspace();
        process.env.CODELOUPE_CACHE_DIR = workspace.cacheDir;
        probe.reset({ folders: [workspace.root], settings: {
            'codeloupe.server.command': serverCommand(),
            'codeloupe.embed.provider': 'none',
            'codeloupe.store.url': process.env.CODELOUPE_TEST_STORE_URL,
            'codeloupe.store.repositories': ['billing'],
        } });
        context = { subscriptions: [], extensionPath: path.resolve(__dirname, '..'),
            extensionUri: vscode.Uri.file(path.resolve(__dirname, '..')), secrets: probe.secretStorage() };
        client = await extension.activate(context).whenReady();
        assert.ok(client, 'the server started');
        await waitFor('the shared repository', async () => {
            try {
                return await client.sendRequest('codeloupe/search', { query: QUERY, folderUri: 'codeloupe-index:///billing' });
            } catch {
                return undefined;
            }
        });
    });

    after(async function () {
        await extension.deactivate();
        context.subscriptions.forEach((disposable) => disposable.dispose());
        delete process.env.CODELOUPE_CACHE_DIR;
        workspace.remove();
    });

    it('opens a search result from the shared index read from the server, at its line', async function () {
        await vscode.commands.executeCommand('codeloupe.client.search');
        const picker = probe.quickPicks.at(-1);
        picker.value = QUERY;
        const items = await waitFor('shared results', () => picker.items.some((item) => item.match?.location.uri.startsWith('codeloupe-index:')) && picker.items);
        const shared = items.find((item) => item.match?.location.uri.startsWith('codeloupe-index:///billing/'));
        const shownBefore = probe.shown.length;
        await picker.accept(shared);
        const opened = await waitFor('the accepted document', () => probe.shown.length > shownBefore && probe.shown.at(-1));
        assert.equal(opened.uri.scheme, 'codeloupe-index');
        assert.equal(opened.options.selection.start.line, shared.match.anchorLine, 'the cursor is on the matching line');
        const relative = opened.uri.path.replace(/^\/billing\//, '');
        const document = await vscode.workspace.openTextDocument(opened.uri);
        assert.equal(document.getText(), fs.readFileSync(path.join(process.env.CODELOUPE_TEST_EXPECTED, relative), 'utf8'));
        assert.equal(document.languageId, 'python');
    });

    it('refuses a path escaping the repository', async function () {
        await assert.rejects(vscode.workspace.openTextDocument(vscode.Uri.from({ scheme: 'codeloupe-index', path: '/billing/a/../../../etc/passwd' })),
            /traversal/);
    });
});
