// The status bar item: index progress and vector completeness from codeloupe/status.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import type { StatusResult } from './protocol';
import { StatusRequest } from './protocol';

const POLL_INDEXING_MS = 1000;
/** Vectors can lag for minutes (or stall on an unreachable endpoint): poll them less often. */
const POLL_VECTORS_MS = 5000;

interface StatusText {
    text: string;
    tooltip: string;
}

/** Summarises every folder: indexing beats error beats ready; vectors show as a percentage until complete. */
function describeStatus(status: StatusResult): StatusText {
    const folders = status.folders;
    const files = folders.reduce((sum, folder) => sum + folder.files, 0);
    const done = folders.reduce((sum, folder) => sum + folder.vectors.done, 0);
    const total = folders.reduce((sum, folder) => sum + folder.vectors.total, 0);
    const vectors = total > 0 && done < total ? ` · vectors ${Math.floor((100 * done) / total)}%` : '';
    const tooltip = folders.map((folder) => `${folder.root}: ${folder.state}, ${folder.files} files, ${folder.chunks} chunks, ` +
        `vectors ${folder.vectors.done}/${folder.vectors.total}${folder.message ? ` (${folder.message})` : ''}`).join('\n');
    const indexing = folders.find((folder) => folder.state === 'indexing');
    if (indexing !== undefined) {
        return { text: `$(sync~spin) codeloupe ${indexing.message || `${files} files`}${vectors}`, tooltip };
    }
    if (folders.some((folder) => folder.state === 'error')) {
        return { text: '$(error) codeloupe', tooltip };
    }
    return { text: `$(search) codeloupe ${files} files${vectors}`, tooltip: tooltip || 'codeloupe: no workspace folder indexed' };
}

export class StatusItem implements vscode.Disposable {
    readonly item: vscode.StatusBarItem;
    private timer: NodeJS.Timeout | undefined;

    constructor(command: string) {
        this.item = vscode.window.createStatusBarItem('codeloupe.status', vscode.StatusBarAlignment.Left, 10);
        this.item.name = 'codeloupe';
        this.item.command = command;
        this.show('$(loading~spin) codeloupe', 'Starting the codeloupe language server');
    }

    show(text: string, tooltip: string): void {
        this.item.text = text;
        this.item.tooltip = tooltip;
        this.item.show();
    }

    /** Asks the server once; keeps polling while some folder is still indexing or vectors are incomplete. */
    async refresh(client: LanguageClient): Promise<StatusResult | undefined> {
        clearTimeout(this.timer);
        try {
            const status = await client.sendRequest(StatusRequest, {});
            const { text, tooltip } = describeStatus(status);
            this.show(text, tooltip);
            const indexing = status.folders.some((folder) => folder.state === 'indexing');
            const embedding = status.folders.some((folder) => folder.vectors.done < folder.vectors.total);
            if (indexing || embedding) {
                this.timer = setTimeout(() => void this.refresh(client), indexing ? POLL_INDEXING_MS : POLL_VECTORS_MS);
            }
            return status;
        } catch (error) {
            if (client.isRunning()) {
                this.show('$(warning) codeloupe', `codeloupe/status failed: ${error instanceof Error ? error.message : String(error)}`);
            }
            return undefined;
        }
    }

    stopPolling(): void {
        clearTimeout(this.timer);
    }

    dispose(): void {
        this.stopPolling();
        this.item.dispose();
    }
}
