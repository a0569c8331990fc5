'use strict';
// Drives the real codeloupe-lsp over stdio with vscode-languageserver-protocol, as the extension does, and checks
// the parts of docs/protocol.md the extension relies on.
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const { pathToFileURL } = require('node:url');
const path = require('node:path');
const {
    createProtocolConnection,
    StreamMessageReader,
    StreamMessageWriter,
    InitializeRequest,
    InitializedNotification,
    ShutdownRequest,
    ExitNotification,
    WorkspaceSymbolRequest,
    CodeLensRequest,
    CodeLensResolveRequest,
    HoverRequest,
    ShowMessageNotification,
    MessageType,
} = require('vscode-languageserver-protocol/node');
const { lineOf, makeWorkspace, serverCommand, waitFor } = require('./helpers');

const uriOf = (root, relative) => pathToFileURL(path.join(root, relative)).href;

describe('codeloupe-lsp over stdio (protocol)', function () {
    let workspace;
    let server;
    let connection;
    const shownMessages = [];

    before(async function () {
        workspace = makeWorkspace();
        server = spawn(serverCommand(), [], {
            cwd: workspace.root,
            env: { ...process.env, CODELOUPE_CACHE_DIR: workspace.cacheDir },
            stdio: ['pipe', 'pipe', 'pipe'],
        });
        let stderr = '';
        server.stderr.on('data', (chunk) => {
            stderr += chunk;
        });
        server.on('exit', (code) => {
            if (code !== 0 && code !== null) {
                console.error(`codeloupe-lsp exited with ${code}:\n${stderr}`);
            }
        });
        connection = createProtocolConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));
        connection.onRequest('window/workDoneProgress/create', () => null);
        connection.onRequest('client/registerCapability', () => null);
        connection.onRequest('workspace/configuration', (params) => params.items.map(() => null));
        connection.onNotification(ShowMessageNotification.type, (params) => shownMessages.push(params));
        connection.onNotification('$/progress', () => undefined);
        connection.listen();
        const rootUri = pathToFileURL(workspace.root).href;
        const result = await connection.sendRequest(InitializeRequest.type, {
            processId: process.pid,
            rootUri,
            workspaceFolders: [{ uri: rootUri, name: 'workspace' }],
            capabilities: {
                window: { workDoneProgress: true, showDocument: { support: true } },
                workspace: { configuration: true, workspaceFolders: true },
                textDocument: { hover: { contentFormat: ['markdown', 'plaintext'] } },
            },
            // An unknown key must come back as a warning, not an error.
            initializationOptions: { embedProvider: 'none', notARealSetting: true },
        });
        this.capabilities = result.capabilities;
        await connection.sendNotification(InitializedNotification.type, {});
        await waitFor('the index to be ready', async () => {
            const status = await connection.sendRequest('codeloupe/status', {});
            return status.folders.length === 1 && status.folders[0].state === 'ready';
        });
    });

    after(async function () {
        if (connection !== undefined) {
            await connection.sendRequest(ShutdownRequest.type).catch(() => undefined);
            await connection.sendNotification(ExitNotification.type).catch(() => undefined);
            connection.dispose();
        }
        if (server !== undefined && server.exitCode === null) {
            await new Promise((resolve) => {
                const timer = setTimeout(() => {
                    server.kill();
                    resolve();
                }, 5000);
                server.once('exit', () => {
                    clearTimeout(timer);
                    resolve();
                });
            });
        }
        workspace?.remove();
    });

    it('advertises what the client uses and warns about unknown options', function () {
        assert.ok(this.capabilities.hoverProvider, 'hoverProvider');
        assert.ok(this.capabilities.codeLensProvider, 'codeLensProvider');
        assert.ok(this.capabilities.workspaceSymbolProvider, 'workspaceSymbolProvider');
        assert.ok(this.capabilities.executeCommandProvider?.commands.includes('codeloupe.reindex'), 'codeloupe.reindex command');
        const warning = shownMessages.find((message) => message.type === MessageType.Warning && message.message.includes('notARealSetting'));
        assert.ok(warning, `a warning naming the unknown option; got ${JSON.stringify(shownMessages)}`);
    });

    it('reports the index status of the folder', async function () {
        const status = await connection.sendRequest('codeloupe/status', {});
        const [folder] = status.folders;
        assert.equal(folder.uri.replace(/\/$/, ''), pathToFileURL(workspace.root).href);
        assert.ok(folder.files >= 6, `files: ${folder.files}`);
        assert.equal(folder.provider, 'none');
        assert.ok(folder.chunks > 0, `chunks: ${folder.chunks}`);
    });

    it('codeloupe/search returns ranked files with LSP ranges on the right lines', async function () {
        const result = await connection.sendRequest('codeloupe/search', { query: 'check the user password on login' });
        assert.equal(result.query, 'check the user password on login');
        assert.ok(result.core.length > 0, 'at least one CORE file');
        const files = [...result.core, ...result.related];
        const auth = files.find((file) => file.path === 'app/auth.py');
        assert.ok(auth, `app/auth.py among ${files.map((file) => file.path)}`);
        assert.equal(auth.uri, uriOf(workspace.root, 'app/auth.py'));
        const loginLine = lineOf(workspace.root, 'app/auth.py', 'def login(');
        const chunk = auth.chunks.find((candidate) => candidate.symbols.includes('login') || candidate.name === 'login');
        assert.ok(chunk, `a chunk for login in ${JSON.stringify(auth.chunks.map((c) => c.name))}`);
        assert.equal(chunk.location.uri, auth.uri);
        assert.ok(chunk.location.range.start.line <= loginLine && loginLine < chunk.location.range.end.line,
            `login (line ${loginLine}) inside ${JSON.stringify(chunk.location.range)}`);
        assert.equal(chunk.location.range.start.character, 0);
        assert.equal(chunk.location.range.end.character, 0);
        if (result.core.includes(auth)) {
            assert.ok(chunk.text.includes('def login('), 'CORE chunks carry their text verbatim');
        }
        for (const [index, file] of result.core.entries()) {
            assert.equal(file.rank, index + 1, 'core in rank order');
        }
    });

    it('workspace/symbol finds definitions with real ranges', async function () {
        const symbols = await connection.sendRequest(WorkspaceSymbolRequest.type, { query: 'issue_token' });
        const symbol = symbols.find((candidate) => candidate.name.endsWith('issue_token') && candidate.location.uri.endsWith('app/tokens.py'));
        assert.ok(symbol, `issue_token in ${JSON.stringify(symbols.map((s) => [s.name, s.location.uri]))}`);
        const line = lineOf(workspace.root, 'app/tokens.py', 'def issue_token(');
        assert.ok('range' in symbol.location, 'a real range, not a lazily resolved location');
        assert.ok(symbol.location.range.start.line <= line && line <= symbol.location.range.end.line);
    });

    it('codeLens lenses resolve to codeloupe.showLocations with [uri, position, Location[]]', async function () {
        const uri = uriOf(workspace.root, 'app/tokens.py');
        const lenses = await connection.sendRequest(CodeLensRequest.type, { textDocument: { uri } });
        assert.ok(lenses.length > 0, 'lenses on app/tokens.py');
        const resolved = await Promise.all(lenses.map((lens) => (lens.command ? lens : connection.sendRequest(CodeLensResolveRequest.type, lens))));
        const withLocations = resolved.filter((lens) => lens.command?.command === 'codeloupe.showLocations');
        assert.ok(withLocations.length > 0, `a showLocations lens in ${JSON.stringify(resolved.map((l) => l.command))}`);
        const importers = withLocations.find((lens) => lens.command.arguments[2].some((location) => location.uri.endsWith('app/auth.py')));
        assert.ok(importers, 'a lens on tokens.py lists app/auth.py (it imports issue_token)');
        const [lensUri, position, locations] = importers.command.arguments;
        assert.equal(lensUri, uri);
        assert.equal(typeof position.line, 'number');
        assert.equal(typeof position.character, 'number');
        for (const location of locations) {
            assert.equal(typeof location.uri, 'string');
            assert.equal(typeof location.range.start.line, 'number');
        }
    });

    it('hover on a definition is markdown listing its graph neighbours', async function () {
        const uri = uriOf(workspace.root, 'app/tokens.py');
        const line = lineOf(workspace.root, 'app/tokens.py', 'def issue_token(');
        const hover = await connection.sendRequest(HoverRequest.type, {
            textDocument: { uri },
            position: { line, character: 'def '.length + 2 },
        });
        assert.ok(hover, 'a hover');
        const value = typeof hover.contents === 'string' ? hover.contents : hover.contents.value;
        assert.equal(hover.contents.kind, 'markdown');
        assert.match(value, /app\/auth\.py/, 'the importer app/auth.py is listed');
        assert.match(value, /file:\/\/[^\s)]+#L\d+/, 'neighbours link to file:// URIs with #L fragments');
    });
});
