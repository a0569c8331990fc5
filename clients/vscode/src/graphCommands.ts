// The graph commands: the map, one file with its neighbours, and the route between two files or concepts.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import type { GraphPage } from './graphViews';
import { activeRepository, INDEX_SCHEME } from './indexDocuments';
import { outsideEveryFolder } from './workspaceFiles';
import { GraphNodeRequest, GraphPathRequest, GraphRequest, isGraphFolder } from './protocol';
import { type PageContext, prepareGraphPage, renderCommunities } from './render';

/** The map of the workspace's communities (of the repository `folderUri` names, a shared index's; none: the
 * workspace's): the engine's page, or lists of links when the server sends none; with the map's files by path, which
 * the engine's page names them by. */
export async function graphMapPage(client: LanguageClient, folderUri: string | undefined): Promise<{
    render: (context: PageContext) => string; paths: Map<string, string>;
}> {
    const graph = await client.sendRequest(GraphRequest, { mode: 'map', html: true, folderUri });
    const html = graph.html;
    return {
        render: (context) => (html ? prepareGraphPage(context, html) : renderCommunities(context, graph)),
        paths: new Map(graph.nodes.map((node) => [node.path, node.uri])),
    };
}

/** Where the graph commands show a page of the graph detail tab, or what went wrong. */
export interface GraphDetail {
    show(page: GraphPage): void;
    showError(title: string, message: string): void;
}

/** One file of the graph (the explorer's or editor's file, else the active editor's) with its neighbours; a
 * folder of the explorer: its part of the graph. */
export async function showGraphNode(client: LanguageClient, detail: GraphDetail, target?: vscode.Uri): Promise<void> {
    const uri = target instanceof vscode.Uri ? target : vscode.window.activeTextEditor?.document.uri;
    if (uri === undefined) {
        void vscode.window.showWarningMessage('codeloupe: open a file (or pick one in the explorer) to show it in the graph.');
        return;
    }
    const outside = outsideEveryFolder(uri);
    if (outside !== undefined) {
        // Not a page quoting the server's refusal ("`node` file:///... is outside every workspace folder").
        void vscode.window.showWarningMessage(`${outside} Open its folder to see it in the graph.`);
        return;
    }
    const title = `Codeloupe Graph: ${vscode.workspace.asRelativePath(uri)}`;
    try {
        const node = await client.sendRequest(GraphNodeRequest, { mode: 'node', node: client.code2ProtocolConverter.asUri(uri) });
        if (node.found === false) {
            detail.show({ title, kind: 'miss', miss: node });
            return;
        }
        if (isGraphFolder(node)) {
            detail.show({ title, kind: 'folder', folder: node });
            return;
        }
        const language = (await vscode.workspace.openTextDocument(vscode.Uri.parse(node.uri))).languageId;
        detail.show({ title, kind: 'node', node, language });
    } catch (error) {
        detail.showError(title, error instanceof Error ? error.message : String(error));
    }
}

/** How two files (or concepts: "the CLI", "password hashing") connect, hop by hop. */
export async function showGraphPath(client: LanguageClient, detail: GraphDetail): Promise<void> {
    const current = vscode.window.activeTextEditor?.document.uri;
    // A shared repository's document: its path in the repository, which the route is then asked of.
    const folderUri = activeRepository();
    const from = await vscode.window.showInputBox({
        title: 'Codeloupe: Graph Path (1/2)',
        prompt: 'From: a workspace file or a concept',
        value: current?.scheme === INDEX_SCHEME ? current.path.split('/').slice(2).join('/')
            : current ? vscode.workspace.asRelativePath(current, false) : '',
    });
    if (!from?.trim()) {
        return;
    }
    const to = await vscode.window.showInputBox({ title: 'Codeloupe: Graph Path (2/2)', prompt: 'To: a workspace file or a concept' });
    if (!to?.trim()) {
        return;
    }
    const title = `Codeloupe Graph: ${from.trim()} → ${to.trim()}`;
    try {
        const [path, map] = await Promise.all([
            client.sendRequest(GraphPathRequest, { mode: 'path', from: from.trim(), to: to.trim(), folderUri }),
            client.sendRequest(GraphRequest, { mode: 'map', folderUri }),
        ]);
        detail.show({ title, kind: 'path', path, uris: map.nodes.map((node): [string, string] => [node.path, node.uri]) });
    } catch (error) {
        detail.showError(title, error instanceof Error ? error.message : String(error));
    }
}
