'use strict';
// Driven by bench/vscode_bench.py: the VS Code extension's real bundle (clients/vscode/out/extension.js) with the
// real vscode-languageclient against the real codeloupe-lsp, under the `vscode` stub the mocha suite uses.
// Prints one JSON line: ms from activation to the first search answer in the picker, then save -> searchable times.
const started = process.hrtime.bigint();
const ms = () => Number(process.hrtime.bigint() - started) / 1e6;

const path = require('node:path');
const CLIENT = path.resolve(__dirname, '..', 'clients', 'vscode');
require(path.join(CLIENT, 'test', 'register.js'));
const vscode = require('vscode');
const extension = require(path.join(CLIENT, 'out', 'extension.js'));
const { serverCommand, waitFor } = require(path.join(CLIENT, 'test', 'helpers.js'));

const root = process.env.CODELOUPE_BENCH_ROOT;
const saves = Number(process.env.CODELOUPE_BENCH_SAVES || '0');
const lingerMs = Number(process.env.CODELOUPE_BENCH_LINGER_MS || '12000');
const probe = vscode.__test;
const sleep = (delay) => new Promise((resolve) => setTimeout(resolve, delay));
const fileRows = (picker) => picker.items.filter((item) => item.match !== undefined);

async function main() {
    probe.reset({ folders: [root], settings: { 'codeloupe.server.command': serverCommand(), 'codeloupe.embed.provider': 'none' } });
    const context = { subscriptions: [], extensionPath: CLIENT, extensionUri: vscode.Uri.file(CLIENT), secrets: probe.secretStorage() };
    const api = extension.activate(context);
    const out = { activated_ms: ms() };
    // When the client first shows indexing progress (the server's $/progress becomes a window progress).
    const progressWatch = setInterval(() => {
        if (probe.progress.length > 0) {
            out.first_progress_ms = ms();
            clearInterval(progressWatch);
        }
    }, 5);
    // The user asks at once, as the Neovim bench does: the command waits for the client, the picker opens, the
    // query is typed (the picker's debounce included), the server answers once the workspace has an index.
    void vscode.commands.executeCommand('codeloupe.client.search');
    const picker = await waitFor('the search picker', () => probe.quickPicks[0], 600000, 5);
    out.picker_ms = ms();
    picker.value = 'walk a directory tree';
    await waitFor('a first answer', () => fileRows(picker).length > 0, 600000, 5);
    out.first_answer_ms = ms();
    out.first_path = fileRows(picker)[0].match.location.uri;
    clearInterval(progressWatch);
    picker.hide();

    const client = await api.whenReady();
    const again = ms();
    await client.sendRequest('codeloupe/search', { query: 'read a configuration file' });
    out.second_answer_ms = ms() - again;

    out.save_ms = [];
    for (let k = 1; k <= saves; k += 1) {
        const token = `zqx${k}benchtoken${Math.floor(Math.random() * 1e6)}`;
        const rel = `codeloupe_bench_${k}.py`;
        const saved = ms();
        await probe.saveDocument(path.join(root, rel), `def ${token}():\n    return 1\n`);
        let found = false;
        while (!found && ms() - saved < 60000) {
            const result = await client.sendRequest('codeloupe/search', { query: token });
            found = result.core.length > 0 && result.core[0].path === rel;
            if (!found) {
                await sleep(5);
            }
        }
        out.save_ms.push(found ? ms() - saved : -1);
    }
    // A session outlives its first answer: let the server finish its refresh (and save what a restart reads)
    // before quitting, as an editor left open would.
    await waitFor('a ready index', async () => {
        const status = await client.sendRequest('codeloupe/status', {});
        return status.folders.length > 0 && status.folders.every((folder) => folder.state === 'ready');
    }, 600000, 50);
    await sleep(lingerMs);
    await extension.deactivate();
    context.subscriptions.forEach((disposable) => disposable.dispose());
    if (process.env.CODELOUPE_BENCH_LOG) {  // the client's output channel (the server's log), to see where time went
        require('node:fs').writeFileSync(process.env.CODELOUPE_BENCH_LOG, probe.log.join('\n'));
    }
    process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().then(() => process.exit(0), (error) => {
    process.stdout.write(`${JSON.stringify({ error: String(error?.stack ?? error) })}\n`);
    process.exit(1);
});
