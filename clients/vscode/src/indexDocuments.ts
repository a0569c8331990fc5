// Files of repositories the user has not cloned: search results from the shared index (settings `codeloupe.store.url`
// and `codeloupe.store.repositories`) carry `codeloupe-index:///<repository>/<path>?rev=<commit>` URIs, whose text the
// server reads from the index (`codeloupe/read`). A content provider's documents are read-only: nothing can be saved.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { ReadRequest } from './protocol';

export const INDEX_SCHEME = 'codeloupe-index';

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
