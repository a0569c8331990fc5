// The webview panels: results (bundles, status), the graph, each reused while open; and answers, one panel per ask.
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { messageTarget, openAt } from './locations';
import { ANSWER_VIEW, type KeptAnswers } from './keptAnswers';
import { isAskAgainMessage, isOpenMessage, isRefreshMessage, isReplayMessage } from './protocol';
import type { PageContext } from './render';
import { visible, visibleMessage } from './visible';

export interface PanelOptions {
    /** The panel is one ask's (its draft, then its answer): shown in front when it opens, then updated where it is (the
     * answer does not jump over the tab being read, another answer's maybe); once its tab is closed, nothing opens it. */
    single?: boolean;
    /** The editor group it opens in (default: beside the active editor). */
    column?: vscode.ViewColumn;
    /** The kept answer its pages name (PageContext.keep), for a reloaded window to show again. */
    keep?: string;
    /** Run when its page's "Ask again" button is clicked. */
    askAgain?: () => void;
    /** Run when its page's "Refresh" button is clicked. */
    refresh?: () => void;
}

/** How long a visible tab waits, after a file it shows code of changed, for more changes before it reads them: a save
 * of many files, or a checkout, is read once. */
export const REREAD_QUIET_MS = 300;

/** Says when a file changes: saved in an editor, or changed, created or deleted on disk by anything else (a checkout, a
 * formatter, another editor), as the workspace's file watcher sees it. */
export class FileChanges implements vscode.Disposable {
    private readonly changed = new vscode.EventEmitter<vscode.Uri>();
    /** Fires with the file's URI. */
    readonly onDidChange = this.changed.event;
    private readonly subscriptions: vscode.Disposable[];

    constructor() {
        const watcher = vscode.workspace.createFileSystemWatcher('**/*');
        const fire = (uri: vscode.Uri) => this.changed.fire(uri);
        this.subscriptions = [watcher, watcher.onDidChange(fire), watcher.onDidCreate(fire), watcher.onDidDelete(fire),
            vscode.workspace.onDidSaveTextDocument((document) => fire(document.uri)), this.changed];
    }

    dispose(): void {
        this.subscriptions.forEach((subscription) => subscription.dispose());
    }
}

/** A document's URI in one spelling (VS Code's and the server's may encode the same path differently). */
const sameUri = (uri: string | vscode.Uri): string => (typeof uri === 'string' ? vscode.Uri.parse(uri) : uri).toString();

/** How a panel's tab is made: options VS Code needs again for a tab it restores. */
const WEBVIEW_OPTIONS: vscode.WebviewPanelOptions & vscode.WebviewOptions = {
    enableScripts: true,
    enableCommandUris: false,
    localResourceRoots: [],
    retainContextWhenHidden: false,
};

export class Panel implements vscode.Disposable {
    private panel: vscode.WebviewPanel | undefined;
    private tabClosed = false;
    private readonly closed = new vscode.EventEmitter<void>();
    /** Fires when the panel's tab is closed. */
    readonly onDidClose = this.closed.event;
    private readonly shown = new vscode.EventEmitter<void>();
    /** Fires when the panel's tab, hidden, is shown again. */
    readonly onDidShow = this.shown.event;
    /** The current page's context (its nonce, its id), for `refresh` to render it again as the same page. */
    private context: PageContext | undefined;
    /** Graph pages name files by workspace path; this maps them to URIs from the same graph answer. */
    private pathToUri: ReadonlyMap<string, string> = new Map();
    /** Everything posted to the current page, each numbered by its place (`seq`). The panel does not keep its page
     * while hidden (retainContextWhenHidden would hold a live page per panel all along); shown again, VS Code loads the
     * html afresh and what was posted meanwhile was dropped, so the page, once loaded, asks for it all again. */
    private posted: { seq: number }[] = [];
    /** What keeps the current page's code current (`rereadWhen`): let go when another page is shown. */
    private following: vscode.Disposable | undefined;

    constructor(private readonly viewType: string, private readonly options: PanelOptions = {}) {}

    /** Whether the panel's tab is open. */
    get isOpen(): boolean {
        return this.panel !== undefined;
    }

    /** Whether the panel's tab is open and shown (not hidden behind another tab of its group). */
    get isVisible(): boolean {
        return this.panel?.visible === true;
    }

    /** The editor group the panel's tab is in; undefined while it has none. */
    get viewColumn(): vscode.ViewColumn | undefined {
        return this.panel?.viewColumn;
    }

    /** Shows the panel (creating it if needed) with the page `render` builds for a fresh nonce; `page`: the page's id
     * (a page rendered again where it was read, in a reloaded window), default a new one. */
    show(title: string, render: (context: PageContext) => string, pathToUri: ReadonlyMap<string, string> = new Map(), page?: string): void {
        const panel = this.reveal(title);
        if (panel !== undefined) {
            this.render(panel, render, pathToUri, page);
        }
    }

    /** Shows a page in the panel's tab where the tab is: a tab VS Code restored in a reloaded window is not brought in
     * front of the one being read (`show` does, for a page the user asked for). Nothing once its tab is closed. */
    showInPlace(title: string, render: (context: PageContext) => string, page?: string, pathToUri: ReadonlyMap<string, string> = new Map()): void {
        if (this.panel !== undefined) {
            this.panel.title = visible(title);
            this.render(this.panel, render, pathToUri, page);
        }
    }

    private render(panel: vscode.WebviewPanel, render: (context: PageContext) => string, pathToUri: ReadonlyMap<string, string>,
        page: string = randomBytes(12).toString('base64url')): void {
        this.following?.dispose();
        this.following = undefined;
        this.pathToUri = pathToUri;
        this.posted = [];
        this.context = { nonce: randomBytes(16).toString('base64'), cspSource: panel.webview.cspSource, page, keep: this.options.keep };
        panel.webview.html = render(this.context);
    }

    /** Renders the current page again as the same page (read at the same place), when it renders differently now. */
    refresh(render: (context: PageContext) => string): void {
        if (this.panel === undefined || this.context === undefined) {
            return;
        }
        const html = render(this.context);
        if (html !== this.panel.webview.html) {
            this.posted = [];
            this.panel.webview.html = html;
        }
    }

    /**
     * Keeps the code the current page shows current: `reread` reads it from disk again (and says where it changed since
     * the page's answer), and the page is rendered again, at the place read, where that changed what it shows. It runs
     * each time the hidden tab is shown again, and while the tab is visible once one of `uris` (the files it shows code
     * of) is saved or changes on disk, after REREAD_QUIET_MS without another change, one read at a time. A hidden tab
     * reads nothing: it reads when shown. Until the panel shows another page.
     */
    rereadWhen(changes: FileChanges, uris: Iterable<string>, reread: () => Promise<(context: PageContext) => string>): void {
        const files = new Set([...uris].map(sameUri));
        let timer: ReturnType<typeof setTimeout> | undefined;
        let reading: Promise<void> | undefined;
        let again = false;
        let current = true;
        const read = async (): Promise<void> => {
            if (reading !== undefined) {
                again = true;  // a change while reading: read once more after, not twice at once
                return;
            }
            do {
                again = false;
                reading = reread().then((render) => (current ? this.refresh(render) : undefined));
                await reading.catch(() => undefined);
                reading = undefined;
            } while (again && current);
        };
        const subscriptions = [
            this.onDidShow(() => void read()),
            changes.onDidChange((uri) => {
                if (this.isVisible && files.has(sameUri(uri))) {
                    clearTimeout(timer);
                    timer = setTimeout(() => void read(), REREAD_QUIET_MS);
                }
            }),
        ];
        this.following = new vscode.Disposable(() => {
            current = false;
            clearTimeout(timer);
            subscriptions.forEach((subscription) => subscription.dispose());
        });
    }

    /** Takes on a tab VS Code restored in a reloaded window (before its first `show`). */
    adopt(panel: vscode.WebviewPanel): void {
        panel.webview.options = WEBVIEW_OPTIONS;
        this.attach(panel);
    }

    /** Sends a message to the page (progress while an answer is written), numbered, and keeps it for a reloaded page. */
    post(message: object): void {
        const numbered = { ...message, seq: this.posted.length };
        this.posted.push(numbered);
        void this.panel?.webview.postMessage(numbered);
    }

    /** The panel's tab, titled `name`, shown in front (a single panel only as it opens); undefined once a single
     * panel's tab was closed. */
    private reveal(name: string): vscode.WebviewPanel | undefined {
        // A title names a file or quotes a query: shown as the pages show them.
        const title = visible(name);
        if (this.panel !== undefined) {
            this.panel.title = title;
            if (!this.options.single) {
                this.panel.reveal(undefined, true);
            }
            return this.panel;
        }
        if (this.options.single && this.tabClosed) {
            return undefined;
        }
        const column = this.options.column ?? vscode.ViewColumn.Beside;
        const panel = vscode.window.createWebviewPanel(this.viewType, title, { viewColumn: column, preserveFocus: true }, WEBVIEW_OPTIONS);
        this.attach(panel);
        return panel;
    }

    private attach(panel: vscode.WebviewPanel): void {
        panel.webview.onDidReceiveMessage((message: unknown) => this.onMessage(message));
        // The view state changes too as the tab moves or takes focus: only a hidden tab shown again counts.
        let visible = panel.visible;
        panel.onDidChangeViewState(({ webviewPanel }) => {
            if (webviewPanel.visible && !visible) {
                this.shown.fire();
            }
            visible = webviewPanel.visible;
        });
        panel.onDidDispose(() => {
            this.following?.dispose();
            this.following = undefined;
            this.panel = undefined;
            this.tabClosed = true;
            this.closed.fire();
        });
        this.panel = panel;
    }

    private async onMessage(message: unknown): Promise<void> {
        if (isReplayMessage(message)) {
            // In one message: the page is whole again at once, and only then goes back to the place it was read at.
            void this.panel?.webview.postMessage({ type: 'replayed', messages: this.posted });
            return;
        }
        if (isAskAgainMessage(message)) {
            this.options.askAgain?.();
            return;
        }
        if (isRefreshMessage(message)) {
            this.options.refresh?.();
            return;
        }
        if (!isOpenMessage(message)) {
            return;
        }
        const target = messageTarget(message, this.pathToUri);
        if (target === undefined) {
            return;
        }
        try {
            await openAt(target.uri, target.range, { preview: false }, target.anchorLine);
        } catch (error) {
            void vscode.window.showErrorMessage(visibleMessage(`codeloupe: cannot open ${target.uri.toString()}: ${String(error)}`));
        }
    }

    dispose(): void {
        this.following?.dispose();
        this.panel?.dispose();
        this.closed.dispose();
        this.shown.dispose();
    }
}

/**
 * The answers: a panel per ask, so that a second question never replaces the first's answer, and an ask's progress,
 * posted to its own panel, never shows in another's. A new one opens in the group of the last one still open, with
 * the others as tabs beside it. Each is kept (KeptAnswers, by its ask's id) until its tab is closed, for a reloaded
 * window to show again.
 */
export class AnswerPanels {
    private readonly open: Panel[] = [];

    constructor(private readonly kept: () => KeptAnswers | undefined) {}

    /** A panel for ask `id`; nothing is shown until its first page. */
    create(id: string): Panel {
        return this.track(new Panel(ANSWER_VIEW, { single: true, column: this.open.at(-1)?.viewColumn, keep: id }), id);
    }

    /** The panel of a tab VS Code restored in a reloaded window, the answer of ask `id`; `askAgain` for its button. */
    restore(webviewPanel: vscode.WebviewPanel, id: string, askAgain?: () => void): Panel {
        const panel = this.track(new Panel(ANSWER_VIEW, { single: true, keep: id, askAgain }), id);
        panel.adopt(webviewPanel);
        return panel;
    }

    private track(panel: Panel, id: string): Panel {
        this.open.push(panel);
        panel.onDidClose(() => {
            this.open.splice(this.open.indexOf(panel), 1);
            void this.kept()?.forget(id);
        });
        return panel;
    }

}
