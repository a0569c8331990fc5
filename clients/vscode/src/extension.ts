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
    LSPErrorCodes,
    MessageType,
    type Position,
    ResponseError,
    type ServerOptions,
    ShowMessageNotification,
    WorkDoneProgress,
} from 'vscode-languageclient/node';
import { promptQuestion } from './askPrompt';
import { ASK_STARTED, type AskProgressLine, describeAskEvent } from './askProgress';
import { BundleView, OPEN_MATCH_COMMAND } from './bundleView';
import { type GraphDetail, graphMapPage, showGraphNode, showGraphPath } from './graphCommands';
import { type GraphPage, renderGraphPage } from './graphViews';
import { activeRepository, INDEX_SCHEME, IndexDocuments, linkIndexDocuments, OPEN_INDEX_DOCUMENT_COMMAND } from './indexDocuments';
import { openAt, openLspLocation } from './locations';
import type { Match } from './match';
import {
    ANSWER_VIEW,
    answerCodeFiles,
    BUNDLE_VIEW,
    bundleCodeFiles,
    bundleFromDisk,
    draftFromDisk,
    GRAPH_DETAIL_VIEW,
    GRAPH_VIEW,
    graphCodeFiles,
    graphFromDisk,
    type KeptAnswer,
    KeptAnswers,
    keptDraftCode,
    keptResult,
    MAX_KEPT_ANSWERS,
    MAX_KEPT_CHARS,
    type NotKept,
    withCodeFromDisk,
    withoutBundleCode,
    withoutGraphCode,
} from './keptAnswers';
import { AnswerPanels, FileChanges, Panel } from './panels';
import type { AskEvent, AskResult, ReindexResult, SearchResult } from './protocol';
import { AskRequest, SearchRequest } from './protocol';
import {
    renderAnswer,
    renderBundle,
    renderError,
    renderFailed,
    renderInterrupted,
    renderNote,
    renderStatus,
    renderWaiting,
} from './render';
import { showRelated } from './related';
import { runSearchPicker, type SearchPickerActions } from './search';
import { resolveServerCommand, ServerNotFoundError } from './serverCommand';
import {
    affectsEnable,
    affectsEngine,
    affectsServerCommand,
    CHAT_API_KEY_SECRET,
    engineOptions,
    isEnabled,
    SECTION,
    type SecretOptions,
} from './settings';
import { StatusItem } from './statusBar';
import { showTour } from './tour';
import { visibleLabel, visibleMessage } from './visible';

/** The lens command the server puts on its code lenses; it is run here, never sent back to the server. */
export const SERVER_LENS_COMMAND = 'codeloupe.showLocations';

/** The extension's own commands ("codeloupe.client.*": the server's executeCommand ids own "codeloupe.*"). */
export const Commands = {
    search: 'codeloupe.client.search',
    searchSymbol: 'codeloupe.client.searchSymbol',
    ask: 'codeloupe.client.ask',
    askSelection: 'codeloupe.client.askSelection',
    graph: 'codeloupe.client.graph',
    graphNode: 'codeloupe.client.graphNode',
    graphPath: 'codeloupe.client.graphPath',
    tour: 'codeloupe.client.tour',
    related: 'codeloupe.client.related',
    setChatApiKey: 'codeloupe.client.setChatApiKey',
    openMatch: OPEN_MATCH_COMMAND,
    reindex: 'codeloupe.client.reindex',
    status: 'codeloupe.client.status',
    restart: 'codeloupe.client.restart',
    showLocations: 'codeloupe.client.showLocations',
    openIndexDocument: OPEN_INDEX_DOCUMENT_COMMAND,
} as const;

/** The status item while a server starts (or restarts), until its first status answer. */
const STARTING_TEXT = '$(loading~spin) codeloupe';

const DISABLED_REASON = 'codeloupe is turned off (the codeloupe.enable setting).';

const UNTRUSTED_TITLE = 'codeloupe is off in Restricted Mode';
const UNTRUSTED_DETAIL = 'It would start a language server that reads every file of this workspace and run the configured ' +
    'server command. Trust the workspace to turn it on.';
const UNTRUSTED_REASON = `${UNTRUSTED_TITLE}. ${UNTRUSTED_DETAIL}`;

/** What a reloaded window's answer tab says of an answer that could not be kept, by why. */
const NOT_KEPT: Record<NotKept, string> = {
    'no-parts': 'This answer was not kept for the reloaded window: the language server that gave it is older than answers '
        + 'in parts (words and cited spans), and its answer\'s text quotes the code, which is never kept. Ask the question again to see it.',
};

/** The view type of the index status tab (package.json's `onWebviewPanel:` activation events name it), and its title. */
const STATUS_VIEW = 'codeloupe.status';
const STATUS_TITLE = 'Codeloupe: Status';

/** Opens the Workspace Trust editor. */
const MANAGE_TRUST_COMMAND = 'workbench.trust.manage';
const MANAGE_TRUST = 'Manage Workspace Trust';

/** What activate() returns: lets other extensions (and the tests) reach the running client. */
export interface CodeloupeApi {
    /** The running client, or undefined with the reason it is not running. */
    whenReady(): Promise<LanguageClient | undefined>;
    readonly unavailableReason: string | undefined;
}

class Controller implements vscode.Disposable {
    private readonly log = vscode.window.createOutputChannel('codeloupe', { log: true });
    /** The files saved or changed on disk: a visible tab showing code of one reads it again. */
    private readonly changes = new FileChanges();
    private readonly status = new StatusItem(Commands.status);
    // One panel per kind of page, so an answer never replaces the bundle being read (or the status), and one per ask.
    private readonly bundlePanel = new Panel(BUNDLE_VIEW);
    private readonly answers = new AnswerPanels(() => this.kept);
    /** What each answer tab, the bundle tab, the graph tabs and the Last Bundle view show, for a reloaded window (set once
     * registered: it is the workspace's state). */
    private kept: KeptAnswers | undefined;
    private readonly statusPanel = new Panel(STATUS_VIEW, { refresh: () => void this.refreshStatus() });
    private readonly graph = new Panel(GRAPH_VIEW);
    private readonly graphDetail = new Panel(GRAPH_DETAIL_VIEW);
    private readonly lastBundle = new BundleView('codeloupe.lastBundle');
    private readonly secretOptions: SecretOptions = {};
    private secretStorage: vscode.SecretStorage | undefined;
    private client: LanguageClient | undefined;
    private starting: Promise<LanguageClient | undefined> = Promise.resolve(undefined);
    /** The starts and stops, each run once the one before it is done (see `inTurn`). */
    private lifecycle: Promise<unknown> = Promise.resolve();
    unavailableReason: string | undefined;

    register(context: vscode.ExtensionContext): void {
        const command = (id: string, run: (client: LanguageClient, ...args: never[]) => Promise<unknown> | unknown) =>
            vscode.commands.registerCommand(id, async (...args: never[]) => {
                const client = await this.requireClient();
                if (client === undefined) {
                    return undefined;
                }
                try {
                    return await run(client, ...args);
                } catch (error) {
                    // A refusal or a failure of one command is a notification: thrown out of the command, the real
                    // workbench showed it as a modal "Command '...' resulted in an error" dialog.
                    if (!isCancellation(error)) {
                        this.log.error(`${id} failed: ${String(error)}`);
                        void vscode.window.showErrorMessage(visibleMessage(`codeloupe: ${error instanceof Error ? error.message : String(error)}`));
                    }
                    return undefined;
                }
            });
        this.secretStorage = context.secrets;
        this.kept = new KeptAnswers(context.workspaceState);
        context.subscriptions.push(
            // A reloaded window shows the answer tabs it had (package.json activates the extension for them).
            vscode.window.registerWebviewPanelSerializer(ANSWER_VIEW, {
                deserializeWebviewPanel: (panel: vscode.WebviewPanel, state: unknown) => this.restoreAnswer(panel, state),
            }),
            // And the bundle tab and the status tab it had.
            vscode.window.registerWebviewPanelSerializer(BUNDLE_VIEW, {
                deserializeWebviewPanel: (panel: vscode.WebviewPanel, state: unknown) => this.restoreBundle(panel, state),
            }),
            vscode.window.registerWebviewPanelSerializer(STATUS_VIEW, {
                deserializeWebviewPanel: (panel: vscode.WebviewPanel) => this.restoreStatus(panel),
            }),
            // And the graph tabs: the map, and one file, folder or route of it.
            vscode.window.registerWebviewPanelSerializer(GRAPH_VIEW, {
                deserializeWebviewPanel: (panel: vscode.WebviewPanel) => this.restoreGraphMap(panel),
            }),
            vscode.window.registerWebviewPanelSerializer(GRAPH_DETAIL_VIEW, {
                deserializeWebviewPanel: (panel: vscode.WebviewPanel, state: unknown) => this.restoreGraphDetail(panel, state),
            }),
            // A closed tab's page is forgotten (not as the extension stops: `shutDown` lets go of `kept` first).
            this.bundlePanel.onDidClose(() => void this.kept?.keepBundle('tab', undefined)),
            this.graph.onDidClose(() => void this.kept?.keepGraphMap(undefined)),
            this.graphDetail.onDidClose(() => void this.kept?.keepGraphDetail(undefined)),
            this,
            command(Commands.search, (client) => this.search(client)),
            command(Commands.searchSymbol, (client) => this.searchSymbol(client)),
            command(Commands.ask, (client, query?: unknown) => this.ask(client, query)),
            command(Commands.askSelection, (client) => this.ask(client, selectedText())),
            command(Commands.graph, (client) => this.showGraphMap(client)),
            command(Commands.graphNode, (client, uri?: vscode.Uri) => showGraphNode(client, this.graphDetailTab, uri)),
            command(Commands.graphPath, (client) => showGraphPath(client, this.graphDetailTab)),
            command(Commands.tour, (client) => showTour(client)),
            command(Commands.related, (client) => showRelated(client)),
            command(Commands.openMatch, (client, match: Match) => openLspLocation(client, match.location, { preview: false }, match.anchorLine)),
            vscode.commands.registerCommand(Commands.setChatApiKey, () => this.setChatApiKey()),
            context.secrets.onDidChange((event) => (event.key === CHAT_API_KEY_SECRET ? this.reloadSecrets() : undefined)),
            command(Commands.reindex, (client) => this.reindex(client)),
            command(Commands.status, (client) => this.showStatus(client)),
            vscode.commands.registerCommand(Commands.restart, () => this.restart()),
            vscode.commands.registerCommand(Commands.showLocations, (uri: vscode.Uri, position: vscode.Position, locations: vscode.Location[]) =>
                vscode.commands.executeCommand('editor.action.showReferences', uri, position, locations)),
            vscode.workspace.onDidChangeConfiguration((event) => this.onConfigurationChanged(event)),
            vscode.workspace.registerTextDocumentContentProvider(INDEX_SCHEME, new IndexDocuments(() => this.starting)),
            vscode.commands.registerCommand(Commands.openIndexDocument, (uri: string, line: number) =>
                openAt(vscode.Uri.parse(uri), undefined, { preview: false }, line - 1)),
        );
        void this.restoreLastBundle();
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

    /**
     * Runs `step` once every start and stop asked for before it is done. A language client cannot be stopped while it
     * starts, and one stopped meanwhile (the extension deactivated, a restart, codeloupe.enable turned off and on)
     * was left running: it went on to register the server's commands, and the next client's start failed with
     * "command 'codeloupe.reindex' already exists".
     */
    private inTurn<T>(step: () => Promise<T>): Promise<T> {
        const run = this.lifecycle.then(step);
        this.lifecycle = run.catch(() => undefined);
        return run;
    }

    start(): Promise<LanguageClient | undefined> {
        this.starting = this.inTurn(async () => {
            if (!isEnabled()) {
                this.unavailableReason = DISABLED_REASON;
                this.status.show('$(circle-slash) codeloupe', DISABLED_REASON);
                return undefined;
            }
            // Until the server answers, the item says it is starting: after a restart or a trust grant it still showed
            // the old server's "codeloupe N files" (or the Restricted Mode shield), as if nothing were under way.
            this.status.show(STARTING_TEXT, 'Starting the codeloupe language server');
            await this.loadSecrets();
            return this.startClient();
        });
        return this.starting;
    }

    private async loadSecrets(): Promise<void> {
        this.secretOptions.chatApiKey = (await this.secretStorage?.get(CHAT_API_KEY_SECRET)) || undefined;
    }

    private async reloadSecrets(): Promise<void> {
        await this.loadSecrets();
        await this.pushSettings();
    }

    /** Asks for the chat API key (hidden input) and keeps it in SecretStorage; an empty answer removes it. */
    private async setChatApiKey(): Promise<void> {
        const key = await vscode.window.showInputBox({
            title: 'Codeloupe: Chat API Key',
            prompt: 'The API key of the chat endpoint (codeloupe.chat.baseUrl). Stored in the OS keychain, never in settings. Empty: remove it.',
            password: true,
            ignoreFocusOut: true,
        });
        if (key === undefined || this.secretStorage === undefined) {
            return;
        }
        if (key.trim() === '') {
            await this.secretStorage.delete(CHAT_API_KEY_SECRET);
        } else {
            await this.secretStorage.store(CHAT_API_KEY_SECRET, key.trim());
        }
        await this.reloadSecrets();
        void vscode.window.showInformationMessage(key.trim() === '' ? 'codeloupe: chat API key removed.' : 'codeloupe: chat API key stored.');
    }

    /**
     * Restricted Mode: the status item says so (a shield on the warning background; a click opens the trust editor),
     * and nothing else does until a command is run. A notification cannot be closed by its extension: one shown at
     * start-up stayed in the notification center, saying codeloupe was off, after the trust grant had started it.
     */
    refuseUntrusted(): void {
        this.unavailableReason = UNTRUSTED_REASON;
        this.status.show('$(shield) codeloupe', `${UNTRUSTED_REASON} Click to manage workspace trust.`, MANAGE_TRUST_COMMAND);
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
        // In place of the client's own window/showMessage handler (registered before start, it replaces that one as the
        // connection opens): the server's messages quote the workspace, shown through visibleMessage.
        client.onNotification(ShowMessageNotification.type, ({ type, message }) => {
            const show = type === MessageType.Error ? vscode.window.showErrorMessage
                : type === MessageType.Warning ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
            void show(visibleMessage(message));
        });
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
            // Hover and code lenses also on the shared index's read-only documents (the server answers from the index).
            documentSelector: [{ scheme: 'file' }, { scheme: INDEX_SCHEME }],
            // The server applies a repository's own endpoint, key and model settings only in a trusted workspace.
            initializationOptions: { ...engineOptions(this.secretOptions), trusted: vscode.workspace.isTrusted },
            outputChannel: this.log,
            // The server's hovers quote the repository (names, paths, doc lines; it escapes them as text): rendered
            // with no command run from a link, no HTML and no theme icons.
            markdown: { isTrusted: false, supportHtml: false, supportThemeIcons: false },
            middleware: {
                // The server may pull its settings: answer in the engine's names, as the init options do.
                workspace: {
                    configuration: (params, token, next) => params.items.some((item) => item.section === SECTION)
                        ? params.items.map((item) => (item.section === SECTION ? engineOptions(this.secretOptions) : null))
                        : next(params, token),
                },
                provideCodeLenses: async (document, token, next) => (await next(document, token))?.map(convertLens),
                provideHover: async (document, position, token, next) => {
                    const hover = await next(document, position, token);
                    if (hover) {
                        hover.contents = hover.contents.map((part) => (part instanceof vscode.MarkdownString ? linkIndexDocuments(part) : part));
                    }
                    return hover;
                },
                resolveCodeLens: async (lens, token, next) => {
                    const resolved = await next(lens, token);
                    return resolved ? convertLens(resolved) : resolved;
                },
            },
        };
    }

    /**
     * Points the server's `codeloupe.showLocations` lens at our command, with VS Code objects for arguments. Its title
     * names the file's community (the repository's folder names): a lens renders `$(name)` as an icon.
     */
    private convertLens(lens: vscode.CodeLens): vscode.CodeLens {
        const command = lens.command;
        if (command?.command !== SERVER_LENS_COMMAND || this.client === undefined) {
            return lens;
        }
        const converter = this.client.protocol2CodeConverter;
        const [uri, position, locations] = (command.arguments ?? []) as [string, Position, Location[] | undefined];
        lens.command = {
            title: visibleLabel(command.title),
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
        void vscode.window.showErrorMessage(visibleMessage(reason), action).then((choice) => {
            if (choice === action) {
                void run();
            }
        });
    }

    private async requireClient(): Promise<LanguageClient | undefined> {
        const client = await this.starting;
        if (client === undefined) {
            this.warnUnavailable();
        }
        return client;
    }

    /**
     * Why a command did nothing. In Restricted Mode a modal dialog with a button to the trust editor, as VS Code's own
     * trust requests are: a notification cannot be closed by its extension, so one left unanswered stayed in the
     * notification center, saying codeloupe was off, after trusting the workspace had started it.
     */
    private warnUnavailable(): void {
        const reason = this.unavailableReason ?? 'codeloupe: the language server is not running.';
        if (vscode.workspace.isTrusted) {
            void vscode.window.showWarningMessage(visibleMessage(reason));
            return;
        }
        void vscode.window.showWarningMessage(UNTRUSTED_TITLE, { modal: true, detail: UNTRUSTED_DETAIL }, MANAGE_TRUST).then((choice) => {
            if (choice === MANAGE_TRUST) {
                void vscode.commands.executeCommand(MANAGE_TRUST_COMMAND);
            }
        });
    }

    /**
     * The extension stops (a window reloading, closing): what the answer tabs show is kept as it is now. The server
     * stopping fails the asks under way, whose drafts must come back as interrupted, not as that failure.
     */
    async shutDown(): Promise<void> {
        this.kept = undefined;
        await this.stop();
    }

    /** Stops the server, once a start under way is done (it is that start's server that is stopped). */
    stop(): Promise<void> {
        return this.inTurn(() => this.stopClient());
    }

    private async stopClient(): Promise<void> {
        const client = this.client;
        this.client = undefined;
        this.status.stopPolling();
        if (client !== undefined) {
            await client.stop().catch((error) => this.log.warn(`stopping the server: ${String(error)}`));
        }
    }

    /** Two at once (the command run twice, codeloupe.enable turned off and on) run one after the other. */
    private restart(): Promise<LanguageClient | undefined> {
        if (!vscode.workspace.isTrusted) {
            this.warnUnavailable();
            return Promise.resolve(undefined);
        }
        void this.inTurn(async () => {
            this.status.show(STARTING_TEXT, 'Restarting the codeloupe language server');
            await this.stopClient();
        });
        return this.start();
    }

    private async onConfigurationChanged(event: vscode.ConfigurationChangeEvent): Promise<void> {
        if (!vscode.workspace.isTrusted) {
            return;
        }
        if (affectsEnable(event) || affectsServerCommand(event)) {
            await this.restart();
            return;
        }
        if (affectsEngine(event)) {
            await this.pushSettings();
        }
    }

    private async pushSettings(): Promise<void> {
        const client = this.client;
        if (client === undefined) {
            return;
        }
        await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: engineOptions(this.secretOptions) } });
        void this.status.refresh(client);
    }

    /** The selection is the starting query, all of it: a pasted traceback is a query too. */
    private search(client: LanguageClient): void {
        runSearchPicker(client, this.pickerActions, selectedText() ?? '');
    }

    private searchSymbol(client: LanguageClient): void {
        runSearchPicker(client, this.pickerActions, wordUnderCursor() ?? selectedText() ?? '');
    }

    private readonly pickerActions: SearchPickerActions = {
        showBundle: (result) => {
            this.bundlePanel.show(pageTitle(result.query), (context) => renderBundle(context, result));
            void this.kept?.keepBundle('tab', result);
            this.followBundle(withoutBundleCode(result));
        },
        remember: (result) => this.rememberBundle(result),
    };

    /** The bundle tab reads its CORE code again as the files it is from change (`Panel.rereadWhen`); `kept`: the
     * bundle as kept (the digests of the lines it showed). */
    private followBundle(kept: SearchResult): void {
        this.bundlePanel.rereadWhen(this.changes, bundleCodeFiles(kept), async () => {
            const shown = await bundleFromDisk(kept);
            return (context) => renderBundle(context, shown);
        });
    }

    /** The Last Bundle view shows `result`, and a reloaded window shows it there again. */
    private rememberBundle(result: SearchResult): void {
        this.lastBundle.show(result);
        void this.kept?.keepBundle('last', result);
    }

    /**
     * The Last Bundle view of a reloaded window: the bundle it showed, its CORE code read from disk again (as the
     * bundle tab's), unless a search or ask answered meanwhile. It was empty after a reload.
     */
    private async restoreLastBundle(): Promise<void> {
        const kept = this.kept?.bundle('last');
        const shown = kept && await bundleFromDisk(kept);
        if (shown !== undefined && this.lastBundle.isEmpty) {
            this.lastBundle.show(shown);
        }
    }

    /** The graph detail tab: shows a page, keeps it for a reloaded window, and reads its code again as its files change. */
    private readonly graphDetailTab: GraphDetail = {
        show: (page) => {
            this.graphDetail.show(page.title, (context) => renderGraphPage(context, page), graphPaths(page));
            void this.kept?.keepGraphDetail(page);
            this.followGraph(withoutGraphCode(page));
        },
        showError: (title, message) => {
            this.graphDetail.show(title, (context) => renderError(context, title, message));
            void this.kept?.keepGraphDetail(undefined);
        },
    };

    /** The graph detail tab reads its code again as the files it is from change; `kept`: the page as kept (digests). */
    private followGraph(kept: GraphPage): void {
        this.graphDetail.rereadWhen(this.changes, graphCodeFiles(kept), async () => {
            const shown = await graphFromDisk(kept);
            return (context) => renderGraphPage(context, shown);
        });
    }

    private async showGraphMap(client: LanguageClient): Promise<void> {
        const folderUri = activeRepository();
        const { render, paths } = await graphMapPage(client, folderUri);
        this.graph.show('Codeloupe: Graph', render, paths);
        void this.kept?.keepGraphMap({ folderUri });
    }

    /**
     * The graph map tab of a reloaded window: the map the server gives once it is up, of the repository it showed
     * (only that is kept: the page is the server's, and quotes no code).
     */
    private async restoreGraphMap(webviewPanel: vscode.WebviewPanel): Promise<void> {
        const title = 'Codeloupe: Graph';
        this.graph.adopt(webviewPanel);
        this.graph.showInPlace(title, (context) => renderNote(context, title, 'Waiting for the codeloupe language server…'));
        const client = await this.starting;
        if (client === undefined) {
            const reason = this.unavailableReason ?? 'The codeloupe language server is not running.';
            this.graph.showInPlace(title, (context) => renderNote(context, title, reason));
            return;
        }
        try {
            const { render, paths } = await graphMapPage(client, this.kept?.graphMap()?.folderUri);
            this.graph.showInPlace(title, render, undefined, paths);
        } catch (error) {
            this.graph.showInPlace(title, (context) => renderError(context, title, error instanceof Error ? error.message : String(error)));
        }
    }

    /**
     * The graph detail tab of a reloaded window, shown as it was: the page kept with it (a file with its neighbours,
     * a folder, a route), its code read from disk now (as a restored answer's), at the place read; one not kept (an
     * error, or too large) says so.
     */
    private async restoreGraphDetail(webviewPanel: vscode.WebviewPanel, state: unknown): Promise<void> {
        const kept = this.kept?.graphDetail();
        this.graphDetail.adopt(webviewPanel);
        if (kept === undefined) {
            const note = `This graph page was not kept for the reloaded window: a page is kept up to ${MAX_KEPT_CHARS / 1024} KiB without its `
                + 'code, an error is not. Show it in the graph again to see it.';
            this.graphDetail.showInPlace(webviewPanel.title, (context) => renderNote(context, webviewPanel.title, note));
            return;
        }
        const shown = await graphFromDisk(kept);
        this.graphDetail.showInPlace(kept.title, (context) => renderGraphPage(context, shown), pageState(state).page, graphPaths(kept));
        this.followGraph(kept);
    }

    /**
     * The answer tab reads its cited lines from disk again each time it is shown again, and while it is visible as a
     * file it cites is saved or changes on disk (`Panel.rereadWhen`): today's lines, marked as changed since the answer
     * where they are not the answer's. Otherwise the tab shows the lines it was rendered with (a live tab the server's,
     * a restored one those read at the reload). `kept`: the answer as kept (the digests of the lines it showed).
     */
    private followAnswer(panel: Panel, query: string, kept: AskResult): void {
        panel.rereadWhen(this.changes, answerCodeFiles(kept), async () => {
            const shown = await withCodeFromDisk(kept);
            return (context) => renderAnswer(context, query, shown);
        });
    }

    /** `presetQuery`: the question when a caller passes one (menus pass a resource URI instead: ignored). */
    private async ask(client: LanguageClient, presetQuery?: unknown): Promise<void> {
        const query = (typeof presetQuery === 'string' ? presetQuery : undefined) ?? (await promptQuestion(client));
        if (!query?.trim()) {
            return;
        }
        const title = pageTitle(query);
        const id = randomUUID();
        const panel = this.answers.create(id);
        panel.show(title, (context) => renderWaiting(context, query));
        // Kept as it is written: a window reloaded before its answer shows the draft so far, marked as interrupted.
        const draft: Required<KeptAnswer>['draft'] = { parts: [], steps: [] };
        // What its tab shows, while it is open (a closed tab's answer is forgotten, and one that cannot be kept too).
        const keep = (answer: KeptAnswer | undefined) => void (answer !== undefined && panel.isOpen ? this.kept?.keep(id, answer) : this.kept?.forget(id));
        keep({ query, draft });
        // The ask stops when its notification's Cancel is clicked or its tab is closed: nothing would show its answer.
        const stop = new vscode.CancellationTokenSource();
        const closed = panel.onDidClose(() => stop.cancel());
        const progressToken = `codeloupe-ask-${randomUUID()}`;
        await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'codeloupe', cancellable: true }, async (progress, cancel) => {
            const cancelled = cancel.onCancellationRequested(() => stop.cancel());
            const listener = client.onProgress(WorkDoneProgress.type, progressToken, (value) => {
                const event = value.kind === 'report' ? parseAskEvent(value.message) : undefined;
                const line: AskProgressLine | undefined = value.kind === 'begin' ? ASK_STARTED : event && describeAskEvent(event);
                if (line !== undefined) {
                    // A notification renders a link in its message: the status quotes file names and the model's words.
                    progress.report({ message: visibleMessage(line.status) });
                    panel.post({ type: 'progress', ...line });
                    if (keepDraftLine(draft, line, event)) {
                        keep({ query, draft });
                    }
                }
            });
            try {
                const result: AskResult = await client.sendRequest(AskRequest, { query, workDoneToken: progressToken, folderUri: activeRepository() }, stop.token);
                panel.show(title, (context) => renderAnswer(context, query, result));
                this.rememberBundle(result.bundle);
                const kept = keptResult(result);
                keep(typeof kept === 'string' ? { query, notKept: kept } : { query, result: kept });
                if (typeof kept !== 'string') {
                    this.followAnswer(panel, query, kept);
                }
            } catch (error) {
                const shown = await this.askFailed(client, panel, query, error, stop.token);
                keep(shown === undefined ? undefined : { query, error: shown });
            } finally {
                listener.dispose();
                cancelled.dispose();
                closed.dispose();
                stop.dispose();
            }
        });
    }

    /**
     * A server without codeloupe/ask still answers with its retrieval bundle; other failures show in the ask's view.
     * Resolves with what the view says of a failure (for a reloaded window), undefined when it shows no failure.
     */
    private async askFailed(client: LanguageClient, panel: Panel, query: string, error: unknown, cancel: vscode.CancellationToken): Promise<string | undefined> {
        const title = pageTitle(query);
        if (cancel.isCancellationRequested) {
            panel.show(title, (context) => renderError(context, title, 'Cancelled.'));
            return 'Cancelled.';
        }
        if (error instanceof ResponseError && error.code === ErrorCodes.MethodNotFound) {
            try {
                const bundle = await client.sendRequest(SearchRequest, { query }, cancel);
                panel.show(title, (context) => renderBundle(context, bundle, 'This server cannot narrate answers (no codeloupe/ask): here is the ranked bundle.'));
                return undefined;
            } catch (searchError) {
                error = searchError;
            }
        }
        this.log.error(`ask failed: ${String(error)}`);
        const message = error instanceof Error ? error.message : String(error);
        panel.show(title, (context) => renderError(context, title, message));
        return message;
    }

    /**
     * An answer tab of a reloaded window, shown as it was: the answer with its code read from disk now, the draft of
     * an ask the reload interrupted (with a button to ask again), or what a failed ask said. `state` is the one its
     * page set: the kept answer it showed and the place it was read at.
     */
    private async restoreAnswer(webviewPanel: vscode.WebviewPanel, state: unknown): Promise<void> {
        const { keep, page } = pageState(state);
        const answer = keep === undefined ? undefined : this.kept?.get(keep);
        const askAgain = answer && (() => {
            panel.dispose();
            void vscode.commands.executeCommand(Commands.ask, answer.query);
        });
        const panel = this.answers.restore(webviewPanel, keep ?? randomUUID(), askAgain);
        if (answer === undefined) {
            const note = `This answer was not kept for the reloaded window: the answers of the ${MAX_KEPT_ANSWERS} most recent questions are, `
                + `each up to ${MAX_KEPT_CHARS / 1024} KiB without its code. Ask the question again to see it.`;
            panel.show(webviewPanel.title, (context) => renderNote(context, webviewPanel.title, note), undefined, page);
            return;
        }
        const { query, result, draft, error, notKept } = answer;
        const title = pageTitle(query);
        if (notKept !== undefined) {
            panel.show(title, (context) => renderNote(context, title, NOT_KEPT[notKept], true), undefined, page);
        } else if (result !== undefined) {
            const shown = await withCodeFromDisk(result);
            panel.show(title, (context) => renderAnswer(context, query, shown), undefined, page);
            this.followAnswer(panel, query, result);
        } else if (draft !== undefined) {
            const parts = await draftFromDisk(draft.parts);
            panel.show(title, (context) => renderInterrupted(context, query, parts, draft.steps), undefined, page);
        } else {
            panel.show(title, (context) => renderFailed(context, query, error ?? ''), undefined, page);
        }
    }

    /**
     * The bundle tab of a reloaded window, shown as it was: the bundle kept with it, its CORE code read from disk now
     * (as a restored answer's), at the place read; a bundle not kept (too large) says so.
     */
    private async restoreBundle(webviewPanel: vscode.WebviewPanel, state: unknown): Promise<void> {
        const kept = this.kept?.bundle('tab');
        this.bundlePanel.adopt(webviewPanel);
        if (kept === undefined) {
            const note = `This bundle was not kept for the reloaded window: a bundle is kept up to ${MAX_KEPT_CHARS / 1024} KiB without its code. `
                + 'Search again to see it.';
            this.bundlePanel.showInPlace(webviewPanel.title, (context) => renderNote(context, webviewPanel.title, note));
            return;
        }
        const shown = await bundleFromDisk(kept);
        this.bundlePanel.showInPlace(pageTitle(kept.query), (context) => renderBundle(context, shown), pageState(state).page);
        this.followBundle(kept);
    }

    /** The status tab of a reloaded window: the index status the server gives once it is up (nothing of it is kept). */
    private async restoreStatus(webviewPanel: vscode.WebviewPanel): Promise<void> {
        this.statusPanel.adopt(webviewPanel);
        this.statusPanel.showInPlace(STATUS_TITLE, (context) => renderNote(context, STATUS_TITLE, 'Waiting for the codeloupe language server…'));
        await this.refreshStatus();
    }

    /** The status tab shows the server's status now, where the tab is (its Refresh button, a reloaded window); the
     * reason where no server runs. */
    private async refreshStatus(): Promise<void> {
        const client = await this.starting;
        const status = client && await this.status.refresh(client);
        if (status === undefined) {
            const reason = this.unavailableReason ?? 'The codeloupe language server is not running.';
            this.statusPanel.showInPlace(STATUS_TITLE, (context) => renderNote(context, STATUS_TITLE, reason));
            return;
        }
        const asOf = new Date();
        this.statusPanel.showInPlace(STATUS_TITLE, (context) => renderStatus(context, status, asOf));
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
            const asOf = new Date();
            this.statusPanel.show(STATUS_TITLE, (context) => renderStatus(context, status, asOf));
        }
    }

    dispose(): void {
        void this.stop();
        this.status.dispose();
        // The answer, bundle, status and graph tabs stay open: closed as the extension stops (a window reloading), they
        // would not come back.
        this.changes.dispose();
        this.lastBundle.dispose();
        this.log.dispose();
    }
}

/** A request the user or the editor cancelled (a picker closed, a newer query): nothing went wrong. */
function isCancellation(error: unknown): boolean {
    return (error instanceof ResponseError && error.code === LSPErrorCodes.RequestCancelled)
        || error instanceof vscode.CancellationError;
}

/** A page title from a query: its first line, short. */
function pageTitle(query: string): string {
    const line = query.trim().split('\n', 1)[0];
    return `Codeloupe: ${line.length > 60 ? `${line.slice(0, 59)}…` : line}`;
}

/** The active editor's selection, verbatim (newlines kept); undefined when nothing is selected. */
function selectedText(): string | undefined {
    const editor = vscode.window.activeTextEditor;
    const text = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection) : '';
    return text.trim() === '' ? undefined : text;
}

function wordUnderCursor(): string | undefined {
    const editor = vscode.window.activeTextEditor;
    const range = editor?.document.getWordRangeAtPosition(editor.selection.active);
    return range === undefined ? undefined : editor?.document.getText(range);
}

/** The links of a graph page name files by path (a route's hops): their URIs. */
function graphPaths(page: GraphPage): ReadonlyMap<string, string> {
    return new Map(page.kind === 'path' ? page.uris : []);
}

/** Adds what a progress line adds to the draft (its words, a code part as an answer's is kept or only its caption, a
 * step); whether it added any. `event`: the event the line says. */
function keepDraftLine(draft: Required<KeptAnswer>['draft'], line: AskProgressLine, event: AskEvent | undefined): boolean {
    if (line.step !== undefined) {
        draft.steps.push(line.step);
    }
    if (line.delta !== undefined) {
        const last = draft.parts.at(-1);
        if (typeof last === 'string') {
            draft.parts[draft.parts.length - 1] = last + line.delta;
        } else {
            draft.parts.push(line.delta);
        }
    }
    if (line.code !== undefined) {
        draft.parts.push((event && keptDraftCode(event))
            ?? { caption: line.code.caption, ...(line.code.note === undefined ? {} : { note: line.code.note }) });
    }
    return line.step !== undefined || line.delta !== undefined || line.code !== undefined;
}

/** The state an answer page set (render.ts's page script): the kept answer it shows, the page's id. */
function pageState(state: unknown): { keep?: string; page?: string } {
    const value = typeof state === 'object' && state !== null ? state as Record<string, unknown> : {};
    return {
        keep: typeof value.keep === 'string' ? value.keep : undefined,
        page: typeof value.page === 'string' && value.page !== '' ? value.page : undefined,
    };
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

/** Exported so the client's tests can check which settings scopes reach the server. */
export { engineOptions } from './settings';
/** Exported so the client's tests can check the bounds on the answers kept for a reloaded window. */
export { KeptAnswers, MAX_KEPT_ANSWERS, MAX_KEPT_CHARS } from './keptAnswers';
/** Exported so the client's tests can check what the status item says for a server's status. */
export { describeStatus } from './statusBar';

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
    await controller?.shutDown();
    controller = undefined;
}
