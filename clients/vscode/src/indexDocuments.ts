// Files of repositories the user has not cloned: search results from the shared index (settings `codeloupe.store.url`
// and `codeloupe.store.repositories`) carry `codeloupe-index:///<repository>/<path>?rev=<commit>` URIs, whose text the
// server reads from the index (`codeloupe/read`). A content provider's documents are read-only: nothing can be saved.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { ReadRequest } from './protocol';

export const INDEX_SCHEME = 'codeloupe-index';

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
