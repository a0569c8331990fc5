// "Codeloupe: Search the Codebase": a QuickPick that queries codeloupe/search as you type.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { openLspLocation } from './locations';
import { type Match, matchOf } from './match';
import type { FileResult, SearchResult } from './protocol';
import { SearchRequest, shownPath } from './protocol';
import { resultNotes } from './render';
import { viaLabel } from './via';
import { oneLine, visible, visibleLabel } from './visible';

const SEARCH_DEBOUNCE_MS = 150;

export interface SearchItem extends vscode.QuickPickItem {
    /** Set on file items: where accepting (or highlighting) the item goes. */
    match?: Match;
    /** Set on the item that opens the whole bundle. */
    openBundle?: boolean;
}

/** One row per file: the file, then the matching chunk's symbol and line; graph neighbours say so. A tail file is
 * a map line (the server reads none of its text): one row, without the snippet line. */
function fileItem(file: FileResult): SearchItem {
    const match = matchOf(file);
    const via = viaLabel(file.via);
    return {
        label: `${via?.icon ?? '$(file-code)'} ${visibleLabel(oneLine(shownPath(file)))}`,
        description: [via?.text ?? '', visibleLabel(match.symbol), `L${match.anchorLine + 1}`].filter((part) => part !== '').join(' · '),
        detail: file.tail === true || match.line === '' ? undefined : visibleLabel(match.line),
        match,
        alwaysShow: true,
    };
}

/** The label of the separator the long tail is folded under (every tail file stays in the list, after it). */
const tailSeparatorLabel = (count: number): string => `${count} more related file${count === 1 ? '' : 's'}`;

function searchItems(result: SearchResult): SearchItem[] {
    if (result.core.length === 0 && result.related.length === 0) {
        return [{ label: 'No match', description: visibleLabel(result.query), alwaysShow: true }];
    }
    // The long tail (rule 2 keeps every candidate) comes last, under its own separator, so the files worth reading
    // first are not buried in it; it is still there to scroll to and open.
    const related = result.related.filter((file) => file.tail !== true);
    const tail = result.related.filter((file) => file.tail === true);
    const items: SearchItem[] = [{
        label: '$(list-tree) Open the full bundle',
        description: `${result.core.length} core, ${result.related.length} related`
            + (tail.length === 0 ? '' : ` (${tail.length} in the long tail)`),
        detail: resultNotes(result).length === 0 ? undefined : `$(warning) ${visibleLabel(resultNotes(result).join(' · '))}`,
        openBundle: true,
        alwaysShow: true,
    }];
    items.push({ label: 'CORE', kind: vscode.QuickPickItemKind.Separator }, ...result.core.map(fileItem));
    if (related.length > 0) {
        items.push({ label: 'RELATED', kind: vscode.QuickPickItemKind.Separator }, ...related.map(fileItem));
    }
    if (tail.length > 0) {
        items.push({ label: tailSeparatorLabel(tail.length), kind: vscode.QuickPickItemKind.Separator }, ...tail.map(fileItem));
    }
    return items;
}

export interface SearchPickerActions {
    /** Renders a whole result in the bundle panel. */
    showBundle(result: SearchResult): void;
    /** Keeps the result the user acted on (opened a file or the bundle) as the last bundle. */
    remember(result: SearchResult): void;
}

/** Runs one search session. */
export function runSearchPicker(client: LanguageClient, { showBundle, remember }: SearchPickerActions, initialQuery = ''): void {
    const picker = vscode.window.createQuickPick<SearchItem>();
    picker.title = 'Codeloupe: Search the Codebase';
    picker.placeholder = 'Describe what you are looking for, or paste a bug report';
    picker.matchOnDescription = false;
    picker.matchOnDetail = false;
    // The input is the query, not a filter of the rows: VS Code's default (sort by label match) hides every
    // separator as soon as the input has text (CORE, RELATED and the folded tail vanished in a real code-server
    // workbench) and reorders the ranking whenever a label happens to match the query. `sortByLabel` is not in
    // the typed API yet (proposal quickPickSortByLabel); the workbench applies it, an editor without it ignores it.
    (picker as vscode.QuickPick<SearchItem> & { sortByLabel?: boolean }).sortByLabel = false;
    let latest: SearchResult | undefined;
    let lastQuery = '';
    let pending: vscode.CancellationTokenSource | undefined;
    let timer: NodeJS.Timeout | undefined;

    const cancelPending = (): void => {
        clearTimeout(timer);
        pending?.cancel();
        pending?.dispose();
        pending = undefined;
    };

    const search = async (query: string): Promise<void> => {
        cancelPending();
        lastQuery = query;
        if (query.trim() === '') {
            picker.items = [];
            picker.busy = false;
            return;
        }
        const source = new vscode.CancellationTokenSource();
        pending = source;
        picker.busy = true;
        try {
            const result = await client.sendRequest(SearchRequest, { query }, source.token);
            if (source.token.isCancellationRequested) {
                return;
            }
            latest = result;
            picker.items = searchItems(result);
            // Enter straight after typing opens the top file, as in every picker of files (in the real workbench
            // the first row, which opens the bundle, was the one highlighted); the bundle row stays one Up away.
            picker.activeItems = picker.items.filter((item) => item.match !== undefined).slice(0, 1);
        } catch (error) {
            if (!source.token.isCancellationRequested) {
                picker.items = [{ label: `$(error) Search failed: ${visibleLabel(error instanceof Error ? error.message : String(error))}`, alwaysShow: true }];
            }
        } finally {
            if (pending === source) {
                picker.busy = false;
                pending = undefined;
                source.dispose();
            }
        }
    };

    picker.onDidChangeValue((value) => {
        clearTimeout(timer);
        if (value === lastQuery) {
            return;
        }
        timer = setTimeout(() => void search(value), SEARCH_DEBOUNCE_MS);
    });
    picker.onDidChangeActive((active) => {
        const match = active[0]?.match;
        if (match !== undefined) {
            void openLspLocation(client, match.location, { preview: true }, match.anchorLine).catch(() => undefined);
        }
    });
    picker.onDidAccept(() => {
        const chosen = picker.selectedItems[0] ?? picker.activeItems[0];
        if (latest !== undefined && (chosen?.openBundle || chosen?.match !== undefined)) {
            remember(latest);
        }
        if (chosen?.openBundle && latest !== undefined) {
            showBundle(latest);
            picker.hide();
        } else if (chosen?.match !== undefined) {
            void openLspLocation(client, chosen.match.location, { preview: false }, chosen.match.anchorLine);
            picker.hide();
        }
    });
    picker.onDidHide(() => {
        cancelPending();
        picker.dispose();
    });
    picker.show();
    if (initialQuery.includes('\n')) {
        // The input box holds one line: a multi-line selection (a traceback, a bug report) is searched whole and
        // named in the placeholder; typing starts a new query.
        const lines = initialQuery.trim().split('\n');
        picker.placeholder = `Searching the ${lines.length} selected lines: ${visible(lines[0].trim())} … (type to search something else)`;
        void search(initialQuery);
    } else if (initialQuery.trim() !== '') {
        picker.value = initialQuery.trim();
        void search(initialQuery.trim());
    }
}
