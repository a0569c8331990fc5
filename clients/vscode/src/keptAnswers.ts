// The answers (and the bundles, and the graph pages) a reloaded window brings back: what each answer tab, the bundle
// tab, the Last Bundle view and the graph detail tab showed, kept in the workspace's state (bounded), so that VS Code's
// serializer can render it again. The code is never kept: an answer is kept as its prose and the spans it cites, a
// bundle as its files and chunks, a graph page as its links and spans, and the code of each span is read from disk
// again when the tab is shown (rule 5).
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { finalBreak, LINE_BREAK } from './lines';
import type { Location } from 'vscode-languageclient/node';
import type {
    AnswerPart, AskEvent, AskResult, ChunkResult, FileResult, HopCode, SearchResult,
} from './protocol';
import type { GraphPage } from './graphViews';
import type { Reread, SinceAnswer } from './render';

/** The view type of the answer tabs (package.json's `onWebviewPanel:` activation event names it). */
export const ANSWER_VIEW = 'codeloupe.answer';
/** The answers kept: those of the most recent asks; an older one's tab comes back saying it was not kept. */
export const MAX_KEPT_ANSWERS = 20;
/** The most one kept answer may take (its JSON, without its code); a larger one is not kept. */
export const MAX_KEPT_CHARS = 256 * 1024;
/** The view type of the bundle tab ("Open the full bundle"), restored as the answer tabs are. */
export const BUNDLE_VIEW = 'codeloupe.bundle';
/** The bundles kept: the bundle tab's (one tab, one bundle), and the Last Bundle view's. */
const BUNDLE_KEYS = { tab: 'codeloupe.keptBundle', last: 'codeloupe.lastBundle' } as const;
/** Which kept bundle: the bundle tab's, or the Last Bundle view's. */
export type KeptBundle = keyof typeof BUNDLE_KEYS;
/** The view type of the graph map tab, and of the tab of one file, folder or route of the graph. */
export const GRAPH_VIEW = 'codeloupe.graph';
export const GRAPH_DETAIL_VIEW = 'codeloupe.graphDetail';
/** The graph map tab's repository (a shared index's), and the graph detail tab's page. */
const GRAPH_MAP_KEY = 'codeloupe.keptGraphMap';
const GRAPH_DETAIL_KEY = 'codeloupe.keptGraphDetail';
/** The ids of the kept answers, oldest ask first; each answer is kept under its own key (a draft rewrites only its own). */
const ORDER_KEY = 'codeloupe.keptAnswers';
const answerKey = (id: string): string => `codeloupe.keptAnswer.${id}`;

/** A code part of a draft from a server older than the span's `location` in its progress: its caption
 * (path:first-last) and note; its code is not kept. */
export interface KeptDraftCaption {
    caption: string;
    note?: string;
}

/** A code part of a draft, as kept: as an answer's code part is (its code left out, its digest in its place, read from
 * its document again when a reloaded window shows it), or only its caption (an older server's). */
export type KeptDraftCode = KeptDraftCaption | Digested<AnswerPart>;

/** Why an answer its tab showed is not kept: its server sends no answer parts (an older one), and the answer's markdown,
 * which alone renders it, quotes the code. */
export type NotKept = 'no-parts';

/** What an answer tab showed, by the state of its ask. */
export interface KeptAnswer {
    query: string;
    /** The answer, its code left out (emptied); present once the ask answered. */
    result?: AskResult;
    /** The ask answered, and its answer could not be kept: why. */
    notKept?: NotKept;
    /** The ask was still being answered: the draft so far (its text, each code part's caption) and its steps. */
    draft?: { parts: (string | KeptDraftCode)[]; steps: string[] };
    /** The ask failed or was cancelled: what its tab said. */
    error?: string;
}

/** The kept answers of this workspace (ExtensionContext.workspaceState), each under its ask's own id. */
export class KeptAnswers {
    constructor(private readonly state: vscode.Memento) {}

    get(id: string): KeptAnswer | undefined {
        return this.state.get<KeptAnswer>(answerKey(id));
    }

    /** Keeps (or replaces) the answer of ask `id`; past the count the oldest asks' go, and one too large is not kept. */
    async keep(id: string, answer: KeptAnswer): Promise<void> {
        if (JSON.stringify(answer).length > MAX_KEPT_CHARS) {
            await this.forget(id);
            return;
        }
        const order = this.order();
        const writes = [this.state.update(answerKey(id), answer)];
        if (!order.includes(id)) {
            order.push(id);
            const gone = order.splice(0, Math.max(0, order.length - MAX_KEPT_ANSWERS));
            writes.push(this.state.update(ORDER_KEY, order), ...gone.map((old) => this.state.update(answerKey(old), undefined)));
        }
        await Promise.all(writes);
    }

    /** Forgets the answer of ask `id` (its tab was closed, or it cannot be kept). */
    async forget(id: string): Promise<void> {
        const order = this.order();
        if (order.includes(id)) {
            await Promise.all([this.state.update(ORDER_KEY, order.filter((kept) => kept !== id)), this.state.update(answerKey(id), undefined)]);
        }
    }

    /** The bundle the bundle tab (`tab`) or the Last Bundle view (`last`) shows, without its code; undefined when none
     * is kept. */
    bundle(which: KeptBundle): SearchResult | undefined {
        return this.state.get<SearchResult>(BUNDLE_KEYS[which]);
    }

    /** Keeps the bundle the bundle tab or the Last Bundle view shows, its code left out (one over MAX_KEPT_CHARS
     * without it is not kept); undefined: forgets it (its tab was closed). */
    async keepBundle(which: KeptBundle, bundle: SearchResult | undefined): Promise<void> {
        await this.keepBounded(BUNDLE_KEYS[which], bundle && withoutBundleCode(bundle));
    }

    /** The repository the graph map tab showed (`folderUri`: a shared index's; none, the workspace's); undefined when
     * no map tab is kept. */
    graphMap(): { folderUri?: string } | undefined {
        return this.state.get<{ folderUri?: string }>(GRAPH_MAP_KEY);
    }

    /** Keeps which repository the graph map tab shows (its page is the server's, asked again: it quotes no code);
     * undefined: forgets it (its tab was closed). */
    async keepGraphMap(map: { folderUri?: string } | undefined): Promise<void> {
        await this.state.update(GRAPH_MAP_KEY, map);
    }

    /** The page the graph detail tab shows, without its code; undefined when none is kept. */
    graphDetail(): GraphPage | undefined {
        return this.state.get<GraphPage>(GRAPH_DETAIL_KEY);
    }

    /** Keeps the page the graph detail tab shows, its code left out (one over MAX_KEPT_CHARS without it is not kept);
     * undefined: forgets it (its tab was closed, or it shows what is not kept: an error). */
    async keepGraphDetail(page: GraphPage | undefined): Promise<void> {
        await this.keepBounded(GRAPH_DETAIL_KEY, page && withoutGraphCode(page));
    }

    private async keepBounded(key: string, kept: object | undefined): Promise<void> {
        await this.state.update(key, kept !== undefined && JSON.stringify(kept).length <= MAX_KEPT_CHARS ? kept : undefined);
    }

    private order(): string[] {
        return [...(this.state.get<string[]>(ORDER_KEY) ?? [])];
    }
}

/** A cited span or chunk's code as kept: the digest of its lines as the answer showed them (a hash, not the code), for a
 * tab showing it again to tell whether the file still holds those lines. */
type Digested<T> = T & { digest?: string };

/** The digest of a span's lines; its final line break left out, which the server's spans may or may not carry. */
function digestOf(text: string): string {
    return createHash('sha256').update(text.slice(0, text.length - finalBreak(text).length)).digest('base64url');
}

const withoutChunkCode = (chunk: ChunkResult): Digested<ChunkResult> =>
    ({ ...chunk, text: '', digest: digestOf(chunk.text), ...(chunk.snippet ? { snippet: { ...chunk.snippet, text: '' } } : {}) });
const withoutFileCode = (file: FileResult): FileResult => ({ ...file, chunks: file.chunks.map(withoutChunkCode) });
/** A bundle as kept: its chunks' code emptied, each one's digest in its place. */
export const withoutBundleCode = (bundle: SearchResult): SearchResult =>
    ({ ...bundle, core: bundle.core.map(withoutFileCode), related: bundle.related.map(withoutFileCode) });

const withoutHopCode = (code: HopCode | undefined): Digested<HopCode> | undefined => code && { ...code, text: '', digest: digestOf(code.text) };

/** A graph page as kept: the code of a file's chunks and of a route's use and definition sites emptied, each one's
 * digest in its place. */
export function withoutGraphCode(page: GraphPage): GraphPage {
    if (page.kind === 'node') {
        return { ...page, node: { ...page.node, chunks: page.node.chunks.map((chunk) => ({ ...chunk, text: '', digest: digestOf(chunk.text) })) } };
    }
    if (page.kind === 'path') {
        const hops = page.path.hops.map((hop) => ({ ...hop, useCode: withoutHopCode(hop.useCode), definitionCode: withoutHopCode(hop.definitionCode) }));
        return { ...page, path: { ...page.path, hops } };
    }
    return page;
}

/** The files a bundle shows code of (its CORE chunks', which `bundleFromDisk` reads again). */
export const bundleCodeFiles = (bundle: SearchResult): string[] => bundle.core.flatMap((file) => file.chunks.map((chunk) => chunk.location.uri));

/** The files an answer shows code of (its code parts' and its bundle's, which `withCodeFromDisk` reads again). */
export const answerCodeFiles = (result: AskResult): string[] => [
    ...(result.parts ?? []).flatMap((part) => (part.kind === 'code' && part.location !== undefined ? [part.location.uri] : [])),
    ...bundleCodeFiles(result.bundle),
];

/** The files a graph page shows code of (a file's chunks, a route's use and definition sites). */
export function graphCodeFiles(page: GraphPage): string[] {
    if (page.kind === 'node') {
        return page.node.chunks.map((chunk) => chunk.location.uri);
    }
    if (page.kind === 'path') {
        return page.path.hops.flatMap((hop) => [hop.useCode, hop.definitionCode]).flatMap((code) => (code ? [code.location.uri] : []));
    }
    return [];
}

/** A kept graph page (`withoutGraphCode`) with its code read from disk now, as a kept answer's (`withCodeFromDisk`). */
export async function graphFromDisk(page: GraphPage): Promise<GraphPage> {
    const { located } = rereader();
    if (page.kind === 'node') {
        return { ...page, node: { ...page.node, chunks: await Promise.all(page.node.chunks.map(located)) } };
    }
    if (page.kind === 'path') {
        const site = async (code: HopCode | undefined) => code && located(code);
        const hops = await Promise.all(page.path.hops.map(async (hop) => ({ ...hop, useCode: await site(hop.useCode), definitionCode: await site(hop.definitionCode) })));
        return { ...page, path: { ...page.path, hops } };
    }
    return page;
}

const isLine = (value: unknown): value is number => typeof value === 'number' && Number.isInteger(value) && value >= 1;

/** The code part a `delta` event streams, kept as an answer's code part is (no code: its digest), when the event names
 * its span's document (`location`); undefined for any other event, and for an older server's code part. */
export function keptDraftCode(event: AskEvent): Digested<AnswerPart> | undefined {
    const { kind, plain, path, start_line: startLine, end_line: endLine, language, location } = event;
    const where = typeof location === 'object' && location !== null ? location as Record<string, unknown> : {};
    if (kind !== 'code' || typeof plain !== 'string' || typeof path !== 'string' || !isLine(startLine) || !isLine(endLine)
        || typeof where.uri !== 'string') {
        return undefined;
    }
    // The span's lines as the answer names them, whatever range the event's location says.
    const range = { start: { line: startLine - 1, character: 0 }, end: { line: endLine, character: 0 } };
    return {
        kind, text: '', digest: digestOf(plain), path, startLine, endLine, language: typeof language === 'string' ? language : '',
        location: { uri: where.uri, range }, changed: event.changed === true,
    };
}

/**
 * An answer as kept: its code emptied (code parts, citations, the bundle's chunks; each span's digest in its place) and
 * its markdown left out (it quotes the code); `no-parts` for an answer of a server older than `parts`, which only its
 * markdown renders.
 */
export function keptResult(result: AskResult): AskResult | NotKept {
    const narrated = !result.fallback && !result.abstained;
    if (narrated && (result.parts === undefined || result.parts.length === 0)) {
        return 'no-parts';
    }
    return {
        ...result,
        answer: '',
        parts: result.parts?.map((part): Digested<AnswerPart> => (part.kind === 'code' ? { ...part, text: '', digest: digestOf(part.text) } : part)),
        citations: result.citations.map((citation) => ({ ...citation, text: '' })),
        uncited: result.uncited.map(withoutFileCode),
        bundle: withoutBundleCode(result.bundle),
    };
}

/** The most of a file a tab reads again: as much as the server reads of one for an answer (READ_MAX_BYTES). */
const READ_MAX_BYTES = 64 * 1024 * 1024;

/** Reads a document's text: a file from disk, a shared-index document through its content provider. */
async function readText(uri: string): Promise<string> {
    const parsed = vscode.Uri.parse(uri);
    if (parsed.scheme === 'file') {
        // A cited file swapped since for a FIFO, a device or a link to one is not read: Node's readFile waited on a
        // FIFO for ever and read /dev/zero until it held 2 GiB, in the extension host, as a reloaded window came back.
        const { type, size } = await vscode.workspace.fs.stat(parsed);
        if ((type & vscode.FileType.File) === 0 || size > READ_MAX_BYTES) {
            throw new Error(`${parsed.fsPath}: not a regular file of at most ${READ_MAX_BYTES >> 20} MiB`);
        }
        await refuseWhatTheServerWould(parsed, type);
        return new TextDecoder().decode(await vscode.workspace.fs.readFile(parsed));
    }
    return (await vscode.workspace.openTextDocument(parsed)).getText();
}

/**
 * Refuses a file the server would not read for an answer, though the tab reads it itself: a link (the server never
 * cites one; the cited path may have become a link to a `.env` or out of the workspace since), a path in no folder of
 * the workspace, or one that a link among its folders leads elsewhere. The server's secret rule needs no asking: it
 * judges the path alone, the same path whose content the answer showed the user then.
 */
async function refuseWhatTheServerWould(uri: vscode.Uri, type: vscode.FileType): Promise<void> {
    const folder = vscode.workspace.getWorkspaceFolder(uri);
    if ((type & vscode.FileType.SymbolicLink) !== 0 || folder === undefined) {
        throw new Error(`${uri.fsPath}: a link, or in no folder of the workspace`);
    }
    const [real, root] = await Promise.all([fs.realpath(uri.fsPath), fs.realpath(folder.uri.fsPath)]);
    if (real !== path.join(root, path.relative(folder.uri.fsPath, uri.fsPath))) {
        throw new Error(`${uri.fsPath}: a link on its way leads to ${real}`);
    }
}

/** Lines `first`..`last` (1-based, inclusive) of `text`, each with its own line break, as the server cuts a span; those
 * of them the text still has (none: ''). */
function linesOf(text: string, first: number, last: number): string {
    const pieces = text.split(new RegExp(`(${LINE_BREAK.source})`));
    return pieces.slice(Math.max(0, (first - 1) * 2), Math.max(0, last * 2)).join('');
}

/**
 * A kept answer with its code read from disk now, as the view renders it: each code part and CORE chunk gets its
 * lines again, as the file holds them today. One whose lines are not those the answer showed (their digest differs)
 * says the file changed since the answer; one whose file cannot be read, that it is gone (only its caption shows).
 */
export async function withCodeFromDisk(result: AskResult): Promise<AskResult> {
    const reread = rereader();
    return {
        ...result,
        parts: result.parts && await Promise.all(result.parts.map(reread.part)),
        bundle: await bundleFromDisk(result.bundle, reread),
    };
}

/** A kept bundle with the code of its CORE chunks read from disk now, as an answer's (`withCodeFromDisk`); RELATED
 * files show no code. */
export async function bundleFromDisk(bundle: SearchResult, { chunk } = rereader()): Promise<SearchResult> {
    const file = async (kept: FileResult): Promise<FileResult> => ({ ...kept, chunks: await Promise.all(kept.chunks.map(chunk)) });
    return { ...bundle, core: await Promise.all(bundle.core.map(file)) };
}

/** A kept draft with its code parts read from their documents now, as an answer's are (`withCodeFromDisk`); an older
 * server's, its captions alone. */
export async function draftFromDisk(parts: (string | KeptDraftCode)[]): Promise<(string | KeptDraftCaption | Reread<AnswerPart>)[]> {
    const { part } = rereader();
    return Promise.all(parts.map((kept) => (typeof kept === 'string' || !('kind' in kept) ? kept : part(kept))));
}

/** Reads kept code parts and chunks from their documents again (each document once), as `withCodeFromDisk` says. */
function rereader() {
    const texts = new Map<string, Promise<string | undefined>>();
    const read = (uri: string) => texts.get(uri) ?? texts.set(uri, readText(uri).catch(() => undefined)).get(uri)!;
    const span = async (uri: string, first: number, last: number, digest: string | undefined): Promise<{ text: string; since?: SinceAnswer }> => {
        const text = await read(uri);
        if (text === undefined) {
            // A shared-index document is not on disk: it cannot be read now (its server is not up, say), not gone.
            return { text: '', since: vscode.Uri.parse(uri).scheme === 'file' ? 'gone' : 'unreadable' };
        }
        const lines = linesOf(text, first, last);
        return digest === undefined || digestOf(lines) === digest ? { text: lines } : { text: lines, since: 'changed' };
    };
    const part = async ({ digest, ...kept }: Digested<AnswerPart>): Promise<Reread<AnswerPart>> => {
        const { location, startLine, endLine } = kept;
        if (kept.kind !== 'code' || location === undefined || startLine === undefined || endLine === undefined) {
            return kept;
        }
        return { ...kept, ...(await span(location.uri, startLine, endLine, digest)) };
    };
    // A chunk, or a graph page's code, by the lines its location's range covers (an end at a line's start ends before it).
    const located = async <T extends { location: Location; text: string }>({ digest, ...kept }: Digested<T>): Promise<Reread<T>> => {
        const { start, end } = kept.location.range;
        const last = end.character === 0 && end.line > start.line ? end.line : end.line + 1;
        return { ...kept, ...(await span(kept.location.uri, start.line + 1, last, digest)) } as Reread<T>;
    };
    return { part, chunk: located<ChunkResult>, located };
}
