// Opening files at ranges, from pickers, webviews and code lenses.
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { LanguageClient, Location, Range } from 'vscode-languageclient/node';
import type { OpenMessage } from './protocol';

export interface OpenOptions {
    /** Open as a preview tab and keep focus where it is (QuickPick highlight). */
    preview: boolean;
}

export async function openAt(uri: vscode.Uri, range: vscode.Range | undefined, { preview }: OpenOptions): Promise<vscode.TextEditor> {
    const editor = await vscode.window.showTextDocument(uri, {
        preview,
        preserveFocus: preview,
        selection: range,
    });
    if (range !== undefined) {
        editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
    return editor;
}

export function openLspLocation(client: LanguageClient, location: Location, options: OpenOptions): Promise<vscode.TextEditor> {
    const converter = client.protocol2CodeConverter;
    return openAt(converter.asUri(location.uri), converter.asRange(location.range), options);
}

/** Resolves a webview's open message: a URI, or a path relative to a workspace folder (the graph page). */
export function messageTarget(client: LanguageClient, message: OpenMessage, pathToUri?: ReadonlyMap<string, string>): { uri: vscode.Uri; range?: vscode.Range } | undefined {
    let uri: vscode.Uri | undefined;
    if (message.uri !== undefined) {
        uri = client.protocol2CodeConverter.asUri(message.uri);
    } else if (message.path !== undefined) {
        const known = pathToUri?.get(message.path);
        if (known !== undefined) {
            uri = client.protocol2CodeConverter.asUri(known);
        } else if (path.isAbsolute(message.path)) {
            uri = vscode.Uri.file(message.path);
        } else {
            const folder = vscode.workspace.workspaceFolders?.[0];
            uri = folder ? vscode.Uri.joinPath(folder.uri, message.path) : undefined;
        }
    }
    if (uri === undefined) {
        return undefined;
    }
    if (message.range !== undefined) {
        return { uri, range: client.protocol2CodeConverter.asRange(message.range as Range) };
    }
    if (typeof message.line === 'number' && message.line >= 1) {
        const line = new vscode.Position(message.line - 1, 0);
        return { uri, range: new vscode.Range(line, line) };
    }
    return { uri };
}
