// A QuickPick of places in the workspace: highlighting one previews it, accepting opens it.
import * as vscode from 'vscode';
import type { LanguageClient, Location } from 'vscode-languageclient/node';
import { openLspLocation } from './locations';

export interface LocationItem extends vscode.QuickPickItem {
    location?: Location;
    /** Accepting the row lists these instead, the picker staying open (a list cut short, listed further). */
    more?: () => Promise<LocationItem[]>;
}

/**
 * Shows `items` (separators and places) under `title`; resolves once the picker is accepted or hidden, and rejects
 * (the picker hidden) when a row's `more` fails.
 */
export function pickLocation(client: LanguageClient, title: string, items: LocationItem[]): Promise<void> {
    const picker = vscode.window.createQuickPick<LocationItem>();
    picker.title = title;
    picker.matchOnDescription = true;
    // Typing filters the places but keeps their order and section headings (the default sort by label hid the
    // tour's "Entry points" and "Most mentioned names" in the real workbench, as it hid search's CORE/RELATED).
    (picker as vscode.QuickPick<LocationItem> & { sortByLabel?: boolean }).sortByLabel = false;
    picker.items = items;
    return new Promise((resolve, reject) => {
        let opening: Promise<unknown> | undefined;
        let failed: { error: unknown } | undefined;
        let hidden = false;
        // The highlight moves faster than files open (new items: the workbench highlights their first row, then the
        // one asked for), and files open in any order: previews go one at a time, each only if its row is still
        // the highlighted one, so the editor ends on the highlighted row.
        let previewed: Promise<unknown> = Promise.resolve();
        picker.onDidChangeActive(([item]) => {
            const location = item?.location;
            if (location !== undefined) {
                previewed = previewed.then(() => (hidden || picker.activeItems[0] !== item ? undefined
                    : openLspLocation(client, location, { preview: true }))).catch(() => undefined);
            }
        });
        const listMore = async (row: LocationItem, more: () => Promise<LocationItem[]>): Promise<void> => {
            picker.busy = true;
            // A filter typed to reach the row matches the row, not what it lists: kept, it would leave the picker
            // empty. It goes now, not once the list is in, so a filter typed while the list loads is kept.
            if (picker.value !== '') {
                picker.value = '';
                picker.activeItems = [row];
            }
            try {
                const listed = await more();
                if (hidden) {
                    return;
                }
                // The list goes on where it was cut: the row that takes the accepted one's place is highlighted.
                const at = picker.items.indexOf(row);
                picker.items = listed;
                const next = listed[at];
                if (next !== undefined && next.kind !== vscode.QuickPickItemKind.Separator) {
                    picker.activeItems = [next];
                }
            } catch (error) {
                failed = { error };
                picker.hide();
            } finally {
                picker.busy = false;
            }
        };
        picker.onDidAccept(() => {
            const accepted = picker.selectedItems[0] ?? picker.activeItems[0];
            if (accepted?.more !== undefined) {
                if (!picker.busy) {
                    void listMore(accepted, accepted.more);
                }
                return;
            }
            const location = accepted?.location ?? picker.activeItems[0]?.location;
            opening = location === undefined ? undefined : previewed.then(() => openLspLocation(client, location, { preview: false }));
            picker.hide();
        });
        picker.onDidHide(() => {
            hidden = true;
            picker.dispose();
            if (failed !== undefined) {
                reject(failed.error);
                return;
            }
            // Resolved once the accepted place is open (or failed to open), so callers see the editor it opened.
            void Promise.resolve(opening).then(() => resolve(), () => resolve());
        });
        picker.show();
    });
}

/** "path:line" of a location, 1-based, for a row's description. */
export function lineOf(path: string, location: Location): string {
    return `${path}:${location.range.start.line + 1}`;
}
