// Which editor files the server can answer about: only files inside a workspace folder are indexed.
import * as vscode from 'vscode';
import { visibleMessage } from './visible';

/**
 * Why a file cannot be asked about, or undefined when it can: a file on disk outside every workspace folder (opened
 * with File > Open File, or a file of another project) is in no index. Shared-index documents
 * (`codeloupe-index:`) are answered from the index and pass.
 */
export function outsideEveryFolder(uri: vscode.Uri): string | undefined {
    if (uri.scheme !== 'file' || vscode.workspace.getWorkspaceFolder(uri) !== undefined) {
        return undefined;
    }
    return visibleMessage(`codeloupe: ${uri.fsPath} is outside every workspace folder, so it is not indexed.`);
}
