// Files of repositories the user has not cloned: search results from the shared index (settings `codeloupe.store.url`
// and `codeloupe.store.repositories`) carry `codeloupe-index:///<repository>/<path>?rev=<commit>` URIs, whose text the
// server reads from the index (`codeloupe/read`). A content provider's documents are read-only: nothing can be saved.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { ReadRequest } from './protocol';

export const INDEX_SCHEME = 'codeloupe-index';
/** Opens a shared-index document at a 1-based line: the target of the links `linkIndexDocuments` rewrites. */
export const OPEN_INDEX_DOCUMENT_COMMAND = 'codeloupe.client.openIndexDocument';

const INDEX_LINK = new RegExp(`\\]\\((${INDEX_SCHEME}:[^)#\\s]+)(?:#L(\\d+))?\\)`, 'g');

/**
 * The server's markdown (hovers) with every `codeloupe-index:` link made a link that opens the document: VS Code
 * renders links of its own schemes only, so a custom scheme's link would be inert text. The markdown may run this
 * one command and no other.
 */
export function linkIndexDocuments(markdown: vscode.MarkdownString): vscode.MarkdownString {
    if (!markdown.value.includes(`](${INDEX_SCHEME}:`)) {
        return markdown;
    }
    const value = markdown.value.replace(INDEX_LINK, (_link, uri: string, line?: string) =>
        `](command:${OPEN_INDEX_DOCUMENT_COMMAND}?${encodeURIComponent(JSON.stringify([uri, Number(line ?? 1)]))})`);
    const linked = new vscode.MarkdownString(value, markdown.supportThemeIcons);
    linked.isTrusted = { enabledCommands: [OPEN_INDEX_DOCUMENT_COMMAND] };
    return linked;
}

/**
 * The shared repository (`codeloupe-index:///<repository>`, a request's `folderUri`) of the active editor's document,
 * so that ask, tour and the graph answer about the repository being read; undefined for any other document.
 */
export function activeRepository(): string | undefined {
    const uri = vscode.window.activeTextEditor?.document.uri;
    const repository = uri?.scheme === INDEX_SCHEME ? uri.path.split('/')[1] : undefined;
    return repository ? `${INDEX_SCHEME}:///${repository}` : undefined;
}

export class IndexDocuments implements vscode.TextDocumentContentProvider {
    constructor(private readonly client: () => Promise<LanguageClient | undefined>) {}

    async provideTextDocumentContent(uri: vscode.Uri, token: vscode.CancellationToken): Promise<string> {
        const client = await this.client();
        if (client === undefined) {
            throw new Error(`codeloupe: the language server is not running, so ${uri.toString()} cannot be read`);
        }
        return (await client.sendRequest(ReadRequest, { uri: uri.toString() }, token)).text;
    }
}
