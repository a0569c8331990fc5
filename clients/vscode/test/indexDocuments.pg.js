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
const escapeRegExp = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

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

    it('answers hover, lenses, related, the graph, ask and status about a shared document, from its repository', async function () {
        const located = await client.sendRequest('codeloupe/locate', { text: 'def charge', folderUri: 'codeloupe-index:///billing' });
        const card = located.locations[0].uri;
        const pinned = (file) => card.replace('src/shop/payments/card.py', file);
        const document = await vscode.workspace.openTextDocument(vscode.Uri.parse(card));
        const token = new vscode.CancellationTokenSource().token;
        const [{ selector, provider: hovers }] = probe.providers.HoverProvider;
        assert.ok(vscode.languages.match(selector, document) > 0, 'the language client serves codeloupe-index documents');
        const hover = await hovers.provideHover(document, new vscode.Position(0, 0), token);
        // A codeloupe-index: link would be inert in VS Code's hover: it runs the one command that opens it.
        const [markdown] = hover.contents;
        assert.deepEqual(markdown.isTrusted, { enabledCommands: ['codeloupe.client.openIndexDocument'] });
        const links = [...markdown.value.matchAll(/\]\(command:codeloupe\.client\.openIndexDocument\?([^)]+)\)/g)]
            .map((match) => JSON.parse(decodeURIComponent(match[1])));
        assert.deepEqual(links.find(([uri]) => uri === pinned('src/shop/cart.py')), [pinned('src/shop/cart.py'), 1]);
        assert.doesNotMatch(markdown.value, /\]\(codeloupe-index:/);
        const importer = links.find(([uri]) => uri === pinned('tests/check_shop.py'));
        await vscode.commands.executeCommand('codeloupe.client.openIndexDocument', ...importer);
        const opened = probe.shown.at(-1);
        assert.equal(opened.uri.toString(), pinned('tests/check_shop.py'));
        assert.equal(opened.options.selection.start.line, importer[1] - 1, 'at the line of the use');

        const [{ provider: lensProvider }] = probe.providers.CodeLensProvider;
        const lenses = await lensProvider.provideCodeLenses(document, token);
        const resolved = await Promise.all(lenses.map((lens) => (lens.command ? lens : lensProvider.resolveCodeLens(lens, token))));
        const used = resolved.find((lens) => lens.command?.title === 'used in 2 files');
        assert.ok(used, JSON.stringify(resolved.map((lens) => lens.command?.title)));
        assert.equal(used.command.command, 'codeloupe.client.showLocations');
        assert.deepEqual(used.command.arguments[2].map((location) => location.uri.scheme), ['codeloupe-index', 'codeloupe-index']);

        // The shared document is the active editor: the commands ask its repository.
        vscode.window.activeTextEditor = { document, selection: new vscode.Selection(new vscode.Position(6, 0), new vscode.Position(6, 0)) };
        const sent = [];
        const original = client.sendRequest;
        client.sendRequest = function (type, params, ...rest) {
            const pending = original.call(this, type, params, ...rest);
            sent.push({ method: typeof type === 'string' ? type : type.method, params, pending });
            return pending;
        };
        try {
            void vscode.commands.executeCommand('codeloupe.client.related');  // its picker waits for a choice
            await waitFor('the related request', () => sent.some((entry) => entry.method === 'codeloupe/related'));
            await vscode.commands.executeCommand('codeloupe.client.graphNode');
            await vscode.commands.executeCommand('codeloupe.client.ask', QUERY);
            await vscode.commands.executeCommand('codeloupe.client.status');
        } finally {
            delete client.sendRequest;
            vscode.window.activeTextEditor = undefined;
        }
        const answer = async (method) => {
            const call = sent.find((entry) => entry.method === method);
            assert.ok(call, `${method} was sent`);
            return { params: call.params, result: await call.pending };
        };
        const related = await answer('codeloupe/related');
        assert.ok(related.result.chunks.length > 0 && related.result.chunks.every((chunk) => chunk.location.uri === pinned(chunk.path)));
        const node = await answer('codeloupe/graph');
        assert.equal(node.result.uri, card);
        const ask = await answer('codeloupe/ask');
        assert.equal(ask.params.folderUri, 'codeloupe-index:///billing');
        const files = [...ask.result.bundle.core, ...ask.result.bundle.related];
        assert.ok(files.length > 0 && files.every((file) => file.uri === pinned(file.path)));
        const status = await answer('codeloupe/status');
        assert.deepEqual(status.result.repositories.map((entry) => entry.repository), ['billing']);
        const html = probe.panels.filter((panel) => panel.viewType === 'codeloupe.status').at(-1).webview.html;
        assert.match(html, /Shared repositories/);
        assert.match(html, new RegExp(`<td>billing</td><td>${status.result.repositories[0].commit}</td>`));
    });

    it('refuses a path escaping the repository', async function () {
        await assert.rejects(vscode.workspace.openTextDocument(vscode.Uri.from({ scheme: 'codeloupe-index', path: '/billing/a/../../../etc/passwd' })),
            /traversal/);
    });
});
