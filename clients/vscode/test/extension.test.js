'use strict';
// The real extension (out/extension.js, as bundled) under the vscode stub, with the real vscode-languageclient
// talking to the real codeloupe-lsp on a fixture workspace.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const vscode = require('vscode');
const extension = require('../out/extension.js');
const packageJson = require('../package.json');
const MarkdownIt = require('markdown-it');
const { launchChromium, openWebview, runPanelPage } = require('./chromium');
const { GATE, startChatServer } = require('./chatServer');
const { lineOf, makeWorkspace, serverCommand, serverPython, waitFor } = require('./helpers');

const probe = vscode.__test;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Activates the extension the way VS Code would, after resetting the stub to `options`; `workspaceState`: the
 * workspace's, as a window reloaded in it finds it again. */
function activate(options, workspaceState = probe.memento()) {
    probe.reset(options);
    const context = { subscriptions: [], extensionPath: path.resolve(__dirname, '..'), extensionUri: vscode.Uri.file(path.resolve(__dirname, '..')),
        secrets: probe.secretStorage(), workspaceState };
    const api = extension.activate(context);
    return {
        api,
        async close() {
            await extension.deactivate();
            context.subscriptions.forEach((disposable) => disposable.dispose());
        },
    };
}

/**
 * Records the requests the extension sends through `client` for `method` (calls go through unchanged);
 * `onSent` runs synchronously once a request is on its way, before any answer can be handled.
 */
function recordRequests(client, method, onSent = () => undefined) {
    const calls = [];
    const original = client.sendRequest;
    client.sendRequest = function (type, ...rest) {
        const name = typeof type === 'string' ? type : type.method;
        if (name !== method) {
            return original.call(this, type, ...rest);
        }
        const call = { params: rest[0], token: rest[1] };
        calls.push(call);
        const pending = original.call(this, type, ...rest);
        pending.then((result) => {
            call.result = result;
        }, (error) => {
            call.error = error;
        });
        onSent(call);
        return pending;
    };
    return { calls, restore: () => delete client.sendRequest };
}

/** Waits until every folder is indexed: the server reopens folders when settings change. */
function waitForReady(client) {
    return waitFor('a ready index', async () => {
        const status = await client.sendRequest('codeloupe/status', {});
        return status.folders.length > 0 && status.folders.every((folder) => folder.state === 'ready');
    });
}

const panelOf = (viewType) => probe.panels.filter((panel) => panel.viewType === viewType).at(-1);

const ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"' };

/** The text of a code block's HTML (its line spans' text, HTML's escapes read back). */
function blockText(html) {
    return html.replace(/<[^>]*>/g, '').replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot);/gi, (_, name) => (name.startsWith('#')
        ? String.fromCodePoint(Number(name.startsWith('#x') ? `0x${name.slice(2)}` : name.slice(1))) : ENTITIES[name]));
}

/** The draft the answer view builds from the progress its `panel` posted: its text runs, joined, and its code blocks
 * (`{caption, note?, text}`, the text of the block). */
function draftOf(panel) {
    const draft = [];
    for (const message of panel.posted.filter((posted) => posted.type === 'progress')) {
        if (message.code !== undefined) {
            const { html, ...code } = message.code;
            draft.push({ ...code, text: blockText(html) });
        } else if (typeof message.delta === 'string') {
            draft.push(typeof draft.at(-1) === 'string' ? `${draft.pop()}${message.delta}` : message.delta);
        }
    }
    return draft;
}

/** Runs "Ask the Codebase" as a user would: waits for the prompt's cached questions, types `question`, presses
 * Enter on it; resolves with the prompt once the ask is done. */
async function askTyped(question) {
    const before = probe.quickPicks.length;
    const running = vscode.commands.executeCommand('codeloupe.client.ask');
    const picker = await waitFor('the ask prompt', () => (probe.quickPicks[before]?.busy === false ? probe.quickPicks[before] : undefined));
    picker.value = question;
    await picker.accept(picker.items.find((item) => item.question === question));
    await running;
    return picker;
}

/** Types `query` into the search picker as a user would: the picker and its items once results are in. */
async function searchTyped(query) {
    await vscode.commands.executeCommand('codeloupe.client.search');
    const picker = probe.quickPicks.at(-1);
    picker.value = query;
    const items = await waitFor('search results', () => picker.items.some((item) => item.match) && picker.items);
    return { picker, items };
}
const sameRange = (a, b) => a.start.line === b.start.line && a.start.character === b.start.character
    && a.end.line === b.end.line && a.end.character === b.end.character;

/**
 * Scrolls the page `run` shows as a user does (the wheel); resolves with where it is, once the page said so
 * (setState, as it scrolls). A page that does not say so is let through here: the check of where it comes back fails.
 */
async function scrollBy(run, deltaY) {
    const view = await run.current();
    await view.page.mouse.move(200, 200);
    await view.page.mouse.wheel({ deltaY });
    let last;
    const y = await waitFor('the page scrolled, and still', async () => {
        const now = await view.page.evaluate(() => window.scrollY);
        const still = now > 0 && now === last;
        last = now;
        return still && now;
    });
    await waitFor('the place kept', () => run.state.value?.scrollY === y, 5000).catch(() => undefined);
    return y;
}

function withPath(directories, run) {
    const saved = process.env.PATH;
    process.env.PATH = directories;
    return Promise.resolve(run()).finally(() => {
        process.env.PATH = saved;
    });
}

describe('the extension against the real server', function () {
    let workspace;
    let session;
    let client;
    let browser;

    before(async function () {
        workspace = makeWorkspace();
        process.env.CODELOUPE_CACHE_DIR = workspace.cacheDir;
        session = activate({
            folders: [workspace.root],
            settings: { 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none' },
        });
        [client, browser] = await Promise.all([session.api.whenReady(), launchChromium()]);
        assert.ok(client, `the client started: ${session.api.unavailableReason}\n${probe.log.join('\n')}`);
        await waitFor('the status item to show a ready index', () => /\$\(search\) codeloupe \d+ files/.test(probe.statusItems[0]?.text));
    });

    after(async function () {
        await session?.close();
        await browser?.close();
        delete process.env.CODELOUPE_CACHE_DIR;
        workspace?.remove();
    });

    it('registers every contributed command and runs the server with the settings as init options', async function () {
        const contributed = packageJson.contributes.commands.map((command) => command.command);
        for (const id of contributed) {
            assert.ok(probe.commandIds().includes(id), `${id} registered`);
        }
        assert.ok(client.isRunning());
        const { settingNames, ...sent } = client.clientOptions.initializationOptions;
        assert.deepEqual(sent, { embedProvider: 'none', trusted: true },
            'only explicitly set settings are sent, in the engine\'s camelCase names, with the workspace trust');
        assert.equal(settingNames.chunkBudget, 'codeloupe.chunkBudget', 'with the VS Code name of each, for warnings');
        assert.equal(settingNames.embedProvider, 'codeloupe.embed.provider');
        const status = await client.sendRequest('codeloupe/status', {});
        assert.equal(status.folders[0].provider, 'none', 'the server applied embedProvider from the init options');
        const item = probe.statusItems[0];
        assert.equal(item.command, 'codeloupe.client.status');
        assert.ok(item.visible);
    });

    it('search: debounces typing, converts Locations, previews on highlight and opens the exact range', async function () {
        const searches = recordRequests(client, 'codeloupe/search');
        try {
            await vscode.commands.executeCommand('codeloupe.client.search');
            const picker = probe.quickPicks.at(-1);
            assert.ok(picker.visible);
            picker.value = 'pass';
            picker.value = 'password';
            picker.value = 'check the password on login';
            const items = await waitFor('search results', () => picker.items.some((item) => item.match) && picker.items);
            assert.deepEqual(searches.calls.map((call) => call.params.query), ['check the password on login'], 'one request, for the last value');
            assert.ok(items[0].openBundle, 'the first item opens the whole bundle');
            const top = items.find((item) => item.match);
            assert.deepEqual(picker.activeItems, [top], 'the top file is highlighted, not the bundle row');
            const result = searches.calls[0].result;
            // With embeddings off by choice (provider none) the server's notes are empty: nothing is partial.
            assert.deepEqual(result.notes, []);
            assert.ok(!/Partial index/.test(items[0].detail ?? ''), items[0].detail);
            const auth = items.find((item) => item.label.includes('app/auth.py'));
            assert.ok(auth, `app/auth.py among ${items.map((item) => item.label)}`);
            const file = [...result.core, ...result.related].find((candidate) => candidate.path === 'app/auth.py');
            const chunk = file.chunks[0];
            assert.deepEqual(auth.match.location, chunk.location);
            assert.match(auth.description, new RegExp(`L${chunk.snippet.anchorLine + 1}$`), 'the anchor line, 1-based');
            assert.ok(auth.detail.length > 0 && !auth.detail.includes('\n'), 'a one-line snippet');

            await picker.highlight(auth);
            const preview = await waitFor('a preview', () => probe.shown.at(-1));
            assert.equal(preview.uri.fsPath, path.join(workspace.root, 'app', 'auth.py'));
            assert.equal(preview.options.preview, true);
            assert.equal(preview.options.preserveFocus, true);
            assert.ok(preview.options.selection instanceof vscode.Range, 'a vscode.Range, converted from the LSP range');
            assert.ok(preview.options.selection.isEmpty, 'nothing selected');
            assert.equal(preview.options.selection.start.line, chunk.snippet.anchorLine);
            assert.ok(preview.reveals.some((range) => sameRange(range, chunk.location.range)), 'the span is revealed');

            const shownBefore = probe.shown.length;
            await picker.accept(auth);
            const opened = await waitFor('the accepted file', () => probe.shown.length > shownBefore && probe.shown.at(-1));
            assert.equal(opened.options.preview, false);
            assert.ok(opened.options.selection.isEmpty);
            assert.equal(opened.options.selection.start.line, chunk.snippet.anchorLine);
            assert.equal(picker.visible, false);
            assert.ok(picker.disposed);
        } finally {
            searches.restore();
        }
    });

    it('search: Enter right after typing opens the top file, not the bundle', async function () {
        const { picker, items } = await searchTyped('refund the wombat surcharge');
        const top = items.find((item) => item.match);
        assert.ok(items[0].openBundle && top.label.includes('app/billing.py'), items.map((item) => item.label).join(', '));
        const panels = probe.panels.length;
        const before = probe.shown.length;
        await picker.pressEnter();
        const opened = await waitFor('the top file', () => probe.shown.length > before && probe.shown.at(-1));
        assert.equal(opened.uri.fsPath, path.join(workspace.root, 'app', 'billing.py'));
        assert.equal(opened.options.preview, false);
        assert.equal(probe.panels.length, panels, 'no bundle view opened');
        assert.equal(picker.visible, false);
    });

    it('search: a match deep in a chunk opens at its line with nothing selected and names its own symbol', async function () {
        // app/billing.py is one chunk of five small functions; the match is the last one, far below the chunk's start.
        const searches = recordRequests(client, 'codeloupe/search');
        try {
            const { picker, items } = await searchTyped('refund the wombat surcharge');
            const billing = items.find((item) => item.label.includes('app/billing.py'));
            assert.ok(billing, `app/billing.py among ${items.map((item) => item.label)}`);
            const result = searches.calls.at(-1).result;
            const chunk = [...result.core, ...result.related].find((file) => file.path === 'app/billing.py').chunks[0];
            const refund = lineOf(workspace.root, 'app/billing.py', 'def refund_wombat_surcharge');
            assert.ok(chunk.location.range.start.line < refund - 10, `the chunk starts well above the match (${JSON.stringify(chunk.location.range)})`);
            assert.ok(chunk.snippet.anchorLine >= refund, `the server's anchor is in the matching function (${chunk.snippet.anchorLine})`);
            assert.match(billing.description, /^refund_wombat_surcharge · L\d+$/, 'the symbol that holds the match, not the chunk\'s first');
            assert.equal(billing.description, `refund_wombat_surcharge · L${chunk.snippet.anchorLine + 1}`);
            assert.match(billing.detail, /wombat/);

            const shownBefore = probe.shown.length;
            await picker.accept(billing);
            const opened = await waitFor('the accepted file', () => probe.shown.length > shownBefore && probe.shown.at(-1));
            const selection = opened.options.selection;
            assert.ok(selection.isEmpty, `nothing selected (was ${JSON.stringify(selection)})`);
            assert.equal(selection.start.line, chunk.snippet.anchorLine, 'the cursor is on the matching line');
            const anchorText = fs.readFileSync(path.join(workspace.root, 'app', 'billing.py'), 'utf8').split('\n')[chunk.snippet.anchorLine];
            assert.equal(selection.start.character, anchorText.length - anchorText.trimStart().length, 'at the first non-blank character');
            assert.ok(sameRange(opened.reveals.at(-1), selection), 'the cursor line is in view last');
        } finally {
            searches.restore();
        }
    });

    it('search: an entry point appended to a "where does it start" query is marked in the picker and on the bundle page', async function () {
        const searches = recordRequests(client, 'codeloupe/search');
        let view;
        try {
            const { picker, items } = await searchTyped('where does the program start');
            const result = searches.calls[0].result;
            const entry = [...result.core, ...result.related].find((file) => file.via === 'entry');
            assert.ok(entry, `the server appended an entry point: ${JSON.stringify(result.related.map((file) => [file.path, file.via]))}`);
            const row = items.find((item) => item.match?.location.uri === entry.uri);
            assert.equal(row.label, `$(debug-start) ${entry.path}`);
            assert.match(row.description, /^entry point · /);
            await picker.accept(items[0]);
            view = await openWebview(browser, panelOf('codeloupe.bundle').webview.html);
            const marks = await view.page.$$eval('.via-entry', (spans) => spans.map((span) => span.textContent));
            assert.deepEqual(marks, ['entry point']);
        } finally {
            searches.restore();
            await view?.close();
        }
    });

    it('search: hiding the picker cancels the request in flight', async function () {
        let picker;
        const searches = recordRequests(client, 'codeloupe/search', () => picker.hide());
        try {
            await vscode.commands.executeCommand('codeloupe.client.search');
            picker = probe.quickPicks.at(-1);
            picker.value = 'session token';
            await waitFor('the request', () => searches.calls.length === 1);
            assert.equal(searches.calls[0].token.isCancellationRequested, true);
            assert.ok(picker.disposed);
        } finally {
            searches.restore();
        }
    });

    it('search: the long tail is folded under a separator after the rest, every file of the bundle still there to open', async function () {
        // Thirty files share one rare word: the lexical lane ranks them all, and past the limit and the lanes' short
        // lists they are the bundle's long tail (map lines, `tail: true`).
        const dir = path.join(workspace.root, 'tailfold');
        fs.mkdirSync(dir);
        for (let index = 0; index < 30; index += 1) {
            const name = String(index).padStart(2, '0');
            fs.writeFileSync(path.join(dir, `mod_${name}.py`), `def handler_${name}():\n    return "quuxframe ${name}"\n`);
        }
        const searches = recordRequests(client, 'codeloupe/search');
        try {
            await vscode.commands.executeCommand('codeloupe.client.reindex');
            const { picker, items } = await searchTyped('quuxframe');
            const result = searches.calls.at(-1).result;
            const tail = result.related.filter((file) => file.tail);
            assert.ok(tail.length > 0 && result.related.some((file) => !file.tail), 'the bundle has a tail and a head');
            const separators = items.filter((item) => item.kind === vscode.QuickPickItemKind.Separator).map((item) => item.label);
            assert.deepEqual(separators, ['CORE', 'RELATED', `${tail.length} more related files`]);
            // The workbench hides separators (and re-sorts rows by label) while the input has text unless told not to.
            assert.equal(picker.sortByLabel, false);
            assert.match(items[0].description, new RegExp(`\\(${tail.length} in the long tail\\)$`));
            // Every file of the bundle is an item that opens it, each once, in the bundle's order.
            const labels = items.filter((item) => item.match).map((item) => item.label.split(' ').at(-1));
            assert.deepEqual(labels, [...result.core, ...result.related].map((file) => file.path));
            const fold = items.findIndex((item) => item.label === separators[2]);
            assert.deepEqual(items.slice(fold + 1).map((item) => item.label.split(' ').at(-1)), tail.map((file) => file.path),
                'after the separator: the tail, and only the tail');
            assert.ok(items.slice(fold + 1).every((item) => item.detail === undefined), 'tail rows are one line (no snippet)');
            const last = items.at(-1);
            const shownBefore = probe.shown.length;
            await picker.accept(last);
            const opened = await waitFor('the accepted tail file', () => probe.shown.length > shownBefore && probe.shown.at(-1));
            assert.equal(opened.uri.fsPath, path.join(workspace.root, ...tail.at(-1).path.split('/')));
        } finally {
            searches.restore();
            fs.rmSync(dir, { recursive: true, force: true });
            await vscode.commands.executeCommand('codeloupe.client.reindex');
        }
    });

    it('the full bundle view lists CORE and RELATED with links to their exact ranges', async function () {
        const searches = recordRequests(client, 'codeloupe/search');
        let view;
        try {
            const { picker, items } = await searchTyped('hash a password with a salt');
            await picker.accept(items.find((item) => item.openBundle));
            const panel = panelOf('codeloupe.bundle');
            assert.ok(panel, 'a results panel');
            const result = searches.calls.at(-1).result;
            view = await openWebview(browser, panel.webview.html);
            assert.match(await view.page.$eval('body', (body) => body.textContent), /CORE \(\d+\)[\s\S]*RELATED \(\d+\)/);
            const links = await view.links();
            for (const file of [...result.core, ...result.related]) {
                assert.ok(links.some((link) => link.uri === file.location.uri && sameRange(link.range, file.location.range)),
                    `a link to ${file.path} ${JSON.stringify(file.location.range)}`);
                for (const chunk of file.chunks) {
                    assert.ok(links.some((link) => link.uri === chunk.location.uri && sameRange(link.range, chunk.location.range)),
                        `a link to chunk ${chunk.breadcrumb}`);
                }
            }
            const code = await view.page.$$eval('pre code', (blocks) => blocks.map((block) => block.textContent));
            for (const chunk of result.core.flatMap((file) => file.chunks)) {
                assert.ok(code.includes(chunk.text), `CORE chunk ${chunk.breadcrumb} shown as written (the fixture holds no control character, which would show as an escape)`);
            }
            await assertViewQuiet(view);
        } finally {
            searches.restore();
            await view?.close();
        }
    });

    it('ask without a chat model shows the bundle answer, links every candidate, and opens what is clicked', async function () {
        const asks = recordRequests(client, 'codeloupe/ask');
        let view;
        try {
            const result = await askedResult(asks, 'how is the login password checked');
            assert.equal(asks.calls[0].params.query, 'how is the login password checked');
            assert.equal(typeof asks.calls[0].params.workDoneToken, 'string');
            assert.ok(result.fallback, 'no chat model: the server says why it fell back');
            const panel = panelOf('codeloupe.answer');
            view = await openWebview(browser, panel.webview.html);
            const text = await view.page.$eval('body', (body) => body.textContent);
            assert.ok(text.includes(result.fallback), 'the fallback reason is shown, not an error');
            assert.ok(!(await view.page.$('.error')), 'no error block');
            const links = await view.links();
            const files = [...result.bundle.core, ...result.bundle.related];
            assert.ok(files.length > 0);
            for (const file of files) {
                assert.ok(links.some((link) => link.uri === file.location.uri && sameRange(link.range, file.location.range)), `${file.path} linked`);
                for (const chunk of file.chunks) {
                    assert.ok(links.some((link) => link.uri === chunk.location.uri && sameRange(link.range, chunk.location.range)),
                        `chunk ${chunk.breadcrumb} linked`);
                }
            }
            const code = await view.page.$$eval('pre code', (blocks) => blocks.map((block) => block.textContent));
            for (const chunk of result.bundle.core.flatMap((file) => file.chunks)) {
                assert.equal(code.filter((block) => block === chunk.text).length, 1, `CORE chunk ${chunk.breadcrumb} shown once, as written`);
            }
            const unlinked = await view.page.evaluate((paths) => {
                const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
                const found = [];
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    const inside = node.parentElement.closest('a, pre, title, script, style');
                    if (!inside && paths.some((candidate) => node.textContent.includes(candidate))) {
                        found.push(node.textContent.trim());
                    }
                }
                return found;
            }, files.map((file) => file.path));
            assert.deepEqual(unlinked, [], 'every path on the page is a link');
            assert.ok(!(await view.page.$('#uncited')), 'the bundle is not listed a second time');
            const target = result.uncited[0];
            const selector = `h3 a[data-uri="${target.location.uri}"]`;
            const posted = await view.click(selector);
            assert.equal(posted.length, 1);
            assert.deepEqual(posted[0], { type: 'open', uri: target.location.uri, range: posted[0].range, anchor: posted[0].anchor });
            assert.ok(sameRange(posted[0].range, target.location.range));
            await panel.receive(posted[0]);
            const opened = probe.shown.at(-1);
            assert.equal(opened.uri.toString(), target.location.uri);
            assert.ok(opened.options.selection.isEmpty, 'nothing selected');
            assert.equal(opened.options.selection.start.line, target.location.range.start.line);
            assert.ok(opened.reveals.some((range) => sameRange(range, target.location.range)), 'the span is revealed');
            assert.equal(opened.options.preview, false);
            assert.deepEqual(view.requests, [], 'the page made no network request');
            assert.deepEqual(await view.violations(), []);
            const csp = await view.csp();
            assert.match(csp, /default-src 'none'/);
            assert.match(csp, /script-src 'nonce-[^']+'/);
            assert.doesNotMatch(csp, /https?:|\*/, 'no remote source allowed');
        } finally {
            asks.restore();
            await view?.close();
        }
    });

    /** Takes the scripted chat model out of the settings again and stops it. */
    async function stopChatModel(chat) {
        await probe.changeSettings({ 'codeloupe.chat.baseUrl': '', 'codeloupe.chat.model': '' });
        await waitForReady(client);
        await chat.close();
    }

    /** What an ask test undoes last: the request recorder, the answer view (if one opened) and the chat model. */
    async function endAsk(asks, view, chat) {
        asks.restore();
        await view?.close();
        await stopChatModel(chat);
    }

    /** The scripted `chat` as the chat model, its settings applied. */
    async function useScriptedModel(chat) {
        await probe.changeSettings({ 'codeloupe.chat.baseUrl': chat.baseUrl, 'codeloupe.chat.model': 'replay-model' });
        await waitForReady(client);
    }

    /** `question` asked as typed: the ask's result (`asks` records it). */
    async function askedResult(asks, question) {
        await askTyped(question);
        const result = asks.calls[0].result;
        assert.ok(result, `an ask result (error: ${asks.calls[0].error})`);
        return result;
    }

    /** The answer view asked nothing of the network and broke none of its content policy. */
    async function assertViewQuiet(view) {
        assert.deepEqual(view.requests, []);
        assert.deepEqual(await view.violations(), []);
    }

    it('ask with a chat model renders the narration with every citation linked to its span, and streams progress', async function () {
        const chat = await startChatServer('Login hashes the given password and compares it with the stored hash [[1]]. ' +
            'The token comes from issue_token [[2]].');
        const asks = recordRequests(client, 'codeloupe/ask');
        let view;
        try {
            await useScriptedModel(chat);
            const result = await askedResult(asks, 'how does login check the password and issue a token');
            const panel = panelOf('codeloupe.answer');
            assert.ok((await chat.requestCount()) > 0, 'the server called the scripted chat model');
            assert.equal(result.fallback, null, `narrated (fallback: ${result.fallback})`);
            assert.ok(result.citations.length > 0, 'the answer cites spans');
            view = await openWebview(browser, panel.webview.html);
            const links = await view.links();
            for (const citation of result.citations) {
                assert.ok(links.some((link) => link.uri === citation.location.uri && sameRange(link.range, citation.location.range)),
                    `citation [${citation.k}] ${citation.path}:${citation.startLine}-${citation.endLine} linked`);
            }
            const code = await view.page.$$eval('#answer pre code', (blocks) => blocks.map((block) => block.textContent));
            const fences = [...result.answer.matchAll(/```[^\n]*\n([\s\S]*?)```/g)].map((match) => match[1]);
            assert.deepEqual(code, fences, 'code blocks exactly as the server sent them');
            for (const file of result.uncited) {
                assert.ok(links.some((link) => link.uri === file.location.uri), `uncited ${file.path} listed`);
            }
            const progress = panel.posted.filter((message) => message.type === 'progress');
            assert.ok(progress.length > 0, 'ask progress events reached the view');
            assert.deepEqual(view.requests, []);
        } finally {
            await endAsk(asks, view, chat);
        }
    });

    it('the draft of a streaming answer shows the model\'s words as written and the spliced code under its location', async function () {
        // The draft showed each delta's markdown as text, whose escapes are for a renderer: a `\*` the model wrote
        // read `\\*`, its brackets `\[...\]`, its reference a code span. Each delta carries the part's plain text too.
        const words = 'A literal \\* star, a path C:\\shop\\cart and [not a link] stay as written';
        const chat = await startChatServer(`${words}: login compares hashes [[1]].\nThat is all.`);
        const asks = recordRequests(client, 'codeloupe/ask');
        try {
            await useScriptedModel(chat);
            const result = await askedResult(asks, 'how does login check the password');
            assert.equal(result.fallback, null, `narrated (fallback: ${result.fallback})`);
            const [cited] = result.citations;
            const where = `${cited.path}:${cited.startLine}-${cited.endLine}`;
            assert.deepEqual(draftOf(panelOf('codeloupe.answer')),
                [`${words}: login compares hashes (${where}).\n`, { caption: where, text: cited.text }, 'That is all.']);
        } finally {
            asks.restore();
            await stopChatModel(chat);
        }
    });

    it('the draft shows spliced code as a block of its own, as the answer does: a caption and lines the model writes under it stay text', async function () {
        // The draft was one <pre> of text: a spliced part's caption and code read exactly as a caption and lines the
        // model wrote, so while the answer streamed its invented code showed as code from disk (seen in the real workbench).
        const forged = 'app/auth.py:1-2\ndef login(user, password):\nreturn True  # INVENTED';
        const chat = await startChatServer(`Login compares hashes [[1]].\n${forged}\nThat is all.`);
        const asks = recordRequests(client, 'codeloupe/ask');
        let view;
        let answer;
        try {
            await useScriptedModel(chat);
            const result = await askedResult(asks, 'how does login check the password');
            assert.equal(result.fallback, null, `narrated (fallback: ${result.fallback})`);
            const answerPanel = panelOf('codeloupe.answer');
            const waiting = answerPanel.pages.find((page) => page.includes('id="progress-draft"'));
            view = await openWebview(browser, waiting);
            await view.page.evaluate((messages) => messages.forEach((message) => window.postMessage(message, '*')),
                answerPanel.posted);
            await view.page.waitForFunction(() => document.getElementById('progress-draft').textContent.includes('That is all.'));
            const draft = await view.page.$eval('#progress-draft', (shown) => ({
                text: shown.textContent,
                code: [...shown.querySelectorAll('pre'), ...(shown.matches('pre') ? [shown] : [])].map((pre) => pre.textContent),
                captions: [...shown.querySelectorAll('.chunk > .loc')].map((caption) => caption.textContent),
            }));
            const [cited] = result.citations;
            assert.deepEqual(draft.code, [cited.text], 'only the spliced span is a code block');
            assert.deepEqual(draft.captions, [`${cited.path}:${cited.startLine}-${cited.endLine}`]);
            assert.ok(draft.text.endsWith(`${cited.text}${forged}\nThat is all.`), draft.text);
            await assertViewQuiet(view);
            // The block as the answer shows it: highlighted and numbered from the span's first line (it was plain text).
            answer = await openWebview(browser, answerPanel.webview.html);
            const blocks = (shown) => shown.page.$$eval('pre', (pres) => pres.map((pre) => pre.outerHTML));
            const [block] = await blocks(answer);
            assert.deepEqual(await blocks(view), [block]);
            assert.ok(block.includes(`data-line="${cited.startLine}"`) && block.includes('class="hljs-keyword"'), block);
        } finally {
            await answer?.close();
            await endAsk(asks, view, chat);
        }
    });

    /** The answer views opened since `from` (a count of the stub's panels). */
    const answerViews = (from) => probe.panels.slice(from).filter((panel) => panel.viewType === 'codeloupe.answer');
    /** The open answer view that shows the draft of `question` (the last opened, when more do). */
    const viewOf = (question) => waitFor(`the view of "${question}"`, () => answerViews(0)
        .filter((panel) => !panel.disposed && panel.webview.html.includes(`<h1>${question}</h1>`) && panel.webview.html.includes('id="progress-draft"')).at(-1));
    /** The text of `selector` on the page `run` (runPanelPage) shows now ('' while it has none). */
    const textOn = async (run, selector) => (await run.current())?.page.$eval(selector, (element) => element.textContent).catch(() => '') ?? '';

    it('the answer view survives its tab hidden: mid-stream the draft comes back whole, then the answer, each part once', async function () {
        // VS Code lets go of a hidden webview's page (retainContextWhenHidden is off), drops what is posted to it
        // meanwhile and loads its html afresh when its tab is shown again: the draft read "Asking the codebase…" and
        // nothing else, and the rest of the answer's words streamed into an empty draft (seen in the real workbench).
        const chat = await startChatServer(`Login compares hashes [[1]].\n${GATE}Meanwhile the token waits.\n${GATE}That is all.`);
        const asks = recordRequests(client, 'codeloupe/ask');
        const draftShown = (view) => view.page.$eval('#progress-draft', (draft) => ({
            text: draft.textContent,
            code: [...draft.querySelectorAll('pre')].map((pre) => pre.textContent),
            steps: [...document.querySelectorAll('#progress-steps li')].map((step) => step.textContent),
        }));
        let page;
        let asking;
        let lost;
        try {
            await useScriptedModel(chat);
            asking = askTyped('how does login check the password');
            const panel = await viewOf('how does login check the password');
            page = await runPanelPage(browser, panel);
            await (await page.current()).page.waitForFunction(() => document.querySelector('#progress-draft pre'));
            const before = await draftShown(await page.current());
            assert.match(before.text, /^Login compares hashes \(app\/auth\.py:\d+-\d+\)\.\n/);

            panel.hide();
            await chat.release();
            await waitFor('the words streamed while the tab was hidden', () => panel.dropped.some((message) => message.delta?.includes('Meanwhile')));
            panel.show();
            const view = await page.current();
            await view.page.waitForFunction(() => document.getElementById('progress-draft').textContent.includes('Meanwhile'), { timeout: 10000 })
                .catch(async () => assert.fail(`the draft, shown again: ${JSON.stringify(await draftShown(view))}`));
            const after = await draftShown(view);
            assert.deepEqual(after, { ...before, text: `${before.text}Meanwhile the token waits.\n` }, 'the draft as before, each part once, then the new words');

            await chat.release();
            await asking;
            const answer = async () => (await page.current()).page.$eval('#answer', (shown) => shown.textContent);
            const final = await answer();
            assert.equal(final.split('That is all.').length, 2, final);
            panel.hide();
            panel.show();
            assert.equal(await answer(), final, 'the answer as before');

            // A message lost on the way (the next to come is one ahead): the page asks for them all again, once.
            lost = await openWebview(browser, panel.pages.find((shown) => shown.includes('id="progress-draft"')));
            const post = (messages) => lost.page.evaluate((sent) => sent.forEach((message) => window.postMessage(message, '*')), messages);
            const words = ['one ', 'two ', 'three'].map((delta, seq) => ({ type: 'progress', seq, delta }));
            await post([words[0], words[2]]);
            await lost.page.waitForFunction(() => window.__posted.length > 0);
            await post(words);
            assert.deepEqual([lost.loaded, await lost.page.evaluate(() => window.__posted)], [[{ type: 'replay' }], [{ type: 'replay' }]]);
            assert.equal(await lost.page.$eval('#progress-draft', (draft) => draft.textContent), 'one two three');
        } finally {
            await lost?.close();
            await page?.close();
            await chat.close(); // a stream still held ends, and with it the ask
            await asking;
            await endAsk(asks, undefined, chat);
        }
    });

    it('two questions keep their own answers: each in its own view, neither\'s words in the other\'s draft or answer', async function () {
        // The asks shared one view: the second question's page replaced the first's, the first's words still streaming
        // landed in the second's draft, and the first's answer, once in, replaced the second's: one answer was lost.
        const first = 'how does login check the password';
        const second = 'where is the wombat surcharge given back';
        const chat = await startChatServer([
            { when: second, text: `The surcharge goes back in refund_wombat_surcharge [[1]].\n${GATE}Second answer, its end.` },
            { text: `Login compares hashes [[1]].\n${GATE}First answer, its middle.\n${GATE}First answer, its end.` },
        ]);
        const asks = recordRequests(client, 'codeloupe/ask');
        const runs = new Map();
        const run = async (panel) => runs.get(panel) ?? runs.set(panel, await runPanelPage(browser, panel)).get(panel);
        let asking = [];
        try {
            await useScriptedModel(chat);
            const from = probe.panels.length;
            asking = [askTyped(first)];
            const firstView = await run(await viewOf(first));
            await waitFor('the first draft', async () => (await textOn(firstView, '#progress-draft')).startsWith('Login compares hashes'));
            asking.push(askTyped(second));
            const secondView = await run(await viewOf(second));
            await waitFor('the second draft', async () => (await textOn(secondView, '#progress-draft')).startsWith('The surcharge goes back'));

            await chat.release(1); // the first answer streams on while the second is under way
            await waitFor('the first answer\'s next words', () => answerViews(from).some((panel) => panel.posted.some((message) => message.delta?.includes('its middle'))));
            await waitFor('the first draft with its next words', async () => (await textOn(firstView, '#progress-draft')).includes('First answer, its middle.'))
                .catch(async (error) => assert.fail(`${error.message}; the second draft: ${await textOn(secondView, '#progress-draft')}`));
            assert.doesNotMatch(await textOn(secondView, '#progress-draft'), /First answer/, 'the second draft shows the first answer\'s words');

            await chat.release(0);
            await asking[1];
            await chat.release(1);
            await asking[0];
            const [firstAnswer, secondAnswer] = [await textOn(firstView, 'body'), await textOn(secondView, 'body')];
            assert.match(firstAnswer, new RegExp(`^\\s*${first}[^]*Login compares hashes[^]*First answer, its end\\.`), firstAnswer);
            assert.match(secondAnswer, new RegExp(`^\\s*${second}[^]*The surcharge goes back[^]*Second answer, its end\\.`), secondAnswer);
            assert.doesNotMatch(secondAnswer, /First answer|Login compares/, 'the second answer shows the first\'s words');
            assert.doesNotMatch(firstAnswer, /Second answer|surcharge goes back/, 'the first answer shows the second\'s words');
            assert.deepEqual(answerViews(from).map((panel) => panel.title), [`Codeloupe: ${first}`, `Codeloupe: ${second}`]);
            // The first answer, in after the second question's tab opened over it, is not brought in front of it.
            assert.deepEqual(answerViews(from).map((panel) => panel.revealed), [0, 0], 'an answer put in front of the tab being read');
        } finally {
            await Promise.all([...runs.values()].map((page) => page.close()));
            await chat.close();
            await Promise.all(asking);
            await endAsk(asks, undefined, chat);
        }
    });

    it('closing the tab of an answer that streams cancels its ask, and its answer never opens another tab', async function () {
        // Today's tab is the ask's own: its answer, still coming, re-opened the view the user had just closed.
        const question = 'how does login check the password';
        const chat = await startChatServer(`Login compares hashes [[1]].\n${GATE}That is all.`);
        const asks = recordRequests(client, 'codeloupe/ask');
        let asking;
        try {
            await useScriptedModel(chat);
            const from = probe.panels.length;
            asking = askTyped(question);
            const panel = await viewOf(question);
            await waitFor('the draft', () => panel.posted.some((message) => message.delta?.includes('Login compares')));
            panel.dispose();
            await waitFor('the ask cancelled', () => asks.calls[0]?.token?.isCancellationRequested);
            await chat.release();
            await asking;
            assert.deepEqual(answerViews(from), [panel], 'no view opened after the tab was closed');
            assert.deepEqual(probe.messages.filter((message) => /codeloupe/.test(message.message ?? '')), [], 'no error shown');
        } finally {
            await chat.close();
            await asking;
            await endAsk(asks, undefined, chat);
        }
    });

    it('the answer view keeps the place read when its tab is hidden and shown: in the draft once its words are back, in the answer', async function () {
        // VS Code loads a hidden webview's page afresh when its tab is shown again: the view was back at its top.
        const lines = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => `Line ${from + i} of the answer, to be read in order.\n`).join('');
        const chat = await startChatServer(`${lines(1, 60)}Login compares hashes [[1]].\n${GATE}${lines(61, 120)}${GATE}That is all.`);
        const asks = recordRequests(client, 'codeloupe/ask');
        let page;
        let asking;
        try {
            await useScriptedModel(chat);
            const from = probe.panels.length;
            const question = 'how does login check the password';
            asking = askTyped(question);
            const panel = await viewOf(question);
            page = await runPanelPage(browser, panel);
            await waitFor('the draft up to the gate', async () => (await textOn(page, '#progress-draft')).includes('Login compares hashes'));
            /** Where the page shown is once it is back, or where it stays. */
            const placeOnceBack = async (expected) => {
                const view = await page.current();
                await view.page.waitForFunction((y) => window.scrollY === y, { timeout: 5000 }, expected).catch(() => undefined);
                return view.page.evaluate(() => window.scrollY);
            };

            const inDraft = await scrollBy(page, 700);
            panel.hide();
            await chat.release();
            await waitFor('words streamed while hidden', () => panel.dropped.some((message) => message.delta?.includes('Line 61')));
            panel.show();
            await waitFor('the draft back', async () => (await textOn(page, '#progress-draft')).includes('Line 61'));
            assert.equal(await placeOnceBack(inDraft), inDraft, 'the draft shown again, at the place read');

            await chat.release();
            await asking;
            await waitFor('the answer', async () => (await textOn(page, '#answer')).includes('That is all.'));
            assert.equal(await placeOnceBack(0), 0, 'the answer, a new page, starts at its top');
            const inAnswer = await scrollBy(page, 900);
            panel.hide();
            panel.show();
            assert.equal(await placeOnceBack(inAnswer), inAnswer, 'the answer shown again, at the place read');
        } finally {
            await page?.close();
            await chat.close();
            await asking;
            await endAsk(asks, undefined, chat);
        }
    });

    it('ask says under code whose file changed on disk since indexing that its lines were found again, in the view and the draft', async function () {
        // The answer's markdown said so in the caption; the code parts the view renders did not, so the view never did.
        const question = 'where is the password hash compared at login';
        const chat = await startChatServer('Login compares the hashes [[1]].');
        const asks = recordRequests(client, 'codeloupe/ask');
        let view;
        let file;
        let saved;
        try {
            await useScriptedModel(chat);
            // Excerpt [1] is the first chunk of the top file; a line goes above it that no watcher tells the server of.
            const [top] = (await client.sendRequest('codeloupe/search', { query: question })).core;
            file = path.join(workspace.root, ...top.path.split('/'));
            saved = fs.readFileSync(file, 'utf8');
            fs.writeFileSync(file, `# a line the index has not seen\n${saved}`);
            const result = await askedResult(asks, question);
            assert.equal(result.fallback, null, `narrated (fallback: ${result.fallback})`);
            const [code] = result.parts.filter((part) => part.kind === 'code');
            assert.deepEqual([code.path, code.changed], [top.path, true]);
            const where = `${code.path}:${code.startLine}-${code.endLine}`;
            const note = '(changed on disk since indexing: lines re-located)';
            view = await openWebview(browser, panelOf('codeloupe.answer').webview.html);
            const chunk = await view.page.$eval('#answer .chunk', (div) => [...div.children].map((child) => child.textContent));
            assert.deepEqual(chunk, [where, note, code.text]);
            const blocks = draftOf(panelOf('codeloupe.answer')).filter((shown) => typeof shown !== 'string');
            assert.deepEqual(blocks, [{ caption: where, note, text: code.text }]);
            await assertViewQuiet(view);
        } finally {
            if (saved !== undefined) {
                fs.writeFileSync(file, saved);
            }
            await endAsk(asks, view, chat);
            await vscode.commands.executeCommand('codeloupe.client.reindex');
        }
    });

    it('ask shows only spliced code: code, HTML and links the model writes render as plain text or not at all', async function () {
        const hostile = 'Login compares hashes [[1]].\n\n    def login():\n        return "INVENTED-indented"\n\n' +
            'See <pre>INVENTED-pre</pre><script>document.title = "INVENTED-script"</script> and `login` but not ' +
            '`return "INVENTED-inline"` or <img src=x onerror="document.title=1">.\n' +
            '[click](javascript:alert("INVENTED-js")) <javascript:alert(1)> <b>bold</b>\n' +
            '```python\nINVENTED-fenced\n```\n';
        const chat = await startChatServer(hostile);
        const asks = recordRequests(client, 'codeloupe/ask');
        let view;
        try {
            await useScriptedModel(chat);
            const result = await askedResult(asks, 'how does login check the password');
            assert.equal(result.fallback, null, `narrated (fallback: ${result.fallback})`);
            view = await openWebview(browser, panelOf('codeloupe.answer').webview.html);
            const page = await view.page.$eval('#answer', (answer) => ({
                text: answer.textContent,
                blocks: [...answer.querySelectorAll('pre')].map((pre) => pre.textContent),
                inline: [...answer.querySelectorAll('code')].filter((code) => !code.closest('pre')).map((code) => code.textContent),
                elements: [...answer.querySelectorAll('*')].map((element) => element.tagName.toLowerCase()),
                links: [...answer.querySelectorAll('a')].map((a) => ({ href: a.getAttribute('href'), uri: a.getAttribute('data-uri') })),
            }));
            assert.ok(!page.text.includes('INVENTED'), page.text);
            assert.deepEqual(page.blocks, result.citations.map((citation) => citation.text), 'only spliced spans are code blocks');
            assert.deepEqual(page.inline, ['login']);
            assert.deepEqual([...new Set(page.elements)].sort(), ['a', 'code', 'div', 'h3', 'pre', 'span']);
            assert.ok(page.links.every((link) => link.href === '#' && link.uri.startsWith('file:')), JSON.stringify(page.links));
            assert.ok(page.text.includes('click'), 'a link keeps its words');
            await assertViewQuiet(view);
        } finally {
            await endAsk(asks, view, chat);
        }
    });

    it('ask progress says each step in words: retrieval, the plan, every part explored, citations', async function () {
        // A pasted report of six lines or more is broad: the server fans out to agents, so every event kind streams.
        const chat = await startChatServer('Login hashes the password and compares it with the stored hash [[1]].');
        try {
            await useScriptedModel(chat);
            const report = ['Traceback (most recent call last):', '  File "app/cli.py", line 9, in main', '    print(login(user, password, {}))',
                '  File "app/auth.py", line 17, in login', '    raise PermissionError("invalid username or password")',
                'PermissionError: invalid username or password', 'web login with the same password works'].join('\n');
            const progressBefore = probe.progress.length;
            await vscode.commands.executeCommand('codeloupe.client.ask', report);
            const posted = panelOf('codeloupe.answer').posted.filter((message) => message.type === 'progress');
            const notified = probe.progress.slice(progressBefore).flatMap((record) => record.reports.map((report) => report.message));
            const statuses = posted.map((message) => message.status);
            assert.deepEqual(notified, statuses, 'the notification and the view say the same');
            assert.equal(statuses[0], 'Retrieving code for the question…');
            const steps = posted.map((message) => message.step).filter(Boolean);
            assert.ok(steps.some((step) => /^Retrieved \d+ core files? and \d+ related$/.test(step)), steps.join('\n'));
            assert.ok(steps.some((step) => /^Split the question into \d+ parts/.test(step)), steps.join('\n'));
            assert.ok(steps.some((step) => /^Part \d+: "/.test(step)), `each part says what it explores:\n${steps.join('\n')}`);
            assert.ok(steps.some((step) => /^Part \d+ (answered|gave up)/.test(step)), steps.join('\n'));
            for (const status of statuses) {
                assert.doesNotMatch(status, /^(message|retrieval|rerank|plan|agent|delta|citation|fallback|done)\b|[{}]|^Exploring$/,
                    `a human label, not an event name or JSON: ${status}`);
            }
            assert.ok(!statuses.includes(report), 'the question is not echoed as a status');
        } finally {
            await probe.changeSettings({ 'codeloupe.chat.baseUrl': '', 'codeloupe.chat.model': '' });
            await waitForReady(client);
            await chat.close();
        }
    });

    it('ask progress quotes a cited file name as text: the notification renders a command link in its message', async function () {
        // The progress notification renders `[label](command:id?args)` in its message as a link that runs the command
        // on a click, as every notification does; "Citing PATH" quotes the repository's file name (and other steps the
        // model's words: a part's question, a tool's arguments).
        const name = '[Fix](command:workbench.action.terminal.sendSequence?%7B%22text%22%3A%22echo%20pwned%5Cn%22%7D).py';
        const file = path.join(workspace.root, name);
        fs.writeFileSync(file, 'def wombat_burrow_tally(burrows):\n    """Count the wombat burrows of a warren."""\n    return len(burrows)\n');
        const chat = await startChatServer('The wombat burrow tally counts the burrows of a warren [[1]].');
        try {
            await vscode.commands.executeCommand('codeloupe.client.reindex');
            await useScriptedModel(chat);
            const progressBefore = probe.progress.length;
            await vscode.commands.executeCommand('codeloupe.client.ask', 'how is the wombat burrow tally of a warren counted');
            const notified = probe.progress.slice(progressBefore).flatMap((record) => record.reports.map((report) => report.message));
            assert.ok(notified.some((message) => message.startsWith('Citing [Fix] (command:')), notified.join('\n'));
            assert.deepEqual(notified.filter((message) => message.includes('](')), [], 'no link in the notification');
        } finally {
            fs.rmSync(file, { force: true });
            await stopChatModel(chat);
            await vscode.commands.executeCommand('codeloupe.client.reindex');
        }
    });

    it('ask on a server without codeloupe/ask (-32601) shows the retrieval bundle instead of an error', async function () {
        // Emulates an older server over the real wire: the extension's ask goes out as a method this server
        // does not have, so the real server answers -32601 and the real client raises its real ResponseError.
        const original = client.sendRequest;
        client.sendRequest = function (type, ...rest) {
            const name = typeof type === 'string' ? type : type.method;
            return original.call(this, name === 'codeloupe/ask' ? 'codeloupe/askNotImplementedHere' : type, ...rest);
        };
        try {
            const errorsBefore = probe.messages.filter((message) => message.level === 'error').length;
            await askTyped('where are session tokens issued');
            const html = panelOf('codeloupe.answer').webview.html;
            assert.match(html, /no codeloupe\/ask/);
            assert.match(html, /CORE \(\d+\)/);
            assert.match(html, /app\/tokens\.py/);
            assert.doesNotMatch(html, /class="error"/);
            assert.equal(probe.messages.filter((message) => message.level === 'error').length, errorsBefore);
        } finally {
            delete client.sendRequest;
        }
    });

    it('code lenses run showLocations client-side as editor.action.showReferences with VS Code objects', async function () {
        const file = path.join(workspace.root, 'app', 'tokens.py');
        const document = await probe.openDocument(file);
        const [{ provider }] = probe.providers.CodeLensProvider;
        const token = new vscode.CancellationTokenSource().token;
        const lenses = await provider.provideCodeLenses(document, token);
        assert.ok(lenses.length > 0);
        const resolved = await Promise.all(lenses.map((lens) => (lens.command ? lens : provider.resolveCodeLens(lens, token))));
        const lens = resolved.find((candidate) => candidate.command?.command === 'codeloupe.client.showLocations'
            && candidate.command.arguments[2].some((location) => location.uri.fsPath.endsWith(path.join('app', 'auth.py'))));
        assert.ok(lens, `a showLocations lens naming app/auth.py in ${JSON.stringify(resolved.map((l) => l.command?.title))}`);
        assert.ok(!resolved.some((candidate) => candidate.command?.command === 'codeloupe.showLocations'), 'no lens left on the server id');
        const [uri, position, locations] = lens.command.arguments;
        assert.ok(uri instanceof vscode.Uri && uri.fsPath === file);
        assert.ok(position instanceof vscode.Position);
        assert.ok(locations.every((location) => location instanceof vscode.Location && location.range instanceof vscode.Range));
        await vscode.commands.executeCommand(lens.command.command, ...lens.command.arguments);
        const references = probe.executed.find((entry) => entry.id === 'editor.action.showReferences');
        assert.ok(references, 'editor.action.showReferences ran');
        assert.deepEqual(references.args, [uri, position, locations]);
    });

    it('hover comes from the server as markdown naming the graph neighbours', async function () {
        const file = path.join(workspace.root, 'app', 'tokens.py');
        const document = await probe.openDocument(file);
        const [{ provider }] = probe.providers.HoverProvider;
        const line = lineOf(workspace.root, 'app/tokens.py', 'def issue_token(');
        const hover = await provider.provideHover(document, new vscode.Position(line, 6), new vscode.CancellationTokenSource().token);
        assert.ok(hover instanceof vscode.Hover);
        const text = hover.contents.map((content) => content.value ?? String(content)).join('\n');
        assert.match(text, /app\/auth\.py/);
    });

    it('the graph view runs the engine page under our CSP and opens the file a click on the map names', async function () {
        await vscode.commands.executeCommand('codeloupe.client.graph');
        const panel = panelOf('codeloupe.graph');
        assert.ok(panel, 'a graph panel');
        const view = await openWebview(browser, panel.webview.html);
        let posted;
        try {
            assert.match(await view.csp(), /script-src 'nonce-/);
            await view.page.click('g.community');
            posted = await view.click('#detail a');
            assert.deepEqual(view.requests, [], 'the graph page made no network request');
            assert.deepEqual(await view.violations(), [], 'the graph page runs under the CSP');
            assert.deepEqual(view.errors, [], 'the graph page ran without script errors');
        } finally {
            await view.close();
        }
        assert.equal(posted.length, 1, 'one open message from the page');
        assert.equal(posted[0].type, 'open');
        await panel.receive(posted[0]);
        assert.equal(probe.shown.at(-1).uri.fsPath, path.join(workspace.root, ...posted[0].path.split('/')));
        await panel.receive({ type: 'open', path: 'web/server.js', line: 4 });
        assert.equal(probe.shown.at(-1).uri.fsPath, path.join(workspace.root, 'web', 'server.js'));
        assert.equal(probe.shown.at(-1).options.selection.start.line, 3);
    });

    it('the manifest: keybindings, context menus, enablement, enable and timeout settings, an icon, the sidebar view', function () {
        const { contributes } = packageJson;
        // "limited", not false: VS Code activates an extension that does not support Restricted Mode only once the
        // workspace is trusted, so nothing would tell the user why codeloupe is silent (seen in the real workbench).
        assert.equal(packageJson.capabilities.untrustedWorkspaces.supported, 'limited');
        const commands = new Map(contributes.commands.map((command) => [command.command, command]));
        // The palette hides a disabled command: in Restricted Mode typing "codeloupe" there found nothing, and the
        // commands' own answer (the reason and a Manage Workspace Trust button) was out of reach.
        for (const [id, command] of commands) {
            assert.doesNotMatch(command.enablement ?? '', /isWorkspaceTrusted/, `${id} is listed in Restricted Mode`);
        }
        for (const id of ['codeloupe.client.search', 'codeloupe.client.ask', 'codeloupe.client.askSelection', 'codeloupe.client.searchSymbol']) {
            assert.ok(contributes.keybindings.some((binding) => binding.command === id && binding.key && binding.mac), `${id} has a key`);
        }
        const menu = (where) => contributes.menus[where].map((entry) => entry.command);
        assert.ok(menu('editor/context').includes('codeloupe.client.askSelection'));
        assert.ok(menu('editor/context').includes('codeloupe.client.searchSymbol'));
        assert.ok(menu('explorer/context').includes('codeloupe.client.graphNode'));
        for (const entries of Object.values(contributes.menus)) {
            for (const entry of entries) {
                assert.ok(commands.has(entry.command), `${entry.command} in a menu is a contributed command`);
            }
        }
        assert.equal(commands.get('codeloupe.client.askSelection').title, 'Ask about Selection');
        assert.equal(commands.get('codeloupe.client.searchSymbol').title, 'Search for Symbol under Cursor');
        const properties = contributes.configuration.properties;
        assert.equal(properties['codeloupe.enable'].default, true);
        assert.equal(properties['codeloupe.chat.timeoutS'].type, 'number');
        assert.ok(!Object.keys(properties).some((key) => /^codeloupe\.chat\..*key/i.test(key)), 'no chat key in settings');
        const root = path.resolve(__dirname, '..');
        assert.ok(fs.readFileSync(path.join(root, packageJson.icon)).subarray(1, 4).toString() === 'PNG', 'a PNG icon');
        const container = contributes.viewsContainers.activitybar[0];
        assert.ok(fs.existsSync(path.join(root, container.icon)));
        assert.deepEqual(contributes.views[container.id].map((view) => view.id), ['codeloupe.lastBundle']);
    });

    it('a multi-line selection (a pasted traceback) is searched and asked whole', async function () {
        const file = path.join(workspace.root, 'app', 'auth.py');
        const first = lineOf(workspace.root, 'app/auth.py', 'def login(');
        await probe.setActiveEditor(file, new vscode.Range(first, 0, first + 4, 0));
        const selected = vscode.window.activeTextEditor.document.getText(vscode.window.activeTextEditor.selection);
        assert.equal(selected.split('\n').length, 5);
        const searches = recordRequests(client, 'codeloupe/search');
        const asks = recordRequests(client, 'codeloupe/ask');
        try {
            await vscode.commands.executeCommand('codeloupe.client.search');
            const picker = probe.quickPicks.at(-1);
            await waitFor('the search', () => searches.calls.length === 1 && picker.items.length > 0);
            assert.equal(searches.calls[0].params.query, selected, 'the whole selection, newlines kept');
            assert.match(picker.placeholder, new RegExp(`${selected.trim().split('\n').length} selected lines`));
            picker.hide();
            await vscode.commands.executeCommand('codeloupe.client.askSelection');
            assert.equal(asks.calls.length, 1);
            assert.equal(asks.calls[0].params.query, selected);
            assert.ok(asks.calls[0].result, `answered: ${asks.calls[0].error}`);
        } finally {
            searches.restore();
            asks.restore();
            vscode.window.activeTextEditor = undefined;
        }
    });

    it('search for the symbol under the cursor starts the picker with that name', async function () {
        const line = lineOf(workspace.root, 'app/auth.py', 'return issue_token(username)');
        const column = fs.readFileSync(path.join(workspace.root, 'app', 'auth.py'), 'utf8').split('\n')[line].indexOf('issue_token') + 3;
        await probe.setActiveEditor(path.join(workspace.root, 'app', 'auth.py'), new vscode.Range(line, column, line, column));
        const searches = recordRequests(client, 'codeloupe/search');
        try {
            await vscode.commands.executeCommand('codeloupe.client.searchSymbol');
            const picker = probe.quickPicks.at(-1);
            assert.equal(picker.value, 'issue_token');
            const items = await waitFor('results', () => picker.items.some((item) => item.match) && picker.items);
            assert.ok(items.some((item) => item.label.includes('app/tokens.py')), items.map((item) => item.label).join('\n'));
            picker.hide();
        } finally {
            searches.restore();
            vscode.window.activeTextEditor = undefined;
        }
    });

    it('bundle, answer and status open in their own panels; the sidebar keeps the last bundle and opens at the match', async function () {
        const { picker, items } = await searchTyped('refund the wombat surcharge');
        await picker.accept(items.find((item) => item.openBundle));
        await askTyped('where are session tokens issued');
        await vscode.commands.executeCommand('codeloupe.client.status');
        assert.equal(probe.treeViews['codeloupe.lastBundle'].description, 'where are session tokens issued', 'the last bundle is the answer\'s');
        const bundle = panelOf('codeloupe.bundle');
        const answer = panelOf('codeloupe.answer');
        const status = panelOf('codeloupe.status');
        assert.ok(bundle && answer && status);
        assert.notEqual(bundle, answer);
        assert.match(bundle.webview.html, /wombat/, 'the answer did not replace the bundle');
        assert.match(status.webview.html, /Index status/);
        assert.match(status.webview.html, /Skipped<\/th>/, 'the status page has the files skipped for their content');
        assert.match(status.webview.html, /<td>generated 1<\/td>/, 'the fixture\'s generated file is counted');

        const tree = probe.treeViews['codeloupe.lastBundle'];
        await vscode.commands.executeCommand('codeloupe.client.search');
        const again = probe.quickPicks.at(-1);
        again.value = 'hash a password with a salt';
        const rows = await waitFor('search results', () => again.items.some((item) => item.match) && again.items);
        assert.equal(tree.description, 'where are session tokens issued', 'typing a query does not replace the last bundle');
        await again.accept(rows.find((row) => row.match));
        assert.equal(tree.description, 'hash a password with a salt', 'opening a result keeps its bundle in the sidebar');
        const [core, related] = tree.provider.getChildren();
        assert.deepEqual([core.label, related.label], ['CORE', 'RELATED']);
        const files = [...tree.provider.getChildren(core), ...tree.provider.getChildren(related)];
        assert.ok(files.length > 0);
        const item = tree.provider.getTreeItem(files[0]);
        assert.equal(item.command.command, 'codeloupe.client.openMatch');
        const [match] = item.command.arguments;
        await vscode.commands.executeCommand(item.command.command, ...item.command.arguments);
        const opened = probe.shown.at(-1);
        assert.equal(opened.uri.toString(), match.location.uri);
        assert.ok(opened.options.selection.isEmpty);
        assert.equal(opened.options.selection.start.line, match.anchorLine);
    });

    it('the chat API key is set by a command, kept in SecretStorage, sent to the server and never written to settings', async function () {
        const sent = [];
        const original = client.sendNotification;
        client.sendNotification = function (type, params) {
            if ((type.method ?? type) === 'workspace/didChangeConfiguration') {
                sent.push(params);
            }
            return original.call(this, type, params);
        };
        const settingsBefore = JSON.stringify(vscode.workspace.getConfiguration('codeloupe').inspect('chat.model'));
        try {
            probe.answerInputBox('sk-test-0123');
            await vscode.commands.executeCommand('codeloupe.client.setChatApiKey');
            assert.equal(probe.secrets.get('codeloupe.chat.apiKey'), 'sk-test-0123');
            assert.equal(sent.at(-1)?.settings.codeloupe.chatApiKey, 'sk-test-0123', 'the running server got the key');
            assert.ok(!Object.keys(probe.settingsSnapshot()).some((key) => /apikey/i.test(key)), 'nothing written to settings');
            assert.equal(JSON.stringify(vscode.workspace.getConfiguration('codeloupe').inspect('chat.model')), settingsBefore);
            await waitForReady(client);
            probe.answerInputBox('');
            await vscode.commands.executeCommand('codeloupe.client.setChatApiKey');
            assert.equal(probe.secrets.has('codeloupe.chat.apiKey'), false, 'an empty answer removes it');
            assert.equal(sent.at(-1).settings.codeloupe.chatApiKey, undefined);
        } finally {
            delete client.sendNotification;
            await waitForReady(client);
        }
    });

    it('graph node and path views: a file with its neighbours, a route hop by hop, every file a link', async function () {
        const tokens = path.join(workspace.root, 'app', 'tokens.py');
        await vscode.commands.executeCommand('codeloupe.client.graphNode', vscode.Uri.file(tokens));
        const panel = panelOf('codeloupe.graphDetail');
        assert.ok(panel, 'a graph detail panel');
        let view = await openWebview(browser, panel.webview.html);
        try {
            const text = await view.page.$eval('body', (body) => body.textContent);
            assert.match(text, /Used by \(\d+\)/);
            const links = await view.links();
            assert.ok(links.some((link) => link.uri.endsWith('/app/auth.py')), 'app/auth.py, which uses it, is a link');
            const code = await view.page.$$eval('pre code', (blocks) => blocks.map((block) => block.textContent).join(''));
            assert.ok(code.includes('def issue_token('), 'its code, verbatim');
            await assertViewQuiet(view);
        } finally {
            await view.close();
        }
        // What a file uses: the line link opens the use in this file, where the import is, not the used file at a
        // line number of this one.
        await vscode.commands.executeCommand('codeloupe.client.graphNode', vscode.Uri.file(path.join(workspace.root, 'app', 'auth.py')));
        view = await openWebview(browser, panelOf('codeloupe.graphDetail').webview.html);
        try {
            const uses = await view.page.$$eval('#imports + ul a[data-uri]', (anchors) => anchors.map((anchor) => ({
                uri: anchor.getAttribute('data-uri'), range: JSON.parse(anchor.getAttribute('data-range')), text: anchor.textContent })));
            const importLine = lineOf(workspace.root, 'app/auth.py', 'from app.tokens import issue_token');
            const lineLink = uses.find((link) => /^L\d+$/.test(link.text));
            assert.ok(lineLink, JSON.stringify(uses));
            assert.ok(lineLink.uri.endsWith('/app/auth.py'), `the use is in app/auth.py: ${JSON.stringify(lineLink)}`);
            assert.equal(lineLink.range.start.line, importLine);
        } finally {
            await view.close();
        }

        /** Runs Show Graph Path from -> to; the page's hops as text, and its links. */
        const walk = async (from, to) => {
            probe.answerInputBox(from);
            probe.answerInputBox(to);
            await vscode.commands.executeCommand('codeloupe.client.graphPath');
            const page = await openWebview(browser, panelOf('codeloupe.graphDetail').webview.html);
            try {
                const hops = await page.page.$$eval('ol.hops li', (items) => items.map((item) => item.textContent.replace(/\s+/g, ' ').trim()));
                const code = await page.page.$$eval('ol.hops .hop-code pre code', (blocks) => blocks.map((block) => block.textContent));
                return { hops, code, links: await page.links() };
            } finally {
                await page.close();
            }
        };
        const forward = await walk('app/cli.py', 'app/tokens.py');
        assert.ok(forward.hops.length >= 2, forward.hops.join('\n'));
        assert.match(forward.hops[0], /^app\/cli\.py (imports|calls into) app\/auth\.py/, 'the user on the left, the used file on the right');
        assert.match(forward.hops.at(-1), /^app\/auth\.py (imports|calls into) app\/tokens\.py .*defined at app\/tokens\.py:\d+/);
        // Each hop's code as on disk: the last hop's definition is issue_token itself, verbatim.
        const tokensText = fs.readFileSync(path.join(workspace.root, 'app', 'tokens.py'), 'utf8');
        assert.ok(forward.code.some((text) => text.includes('def issue_token(') && tokensText.includes(text.replace(/\n$/, ''))),
            forward.code.join('\n---\n'));
        for (const file of ['app/cli.py', 'app/auth.py', 'app/tokens.py']) {
            assert.ok(forward.links.some((link) => link.uri.endsWith(`/${file}`)), `${file} is a link`);
        }
        // Walked the other way the hops are "used-by": still drawn user first, as the code reads.
        const backward = await walk('app/tokens.py', 'app/cli.py');
        assert.match(backward.hops[0], /^app\/auth\.py (imports|calls into) app\/tokens\.py .*at app\/auth\.py:\d+/, backward.hops.join('\n'));
        assert.match(backward.hops.at(-1), /^app\/cli\.py (imports|calls into) app\/auth\.py/, backward.hops.join('\n'));
    });

    it('Show in Graph on a folder of the explorer: its communities, files and edges across it, each a link', async function () {
        // The explorer offers the command on folders too.
        const explorer = packageJson.contributes.menus['explorer/context'].find((entry) => entry.command === 'codeloupe.client.graphNode');
        assert.doesNotMatch(explorer.when, /explorerResourceIsFolder/, 'offered on a folder of the explorer');
        // A folder outside app/ that uses it, so the page has an edge across app/'s boundary (taken out again after).
        const reports = path.join(workspace.root, 'reports');
        fs.mkdirSync(reports);
        fs.writeFileSync(path.join(reports, 'quarter.py'), '"""Quarterly totals."""\n\nfrom app.billing import subtotal\n\n\n'
            + 'def quarter_total(lines: list[dict]) -> float:\n    return subtotal(lines)\n');
        const useLine = lineOf(workspace.root, 'reports/quarter.py', 'from app.billing import');
        await vscode.commands.executeCommand('codeloupe.client.reindex');
        try {
            await vscode.commands.executeCommand('codeloupe.client.graphNode', vscode.Uri.file(path.join(workspace.root, 'app')));
            const panel = panelOf('codeloupe.graphDetail');
            const view = await openWebview(browser, panel.webview.html);
            let posted;
            try {
                const text = (await view.page.$eval('body', (body) => body.innerText)).replace(/\s+/g, ' ').trim();
                assert.match(text, /^app\/ A folder: \d+ files of the graph\./, text);
                assert.doesNotMatch(text, /undefined|\[object Object\]|NaN/, text);
                const heading = async (id) => view.page.$eval(`#${id}`, (h2) => h2.textContent);
                assert.equal(await heading('usedBy'), 'Used by, from outside (1)');
                assert.equal(await heading('uses'), 'Uses, outside the folder (0)');
                const usedBy = await view.page.$eval('h2#usedBy + ul li', (item) => item.textContent.replace(/\s+/g, ' ').trim());
                assert.equal(usedBy, `reports/quarter.py imports app/billing.py (subtotal) at reports/quarter.py:${useLine + 1}`);
                const communities = await view.page.$$eval('h2#communities + ul li strong', (names) => names.map((name) => name.textContent));
                assert.ok(communities.length > 0 && communities.every((name) => name && !/^\d+$/.test(name)), `communities by name: ${communities}`);
                const links = await view.links();
                for (const file of ['app/auth.py', 'app/tokens.py', 'app/cli.py', 'app/billing.py', 'reports/quarter.py']) {
                    assert.ok(links.some((link) => link.uri.endsWith(`/${file}`)), `${file} is a link`);
                }
                const use = links.find((link) => link.text === `reports/quarter.py:${useLine + 1}`);
                assert.ok(use && use.uri.endsWith('/reports/quarter.py') && use.range.start.line === useLine, JSON.stringify(use));
                posted = await view.click('h2#usedBy + ul li a:last-of-type');
                assert.deepEqual(view.requests, []);
                assert.deepEqual(await view.violations(), []);
                assert.deepEqual(view.errors, []);
            } finally {
                await view.close();
            }
            await panel.receive(posted[0]);
            assert.equal(probe.shown.at(-1).uri.fsPath, path.join(reports, 'quarter.py'), 'the use opens the file that uses app/');
            assert.equal(probe.shown.at(-1).options.selection.start.line, useLine, 'at the line of the use');
        } finally {
            fs.rmSync(reports, { recursive: true, force: true });
            await vscode.commands.executeCommand('codeloupe.client.reindex');
        }
    });

    /** Runs `command`, which shows a QuickPick; resolves with the picker once it has items, and the command's run. */
    async function pickerOf(command) {
        const before = probe.quickPicks.length;
        const running = vscode.commands.executeCommand(command);
        const picker = await waitFor(`the ${command} picker`, () => (probe.quickPicks[before]?.items.length > 0 ? probe.quickPicks[before] : undefined));
        return { picker, running };
    }

    it('tour: entry points, then the most mentioned names labelled as mentions; each opens at its definition', async function () {
        const tours = recordRequests(client, 'codeloupe/tour');
        try {
            const { picker, running } = await pickerOf('codeloupe.client.tour');
            const tour = tours.calls[0].result;
            assert.ok(tour.stops.length > 0, 'the fixture has names to tour');
            const places = picker.items.filter((item) => item.location !== undefined);
            assert.deepEqual(places.map((item) => item.location), [...tour.entryPoints, ...tour.stops].map((place) => place.location),
                'entry points first, then the stops, in the server\'s order');
            const separators = picker.items.filter((item) => item.kind === vscode.QuickPickItemKind.Separator).map((item) => item.label);
            assert.deepEqual(separators, [...(tour.entryPoints.length > 0 ? ['Entry points'] : []), 'Most mentioned names']);
            assert.equal(picker.sortByLabel, false);  // the headings stay while the user types a filter
            const stop = picker.items.find((item) => item.label.endsWith(' issue_token'));
            assert.ok(stop, picker.items.map((item) => item.label).join('\n'));
            assert.match(stop.description, /^\d+ files? mentions? it · app\/tokens\.py:\d+$/);
            await picker.accept(stop);
            await running;
            const opened = probe.shown.at(-1);
            assert.equal(opened.uri.fsPath, path.join(workspace.root, 'app', 'tokens.py'));
            assert.equal(opened.options.selection.start.line, lineOf(workspace.root, 'app/tokens.py', 'def issue_token'));
        } finally {
            tours.restore();
        }
    });

    it('tour: entry points past the strongest 30 are counted, and "Show all" lists every one in the same picker', async function () {
        const tools = path.join(workspace.root, 'tools');  // scripts with a __main__ guard each (taken out again after)
        fs.mkdirSync(tools);
        for (let i = 0; i < 35; i += 1) {
            fs.writeFileSync(path.join(tools, `script_${String(i).padStart(2, '0')}.py`),
                `def run_${i}():\n    return ${i}\n\n\nif __name__ == '__main__':\n    run_${i}()\n`);
        }
        await vscode.commands.executeCommand('codeloupe.client.reindex');
        const tours = recordRequests(client, 'codeloupe/tour');
        try {
            const { picker, running } = await pickerOf('codeloupe.client.tour');
            const cut = tours.calls[0].result;
            const total = cut.entryPoints.length + cut.entryPointsNotShown;
            assert.equal(tours.calls[0].params.entryPoints, undefined, 'the server\'s default first');
            assert.ok(cut.entryPoints.length === 30 && total >= 35, JSON.stringify({ shown: cut.entryPoints.length, total }));
            const more = picker.items.find((item) => item.more !== undefined);
            assert.ok(more, picker.items.map((item) => item.label).join('\n'));
            assert.equal(more.label, `$(list-unordered) Show all ${total} entry points`);
            assert.equal(more.description, `${cut.entryPointsNotShown} more entry points`);
            assert.equal(picker.items.indexOf(more), 1 + cut.entryPoints.length, 'after the listed entry points');
            assert.equal(picker.items[picker.items.indexOf(more) + 1].label, 'Most mentioned names');

            picker.value = 'show all';  // typed to reach the row, as a user does in a long list
            await picker.accept(more);
            await waitFor('every entry point listed', () => tours.calls[1]?.result !== undefined && !picker.busy
                && !picker.items.includes(more));
            assert.equal(picker.value, '', 'the filter that found the row matches none of what it lists: cleared');
            const every = tours.calls[1].result;
            assert.equal(tours.calls[1].params.entryPoints, total);
            assert.equal(tours.calls[1].params.folderUri, tours.calls[0].params.folderUri);
            assert.ok(picker.visible, 'the picker stays open');
            assert.equal(every.entryPointsNotShown, 0);
            assert.ok(picker.items.every((item) => item.more === undefined), 'nothing more to show');
            const places = picker.items.filter((item) => item.location !== undefined).map((item) => item.location);
            assert.deepEqual(places, [...every.entryPoints, ...every.stops].map((place) => place.location));
            assert.deepEqual(every.entryPoints.slice(0, 30), cut.entryPoints, 'the strongest first, as cut');
            assert.deepEqual(picker.activeItems.map((item) => item.location), [every.entryPoints[30].location],
                'the list goes on where it was cut');
            // The real workbench highlights the first of the new rows before the one asked for, and a file not open
            // yet opens slower than an open one: the editor still ends on the highlighted row, which Enter opens.
            const [stale, highlighted] = [picker.items.find((item) => item.location === every.entryPoints[33].location), picker.activeItems[0]];
            const fsPathOf = (item) => client.protocol2CodeConverter.asUri(item.location.uri).fsPath;
            await vscode.workspace.openTextDocument(vscode.Uri.file(fsPathOf(highlighted)));
            const shownBefore = probe.shown.length;
            picker.highlight(stale);
            picker.highlight(highlighted);
            await waitFor('the highlighted row previewed', () => probe.shown.length > shownBefore);
            await picker.pressEnter();
            await running;
            await fs.promises.readFile(fsPathOf(stale));  // as long as the stale row's file takes to read
            assert.deepEqual(probe.shown.slice(shownBefore).map((shown) => [shown.uri.fsPath, shown.options.preview]),
                [[fsPathOf(highlighted), true], [fsPathOf(highlighted), false]]);

            const again = await pickerOf('codeloupe.client.tour');
            const row = again.picker.items.find((item) => item.more !== undefined);
            again.picker.value = 'entry';
            await again.picker.accept(row);
            again.picker.value = 'script_3';  // typed while the list loads: the user's, kept
            await waitFor('every entry point listed again', () => tours.calls[3]?.result !== undefined && !again.picker.busy
                && !again.picker.items.includes(row));
            assert.equal(again.picker.value, 'script_3');
            again.picker.hide();
            await again.running;
        } finally {
            tours.restore();
            fs.rmSync(tools, { recursive: true, force: true });
            await vscode.commands.executeCommand('codeloupe.client.reindex');
        }
    });

    it('related code: the chunks nearest the selected lines, never the selection itself; each opens at its line', async function () {
        const auth = path.join(workspace.root, 'app', 'auth.py');
        const first = lineOf(workspace.root, 'app/auth.py', 'def hash_password');
        await probe.setActiveEditor(auth, new vscode.Range(first, 0, first + 2, 0));
        const asked = recordRequests(client, 'codeloupe/related');
        try {
            const { picker, running } = await pickerOf('codeloupe.client.related');
            const { params, result } = asked.calls[0];
            assert.deepEqual(params.range, { start: { line: first, character: 0 }, end: { line: first + 2, character: 0 } },
                'the selected lines, whole');
            assert.match(picker.title, new RegExp(`^Codeloupe: Related to app/auth\\.py:${first + 1}-${first + 2} \\(${result.lane}\\)$`));
            assert.ok(result.chunks.length > 0, 'the fixture has code near the password hashing');
            assert.deepEqual(picker.items.map((item) => item.location), result.chunks.map((chunk) => chunk.location), 'nearest first');
            for (const chunk of result.chunks) {
                const { start, end } = chunk.location.range;
                assert.ok(!(chunk.path === 'app/auth.py' && start.line < first + 2 && end.line > first), `${chunk.path}:${start.line + 1} is not the selection`);
            }
            await picker.accept(picker.items[0]);
            await running;
            const opened = probe.shown.at(-1);
            assert.equal(opened.uri.toString(), result.chunks[0].location.uri);
            assert.equal(opened.options.selection.start.line, result.chunks[0].location.range.start.line);
        } finally {
            asked.restore();
            vscode.window.activeTextEditor = undefined;
        }
    });

    it('a file outside every workspace folder: Related Code and Show in Graph say so, with no error and no request', async function () {
        // In the real workbench the server's refusal surfaced as a modal "Command 'Codeloupe: Related Code' resulted
        // in an error" dialog, and the graph page quoted it ("`node` file:///... is outside every workspace folder").
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'codeloupe-outside-'));
        const lonely = path.join(dir, 'lonely.py');
        fs.writeFileSync(lonely, 'import os\n\n\ndef read_env(name):\n    return os.environ.get(name, "")\n');
        const asked = recordRequests(client, 'codeloupe/related');
        const graphAsked = recordRequests(client, 'codeloupe/graph');
        const pageBefore = panelOf('codeloupe.graphDetail')?.webview.html;
        const messagesBefore = probe.messages.length;
        try {
            await probe.setActiveEditor(lonely, new vscode.Range(3, 0, 4, 0));
            await vscode.commands.executeCommand('codeloupe.client.related');
            await vscode.commands.executeCommand('codeloupe.client.graphNode', vscode.Uri.file(lonely));
            const shown = probe.messages.slice(messagesBefore);
            assert.deepEqual(shown.map((message) => message.level), ['warning', 'warning'], JSON.stringify(shown));
            for (const message of shown) {
                assert.ok(message.text.includes(`${lonely} is outside every workspace folder`), message.text);
                assert.ok(!message.text.includes('`'), `no protocol parameter names: ${message.text}`);
            }
            assert.deepEqual(asked.calls, [], 'no codeloupe/related request for a file no index holds');
            assert.deepEqual(graphAsked.calls, [], 'no codeloupe/graph request either');
            assert.equal(panelOf('codeloupe.graphDetail')?.webview.html, pageBefore, 'no page quoting the refusal');
        } finally {
            graphAsked.restore();
            asked.restore();
            vscode.window.activeTextEditor = undefined;
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it('a command that fails says so in a notification instead of throwing (no modal error dialog)', async function () {
        // Thrown out of a command, a failure became the real workbench's modal "Command '...' resulted in an error".
        const gone = vscode.Uri.file(path.join(os.tmpdir(), 'codeloupe-no-such-dir', 'gone.py')).toString();
        const messagesBefore = probe.messages.length;
        const match = { location: { uri: gone, range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } } },
            anchorLine: 0 };
        const result = await vscode.commands.executeCommand('codeloupe.client.openMatch', match);
        assert.equal(result, undefined);
        const shown = probe.messages.slice(messagesBefore);
        assert.deepEqual(shown.map((message) => message.level), ['error'], JSON.stringify(shown));
        assert.ok(shown[0].text.startsWith('codeloupe: '), shown[0].text);
    });

    it('ask offers the cached questions; the repeat is served from the flow cache and says so', async function () {
        const question = 'how does login check the password';
        const chat = await startChatServer('Login compares the salted hash of the password [[1]].');
        const asks = recordRequests(client, 'codeloupe/ask');
        let view;
        try {
            // The flow cache matches on the query vector: embeddings from the scripted server too.
            await probe.changeSettings({ 'codeloupe.chat.baseUrl': chat.baseUrl, 'codeloupe.chat.model': 'replay-model',
                'codeloupe.embed.provider': 'openai', 'codeloupe.embed.baseUrl': chat.baseUrl, 'codeloupe.embed.model': 'replay-embed' });
            await waitForReady(client);
            await waitFor('every vector', async () => {
                const { vectors } = (await client.sendRequest('codeloupe/status', {})).folders[0];
                return vectors.total > 0 && vectors.done === vectors.total;
            });
            const fresh = await askTyped(question);
            assert.deepEqual(fresh.items.map((item) => item.question), [question], 'nothing cached yet: only what was typed');
            assert.equal(asks.calls[0].result.flow, null, `a fresh answer (fallback: ${asks.calls[0].result.fallback})`);
            const calls = await chat.requestCount();

            const before = probe.quickPicks.length;
            const running = vscode.commands.executeCommand('codeloupe.client.ask');
            const prompt = await waitFor('the cached question', () => probe.quickPicks[before]?.items.length > 0 && probe.quickPicks[before]);
            assert.deepEqual(prompt.items.map((item) => [item.question, item.description]), [[question, 'cached answer']]);
            await prompt.accept(prompt.items[0]);
            await running;
            assert.equal(asks.calls[1].params.query, question);
            assert.equal(asks.calls[1].result.flow?.action, 'served');
            assert.equal(await chat.requestCount(), calls, 'no model call for a served answer');
            const steps = panelOf('codeloupe.answer').posted.map((message) => message.step).filter(Boolean);
            assert.ok(steps.some((step) => step.startsWith('Serving the cached answer to')), steps.join('\n'));
            view = await openWebview(browser, panelOf('codeloupe.answer').webview.html);
            const note = await view.page.$eval('p.note.flow', (element) => element.textContent);
            assert.match(note, /^Served from the flow cache \(no model call\)/);
            assert.ok(note.includes(question));
        } finally {
            asks.restore();
            await view?.close();
            await probe.changeSettings({ 'codeloupe.embed.provider': 'none', 'codeloupe.embed.baseUrl': '', 'codeloupe.embed.model': '' });
            await stopChatModel(chat);
        }
    });

    it('a file saved in the editor becomes searchable: the client sends didSave and the server indexes it', async function () {
        const file = path.join(workspace.root, 'app', 'saved_note.py');
        await probe.saveDocument(file, 'def platypus_ledger_reconcile():\n    return 1\n');
        const result = await waitFor('the saved file in search', async () => {
            const found = await client.sendRequest('codeloupe/search', { query: 'platypus_ledger_reconcile' });
            return found.core[0]?.path === 'app/saved_note.py' && found;
        });
        assert.equal(result.core[0].chunks[0].location.uri, vscode.Uri.file(file).toString());
    });

    it('code from a file with CRLF and lone CR lines: the picker and the bundle page show the server\'s lines', async function () {
        // A line ends at \n, \r\n or a lone \r only, as VS Code and the server count them (docs/protocol.md).
        const file = path.join(workspace.root, 'app', 'mac_ledger.py');
        // Small functions (one chunk of many lines, some ended by a lone CR).
        const sums = ['alpha', 'beta', 'gamma', 'delta'].map((name) => `def ${name}_total(values):\r    """Sum of the ${name} values."""\r\n`
            + '    return sum(values)\r');
        const text = `"""Old Mac line endings."""\n\r\r${sums.join('\r\r')}\r\rdef numbat_ledger_balance(entries):\r`
            + '    """Balance of a numbat ledger."""\r\n    total = 0\r    for entry in entries:\r\n        total += entry\r    return total\r';
        const lines = text.match(/[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+/g).map((line) => line.replace(/[\r\n]+$/, ''));
        await probe.saveDocument(file, text);
        await waitFor('the saved file in search', async () => {
            const found = await client.sendRequest('codeloupe/search', { query: 'numbat_ledger_balance' });
            return found.core[0]?.path === 'app/mac_ledger.py';
        });
        const searches = recordRequests(client, 'codeloupe/search');
        let view;
        try {
            const { picker, items } = await searchTyped('numbat_ledger_balance');
            const ledger = items.find((item) => item.label.includes('app/mac_ledger.py'));
            const chunk = searches.calls.at(-1).result.core.find((found) => found.path === 'app/mac_ledger.py').chunks[0];
            const anchor = chunk.snippet.anchorLine;
            assert.equal(ledger.detail, lines[anchor].trim(), 'the picker shows the anchor line');
            assert.match(ledger.description, new RegExp(`L${anchor + 1}$`));

            await picker.accept(items.find((item) => item.openBundle));
            view = await openWebview(browser, panelOf('codeloupe.bundle').webview.html);
            const shown = await view.page.$$eval('.file', (files) => [...files.find((div) => div.querySelector('h3').textContent
                .includes('app/mac_ledger.py')).querySelectorAll('.line')].map((span) => [Number(span.dataset.line), span.textContent,
                span.classList.contains('anchor')]));
            const { start, end } = chunk.location.range;
            const spanned = lines.slice(start.line, end.character === 0 ? end.line : end.line + 1);
            assert.deepEqual(shown, spanned.map((line, index) => [start.line + index + 1, line, start.line + index === anchor]));
        } finally {
            searches.restore();
            await view?.close();
        }
    });

    it('bidi and control characters in code, a path and a symbol show as escapes, every line under its own number', async function () {
        // "Trojan Source": shown raw, U+202E reverses what follows it and U+2066/2069 isolate, so a line reads otherwise
        // than it runs and a name shows its end first. The extension shows them as the CLI does (`\u202e`), each in
        // its line: the line breaks (a CRLF, a lone CR) stay the code's own.
        const BIDI = /[\u202e\u202c\u2066\u2069\x1b]/;
        const escaped = (text) => text.replace(new RegExp(BIDI.source, 'g'),
            (found) => (found === '\x1b' ? '\\x1b' : `\\u${found.charCodeAt(0).toString(16)}`));
        const name = 'app/wallaby_\u202eyp.py';
        const text = '"""Wallaby quotas."""\r\n\r\ndef wallaby_quota_check(role="guest\u202e\u2066"):\r'
            + '    access = "user\u202e \u2066// admin\u2069\u2066"\r\n    if access == "admin":\n'
            + '        return "\x1b[2Jwallaby cleared"\r    return role\n';
        const lines = text.match(/[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+/g).map((line) => line.replace(/[\r\n]+$/, ''));
        await probe.saveDocument(path.join(workspace.root, ...name.split('/')), text);
        await waitFor('the saved file in search', async () => {
            const found = await client.sendRequest('codeloupe/search', { query: 'wallaby quota check admin access' });
            return found.core[0]?.path === name;
        });
        const searches = recordRequests(client, 'codeloupe/search');
        let view;
        try {
            const { picker, items } = await searchTyped('wallaby quota check admin access');
            const file = searches.calls.at(-1).result.core[0];
            const chunk = file.chunks[0];
            assert.ok(BIDI.test(chunk.breadcrumb), `the symbol's breadcrumb holds the bidi characters: ${chunk.breadcrumb}`);
            const row = items.find((item) => item.match?.location.uri === chunk.location.uri);
            assert.equal(row.label, `$(file-code) ${escaped(name)}`, 'the picker shows the path escaped');
            assert.equal(row.detail, escaped(lines[chunk.snippet.anchorLine].trim()), 'and the anchor line');
            for (const item of items) {
                assert.ok(![item.label, item.description, item.detail].some((shown) => BIDI.test(shown ?? '')), `raw in ${item.label}`);
            }

            await picker.accept(items.find((item) => item.openBundle));
            view = await openWebview(browser, panelOf('codeloupe.bundle').webview.html);
            const page = await view.page.$eval('body', (body) => body.textContent);
            assert.ok(!BIDI.test(page), 'no raw bidi or control character on the page');
            const shown = await view.page.$$eval('.file', (files) => {
                const div = files.find((candidate) => candidate.querySelector('h3').textContent.includes('wallaby_'));
                return { path: div.querySelector('h3 a').textContent, header: div.querySelector('.chunk a').textContent,
                    lines: [...div.querySelectorAll('.line')].map((span) => [Number(span.dataset.line), span.textContent]) };
            });
            assert.equal(shown.path, escaped(name));
            assert.ok(shown.header.endsWith(escaped(chunk.breadcrumb)), `the symbol escaped: ${shown.header}`);
            const { start, end } = chunk.location.range;
            const spanned = lines.slice(start.line, end.character === 0 ? end.line : end.line + 1);
            assert.ok(spanned.some((line) => line.includes('\u202e')));
            assert.deepEqual(shown.lines, spanned.map((line, index) => [start.line + index + 1, escaped(line)]),
                'each line escaped under its own number');

            const tree = probe.treeViews['codeloupe.lastBundle'];
            const [core] = tree.provider.getChildren();
            const fileNode = tree.provider.getChildren(core).find((node) => node.file.path === name);
            assert.equal(tree.provider.getTreeItem(fileNode).label, escaped(name), 'the sidebar shows the path escaped');
            const [chunkNode] = tree.provider.getChildren(fileNode);
            assert.equal(tree.provider.getTreeItem(chunkNode).tooltip, escaped(chunk.breadcrumb), 'and the symbol');
        } finally {
            searches.restore();
            await view?.close();
        }
    });

    it('the answer view captions code from a file whose name holds a line break, and its progress cites it, with the name on one line, as the draft and the refs do', async function () {
        // The caption was the name as HTML text: its line break read as a space ("wicket bell.py"), so it named another
        // file than the draft's caption and the answer's ref did ("wicket\nbell.py", the engine's one_line).
        const name = 'app/wicket\nbell.py';
        await probe.saveDocument(path.join(workspace.root, 'app', 'wicket\nbell.py'),
            'def ring_wicket_bell(times):\n    """Ring the wicket bell."""\n    return "ding" * times\n');
        await waitFor('the saved file in search', async () => {
            const found = await client.sendRequest('codeloupe/search', { query: 'ring the wicket bell' });
            return found.core[0]?.path === name;
        });
        const chat = await startChatServer('The wicket bell rings [[1]].');
        const asks = recordRequests(client, 'codeloupe/ask');
        let view;
        try {
            await useScriptedModel(chat);
            const result = await askedResult(asks, 'ring the wicket bell');
            const [code] = result.parts.filter((part) => part.kind === 'code');
            const [ref] = result.parts.filter((part) => part.kind === 'ref');
            assert.equal(code.path, name);
            const where = `app/wicket\\nbell.py:${code.startLine}-${code.endLine}`;
            assert.equal(ref.text, `(${where})`, 'the engine names it on one line');
            view = await openWebview(browser, panelOf('codeloupe.answer').webview.html);
            assert.equal(await view.page.$eval('#answer .chunk > a', (a) => a.innerText), where);
            const steps = panelOf('codeloupe.answer').posted.filter((message) => message.type === 'progress' && message.step);
            assert.ok(steps.some((message) => message.step === `Citing ${where}`), steps.map((message) => message.step).join('\n'));
        } finally {
            await endAsk(asks, view, chat);
        }
    });

    it('a related file\'s why naming a file whose name holds a line break shows it on one line in the bundle view and the sidebar, and the picker, sidebar and view name that file on one line', async function () {
        // A callee of a CORE file is there because it is "called from PATH": the bundle view showed the why as HTML
        // text, its line break read as a space ("called from app/quoll gate.py", another file than the engine's
        // one_line names), the sidebar's tooltip split it over two lines, and the picker's label, the sidebar's and the
        // view's header named the file with the break read as a space too.
        const name = 'app/quoll\ngate.py';
        const shown = 'app/quoll\\ngate.py';
        await probe.saveDocument(path.join(workspace.root, 'app', 'hinge.py'), 'def swing_hinge(visitor):\n    return visitor\n');
        await probe.saveDocument(path.join(workspace.root, 'app', 'quoll\ngate.py'), 'from app.hinge import swing_hinge\n\n\n'
            + 'def open_quoll_gate(visitor):\n    """Open the quoll gate for a visitor."""\n    return swing_hinge(visitor)\n');
        const why = `swing_hinge called from ${name}`;
        await waitFor('the callee in search, called from the file', async () => {
            const found = await client.sendRequest('codeloupe/search', { query: 'open_quoll_gate' });
            return found.core[0]?.path === name && found.related.some((file) => file.why === why);
        }, 45000, 250);
        const searches = recordRequests(client, 'codeloupe/search');
        let view;
        try {
            const { picker, items } = await searchTyped('open_quoll_gate');
            const result = searches.calls.at(-1).result;
            const core = items.find((item) => item.match?.location.uri === result.core[0].chunks[0].location.uri);
            assert.equal(core.label, `$(file-code) ${shown}`, 'the picker names the file on one line');
            for (const item of items) {
                assert.ok(![item.label, item.description, item.detail].some((text) => /[\r\n]/.test(text ?? '')), `a line break in ${item.label}`);
            }

            await picker.accept(items.find((item) => item.openBundle));
            view = await openWebview(browser, panelOf('codeloupe.bundle').webview.html);
            const whys = await view.page.$$eval('ul.map > li > span.muted', (spans) => spans.map((span) => span.innerText));
            assert.ok(whys.includes(`swing_hinge called from ${shown}`), whys.join('\n'));
            const headers = await view.page.$$eval('.file h3 a', (links) => links.map((a) => a.innerText));
            assert.ok(headers.includes(shown), `the file's header names it on one line: ${headers.join('\n')}`);

            const tree = probe.treeViews['codeloupe.lastBundle'];
            const related = tree.provider.getChildren().find((node) => node.label === 'RELATED');
            const callee = tree.provider.getChildren(related).find((node) => node.file.why === why);
            assert.equal(tree.provider.getTreeItem(callee).tooltip, `swing_hinge called from ${shown}`);
            const [coreSection] = tree.provider.getChildren();
            const gate = tree.provider.getChildren(coreSection).find((node) => node.file.path === name);
            assert.equal(tree.provider.getTreeItem(gate).label, shown, 'the sidebar names the file on one line');
        } finally {
            searches.restore();
            await view?.close();
        }
    });

    it('theme icon syntax in a path, a line of code and a community shows as written in the picker, lenses and tour; a doc line on a hover is text', async function () {
        // A QuickPick row's label, description and detail, a code lens title and the status bar text render `$(name)`
        // as a theme icon: a folder or file named `$(bell)`, a shell line `cd $(pwd)` (an unknown name renders as
        // nothing) showed icons or blanks instead of the repository's text. Each is shown as written (`\$(bell)`).
        const kit = path.join(workspace.root, 'kit$(bell)');
        fs.mkdirSync(kit);
        // Its doc line tries markdown on the hover: a list, an entity (a bidi override), an image (fetched as the hover
        // shows), a command link, raw HTML.
        fs.writeFileSync(path.join(kit, 'numbat_base.py'), '"""Numbat base rates."""\n\n\ndef numbat_base_rate():\n'
            + '    """1. Rates &#x202e; ![i](https://evil.example/i.png) [run](command:workbench.action.terminal.new) <img src=x> $(zap)."""\n'
            + '    return 3\n');
        fs.writeFileSync(path.join(kit, '$(zap)_numbat.py'), 'from .numbat_base import numbat_base_rate\n\n\n'
            + 'def numbat_burrow_depth(shell, command="cd $(pwd) && numbat burrow"):\n    return shell.run(command, numbat_base_rate())\n\n\n'
            + 'if __name__ == "__main__":\n    numbat_burrow_depth(None)\n');
        const shownPath = 'kit\\$(bell)/\\$(zap)_numbat.py';
        await vscode.commands.executeCommand('codeloupe.client.reindex');
        const searches = recordRequests(client, 'codeloupe/search');
        try {
            const { picker, items } = await searchTyped('numbat burrow depth shell');
            const file = searches.calls.at(-1).result.core.find((hit) => hit.path === 'kit$(bell)/$(zap)_numbat.py');
            assert.ok(file, JSON.stringify(searches.calls.at(-1).result.core.map((hit) => hit.path)));
            const row = items.find((item) => item.match?.location.uri === file.chunks[0].location.uri);
            assert.equal(row.label, `$(file-code) ${shownPath}`);
            assert.equal(row.detail, 'def numbat_burrow_depth(shell, command="cd \\$(pwd) && numbat burrow"):');
            picker.hide();

            const [{ provider }] = probe.providers.CodeLensProvider;
            const token = new vscode.CancellationTokenSource().token;
            const document = await probe.openDocument(path.join(kit, 'numbat_base.py'));
            const lenses = await Promise.all((await provider.provideCodeLenses(document, token))
                .map((lens) => (lens.command ? lens : provider.resolveCodeLens(lens, token))));
            assert.equal(lenses[0].command.title, 'kit\\$(bell) · 0 imports · 1 importers', 'the file lens names its community');

            const [{ provider: hovers }] = probe.providers.HoverProvider;
            const line = lineOf(workspace.root, 'kit$(bell)/numbat_base.py', 'def numbat_base_rate');
            const [markdown] = (await hovers.provideHover(document, new vscode.Position(line, 6), token)).contents;
            assert.deepEqual([markdown.isTrusted, markdown.supportHtml, markdown.supportThemeIcons], [false, false, false]);
            const rendered = new MarkdownIt('commonmark').parse(markdown.value, {}).flatMap((token) => [token, ...(token.children ?? [])]);
            const made = rendered.filter((token) => ['image', 'html_inline', 'html_block', 'ordered_list_open'].includes(token.type)
                || (token.type === 'link_open' && !token.attrGet('href').startsWith('file:')));
            assert.deepEqual(made.map((token) => token.type), [], markdown.value);
            assert.ok(rendered.some((token) => token.type === 'code_inline' && token.content.includes('1. Rates &#x202e; '
                + '![i](https://evil.example/i.png) [run](command:workbench.action.terminal.new) <img src=x> $(zap).')), markdown.value);

            const { picker: tour, running } = await pickerOf('codeloupe.client.tour');
            assert.ok(tour.items.some((item) => item.label === `$(debug-start) ${shownPath}`),
                tour.items.map((item) => item.label).join('\n'));
            tour.hide();
            await running;
        } finally {
            searches.restore();
            fs.rmSync(kit, { recursive: true, force: true });
            await vscode.commands.executeCommand('codeloupe.client.reindex');
        }
    });

    it('settings changes reach the running server (ignore globs apply after reindex)', async function () {
        const query = 'quokka zebracorn lookup table';
        const paths = async () => {
            const result = await client.sendRequest('codeloupe/search', { query });
            return [...result.core, ...result.related].map((file) => file.path);
        };
        assert.ok((await paths()).includes('generated/quokka_tables.py'), 'found before the change');
        await probe.changeSettings({ 'codeloupe.ignore': ['generated/'] });
        await waitForReady(client);
        const reindexed = await vscode.commands.executeCommand('codeloupe.client.reindex');
        assert.equal(typeof reindexed.files, 'number');
        assert.ok(probe.messages.some((message) => message.text.includes(`reindexed ${reindexed.files} files`)));
        assert.ok(!(await paths()).includes('generated/quokka_tables.py'), 'ignored after the change');
        const status = await client.sendRequest('codeloupe/status', {});
        assert.equal(status.folders[0].files, reindexed.files);
    });

    it('a bad settings value is warned of by the VS Code setting the user typed, not the engine\'s name', async function () {
        // `codeloupe.chunkBudget: 5` was warned of as "setting 'chunk_budget'", which no VS Code user typed.
        const warning = "codeloupe: setting 'codeloupe.chunkBudget' from the editor settings: 5 is outside 100..100000; ignored";
        try {
            await probe.changeSettings({ 'codeloupe.chunkBudget': 5 });
            await waitFor(`the warning "${warning}"`, () => probe.messages.some((message) => message.text === warning), 10000);
            assert.ok(!probe.messages.some((message) => message.text.includes('chunk_budget')), 'no engine name');
        } finally {
            await probe.changeSettings({ 'codeloupe.chunkBudget': undefined });
            await waitForReady(client);
        }
    });

    it('the status item recovers after two settings change at once while the index is ready', async function () {
        // Each change re-opens the folder on the server; a status answer that lands while the folder is closed
        // lists no folder at all (it did in 3 of 6 tries by hand). The item must keep polling until the re-opened
        // index is ready, not stop at "0 files"; a few rounds make the race near certain.
        this.timeout(120000);
        try {
            for (const [round, budget] of [3000, 3100, 3200, 3300].entries()) {
                await waitForReady(client);
                await Promise.all([
                    probe.changeSettings({ 'codeloupe.chunkBudget': budget }),
                    probe.changeSettings({ 'codeloupe.embed.model': `unused-model-${round}` }),
                ]);
                await waitForReady(client);
                const { folders: [folder] } = await client.sendRequest('codeloupe/status', {});
                assert.ok(folder.files > 0);
                const expected = `$(search) codeloupe ${folder.files} files`;
                await waitFor(`round ${round}: the status item to show "${expected}" (it shows "${probe.statusItems[0].text}" now)`,
                    () => probe.statusItems[0].text === expected, 5000);
            }
        } finally {
            await probe.changeSettings({ 'codeloupe.chunkBudget': 4000, 'codeloupe.embed.model': '' });
            await waitForReady(client);
        }
    });

    it('the status item opens the index status view', async function () {
        await vscode.commands.executeCommand(probe.statusItems[0].command);
        const html = panelOf('codeloupe.status').webview.html;
        assert.match(html, /Index status/);
        assert.ok(html.includes(workspace.root));
    });
});

describe('answer tabs across a window reload', function () {
    // Every answer tab was gone after a window reload (Developer: Reload Window, VS Code restarting with its tabs): the
    // extension registered no serializer for them and no activation event brought it up to restore them.
    const question = 'how does login check the password';
    const lines = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => `Line ${from + i} of the answer, to be read in order.\n`).join('');
    let workspace;
    let browser;
    let chat;
    let workspaceState;
    let session;
    const options = () => ({ folders: [workspace.root], settings: { 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none',
        'codeloupe.chat.baseUrl': chat.baseUrl, 'codeloupe.chat.model': 'replay-model' } });

    before(async function () {
        workspace = makeWorkspace();
        process.env.CODELOUPE_CACHE_DIR = workspace.cacheDir;
        [browser, chat] = await Promise.all([launchChromium(), startChatServer([
            { when: 'streaming', text: `Login compares hashes [[1]].\n${GATE}That is all.` },
            { text: `${lines(1, 60)}Login compares hashes [[1]].\n${lines(61, 120)}That is all.` },
        ])]);
    });

    beforeEach(async function () {
        workspaceState = probe.memento();
        session = activate(options(), workspaceState);
        const client = await session.api.whenReady();
        assert.ok(client, session.api.unavailableReason);
        await waitForReady(client);
    });

    afterEach(async function () {
        await session?.close();
    });

    after(async function () {
        await browser?.close();
        await chat?.close();
        delete process.env.CODELOUPE_CACHE_DIR;
        workspace?.remove();
    });

    const answerTabs = () => probe.panels.filter((panel) => panel.viewType === 'codeloupe.answer' && !panel.disposed);

    /** Reloads the window: the extension stops with the tabs open, starts again on the same workspace state (with
     * `settings` over the suite's), and VS Code hands each tab (an answer's, the bundle's, the status), with the state
     * its page last set, to its serializer; the restored tabs, in order. */
    async function reload(tabs, settings = {}) {
        const open = tabs.map(({ panel, state }) => ({ viewType: panel.viewType, title: panel.title, state: structuredClone(state) }));
        await session.close();
        const reloaded = options();
        session = activate({ ...reloaded, settings: { ...reloaded.settings, ...settings } }, workspaceState);
        const restored = [];
        for (const tab of open) {
            restored.push(await probe.restorePanel(tab.viewType, tab.title, tab.state));
        }
        return restored;
    }


    it('an answer comes back as it was: its words, its cited code read from disk now, at the place read; closed, it is forgotten', async function () {
        assert.ok(packageJson.activationEvents.includes('onWebviewPanel:codeloupe.answer'), 'VS Code starts the extension to restore an answer tab');
        await askTyped(question);
        const [panel] = answerTabs();
        const page = await runPanelPage(browser, panel);
        const file = path.join(workspace.root, 'app', 'auth.py');
        const original = fs.readFileSync(file, 'utf8');
        let restoredPage;
        try {
            const view = await page.current();
            const before = await view.page.$eval('#answer', (answer) => answer.textContent);
            const [code] = await view.page.$$eval('#answer pre', (blocks) => blocks.map((block) => block.textContent));
            assert.match(before, /Line 120 of the answer[^]*That is all\./);
            assert.ok(code.includes('def login'), code);
            const y = await scrollBy(page, 900);
            // The code is not kept: what the tab shows of it is read from disk when the window is back.
            assert.ok(!JSON.stringify(workspaceState.keys().map((key) => workspaceState.get(key))).includes('def login'), 'code kept with the answer');
            const edited = original.replace('def login(', 'def login_checked(');
            fs.writeFileSync(file, edited);

            const tabs = [{ panel, state: page.state.value }];
            await page.close();
            const [restored] = await reload(tabs);
            assert.equal(restored.title, panel.title);
            restoredPage = await runPanelPage(browser, restored);
            const back = await restoredPage.current();
            const after = await back.page.$eval('#answer', (answer) => answer.textContent);
            const [codeNow] = await back.page.$$eval('#answer pre', (blocks) => blocks.map((block) => block.textContent));
            assert.equal(codeNow, code.replace('def login(', 'def login_checked('), 'the cited lines as the file holds them now');
            // The file changed since the answer: its new lines at the old numbers say so (they showed with no word).
            const since = await back.page.$$eval('#answer .since', (notes) => notes.map((note) => note.textContent));
            assert.deepEqual(since, ['(changed since this answer: the lines as the file holds them now)']);
            assert.equal(after, before.replace(code, `${since[0]}${codeNow}`), 'the answer\'s words as before');
            await back.page.waitForFunction((place) => window.scrollY === place, { timeout: 5000 }, y).catch(() => undefined);
            assert.equal(await back.page.evaluate(() => window.scrollY), y, 'at the place read');
            assert.deepEqual(back.requests, []);
            assert.deepEqual(await back.violations(), []);

            // A restored tab works as a fresh one: a link opens its file, and closing it forgets its answer.
            await session.api.whenReady();
            const posted = await back.click('#answer a.loc');
            await restored.receive(posted[0]);
            assert.equal(probe.shown.at(-1).uri.fsPath, file);
            restored.dispose();
            await waitFor('the answer forgotten', () => workspaceState.keys().every((key) => !key.startsWith('codeloupe.keptAnswer.')));
        } finally {
            fs.writeFileSync(file, original);  // the suite's other tests read the fixture as it was
            await page.close();
            await restoredPage?.close();
        }
    });

    const codeBlocks = (view) => view.page.$$eval('#answer pre', (shown) => shown.map((block) => block.textContent));
    const sinceNotes = (view) => view.page.$$eval('#answer .since', (shown) => shown.map((note) => note.textContent));
    /** The captions of the answer's code parts: the link over each one's code. */
    const captions = (view) => view.page.$$eval('#answer a.loc', (shown) => shown.map((anchor) => ({
        text: anchor.textContent, range: JSON.parse(anchor.getAttribute('data-range')) })));

    /** Asks `question`, runs its answer's page: the page, its tab as `reload` takes it (once the page set its state). */
    async function askedPage() {
        await askTyped(question);
        const panel = answerTabs().at(-1);
        const page = await runPanelPage(browser, panel);
        await waitFor('the page\'s state', () => page.state.value?.keep);
        return { page, tab: { panel, state: page.state.value } };
    }

    it('a link in a restored answer opens its file at its lines before the language server is up', async function () {
        const { page, tab } = await askedPage();
        let restoredPage;
        try {
            const [caption] = await captions(await page.current());
            assert.match(caption.text, /^app\/auth\.py:\d+-\d+$/);
            await page.close();
            // A window whose server is not up (here: never, codeloupe is off in it): the link did nothing.
            const [restored] = await reload([tab], { 'codeloupe.enable': false });
            assert.equal(await session.api.whenReady(), undefined, 'no server in the reloaded window');
            restoredPage = await runPanelPage(browser, restored);
            const shownBefore = probe.shown.length;
            await (await restoredPage.current()).click('#answer a.loc');
            const opened = await waitFor('the cited file opened', () => probe.shown[shownBefore], 5000);
            assert.equal(opened.uri.fsPath, path.join(workspace.root, 'app', 'auth.py'));
            assert.equal(opened.options.selection.start.line, caption.range.start.line, 'at the cited lines');
        } finally {
            await page.close();
            await restoredPage?.close();
        }
    });

    it('a restored answer shows cited lines the file still holds with no note, and says so of a cited file gone', async function () {
        const { page, tab } = await askedPage();
        const file = path.join(workspace.root, 'app', 'auth.py');
        const saved = fs.readFileSync(file, 'utf8');
        let restoredPage;
        let gonePage;
        try {
            const view = await page.current();
            const [code, shownCaptions] = [await codeBlocks(view), await captions(view)];
            assert.equal(code.length, 1, 'one cited span');
            await page.close();
            // Its lines are read from disk, with no server (and none left starting as the window reloads again).
            const [restored] = await reload([tab], { 'codeloupe.enable': false });
            restoredPage = await runPanelPage(browser, restored);
            const back = await restoredPage.current();
            assert.deepEqual(await codeBlocks(back), code, 'the lines the answer showed, read from disk again');
            assert.deepEqual(await sinceNotes(back), [], 'no note over lines the file still holds');

            fs.rmSync(file);
            const [gone] = await reload([{ panel: restored, state: restoredPage.state.value }], { 'codeloupe.enable': false });
            gonePage = await runPanelPage(browser, gone);
            const again = await gonePage.current();
            assert.deepEqual(await sinceNotes(again), ['(no longer on disk)']);
            assert.deepEqual(await codeBlocks(again), [], 'no code where the file is gone');
            assert.deepEqual(await captions(again), shownCaptions, 'its caption still names the span');
        } finally {
            fs.writeFileSync(file, saved);
            await page.close();
            await restoredPage?.close();
            await gonePage?.close();
        }
    });

    it('a restored answer whose cited file became a FIFO shows it as gone and reads nothing from it', async function () {
        // Node's readFile waits on a FIFO for ever (and reads a link to /dev/zero until it holds 2 GiB): the tab
        // never came back, and the extension host's thread reading it was held for good.
        const { page, tab } = await askedPage();
        const file = path.join(workspace.root, 'app', 'auth.py');
        const saved = fs.readFileSync(file, 'utf8');
        let restoredPage;
        try {
            await page.close();
            fs.rmSync(file);
            require('node:child_process').execFileSync('mkfifo', [file]);
            const [restored] = await reload([tab], { 'codeloupe.enable': false });
            restoredPage = await runPanelPage(browser, restored);
            const back = await restoredPage.current();
            assert.deepEqual(await sinceNotes(back), ['(no longer on disk)']);
            assert.deepEqual(await codeBlocks(back), [], 'nothing read from the FIFO');
        } finally {
            fs.rmSync(file, { force: true });
            fs.writeFileSync(file, saved);
            await page.close();
            await restoredPage?.close();
        }
    });

    for (const [what, swap] of [
        ['a link to a .env file of the workspace', (file) => {
            fs.writeFileSync(path.join(workspace.root, '.env'), 'API_KEY=sk-live-0123456789\n');
            fs.symlinkSync(path.join(workspace.root, '.env'), file);
            return () => fs.rmSync(path.join(workspace.root, '.env'), { force: true });
        }],
        ['a file in a folder that became a link out of the workspace', (file, outside) => {
            const folder = path.dirname(file);
            fs.renameSync(folder, `${folder}.saved`);
            fs.mkdirSync(outside);
            fs.writeFileSync(path.join(outside, path.basename(file)), 'API_KEY=sk-live-0123456789\n'.repeat(40));
            fs.symlinkSync(outside, folder);
            return () => {
                fs.rmSync(folder, { force: true });
                fs.renameSync(`${folder}.saved`, folder);
                fs.rmSync(path.dirname(outside), { recursive: true, force: true });
            };
        }],
    ]) {
        it(`a restored answer whose cited file became ${what} reads nothing from it, as the server would not`, async function () {
            // The tab reads a cited file itself, not through the server, so the server's rules (no link followed out
            // of the workspace, no secret file shown) did not hold there: the key was shown as the cited code.
            const { page, tab } = await askedPage();
            const file = path.join(workspace.root, 'app', 'auth.py');
            const saved = fs.readFileSync(file, 'utf8');
            const outside = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'outside-')), 'app');
            let restoredPage;
            let undo = () => {};
            try {
                await page.close();
                fs.rmSync(file);
                undo = swap(file, outside);
                const [restored] = await reload([tab], { 'codeloupe.enable': false });
                restoredPage = await runPanelPage(browser, restored);
                const back = await restoredPage.current();
                assert.ok(!(await back.page.$eval('body', (body) => body.innerText)).includes('sk-live'), 'nothing of the key shown');
                assert.deepEqual(await codeBlocks(back), []);
            } finally {
                undo();
                fs.rmSync(file, { force: true });
                fs.writeFileSync(file, saved);
                await page.close();
                await restoredPage?.close();
            }
        });
    }

    it('a live answer tab shown again after its cited file changed shows the lines the file holds now, marked, at the place read', async function () {
        const { page } = await askedPage();
        const panel = answerTabs().at(-1);
        const file = path.join(workspace.root, 'app', 'auth.py');
        const saved = fs.readFileSync(file, 'utf8');
        try {
            const view = await page.current();
            const code = await codeBlocks(view);
            const y = await scrollBy(page, 900);
            const pages = panel.pages.length;
            panel.hide();
            panel.show();
            // Two lines on top: the cited lines' numbers now hold other lines.
            fs.writeFileSync(file, `# moved down\n#\n${saved}`);
            panel.hide();
            panel.show();
            const back = await waitFor('the answer rendered again', async () => panel.pages.length > pages && (await sinceNotes(await page.current())).length > 0 && page.current());
            assert.deepEqual(await sinceNotes(back), ['(changed since this answer: the lines as the file holds them now)']);
            const [first, last] = (await captions(back))[0].text.split(':')[1].split('-').map(Number);
            const now = `# moved down\n#\n${saved}`.split('\n').slice(first - 1, last).join('\n');
            assert.deepEqual((await codeBlocks(back)).map((block) => block.replace(/\n$/, '')), [now], 'the lines at its numbers now');
            assert.notDeepEqual(await codeBlocks(back), code);
            assert.equal(panel.pages.length, pages + 1, 'rendered again once, though shown twice: a page that renders as it is shown is left as it is');
            await back.page.waitForFunction((place) => window.scrollY === place, { timeout: 5000 }, y).catch(() => undefined);
            assert.equal(await back.page.evaluate(() => window.scrollY), y, 'at the place read');
        } finally {
            fs.writeFileSync(file, saved);
            await page.close();
        }
    });

    it('an answer of a server that sends no answer parts is not kept, and its restored tab says why, with Ask again', async function () {
        const client = await session.api.whenReady();
        const original = client.sendRequest;
        // A server older than answer parts: its answer is its markdown, which quotes the code.
        client.sendRequest = function (type, ...rest) {
            const pending = original.call(this, type, ...rest);
            return (typeof type === 'string' ? type : type.method) === 'codeloupe/ask' ? pending.then(({ parts, ...older }) => older) : pending;
        };
        try {
            await askTyped(question);
        } finally {
            delete client.sendRequest;
        }
        const panel = answerTabs().at(-1);
        const page = await runPanelPage(browser, panel);
        try {
            assert.match(await (await page.current()).page.$eval('#answer', (answer) => answer.textContent), /Login compares hashes/);
            await waitFor('the page\'s state', () => page.state.value?.keep);
            const tabs = [{ panel, state: page.state.value }];
            await page.close();
            const [restored] = await reload(tabs, { 'codeloupe.enable': false });
            assert.doesNotMatch(restored.webview.html, /most recent questions/, 'not the count\'s reason');
            assert.match(restored.webview.html, /<p class="note">This answer was not kept for the reloaded window: the language server that gave it is older than answers in parts/);
            assert.match(restored.webview.html, /<button data-action="ask-again">Ask again<\/button>/);
        } finally {
            await page.close();
        }
    });

    it('an answer still streaming at the reload comes back as its draft, marked interrupted, and Ask again asks it in a new tab', async function () {
        const streaming = 'how does login check the password while streaming';
        const asking = askTyped(streaming);
        let page;
        let restoredPage;
        let answerPage;
        try {
            const panel = await waitFor('the draft', () => answerTabs().find((tab) => tab.posted.some((message) => message.delta?.includes('Login compares'))));
            page = await runPanelPage(browser, panel);
            await waitFor('the page\'s state', () => page.state.value?.keep);
            const tabs = [{ panel, state: page.state.value }];
            await page.close();
            const [restored] = await reload(tabs);
            await asking;
            restoredPage = await runPanelPage(browser, restored);
            const back = await restoredPage.current();
            const shown = await back.page.$eval('body', (body) => ({
                note: body.querySelector('.interrupted')?.textContent ?? '',
                draft: body.querySelector('#progress-draft')?.textContent ?? '',
                code: [...body.querySelectorAll('#progress-draft pre')].map((block) => block.textContent),
                captions: [...body.querySelectorAll('#progress-draft a.loc')].map((anchor) => ({ text: anchor.textContent, uri: anchor.getAttribute('data-uri') })),
                button: body.querySelector('button')?.textContent ?? '',
            }));
            assert.match(shown.note, /^Interrupted: the window was reloaded while this answer was being written/);
            assert.match(shown.draft, /^Login compares hashes \(app\/auth\.py:\d+-\d+\)\.\napp\/auth\.py:\d+-\d+/);
            // Its code part as the answer's: the cited lines read from disk again (they showed as a caption alone, the
            // progress naming the file's path but not its document), under a link to them; the code itself never kept.
            const file = path.join(workspace.root, 'app', 'auth.py');
            assert.equal(shown.captions.length, 1, JSON.stringify(shown.captions));
            assert.equal(vscode.Uri.parse(shown.captions[0].uri).fsPath, file);
            const [first, last] = shown.captions[0].text.split(':')[1].split('-').map(Number);
            const onDisk = fs.readFileSync(file, 'utf8').split('\n').slice(first - 1, last).join('\n');
            assert.deepEqual(shown.code.map((block) => block.replace(/\n$/, '')), [onDisk]);
            assert.ok(onDisk.includes('def login'), onDisk);
            assert.ok(!JSON.stringify(workspaceState.keys().map((key) => workspaceState.get(key))).includes('def login'), 'code kept with the draft');
            assert.equal(shown.button, 'Ask again');

            await chat.release(0);
            const before = probe.panels.length;
            const posted = await back.click('button');
            assert.deepEqual(posted, [{ type: 'askAgain' }]);
            await restored.receive(posted[0]);
            assert.ok(restored.disposed, 'the interrupted tab gives way to the new ask');
            const fresh = await waitFor('the new answer', () => probe.panels.slice(before).find((tab) => tab.viewType === 'codeloupe.answer'
                && tab.webview.html.includes('id="answer"')));
            answerPage = await runPanelPage(browser, fresh);
            assert.match(await (await answerPage.current()).page.$eval('#answer', (answer) => answer.textContent), /Login compares hashes[^]*That is all\./);
        } finally {
            await page?.close();
            await restoredPage?.close();
            await answerPage?.close();
            await asking;
        }
    });

    it('the bundle tab comes back with its code read from disk now, at the place read, and the status tab asks the server again', async function () {
        // Both were gone after a window reload: no serializer restored them (and the extension closed them as it stopped).
        for (const view of ['codeloupe.bundle', 'codeloupe.status']) {
            assert.ok(packageJson.activationEvents.includes(`onWebviewPanel:${view}`), `VS Code starts the extension to restore a ${view} tab`);
        }
        const { picker, items } = await searchTyped('hash_password');
        await picker.accept(items.find((item) => item.openBundle));
        const bundle = probe.panels.filter((panel) => panel.viewType === 'codeloupe.bundle' && !panel.disposed).at(-1);
        await vscode.commands.executeCommand('codeloupe.client.status');
        const status = probe.panels.filter((panel) => panel.viewType === 'codeloupe.status' && !panel.disposed).at(-1);
        const file = path.join(workspace.root, 'app', 'auth.py');
        const saved = fs.readFileSync(file, 'utf8');
        const page = await runPanelPage(browser, bundle);
        let restoredPage;
        try {
            const view = await page.current();
            const code = await view.page.$$eval('pre', (blocks) => blocks.map((block) => block.textContent));
            const hashing = code.findIndex((block) => block.includes('def hash_password('));
            assert.ok(hashing >= 0, code.join('\n---\n'));
            const y = await scrollBy(page, 300);
            await waitFor('the bundle kept', () => workspaceState.get('codeloupe.keptBundle'));
            assert.ok(!JSON.stringify(workspaceState.keys().map((key) => workspaceState.get(key))).includes('def hash_password('), 'code kept with the bundle');
            fs.writeFileSync(file, saved.replace('def hash_password(', 'def hash_password_salted('));

            const tabs = [{ panel: bundle, state: page.state.value }, { panel: status, state: undefined }];
            await page.close();
            const [restored, restoredStatus] = await reload(tabs);
            assert.equal(restored.title, bundle.title);
            restoredPage = await runPanelPage(browser, restored);
            const back = await restoredPage.current();
            const codeNow = await back.page.$$eval('pre', (blocks) => blocks.map((block) => block.textContent));
            assert.equal(codeNow.length, code.length);
            assert.equal(codeNow[hashing], code[hashing].replace('def hash_password(', 'def hash_password_salted('), 'the chunk\'s lines as the file holds them now');
            assert.deepEqual(await back.page.$$eval('.since', (notes) => notes.map((note) => note.textContent)),
                ['(changed since this answer: the lines as the file holds them now)']);
            await back.page.waitForFunction((place) => window.scrollY === place, { timeout: 5000 }, y).catch(() => undefined);
            assert.equal(await back.page.evaluate(() => window.scrollY), y, 'at the place read');
            assert.deepEqual(await back.violations(), []);
            await waitFor('the status asked of the server again', () => /Index status/.test(restoredStatus.webview.html));
            assert.ok(restoredStatus.webview.html.includes(workspace.root));

            restored.dispose();
            await waitFor('the bundle forgotten', () => workspaceState.get('codeloupe.keptBundle') === undefined);
        } finally {
            fs.writeFileSync(file, saved);
            await page.close();
            await restoredPage?.close();
        }
    });
    it('the graph tabs and the Last Bundle view come back: a file\'s page with its code read from disk now, the map asked of the server again', async function () {
        // All three were empty or gone after a window reload: no serializer for the graph tabs (and the extension closed
        // them as it stopped), and nothing kept of the Last Bundle view's bundle.
        for (const view of ['codeloupe.graph', 'codeloupe.graphDetail']) {
            assert.ok(packageJson.activationEvents.includes(`onWebviewPanel:${view}`), `VS Code starts the extension to restore a ${view} tab`);
        }
        const { picker, items } = await searchTyped('hash_password');
        await picker.accept(items.find((item) => item.match));
        const tokens = path.join(workspace.root, 'app', 'tokens.py');
        await vscode.commands.executeCommand('codeloupe.client.graphNode', vscode.Uri.file(tokens));
        await vscode.commands.executeCommand('codeloupe.client.graph');
        const [detail, map] = [panelOf('codeloupe.graphDetail'), panelOf('codeloupe.graph')];
        const code = blockText(detail.webview.html);
        assert.ok(code.includes('def issue_token('), code);
        await waitFor('the graph page kept', () => workspaceState.get('codeloupe.keptGraphDetail'));
        assert.ok(!JSON.stringify(workspaceState.keys().map((key) => workspaceState.get(key))).includes('def issue_token('), 'code kept with the graph page');
        const saved = fs.readFileSync(tokens, 'utf8');
        try {
            fs.writeFileSync(tokens, saved.replace('def issue_token(', 'def issue_token_signed('));
            const [restored, restoredMap] = await reload([{ panel: detail, state: { page: 'graph-page', scrollY: 0 } }, { panel: map, state: undefined }]);
            assert.equal(restored.title, detail.title);
            const html = restored.webview.html;
            assert.ok(blockText(html).includes('def issue_token_signed('), 'the file\'s lines as it holds them now');
            assert.match(html, /<div class="muted since since-changed">/);
            assert.match(html, /data-page="graph-page"/, 'the page read at the same place');
            assert.match(html, /href="#" data-uri="[^"]*\/app\/auth\.py"/, 'its neighbours, each a link');
            await waitFor('the map asked of the server again', () => /graph-data|<h1>Communities/.test(restoredMap.webview.html));

            const tree = probe.treeViews['codeloupe.lastBundle'].provider;
            const files = await waitFor('the Last Bundle view\'s bundle', () => {
                const [core] = tree.getChildren();
                return core && tree.getChildren(core).map((node) => tree.getTreeItem(node).label);
            });
            assert.ok(files.includes('app/auth.py'), files.join(', '));

            restored.dispose();
            await waitFor('the graph page forgotten', () => workspaceState.get('codeloupe.keptGraphDetail') === undefined);
        } finally {
            fs.writeFileSync(tokens, saved);
        }
    });

    it('a visible answer tab reads its cited lines again once the file is saved or changes on disk; a hidden one once shown', async function () {
        // Its code parts went stale with no word while it stayed on screen beside the file being edited: it read them
        // again only when hidden and shown again.
        const { page, tab } = await askedPage();
        await page.close();
        const panel = tab.panel;
        const file = path.join(workspace.root, 'app', 'auth.py');
        const saved = fs.readFileSync(file, 'utf8');
        const shownCode = () => blockText(panel.webview.html);
        const login = 'login';
        const renamed = (name) => saved.replace(`def ${login}(`, `def ${name}(`);
        try {
            assert.ok(shownCode().includes(`def ${login}(`), shownCode());
            const pages = panel.pages.length;
            // Another file saved: nothing to read again.
            const other = path.join(workspace.root, 'app', 'billing.py');
            await probe.saveDocument(other, fs.readFileSync(other, 'utf8'));
            await probe.saveDocument(file, renamed('login_saved'));
            await waitFor('the saved lines shown', () => shownCode().includes('def login_saved('), 5000);
            assert.match(panel.webview.html, /since-changed/);
            assert.equal(panel.pages.length, pages + 1, 'read once');
            assert.match(panel.webview.html, new RegExp(`data-page="${tab.state.page}"`), 'at the place read');

            await probe.changeOnDisk(file, renamed('login_checked_out'));
            await waitFor('the lines changed on disk shown', () => shownCode().includes('def login_checked_out('), 5000);

            // Hidden, it reads the file as it is once shown again.
            panel.hide();
            await probe.changeOnDisk(file, saved);
            panel.show();
            await waitFor('the lines read again once shown', () => shownCode().includes(`def ${login}(`) && !/since-changed/.test(panel.webview.html), 5000);
        } finally {
            fs.writeFileSync(file, saved);
        }
    });

    it('the status tab says it is the status as of a time, and its Refresh asks the server again', async function () {
        // A reloaded window's status tab showed the status of when it came back, as if it were now.
        await vscode.commands.executeCommand('codeloupe.client.status');
        const status = probe.panels.filter((panel) => panel.viewType === 'codeloupe.status' && !panel.disposed).at(-1);
        const [restored] = await reload([{ panel: status, state: undefined }]);
        await waitFor('the status asked of the server', () => /Index status/.test(restored.webview.html));
        assert.match(restored.webview.html, /As of \d\d:\d\d:\d\d[^<]*not kept current\. <button data-action="refresh">Refresh<\/button>/);
        const client = await session.api.whenReady();
        const asked = recordRequests(client, 'codeloupe/status');
        const page = await runPanelPage(browser, restored);
        try {
            const view = await page.current();
            const posted = await view.click('button[data-action="refresh"]');
            assert.deepEqual(posted, [{ type: 'refresh' }]);
            assert.deepEqual(await view.violations(), []);
            const pages = restored.pages.length;
            await restored.receive(posted[0]);
            await waitFor('the status asked again', () => asked.calls.length > 0 && restored.pages.length > pages);
            assert.match(restored.webview.html, /Index status/);
        } finally {
            asked.restore();
            await page.close();
        }
    });
});

describe('the answers kept for a reloaded window', function () {
    it('keeps the most recent asks\' answers, each within its size; a tab whose answer is gone says so, one that failed offers Ask again', async function () {
        const workspaceState = probe.memento();
        const kept = new extension.KeptAnswers(workspaceState);
        const ids = Array.from({ length: extension.MAX_KEPT_ANSWERS + 1 }, (_, n) => `ask-${n}`);
        for (const [n, id] of ids.entries()) {
            await kept.keep(id, { query: `question ${n}`, error: `failure ${n}` });
        }
        assert.equal(kept.get(ids[0]), undefined, 'the oldest ask\'s answer is let go');
        assert.deepEqual(kept.get(ids.at(-1)), { query: `question ${extension.MAX_KEPT_ANSWERS}`, error: `failure ${extension.MAX_KEPT_ANSWERS}` });
        assert.equal(workspaceState.keys().filter((key) => key.startsWith('codeloupe.keptAnswer.')).length, extension.MAX_KEPT_ANSWERS);
        await kept.keep(ids[1], { query: 'question 1', error: 'x'.repeat(extension.MAX_KEPT_CHARS) });
        assert.equal(kept.get(ids[1]), undefined, 'an answer too large is not kept (nor what it replaced)');

        // A reloaded window, in this workspace: the tabs of those answers.
        const session = activate({ folders: [], settings: { 'codeloupe.enable': false } }, workspaceState);
        try {
            const gone = await probe.restorePanel('codeloupe.answer', 'Codeloupe: question 0', { keep: ids[0], page: 'p0', scrollY: 0 });
            assert.match(gone.webview.html, /This answer was not kept for the reloaded window: the answers of the 20 most recent questions are/);
            const failed = await probe.restorePanel('codeloupe.answer', 'Codeloupe: question 20', { keep: ids.at(-1), page: 'p20', scrollY: 0 });
            assert.match(failed.webview.html, /<h1>question 20<\/h1><p class="error">failure 20<\/p>\n<p><button data-action="ask-again">Ask again<\/button><\/p>/);
            assert.match(failed.webview.html, /<body data-page="p20" data-keep="ask-20">/, 'the page rendered again as the same page, of the same answer');
            // A draft from a server whose progress names no span's document (an older one): its code part is its caption.
            await kept.keep('older', { query: 'older draft', draft: { parts: ['See ', { caption: 'app/auth.py:3-4' }], steps: [] } });
            const older = await probe.restorePanel('codeloupe.answer', 'Codeloupe: older draft', { keep: 'older', page: 'p', scrollY: 0 });
            assert.match(older.webview.html, /<div id="progress-draft">See <div class="chunk"><div class="loc">app\/auth\.py:3-4<\/div><div class="muted">\(code shown once answered\)<\/div><\/div><\/div>/);
        } finally {
            await session.close();
        }
    });
});

describe('a workspace of several folders', function () {
    let workspace;
    let second;

    before(function () {
        workspace = makeWorkspace();
        second = path.join(workspace.base, 'billing');
        fs.mkdirSync(path.join(second, 'app'), { recursive: true });
        fs.writeFileSync(path.join(second, 'app', 'auth.py'), 'def refund_login_session(token):\n    """Refund the session of a login token."""\n    return token\n');
        process.env.CODELOUPE_CACHE_DIR = workspace.cacheDir;
    });

    after(function () {
        delete process.env.CODELOUPE_CACHE_DIR;
        workspace?.remove();
    });

    it('ranks both folders as one and labels each file with its folder, so two app/auth.py stay apart', async function () {
        const session = activate({
            folders: [workspace.root, second],
            settings: { 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none' },
        });
        try {
            const client = await session.api.whenReady();
            assert.ok(client, `the client started: ${session.api.unavailableReason}`);
            await waitFor('both folders indexed', async () => {
                const status = await client.sendRequest('codeloupe/status', {});
                return status.folders.length === 2 && status.folders.every((folder) => folder.state === 'ready');
            });
            const searches = recordRequests(client, 'codeloupe/search');
            try {
                const { picker, items } = await searchTyped('login session');
                const result = searches.calls.at(-1).result;
                const files = [...result.core, ...result.related];
                const auths = files.filter((file) => file.path === 'app/auth.py');
                assert.deepEqual(auths.map((file) => file.repository).sort(), ['billing', 'workspace'], 'app/auth.py of each folder');
                const labels = items.filter((item) => item.match).map((item) => item.label.split(' ').at(-1));
                assert.deepEqual(labels, files.map((file) => `${file.repository}:${file.path}`));
                const billing = items.find((item) => item.label.endsWith(' billing:app/auth.py'));
                const shownBefore = probe.shown.length;
                await picker.accept(billing);
                const opened = await waitFor('the accepted file', () => probe.shown.length > shownBefore && probe.shown.at(-1));
                assert.equal(opened.uri.fsPath, path.join(second, 'app', 'auth.py'));
            } finally {
                searches.restore();
            }
        } finally {
            await session.close();
        }
    });
});

describe('a workspace whose settings file holds a link', function () {
    let workspace;

    before(function () {
        workspace = makeWorkspace();
        process.env.CODELOUPE_CACHE_DIR = workspace.cacheDir;
    });

    after(function () {
        delete process.env.CODELOUPE_CACHE_DIR;
        workspace?.remove();
    });

    it('the server\'s warning quoting it shows the link as text: a notification would run the command it names', async function () {
        // The server warns about a settings file's unknown key, quoting it; VS Code's notifications render
        // `[label](command:id?args)` in a message as a link that runs the command (here: typing into a terminal).
        const link = '[Fix the settings](command:workbench.action.terminal.sendSequence?%7B%22text%22%3A%22echo%20pwned%5Cn%22%7D)';
        fs.writeFileSync(path.join(workspace.root, '.codeloupe.toml'), `"${link}" = 1\n`);
        const session = activate({
            folders: [workspace.root],
            settings: { 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none' },
        });
        try {
            assert.ok(await session.api.whenReady(), session.api.unavailableReason);
            await waitFor('the warning about the unknown key', () => probe.messages.some((message) => message.text.includes('unknown setting')));
            await waitForReady(await session.api.whenReady());  // the folder is open: every warning of it is in
            const warnings = probe.messages.filter((message) => message.text.includes('unknown setting'));
            assert.equal(warnings.length, 1, 'shown once, by the extension\'s handler in place of the client\'s own');
            assert.equal(warnings[0].level, 'warning');
            assert.ok(!warnings[0].text.includes('](') && warnings[0].text.includes(link.replace('](', '] (')), warnings[0].text);
        } finally {
            await session.close();
        }
    });
});

describe('the extension when it cannot or must not start', function () {
    let workspace;
    let emptyDir;

    before(function () {
        workspace = makeWorkspace();
        emptyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'codeloupe-empty-path-'));
        process.env.CODELOUPE_CACHE_DIR = workspace.cacheDir;
    });

    after(function () {
        delete process.env.CODELOUPE_CACHE_DIR;
        fs.rmSync(emptyDir, { recursive: true, force: true });
        workspace?.remove();
    });

    it('a server command that does not exist gives an error naming the setting and the fix', async function () {
        const session = activate({ folders: [workspace.root], settings: { 'codeloupe.server.command': path.join(emptyDir, 'codeloupe-lsp') } });
        try {
            assert.equal(await session.api.whenReady(), undefined);
            const error = probe.messages.find((message) => message.level === 'error');
            assert.ok(error, 'an error notification');
            assert.match(error.text, /codeloupe\.server\.command/);
            assert.match(error.text, /Fix:/);
            assert.deepEqual(error.items, ['Open Settings']);
            assert.equal(probe.statusItems[0].text, '$(error) codeloupe');
            await vscode.commands.executeCommand('codeloupe.client.search');
            assert.equal(probe.quickPicks.length, 0, 'no picker without a server');
            assert.ok(probe.messages.some((message) => message.level === 'warning' && message.text === error.text));
        } finally {
            await session.close();
        }
    });

    it('no server on PATH and no Python interpreter: says how to install it', async function () {
        await withPath(emptyDir, async () => {
            const session = activate({ folders: [workspace.root] });
            try {
                assert.equal(await session.api.whenReady(), undefined);
                const error = probe.messages.find((message) => message.level === 'error');
                assert.match(error.text, /codeloupe-lsp is not on PATH/);
                assert.match(error.text, /pip install -c CHECKOUT\/constraints\.txt -e CHECKOUT \(CHECKOUT: a checkout of the codeloupe repository\)/);
            } finally {
                await session.close();
            }
        });
    });

    it('falls back to python -m codeloupe_lsp with the Python extension\'s interpreter', async function () {
        const python = serverPython();
        const pythonApi = { environments: { getActiveEnvironmentPath: () => ({ id: 'fixture', path: python }) } };
        const pythonExtension = { id: 'ms-python.python', isActive: false, exports: undefined, activate: async () => pythonApi };
        await withPath(emptyDir, async () => {
            const session = activate({ folders: [workspace.root], settings: { 'codeloupe.embed.provider': 'none' }, extensions: { 'ms-python.python': pythonExtension } });
            try {
                const client = await session.api.whenReady();
                assert.ok(client?.isRunning(), `started: ${session.api.unavailableReason}`);
                assert.ok(probe.log.some((line) => line.includes(`starting ${python} -P -m codeloupe_lsp`)), probe.log.join('\n'));
            } finally {
                await session.close();
            }
        });
    });

    it('the python -m fallback runs no codeloupe_lsp the workspace holds', async function () {
        // The server works in the workspace folder, and `-m` puts the working directory first on the path.
        const hostile = makeWorkspace();
        const ran = path.join(hostile.base, 'ran');
        fs.mkdirSync(path.join(hostile.root, 'codeloupe_lsp'));
        for (const name of ['__init__.py', '__main__.py']) {
            fs.writeFileSync(path.join(hostile.root, 'codeloupe_lsp', name),
                `open(${JSON.stringify(ran)}, "w").write("the repository ran code")\nraise SystemExit(3)\n`);
        }
        const python = serverPython();
        const pythonApi = { environments: { getActiveEnvironmentPath: () => ({ id: 'fixture', path: python }) } };
        const pythonExtension = { id: 'ms-python.python', isActive: false, exports: undefined, activate: async () => pythonApi };
        try {
            await withPath(emptyDir, async () => {
                const session = activate({ folders: [hostile.root], settings: { 'codeloupe.embed.provider': 'none' }, extensions: { 'ms-python.python': pythonExtension } });
                try {
                    const client = await session.api.whenReady();
                    assert.ok(client?.isRunning(), `started: ${session.api.unavailableReason}`);
                    assert.ok(!fs.existsSync(ran), 'the workspace\'s codeloupe_lsp ran');
                } finally {
                    await session.close();
                }
            });
        } finally {
            hostile.remove();
        }
    });

    it('falls back to python.defaultInterpreterPath without the Python extension', async function () {
        await withPath(emptyDir, async () => {
            const session = activate({ folders: [workspace.root], settings: { 'codeloupe.embed.provider': 'none', 'python.defaultInterpreterPath': serverPython() } });
            try {
                const client = await session.api.whenReady();
                assert.ok(client?.isRunning(), `started: ${session.api.unavailableReason}`);
            } finally {
                await session.close();
            }
        });
    });

    it('codeloupe.enable off starts nothing and disables the commands; turning it on starts the server', async function () {
        const session = activate({ folders: [workspace.root], settings: { 'codeloupe.enable': false, 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none' } });
        try {
            assert.equal(await session.api.whenReady(), undefined);
            assert.match(session.api.unavailableReason, /codeloupe\.enable/);
            assert.equal(probe.statusItems[0].text, '$(circle-slash) codeloupe');
            assert.ok(!probe.log.some((line) => line.includes('starting ')), 'no server process was started');
            await probe.changeSettings({ 'codeloupe.enable': true });
            const client = await session.api.whenReady();
            assert.ok(client?.isRunning(), `started once enabled: ${session.api.unavailableReason}`);
        } finally {
            await session.close();
        }
    });

    it('restart: the status item says the server is starting until the new one is ready, never the old one\'s count', async function () {
        // In the real workbench "Codeloupe: Restart the Language Server" left "codeloupe N files" up the whole time the
        // old server stopped and the new one started: nothing said a restart was under way, and a server that never
        // came back would have looked ready.
        const session = activate({ folders: [workspace.root], settings: { 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none' } });
        try {
            const before = await session.api.whenReady();
            assert.ok(before?.isRunning(), `started: ${session.api.unavailableReason}`);
            const item = probe.statusItems[0];
            await waitFor('the status item to show a ready index', () => /^\$\(search\) codeloupe \d+ files$/.test(item.text));
            const ready = item.text;
            const shown = [];
            let text = item.text;
            Object.defineProperty(item, 'text', { get: () => text, set: (value) => { text = value; shown.push(value); }, configurable: true });
            await vscode.commands.executeCommand('codeloupe.client.restart');
            const after = await session.api.whenReady();
            assert.ok(after?.isRunning() && after !== before, 'a new client runs');
            assert.ok(!before.isRunning(), 'the old one stopped');
            await waitFor(`the status item to show "${ready}" again (it went ${JSON.stringify(shown)})`, () => shown.includes(ready));
            const first = shown.findIndex((value) => value === ready);
            assert.ok(first > 0 && shown.slice(0, first).some((value) => /^\$\(loading~spin\) codeloupe/.test(value)),
                `the item says the server is starting before it is ready again: ${JSON.stringify(shown)}`);
        } finally {
            await session.close();
        }
    });

    /** The server's own commands (vscode-languageclient registers its executeCommand ids) registered now. */
    const serverCommandsRegistered = () => probe.commandIds().filter((id) => id === 'codeloupe.reindex');

    it('deactivated while its server is still starting, the extension stops that server: activated again, it starts, its commands registered once', async function () {
        // A client cannot be stopped while it starts: the one starting as the extension stopped was left running, went
        // on to register the server's commands, and the next activation's failed with "command 'codeloupe.reindex'
        // already exists".
        const options = { folders: [workspace.root], settings: { 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none' } };
        const first = activate(options);
        const starting = first.api.whenReady();
        await first.close();
        const left = await starting;
        try {
            assert.ok(left !== undefined, `it was starting: ${first.api.unavailableReason}`);
            assert.ok(!left.isRunning(), 'the client that was starting is stopped with the extension');
            assert.deepEqual(serverCommandsRegistered(), [], 'none of its commands left registered');
        } finally {
            if (left?.isRunning()) {
                await left.stop();
            }
        }
        const second = activate(options);
        try {
            const client = await second.api.whenReady();
            assert.ok(client?.isRunning(), `started again: ${second.api.unavailableReason}\n${probe.log.join('\n')}`);
            assert.deepEqual(serverCommandsRegistered(), ['codeloupe.reindex']);
        } finally {
            await second.close();
        }
    });

    it('codeloupe.enable turned off and on at once, or restart run twice, leaves one server running and stops it with the extension', async function () {
        // Each restart stopped the server it found and started one: the second found none yet (the first's still stopping
        // or starting), so two were started, and the second to register the server's commands failed.
        const session = activate({ folders: [workspace.root], settings: { 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none' } });
        const clients = [];
        try {
            clients.push(await session.api.whenReady());
            await Promise.all([probe.changeSettings({ 'codeloupe.enable': false }), probe.changeSettings({ 'codeloupe.enable': true })]);
            clients.push(await session.api.whenReady());
            await Promise.all([vscode.commands.executeCommand('codeloupe.client.restart'), vscode.commands.executeCommand('codeloupe.client.restart')]);
            clients.push(await session.api.whenReady());
            assert.ok(clients.at(-1)?.isRunning(), `a server runs: ${session.api.unavailableReason}\n${probe.log.join('\n')}`);
            assert.deepEqual(probe.messages.filter((message) => message.level === 'error'), [], 'nothing failed');
            assert.deepEqual(serverCommandsRegistered(), ['codeloupe.reindex']);
        } finally {
            await session.close();
        }
        assert.deepEqual(serverCommandsRegistered(), [], 'every server stopped with the extension');
        assert.deepEqual(clients.filter((client) => client?.isRunning()), []);
    });

    it('an untrusted workspace starts nothing and says why in the status item, then starts once trusted', async function () {
        const session = activate({
            trusted: false,
            folders: [workspace.root],
            settings: { 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none' },
        });
        try {
            assert.equal(await session.api.whenReady(), undefined);
            assert.match(session.api.unavailableReason, /Restricted Mode/);
            // A notification at start-up cannot be closed by the extension: it stayed in the notification center, saying
            // codeloupe was off, after the trust grant had started it. The status item says so instead.
            assert.deepEqual(probe.messages, [], 'no notification at start-up');
            assert.deepEqual(probe.progress, [], 'no progress notification at start-up');
            const item = probe.statusItems[0];
            assert.equal(item.text, '$(shield) codeloupe');
            assert.equal(item.backgroundColor?.id, 'statusBarItem.warningBackground');
            assert.match(item.tooltip, /Restricted Mode.*Click to manage workspace trust\.$/s);
            assert.equal(item.command, 'workbench.trust.manage', 'a click on the shield opens the trust editor');
            assert.ok(!probe.log.some((line) => line.includes('starting ')), 'no server process was started');

            // A command the user runs is answered, with the trust editor a click away, in a modal dialog: a notification
            // left unanswered stayed in the notification center, saying codeloupe was off, after the trust grant.
            probe.answerMessage('Manage Workspace Trust');
            await vscode.commands.executeCommand('codeloupe.client.search');
            await vscode.commands.executeCommand('codeloupe.client.ask');
            await vscode.commands.executeCommand('codeloupe.client.restart');
            const said = probe.messages.map((message) => [message.level, `${message.text}. ${message.detail}`, message.items, message.modal]);
            assert.deepEqual(said, [
                ['warning', session.api.unavailableReason, ['Manage Workspace Trust'], true],
                ['warning', session.api.unavailableReason, ['Manage Workspace Trust'], true],
                ['warning', session.api.unavailableReason, ['Manage Workspace Trust'], true],
            ]);
            await waitFor('the button to open the trust editor', () => probe.executed.some((entry) => entry.id === 'workbench.trust.manage'));
            await probe.changeSettings({ 'codeloupe.server.command': serverCommand() });
            assert.ok(!probe.log.some((line) => line.includes('starting ')), 'a settings change does not start it either');

            await probe.grantTrust();
            const client = await session.api.whenReady();
            assert.ok(client?.isRunning(), `started once trusted: ${session.api.unavailableReason}\n${probe.log.join('\n')}`);
            await waitFor(`the status item to count the files (${item.text})`, () => /^\$\(search\) codeloupe \d+ files$/.test(item.text));
            assert.equal(item.backgroundColor, undefined, 'no warning background once trusted');
            assert.equal(item.command, 'codeloupe.client.status', 'a click shows the index status again');
            assert.equal(probe.messages.length, 3, 'nothing more was said');
        } finally {
            await session.close();
        }
    });
});

describe('the status item', function () {
    const folder = (fields) => ({ uri: 'file:///w', root: '/w', state: 'ready', trusted: true, message: '', files: 0, chunks: 0,
        vectors: { done: 0, total: 0 }, languages: {}, provider: 'none', model: '', indexPath: '', skipped: 0, ...fields });

    it('says a first index is under way before it has stored a file, not "0 files"', function () {
        // A first index scans the whole tree before its first file is stored: the item read "codeloupe 0 files" with a
        // spinner, as if the workspace were empty.
        const starting = extension.describeStatus({ folders: [folder({ state: 'indexing' })] }, 1);
        assert.equal(starting.text, '$(sync~spin) codeloupe indexing');
        const counting = extension.describeStatus({ folders: [folder({ state: 'indexing', files: 120 })] }, 1);
        assert.equal(counting.text, '$(sync~spin) codeloupe 120 files');
        const ready = extension.describeStatus({ folders: [folder({ files: 0 })] }, 1);
        assert.equal(ready.text, '$(search) codeloupe 0 files', 'an indexed folder with no file says so');
    });
});

describe('the status item with a folder\'s message', function () {
    it('shows theme icon syntax and bidi characters in a message as written', function () {
        // The item's text renders `$(name)` as an icon, and a folder's message may quote an error (an embedding
        // endpoint's): shown raw, `$(alert)` became an icon and U+202E reordered the tooltip.
        const folder = { uri: 'file:///w', root: '/w\u202e', state: 'indexing', trusted: true, message: 'embedding failed: $(alert) 502',
            files: 3, chunks: 4, vectors: { done: 0, total: 4 }, languages: {}, provider: 'openai', model: '', indexPath: '', skipped: 0 };
        const status = extension.describeStatus({ folders: [folder] }, 1);
        assert.equal(status.text, '$(sync~spin) codeloupe embedding failed: \\$(alert) 502 · vectors 0%');
        assert.ok(!status.tooltip.includes('\u202e') && status.tooltip.startsWith('/w\\u202e: indexing'), status.tooltip);
    });
});

describe('packaging', function () {
    it('vsce package produces a .vsix with the bundle and the manifest', function () {
        this.timeout(120000);
        const { execFileSync } = require('node:child_process');
        const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'codeloupe-vsix-'));
        try {
            const vsix = path.join(outDir, 'codeloupe.vsix');
            execFileSync(process.execPath, [path.resolve(__dirname, '..', 'node_modules', '@vscode', 'vsce', 'vsce'), 'package', '--no-dependencies', '--skip-license',
                '--allow-missing-repository', '--out', vsix], { cwd: path.resolve(__dirname, '..'), stdio: 'pipe' });
            const bytes = fs.readFileSync(vsix);
            assert.equal(bytes.subarray(0, 2).toString(), 'PK', 'a zip file');
            for (const name of ['extension/package.json', 'extension/out/extension.js', 'extension/readme.md', 'extension.vsixmanifest',
                'extension/media/icon.png', 'extension/media/codeloupe.svg']) {
                assert.ok(bytes.includes(Buffer.from(name)), `${name} in the .vsix`);
            }
            assert.ok(!bytes.includes(Buffer.from('extension/src/')), 'no sources in the .vsix');
            assert.ok(!bytes.includes(Buffer.from('extension/node_modules/')), 'dependencies are bundled, not shipped');
        } finally {
            fs.rmSync(outDir, { recursive: true, force: true });
        }
    });
});

describe('settings a repository cannot choose', function () {
    const USER_ONLY = ['embed.provider', 'embed.baseUrl', 'embed.model', 'embed.apiKey', 'chat.baseUrl', 'chat.model', 'store.url',
        'store.repositories'];

    /** A WorkspaceConfiguration whose every key has a user, a workspace and a folder value. */
    function scopedConfig() {
        return {
            inspect: (key) => ({ key, globalValue: `user:${key}`, workspaceValue: `workspace:${key}`, workspaceFolderValue: `folder:${key}` }),
        };
    }

    it('endpoints, models and keys come from the user scope only; other settings from the nearest scope', function () {
        const options = extension.engineOptions({}, scopedConfig());
        assert.equal(options.embedBaseUrl, 'user:embed.baseUrl', 'a .vscode/settings.json endpoint never pairs with the user key');
        assert.equal(options.embedApiKey, 'user:embed.apiKey');
        assert.equal(options.chatBaseUrl, 'user:chat.baseUrl');
        assert.equal(options.embedProvider, 'user:embed.provider');
        assert.equal(options.storeUrl, 'user:store.url', 'a repository never chooses the shared index');
        assert.equal(options.repositories, 'user:store.repositories', 'nor whose code the editor opens');
        assert.equal(options.chunkBudget, 'folder:chunkBudget', 'harmless settings keep their folder value');
        const workspaceOnly = { inspect: (key) => ({ key, workspaceValue: `workspace:${key}` }) };
        const fromRepo = extension.engineOptions({}, workspaceOnly);
        assert.equal(fromRepo.embedBaseUrl, undefined);
        assert.equal(fromRepo.chatModel, undefined);
        assert.equal(fromRepo.storeUrl, undefined);
        assert.equal(fromRepo.repositories, undefined);
        assert.equal(fromRepo.ignore, 'workspace:ignore');
    });

    it('the manifest keeps those settings (and the server command) out of workspace settings, and applies them in a remote window', function () {
        const properties = packageJson.contributes.configuration.properties ?? packageJson.contributes.configuration[0].properties;
        // `application`: only the user's settings set it, in a local window and a remote one alike. `machine` kept it out
        // of workspace settings too, but in a remote window (code-server, Remote - SSH) VS Code ignores a machine
        // setting's User value: the endpoint set there was never sent, and Ask said no chat model was configured.
        for (const key of USER_ONLY) {
            assert.equal(properties[`codeloupe.${key}`].scope, 'application', `codeloupe.${key}`);
        }
        // The server command names a program on the machine the server runs on: the Remote settings set it there.
        assert.equal(properties['codeloupe.server.command'].scope, 'machine');
    });
});
