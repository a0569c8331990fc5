// Entry point: starts codeloupe-lsp (only in a trusted workspace) and wires the commands, views and status item.
import { randomUUID } from 'node:crypto';
import * as vscode from 'vscode';
import {
    DidChangeConfigurationNotification,
    ErrorCodes,
    ExecuteCommandRequest,
    LanguageClient,
    type LanguageClientOptions,
    type Location,
    type Position,
    ResponseError,
    type ServerOptions,
    WorkDoneProgress,
} from 'vscode-languageclient/node';
import { ASK_STARTED, type AskProgressLine, describeAskEvent } from './askProgress';
import { Panel } from './panels';
import type { AskEvent, AskResult, ReindexResult, SearchResult } from './protocol';
import { AskRequest, GraphRequest, SearchRequest } from './protocol';
import {
    prepareGraphPage,
    renderAnswer,
    renderBundle,
    renderCommunities,
    renderError,
    renderStatus,
    renderWaiting,
} from './render';
import { runSearchPicker } from './search';
import { resolveServerCommand, ServerNotFoundError } from './serverCommand';
import { affectsEngine, affectsServerCommand, engineOptions, SECTION } from './settings';
import { StatusItem } from './statusBar';

/** The lens command the server puts on its code lenses; it is run here, never sent back to the server. */
export const SERVER_LENS_COMMAND = 'codeloupe.showLocations';

/** The extension's own commands ("codeloupe.client.*": the server's executeCommand ids own "codeloupe.*"). */
export const Commands = {
    search: 'codeloupe.client.search',
    ask: 'codeloupe.client.ask',
    graph: 'codeloupe.client.graph',
    reindex: 'codeloupe.client.reindex',
    status: 'codeloupe.client.status',
    restart: 'codeloupe.client.restart',
    showLocations: 'codeloupe.client.showLocations',
} as const;

const UNTRUSTED_REASON = 'codeloupe is off in Restricted Mode: it would start a language server that reads every file ' +
    'of this workspace and run the configured server command. Trust the workspace to turn it on.';

/** What activate() returns: lets other extensions (and the tests) reach the running client. */
export interface CodeloupeApi {
    /** The running client, or undefined with the reason it is not running. */
    whenReady(): Promise<LanguageClient | undefined>;
    readonly unavailableReason: string | undefined;
}

class Controller implements vscode.Disposable {
    private readonly log = vscode.window.createOutputChannel('codeloupe', { log: true });
    private readonly status = new StatusItem(Commands.status);
    private readonly results = new Panel('codeloupe.results', () => this.client);
    private readonly graph = new Panel('codeloupe.graph', () => this.client);
    private client: LanguageClient | undefined;
    private starting: Promise<LanguageClient | undefined> = Promise.resolve(undefined);
    unavailableReason: string | undefined;

    register(context: vscode.ExtensionContext): void {
        const command = (id: string, run: (client: LanguageClient, ...args: never[]) => Promise<unknown> | unknown) =>
            vscode.commands.registerCommand(id, async (...args: never[]) => {
                const client = await this.requireClient();
                return client === undefined ? undefined : run(client, ...args);
            });
        context.subscriptions.push(
            this,
            command(Commands.search, (client) => this.search(client)),
            command(Commands.ask, (client, query?: string) => this.ask(client, query)),
            command(Commands.graph, (client) => this.showGraph(client)),
            command(Commands.reindex, (client) => this.reindex(client)),
            command(Commands.status, (client) => this.showStatus(client)),
            vscode.commands.registerCommand(Commands.restart, () => this.restart()),
            vscode.commands.registerCommand(Commands.showLocations, (uri: vscode.Uri, position: vscode.Position, locations: vscode.Location[]) =>
                vscode.commands.executeCommand('editor.action.showReferences', uri, position, locations)),
            vscode.workspace.onDidChangeConfiguration((event) => this.onConfigurationChanged(event)),
        );
    }

    get api(): CodeloupeApi {
        const whenReady = (): Promise<LanguageClient | undefined> => this.starting;
        const reason = (): string | undefined => this.unavailableReason;
        return {
            whenReady,
            get unavailableReason() {
                return reason();
            },
        };
    }

    start(): Promise<LanguageClient | undefined> {
        this.starting = this.startClient();
        return this.starting;
    }

    refuseUntrusted(): void {
        this.unavailableReason = UNTRUSTED_REASON;
        this.status.show('$(shield) codeloupe', UNTRUSTED_REASON);
        void vscode.window.showInformationMessage(UNTRUSTED_REASON, 'Manage Workspace Trust').then((choice) => {
            if (choice !== undefined) {
                void vscode.commands.executeCommand('workbench.trust.manage');
            }
        });
    }

    private async startClient(): Promise<LanguageClient | undefined> {
        this.unavailableReason = undefined;
        const folder = vscode.workspace.workspaceFolders?.[0];
        let server;
        try {
            server = await resolveServerCommand(folder?.uri);
        } catch (error) {
            if (!(error instanceof ServerNotFoundError)) {
                throw error;
            }
            this.unavailable(error.message, 'Open Settings', () =>
                vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.server.command`));
            return undefined;
        }
        this.log.info(`starting ${server.command} ${server.args.join(' ')} (from the ${server.source})`);
        const serverOptions: ServerOptions = {
            command: server.command,
            args: server.args,
            options: { cwd: folder?.uri.fsPath, env: process.env },
        };
        const client = new LanguageClient('codeloupe', 'codeloupe', serverOptions, this.clientOptions());
        try {
            await client.start();
        } catch (error) {
            this.unavailable(`codeloupe: the language server (${server.command}) failed to start: ${error instanceof Error ? error.message : String(error)}`,
                'Show Log', () => this.log.show());
            await client.dispose().catch(() => undefined);
            return undefined;
        }
        this.client = client;
        void this.status.refresh(client);
        return client;
    }

    private clientOptions(): LanguageClientOptions {
        const convertLens = (lens: vscode.CodeLens): vscode.CodeLens => this.convertLens(lens);
        return {
            documentSelector: [{ scheme: 'file' }],
            initializationOptions: engineOptions(),
            outputChannel: this.log,
            middleware: {
                // The server may pull its settings: answer in the engine's names, as the init options do.
                workspace: {
                    configuration: (params, token, next) => params.items.some((item) => item.section === SECTION)
                        ? params.items.map((item) => (item.section === SECTION ? engineOptions() : null))
                        : next(params, token),
                },
                provideCodeLenses: async (document, token, next) => (await next(document, token))?.map(convertLens),
                resolveCodeLens: async (lens, token, next) => {
                    const resolved = await next(lens, token);
                    return resolved ? convertLens(resolved) : resolved;
                },
            },
        };
    }

    /** Points the server's `codeloupe.showLocations` lens at our command, with VS Code objects for arguments. */
    private convertLens(lens: vscode.CodeLens): vscode.CodeLens {
        const command = lens.command;
        if (command?.command !== SERVER_LENS_COMMAND || this.client === undefined) {
            return lens;
        }
        const converter = this.client.protocol2CodeConverter;
        const [uri, position, locations] = (command.arguments ?? []) as [string, Position, Location[] | undefined];
        lens.command = {
            title: command.title,
            tooltip: command.tooltip,
            command: Commands.showLocations,
            arguments: [converter.asUri(uri), converter.asPosition(position), (locations ?? []).map((location) => converter.asLocation(location))],
        };
        return lens;
    }

    private unavailable(reason: string, action: string, run: () => unknown): void {
        this.unavailableReason = reason;
        this.log.error(reason);
        this.status.show('$(error) codeloupe', reason);
        void vscode.window.showErrorMessage(reason, action).then((choice) => {
            if (choice === action) {
                void run();
            }
        });
    }

    private async requireClient(): Promise<LanguageClient | undefined> {
        const client = await this.starting;
        if (client === undefined) {
            void vscode.window.showWarningMessage(this.unavailableReason ?? 'codeloupe: the language server is not running.');
        }
        return client;
    }

    async stop(): Promise<void> {
        const client = this.client;
        this.client = undefined;
        this.status.stopPolling();
        if (client !== undefined) {
            await client.stop().catch((error) => this.log.warn(`stopping the server: ${String(error)}`));
        }
    }

    private async restart(): Promise<LanguageClient | undefined> {
        if (!vscode.workspace.isTrusted) {
            this.refuseUntrusted();
            return undefined;
        }
        await this.starting;
        await this.stop();
        return this.start();
    }

    private async onConfigurationChanged(event: vscode.ConfigurationChangeEvent): Promise<void> {
        if (!vscode.workspace.isTrusted) {
            return;
        }
        if (affectsServerCommand(event)) {
            await this.restart();
            return;
        }
        const client = this.client;
        if (client === undefined || !affectsEngine(event)) {
            return;
        }
        await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: engineOptions() } });
        void this.status.refresh(client);
    }

    private search(client: LanguageClient): void {
        const editor = vscode.window.activeTextEditor;
        const selected = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection) : '';
        runSearchPicker(client, (result) => this.showBundle(result), selected.includes('\n') ? '' : selected.trim());
    }

    private showBundle(result: SearchResult): void {
        this.results.show(`Codeloupe: ${result.query}`, (context) => renderBundle(context, result));
    }

    private async ask(client: LanguageClient, presetQuery?: string): Promise<void> {
        const query = presetQuery ?? (await vscode.window.showInputBox({
            title: 'Codeloupe: Ask the Codebase',
            prompt: 'A question about this codebase, or a bug report',
            ignoreFocusOut: true,
        }));
        if (!query?.trim()) {
            return;
        }
        const title = `Codeloupe: ${query}`;
        this.results.show(title, (context) => renderWaiting(context, query));
        const progressToken = `codeloupe-ask-${randomUUID()}`;
        await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'codeloupe', cancellable: true }, async (progress, cancel) => {
            const listener = client.onProgress(WorkDoneProgress.type, progressToken, (value) => {
                const event = value.kind === 'report' ? parseAskEvent(value.message) : undefined;
                const line: AskProgressLine | undefined = value.kind === 'begin' ? ASK_STARTED : event && describeAskEvent(event);
                if (line !== undefined) {
                    progress.report({ message: line.status });
                    this.results.post({ type: 'progress', ...line });
                }
            });
            try {
                const result: AskResult = await client.sendRequest(AskRequest, { query, workDoneToken: progressToken }, cancel);
                this.results.show(title, (context) => renderAnswer(context, query, result));
            } catch (error) {
                await this.askFailed(client, query, error, cancel);
            } finally {
                listener.dispose();
            }
        });
    }

    /** A server without codeloupe/ask still answers with its retrieval bundle; other failures show in the view. */
    private async askFailed(client: LanguageClient, query: string, error: unknown, cancel: vscode.CancellationToken): Promise<void> {
        const title = `Codeloupe: ${query}`;
        if (cancel.isCancellationRequested) {
            this.results.show(title, (context) => renderError(context, title, 'Cancelled.'));
            return;
        }
        if (error instanceof ResponseError && error.code === ErrorCodes.MethodNotFound) {
            try {
                const bundle = await client.sendRequest(SearchRequest, { query }, cancel);
                this.results.show(title, (context) => renderBundle(context, bundle, 'This server cannot narrate answers (no codeloupe/ask): here is the ranked bundle.'));
                return;
            } catch (searchError) {
                error = searchError;
            }
        }
        this.log.error(`ask failed: ${String(error)}`);
        this.results.show(title, (context) => renderError(context, title, error instanceof Error ? error.message : String(error)));
    }

    private async showGraph(client: LanguageClient): Promise<void> {
        const graph = await client.sendRequest(GraphRequest, { mode: 'map', html: true });
        const paths = new Map(graph.nodes.map((node) => [node.path, node.uri]));
        const html = graph.html;
        this.graph.show('Codeloupe: Graph', (context) => (html ? prepareGraphPage(context, html) : renderCommunities(context, graph)), paths);
    }

    private async reindex(client: LanguageClient): Promise<ReindexResult> {
        const result = (await vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: 'codeloupe: reindexing' }, () =>
            client.sendRequest(ExecuteCommandRequest.type, { command: 'codeloupe.reindex', arguments: [] }))) as ReindexResult;
        void vscode.window.showInformationMessage(`codeloupe: reindexed ${result.files} files (${result.chunks} chunks).`);
        void this.status.refresh(client);
        return result;
    }

    private async showStatus(client: LanguageClient): Promise<void> {
        const status = await this.status.refresh(client);
        if (status !== undefined) {
            this.results.show('Codeloupe: Status', (context) => renderStatus(context, status));
        }
    }

    dispose(): void {
        void this.stop();
        this.status.dispose();
        this.results.dispose();
        this.graph.dispose();
        this.log.dispose();
    }
}

/** `report.message` of an ask progress report: one JSON event (anything else is not an event and shows nothing). */
function parseAskEvent(message: string | undefined): AskEvent | undefined {
    try {
        const parsed: unknown = JSON.parse(message ?? '');
        return typeof parsed === 'object' && parsed !== null && typeof (parsed as AskEvent).type === 'string' ? parsed as AskEvent : undefined;
    } catch {
        return undefined;
    }
}

let controller: Controller | undefined;

export function activate(context: vscode.ExtensionContext): CodeloupeApi {
    controller = new Controller();
    controller.register(context);
    if (vscode.workspace.isTrusted) {
        void controller.start();
    } else {
        controller.refuseUntrusted();
        const active = controller;
        context.subscriptions.push(vscode.workspace.onDidGrantWorkspaceTrust(() => void active.start()));
    }
    return controller.api;
}

export async function deactivate(): Promise<void> {
    await controller?.stop();
    controller = undefined;
}
