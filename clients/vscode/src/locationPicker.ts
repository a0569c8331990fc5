// A QuickPick of places in the workspace: highlighting one previews it, accepting opens it.
import * as vscode from 'vscode';
import type { LanguageClient, Location } from 'vscode-languageclient/node';
import { openLspLocation } from './locations';

export interface LocationItem extends vscode.QuickPickItem {
    location?: Location;
}

/** Shows `items` (separators and places) under `title`; resolves once the picker is accepted or hidden. */
export function pickLocation(client: LanguageClient, title: string, items: LocationItem[]): Promise<void> {
    const picker = vscode.window.createQuickPick<LocationItem>();
    picker.title = title;
    picker.matchOnDescription = true;
    // Typing filters the places but keeps their order and section headings (the default sort by label hid the
    // tour's "Entry points" and "Most mentioned names" in the real workbench, as it hid search's CORE/RELATED).
    (picker as vscode.QuickPick<LocationItem> & { sortByLabel?: boolean }).sortByLabel = false;
    picker.items = items;
    return new Promise((resolve) => {
        picker.onDidChangeActive(([item]) => {
            if (item?.location !== undefined) {
                void openLspLocation(client, item.location, { preview: true });
            }
        });
        let opening: Promise<unknown> | undefined;
        picker.onDidAccept(() => {
            const location = picker.selectedItems[0]?.location ?? picker.activeItems[0]?.location;
            opening = location === undefined ? undefined : openLspLocation(client, location, { preview: false });
            picker.hide();
        });
        picker.onDidHide(() => {
            picker.dispose();
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
