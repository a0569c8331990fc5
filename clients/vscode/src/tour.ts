// "Codeloupe: Tour": where to start reading. Entry points first, then the names most files mention.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { activeRepository } from './indexDocuments';
import { lineOf, type LocationItem, pickLocation } from './locationPicker';
import { type TourResult, TourRequest } from './protocol';

/** Rows for a tour: mentions are labelled as mentions, never as uses (a name in a comment counts too). */
export function tourItems(tour: TourResult): LocationItem[] {
    const items: LocationItem[] = [];
    if (tour.entryPoints.length > 0) {
        items.push({ label: 'Entry points', kind: vscode.QuickPickItemKind.Separator });
        items.push(...tour.entryPoints.map((entry) => ({
            label: `$(debug-start) ${entry.path}`,
            description: [entry.kind, entry.detail].filter((part) => part !== '').join(' · '),
            location: entry.location,
        })));
    }
    if (tour.stops.length > 0) {
        items.push({ label: 'Most mentioned names', kind: vscode.QuickPickItemKind.Separator });
        items.push(...tour.stops.map((stop) => ({
            label: `$(symbol-${stop.kind === 'class' ? 'class' : 'function'}) ${stop.name}`,
            description: `${stop.mentions === 1 ? '1 file mentions it' : `${stop.mentions} files mention it`} · ${lineOf(stop.path, stop.location)}`,
            location: stop.location,
        })));
    }
    if (items.length === 0) {
        items.push({ label: 'Nothing to tour yet', description: 'the index holds no definitions' });
    }
    return items;
}

export async function showTour(client: LanguageClient): Promise<void> {
    const folder = vscode.workspace.workspaceFolders?.[0];
    const folderUri = activeRepository() ?? (folder ? client.code2ProtocolConverter.asUri(folder.uri) : undefined);
    const tour = await client.sendRequest(TourRequest, folderUri ? { folderUri } : {});
    await pickLocation(client, 'Codeloupe: Tour', tourItems(tour));
}
