// "Codeloupe: Tour": where to start reading. Entry points first, then the names most files mention.
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';
import { activeRepository } from './indexDocuments';
import { lineOf, type LocationItem, pickLocation } from './locationPicker';
import { MAX_TOUR_ENTRY_POINTS, type TourResult, TourRequest } from './protocol';
import { visibleLabel } from './visible';

/**
 * Rows for a tour: mentions are labelled as mentions, never as uses (a name in a comment counts too). Entry points
 * the tour left out are counted after the listed ones, in a row that lists them with `listEntryPoints(count)`.
 */
export function tourItems(tour: TourResult, listEntryPoints: (count: number) => Promise<LocationItem[]>): LocationItem[] {
    const items: LocationItem[] = [];
    if (tour.entryPoints.length > 0) {
        items.push({ label: 'Entry points', kind: vscode.QuickPickItemKind.Separator });
        items.push(...tour.entryPoints.map((entry) => ({
            label: `$(debug-start) ${visibleLabel(entry.path)}`,
            description: visibleLabel([entry.kind, entry.detail].filter((part) => part !== '').join(' · ')),
            location: entry.location,
        })));
    }
    if (tour.entryPointsNotShown > 0) {
        items.push(moreEntryPoints(tour, listEntryPoints));
    }
    if (tour.stops.length > 0) {
        items.push({ label: 'Most mentioned names', kind: vscode.QuickPickItemKind.Separator });
        items.push(...tour.stops.map((stop) => ({
            label: `$(symbol-${stop.kind === 'class' ? 'class' : 'function'}) ${visibleLabel(stop.name)}`,
            description: `${stop.mentions === 1 ? '1 file mentions it' : `${stop.mentions} files mention it`} · ${visibleLabel(lineOf(stop.path, stop.location))}`,
            location: stop.location,
        })));
    }
    if (items.length === 0) {
        items.push({ label: 'Nothing to tour yet', description: 'the index holds no definitions' });
    }
    return items;
}

/** "N more entry points", as a row that lists them all (as many as the server lists, past that). */
function moreEntryPoints(tour: TourResult, listEntryPoints: (count: number) => Promise<LocationItem[]>): LocationItem {
    const notShown = tour.entryPointsNotShown;
    const total = tour.entryPoints.length + notShown;
    const description = `${notShown} more entry point${notShown === 1 ? '' : 's'}`;
    const count = Math.min(total, MAX_TOUR_ENTRY_POINTS);
    if (count <= tour.entryPoints.length) {
        return { label: `$(info) ${description}`, description: `the tour lists at most ${MAX_TOUR_ENTRY_POINTS}` };
    }
    const label = count === total ? `Show all ${total} entry points` : `Show ${count} of the ${total} entry points`;
    return { label: `$(list-unordered) ${label}`, description, more: () => listEntryPoints(count) };
}

export async function showTour(client: LanguageClient): Promise<void> {
    const folder = vscode.workspace.workspaceFolders?.[0];
    const folderUri = activeRepository() ?? (folder ? client.code2ProtocolConverter.asUri(folder.uri) : undefined);
    const listed = async (entryPoints?: number): Promise<LocationItem[]> => {
        const tour = await client.sendRequest(TourRequest, { ...(folderUri ? { folderUri } : {}), ...(entryPoints ? { entryPoints } : {}) });
        return tourItems(tour, listed);
    };
    await pickLocation(client, 'Codeloupe: Tour', await listed());
}
