// The two webview panels: results (bundles, answers, status) and the graph. Each is reused while open.
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { messageTarget, openAt } from './locations';
import { isOpenMessage, isReplayMessage } from './protocol';
import type { PageContext } from './render';
import { visible, visibleMessage } from './visible';

export class Panel implements vscode.Disposable {
    private panel: vscode.WebviewPanel | undefined;
    /** Graph pages name files by workspace path; this maps them to URIs from the same graph answer. */
    private pathToUri: ReadonlyMap<string, string> = new Map();
    /** Everything posted to the current page, each numbered by its place (`seq`). The panel does not keep its page
     * while hidden (retainContextWhenHidden would hold a live page per panel all along); shown again, VS Code loads the
     * html afresh and what was posted meanwhile was dropped, so the page, once loaded, asks for it all again. */
    private posted: { seq: number }[] = [];

    constructor(
        private readonly viewType: string,
        private readonly getClient: () => LanguageClient | undefined,
    ) {}

    /** Shows the panel (creating it if needed) with the page `render` builds for a fresh nonce. */
    show(title: string, render: (context: PageContext) => string, pathToUri: ReadonlyMap<string, string> = new Map()): void {
        const panel = this.reveal(title);
        this.pathToUri = pathToUri;
        this.posted = [];
        panel.webview.html = render({ nonce: randomBytes(16).toString('base64'), cspSource: panel.webview.cspSource });
    }

    /** Sends a message to the page (progress while an answer is written), numbered, and keeps it for a reloaded page. */
    post(message: object): void {
        const numbered = { ...message, seq: this.posted.length };
        this.posted.push(numbered);
        void this.panel?.webview.postMessage(numbered);
    }

    private reveal(name: string): vscode.WebviewPanel {
        // A title names a file or quotes a query: shown as the pages show them.
        const title = visible(name);
        if (this.panel !== undefined) {
            this.panel.title = title;
            this.panel.reveal(undefined, true);
            return this.panel;
        }
        const panel = vscode.window.createWebviewPanel(this.viewType, title, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true }, {
            enableScripts: true,
            enableCommandUris: false,
            localResourceRoots: [],
            retainContextWhenHidden: false,
        });
        panel.webview.onDidReceiveMessage((message: unknown) => this.onMessage(message));
        panel.onDidDispose(() => {
            this.panel = undefined;
        });
        this.panel = panel;
        return panel;
    }

    private async onMessage(message: unknown): Promise<void> {
        if (isReplayMessage(message)) {
            for (const posted of this.posted) {
                void this.panel?.webview.postMessage(posted);
            }
            return;
        }
        const client = this.getClient();
        if (!isOpenMessage(message) || client === undefined) {
            return;
        }
        const target = messageTarget(client, message, this.pathToUri);
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
        this.panel?.dispose();
    }
}
