// The sidebar view "Last Bundle": the most recent search (or ask) bundle as a tree, CORE then RELATED, each file
// with its matching chunks; selecting one opens it at the match.
import * as vscode from 'vscode';
import { type Match, matchOf } from './match';
import type { ChunkResult, FileResult, SearchResult } from './protocol';
import { shownPath } from './protocol';
import { viaLabel } from './via';
import { oneLine, visible } from './visible';

export const OPEN_MATCH_COMMAND = 'codeloupe.client.openMatch';

type Node =
    | { kind: 'section'; label: string; files: FileResult[] }
    | { kind: 'file'; file: FileResult }
    | { kind: 'chunk'; file: FileResult; chunk: ChunkResult };

function chunkMatch(file: FileResult, chunk: ChunkResult): Match {
    return matchOf({ ...file, location: chunk.location, chunks: [chunk] });
}

export class BundleView implements vscode.TreeDataProvider<Node>, vscode.Disposable {
    private readonly changed = new vscode.EventEmitter<Node | undefined>();
    readonly onDidChangeTreeData = this.changed.event;
    private result: SearchResult | undefined;
    private readonly view: vscode.TreeView<Node>;

    constructor(viewId: string) {
        this.view = vscode.window.createTreeView(viewId, { treeDataProvider: this, showCollapseAll: true });
        this.view.message = 'Search or ask: the last bundle shows here.';
    }

    /** Whether it shows no bundle yet. */
    get isEmpty(): boolean {
        return this.result === undefined;
    }

    show(result: SearchResult): void {
        this.result = result;
        this.view.message = undefined;
        this.view.description = visible(result.query.split('\n', 1)[0]);
        this.changed.fire(undefined);
    }

    getChildren(node?: Node): Node[] {
        const result = this.result;
        if (result === undefined) {
            return [];
        }
        if (node === undefined) {
            return [
                { kind: 'section', label: 'CORE', files: result.core },
                { kind: 'section', label: 'RELATED', files: result.related },
            ];
        }
        if (node.kind === 'section') {
            return node.files.map((file) => ({ kind: 'file', file }));
        }
        if (node.kind === 'file') {
            return node.file.chunks.map((chunk) => ({ kind: 'chunk', file: node.file, chunk }));
        }
        return [];
    }

    getTreeItem(node: Node): vscode.TreeItem {
        if (node.kind === 'section') {
            const item = new vscode.TreeItem(node.label, vscode.TreeItemCollapsibleState.Expanded);
            item.description = `${node.files.length}`;
            return item;
        }
        if (node.kind === 'file') {
            const match = matchOf(node.file);
            const collapsible = node.file.chunks.length > 1 ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None;
            const item = new vscode.TreeItem(oneLine(shownPath(node.file)), collapsible);
            item.resourceUri = vscode.Uri.parse(node.file.uri);
            item.description = [viaLabel(node.file.via)?.text ?? '', visible(match.symbol), `L${match.anchorLine + 1}`].filter(Boolean).join(' · ');
            item.tooltip = oneLine(node.file.why);  // it names files ("called from PATH"): one line, as the engine shows it
            item.command = { title: 'Open', command: OPEN_MATCH_COMMAND, arguments: [match] };
            return item;
        }
        const match = chunkMatch(node.file, node.chunk);
        const item = new vscode.TreeItem(visible(match.symbol || node.chunk.kind), vscode.TreeItemCollapsibleState.None);
        item.description = `L${match.anchorLine + 1}`;
        item.tooltip = oneLine(node.chunk.breadcrumb);
        item.command = { title: 'Open', command: OPEN_MATCH_COMMAND, arguments: [match] };
        return item;
    }

    dispose(): void {
        this.view.dispose();
        this.changed.dispose();
    }
}
