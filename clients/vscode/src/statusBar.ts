// The status bar item: index progress and vector completeness from codeloupe/status.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import type { FolderStatus, StatusResult } from './protocol';
import { StatusRequest } from './protocol';
import { visible, visibleLabel } from './visible';

const POLL_INDEXING_MS = 1000;
/** Vectors can lag for minutes (or stall on an unreachable endpoint): poll them less often. */
const POLL_VECTORS_MS = 5000;

/** Vectors a folder still waits for; none with the `none` provider (lexical and symbol lanes only). */
function missingVectors(folder: FolderStatus): number {
    return folder.provider === 'none' ? 0 : Math.max(0, folder.vectors.total - folder.vectors.done);
}

export interface StatusText {
    text: string;
    tooltip: string;
}

/**
 * Summarises every folder: re-opening (a workspace folder the server does not list yet, as while it re-opens a
 * folder on new settings) and indexing beat error beats ready; vectors show as a percentage until complete.
 */
export function describeStatus(status: StatusResult, expectedFolders: number): StatusText {
    const folders = status.folders;
    const files = folders.reduce((sum, folder) => sum + folder.files, 0);
    const embedded = folders.filter((folder) => folder.provider !== 'none');
    const done = embedded.reduce((sum, folder) => sum + folder.vectors.done, 0);
    const total = embedded.reduce((sum, folder) => sum + folder.vectors.total, 0);
    const vectors = total > 0 && done < total ? ` · vectors ${Math.floor((100 * done) / total)}%` : '';
    const tooltip = visible(folders.map((folder) => `${folder.root}: ${folder.state}, ${folder.files} files, ${folder.chunks} chunks, ` +
        `vectors ${folder.vectors.done}/${folder.vectors.total}${folder.message ? ` (${folder.message})` : ''}`).join('\n'));
    if (folders.length < expectedFolders) {
        return { text: '$(sync~spin) codeloupe opening the workspace', tooltip: tooltip || 'codeloupe: opening the workspace folders' };
    }
    const indexing = folders.find((folder) => folder.state === 'indexing');
    if (indexing !== undefined) {
        // A first index has stored no file yet while it scans the tree: "0 files" would read as an empty workspace.
        // The folder's message may quote an error (an embedding endpoint's): the item's text renders `$(name)`.
        const progress = indexing.message ? visibleLabel(indexing.message) : files > 0 ? `${files} files` : 'indexing';
        return { text: `$(sync~spin) codeloupe ${progress}${vectors}`, tooltip };
    }
    if (folders.some((folder) => folder.state === 'error')) {
        return { text: '$(error) codeloupe', tooltip };
    }
    return { text: `$(search) codeloupe ${files} files${vectors}`, tooltip: tooltip || 'codeloupe: no workspace folder indexed' };
}

export class StatusItem implements vscode.Disposable {
    readonly item: vscode.StatusBarItem;
    private timer: NodeJS.Timeout | undefined;
    /** Counts refreshes: an answer is shown only if no later refresh started meanwhile. */
    private generation = 0;

    /** `command`: what a click runs (the index status), unless show() is given an action. */
    constructor(private readonly command: string) {
        this.item = vscode.window.createStatusBarItem('codeloupe.status', vscode.StatusBarAlignment.Left, 10);
        this.item.name = 'codeloupe';
        this.show('$(loading~spin) codeloupe', 'Starting the codeloupe language server');
    }

    /**
     * `action`: a command the user must run before codeloupe can (the trust editor in Restricted Mode): a click runs
     * it instead of the index status, and the item has the warning background until a show() without one.
     */
    show(text: string, tooltip: string, action?: string): void {
        this.item.text = text;
        this.item.tooltip = tooltip;
        this.item.command = action ?? this.command;
        this.item.backgroundColor = action === undefined ? undefined : new vscode.ThemeColor('statusBarItem.warningBackground');
        this.item.show();
    }

    /**
     * Asks the server once; keeps polling while a folder is still opening or indexing, or vectors are incomplete.
     * Only the latest refresh shows or schedules anything: an older answer landing late (two settings changed at
     * once) must neither overwrite it nor start a second polling chain.
     */
    async refresh(client: LanguageClient): Promise<StatusResult | undefined> {
        clearTimeout(this.timer);
        const generation = ++this.generation;
        try {
            const status = await client.sendRequest(StatusRequest, {});
            if (generation !== this.generation) {
                return status;
            }
            const expectedFolders = vscode.workspace.workspaceFolders?.length ?? 0;
            const { text, tooltip } = describeStatus(status, expectedFolders);
            this.show(text, tooltip);
            const opening = status.folders.length < expectedFolders;
            const indexing = opening || status.folders.some((folder) => folder.state === 'indexing');
            const embedding = status.folders.some((folder) => missingVectors(folder) > 0);
            if (indexing || embedding) {
                this.timer = setTimeout(() => void this.refresh(client), indexing ? POLL_INDEXING_MS : POLL_VECTORS_MS);
            }
            return status;
        } catch (error) {
            if (client.isRunning() && generation === this.generation) {
                this.show('$(warning) codeloupe', `codeloupe/status failed: ${error instanceof Error ? error.message : String(error)}`);
            }
            return undefined;
        }
    }

    stopPolling(): void {
        clearTimeout(this.timer);
        this.generation += 1;
    }

    dispose(): void {
        this.stopPolling();
        this.item.dispose();
    }
}
