// "Codeloupe: Related Code": the indexed chunks nearest to the selection (or the cursor line), nearest first.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { linesOf } from './lines';
import { lineOf, type LocationItem, pickLocation } from './locationPicker';
import { type RelatedResult, RelatedRequest } from './protocol';
import { visible, visibleLabel } from './visible';
import { outsideEveryFolder } from './workspaceFiles';

export function relatedItems(related: RelatedResult): LocationItem[] {
    if (related.chunks.length === 0) {
        return [{ label: 'Nothing related', description: `no other ${related.language} chunk is near this code` }];
    }
    return related.chunks.map((chunk) => {
        const firstLine = linesOf(chunk.text).find((line) => line.trim() !== '')?.trim();
        return {
            label: `$(file-code) ${visibleLabel(chunk.breadcrumb || chunk.name || chunk.path)}`,
            description: `${visibleLabel(lineOf(chunk.path, chunk.location))} · ${chunk.score.toFixed(2)}`,
            detail: firstLine === undefined ? undefined : visibleLabel(firstLine),
            location: chunk.location,
        };
    });
}

export async function showRelated(client: LanguageClient): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (editor === undefined) {
        void vscode.window.showWarningMessage('codeloupe: open a file and select code (or put the cursor on a line) to find related code.');
        return;
    }
    const outside = outsideEveryFolder(editor.document.uri);
    if (outside !== undefined) {
        // The server would refuse it (`uri` ... is outside every workspace folder), which the real workbench shows
        // as a modal "Command 'Codeloupe: Related Code' resulted in an error" dialog.
        void vscode.window.showWarningMessage(`${outside} Open its folder to find code related to it.`);
        return;
    }
    const { start, end } = editor.selection;
    // Whole lines: the selection's, or the cursor's when nothing is selected.
    const lastLine = end.line > start.line && end.character === 0 ? end.line : end.line + 1;
    const range = { start: { line: start.line, character: 0 }, end: { line: lastLine, character: 0 } };
    const related = await client.sendRequest(RelatedRequest, { uri: client.code2ProtocolConverter.asUri(editor.document.uri), range });
    const where = `${vscode.workspace.asRelativePath(editor.document.uri)}:${start.line + 1}-${lastLine}`;
    await pickLocation(client, `Codeloupe: Related to ${visible(where)} (${related.lane})`, relatedItems(related));
}
