// Opening files at ranges, from pickers, webviews and code lenses.
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { LanguageClient, Location } from 'vscode-languageclient/node';
import type { OpenMessage } from './protocol';

export interface OpenOptions {
    /** Open as a preview tab and keep focus where it is (QuickPick highlight). */
    preview: boolean;
}

/**
 * Opens `uri` with the cursor at the start of `anchorLine` (default: the span's first line) and nothing selected,
 * so the next keystroke edits nothing by surprise; the span is revealed, then the cursor line if the span is taller
 * than the view.
 */
export async function openAt(uri: vscode.Uri, span: vscode.Range | undefined, { preview }: OpenOptions, anchorLine?: number): Promise<vscode.TextEditor> {
    const document = await vscode.workspace.openTextDocument(uri);
    const line = Math.max(0, Math.min(anchorLine ?? span?.start.line ?? 0, document.lineCount - 1));
    const cursor = new vscode.Position(line, document.lineAt(line).firstNonWhitespaceCharacterIndex);
    const editor = await vscode.window.showTextDocument(document, {
        preview,
        preserveFocus: preview,
        selection: new vscode.Range(cursor, cursor),
    });
    if (span !== undefined) {
        editor.revealRange(span, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
    editor.revealRange(new vscode.Range(cursor, cursor), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    return editor;
}

export function openLspLocation(client: LanguageClient, location: Location, options: OpenOptions, anchorLine?: number): Promise<vscode.TextEditor> {
    const converter = client.protocol2CodeConverter;
    return openAt(converter.asUri(location.uri), converter.asRange(location.range), options, anchorLine);
}

/** Resolves a webview's open message: a URI, or a path relative to a workspace folder (the graph page). */
export interface OpenTarget {
    uri: vscode.Uri;
    range?: vscode.Range;
    /** 0-based line for the cursor, when the page named one inside the range. */
    anchorLine?: number;
}

/**
 * The page's message as VS Code's own URI and range, with no language server: a tab a reloaded window restores is up
 * before its server, and its links did nothing until the server was (the page already names each span's URI and lines).
 */
export function messageTarget(message: OpenMessage, pathToUri?: ReadonlyMap<string, string>): OpenTarget | undefined {
    let uri: vscode.Uri | undefined;
    if (message.uri !== undefined) {
        uri = vscode.Uri.parse(message.uri);
    } else if (message.path !== undefined) {
        const known = pathToUri?.get(message.path);
        if (known !== undefined) {
            uri = vscode.Uri.parse(known);
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
        const { start, end } = message.range;
        return { uri, range: new vscode.Range(start.line, start.character, end.line, end.character), anchorLine: message.anchor };
    }
    if (typeof message.line === 'number' && message.line >= 1) {
        const line = new vscode.Position(message.line - 1, 0);
        return { uri, range: new vscode.Range(line, line) };
    }
    return { uri };
}
