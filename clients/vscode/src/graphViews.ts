// HTML for one graph node (a file with its neighbours, or a folder's part of the graph) and for a path between two
// files or concepts.
// Pure functions of the server's answers (no vscode import); every file and span is a link.
import type { Location } from 'vscode-languageclient/node';
import { escapeHtml } from './code';
import type { GraphFolderEdge, GraphFolderResult, GraphHop, GraphNeighbour, GraphNodeMiss, GraphNodeResult, GraphPathResult, HopCode } from './protocol';
import { locationLink, type PageContext, renderPage, type Reread, renderReread } from './render';

/** A page of the graph detail tab: one file of the graph with its neighbours and code (`language`: its editor's), a
 * folder's part, a file the graph does not hold, or the route between two files or concepts (`uris`: the map's files,
 * by path, that the route's hops link to). */
export type GraphPage = { title: string } & (
    | { kind: 'node'; node: GraphNodeResult; language: string }
    | { kind: 'folder'; folder: GraphFolderResult }
    | { kind: 'miss'; miss: GraphNodeMiss }
    | { kind: 'path'; path: GraphPathResult; uris: [string, string][] });

/** The page of the graph detail tab, as `page` says. */
export function renderGraphPage(context: PageContext, page: GraphPage): string {
    switch (page.kind) {
        case 'node':
            return renderGraphNode(context, page.node, page.language);
        case 'folder':
            return renderGraphFolder(context, page.folder);
        case 'miss':
            return renderGraphMiss(context, page.miss);
        case 'path': {
            const uris = new Map(page.uris);
            return renderGraphPath(context, page.path, (file) => uris.get(file));
        }
    }
}

const fileStart = (uri: string): Location => ({
    uri,
    range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
});

function neighbourItem(neighbour: GraphNeighbour): string {
    const carriers = neighbour.symbols.length > 0 ? ` <span class="muted">${escapeHtml(neighbour.symbols.join(', '))}</span>` : '';
    // The line of the use, in the file that holds it (this one for what it imports): never `uri` at `line`.
    const where = neighbour.use ? ` ${locationLink(neighbour.use, `L${neighbour.use.range.start.line + 1}`)}` : '';
    return `<li>${locationLink(fileStart(neighbour.uri), neighbour.path)} <span class="muted">${escapeHtml(neighbour.kind)}</span>${where}${carriers}</li>`;
}

function section(id: string, title: string, items: string[]): string {
    const body = items.length > 0 ? `<ul class="map">${items.join('\n')}</ul>` : '<p class="muted">None.</p>';
    return `<h2 id="${id}">${escapeHtml(title)} (${items.length})</h2>\n${body}`;
}

/** A file the graph does not hold: the server's reason, and the graph files closest to it by name. */
export function renderGraphMiss(context: PageContext, miss: GraphNodeMiss): string {
    const suggestions = miss.suggestions.map((entry) => `<li>${locationLink(fileStart(entry.uri), entry.path)}</li>`);
    const offer = suggestions.length > 0 ? `<h2>Closest graph files by name</h2><ul class="map">${suggestions.join('\n')}</ul>` : '';
    return renderPage(context, `codeloupe graph: ${miss.node}`, `<h1>${escapeHtml(miss.node)}</h1>
<p class="note">${escapeHtml(miss.message)}</p>
${offer}`);
}

/** One file of the graph: its community, what it uses, what uses it, what reads alike, its code (read from disk again
 * where the page is a kept one: `since` where it changed). */
export function renderGraphNode(context: PageContext, node: GraphNodeResult, language: string): string {
    const community = `Community: ${node.communityName || node.community}`;
    const hub = node.god ? ' · <span class="badge">hub</span>' : '';
    const semantic = node.semantic.map((entry) => `<li>${locationLink(fileStart(entry.uri), entry.path)} <span class="muted">cosine ${entry.cosine.toFixed(2)}</span></li>`);
    const chunks = node.chunks.map((chunk: Reread<GraphNodeResult['chunks'][number]>) => `<div class="chunk">${locationLink(chunk.location, `L${chunk.location.range.start.line + 1}`)}
${renderReread(chunk, language, { firstLine: chunk.location.range.start.line + 1 })}</div>`);
    const external = node.external && node.external.length > 0
        ? `<p class="muted">Outside the workspace: ${escapeHtml(node.external.join(', '))}</p>` : '';
    const body = `<h1>${locationLink(fileStart(node.uri), node.path)}</h1>
<p class="muted">${escapeHtml(community)}${hub}</p>
${section('imports', 'Uses', node.imports.map(neighbourItem))}
${external}
${section('importers', 'Used by', node.importers.map(neighbourItem))}
${section('semantic', 'Reads alike', semantic)}
${node.symbols.length > 0 ? `<h2 id="symbols">Defines</h2><p>${node.symbols.map((symbol) => `<code>${escapeHtml(symbol)}</code>`).join(' ')}</p>` : ''}
${chunks.length > 0 ? `<h2 id="code">Code</h2>${chunks.join('\n')}` : ''}`;
    return renderPage(context, `codeloupe graph: ${node.path}`, body);
}

/** A folder: its communities (named, with its files in each), its files, and the edges across its boundary, each
 * drawn user first with a link to the line of the use. */
export function renderGraphFolder(context: PageContext, folder: GraphFolderResult): string {
    const uriOf = new Map(folder.files.map((file) => [file.path, file.uri]));
    const fileLink = (path: string, uri = uriOf.get(path)): string => (uri ? locationLink(fileStart(uri), path) : escapeHtml(path));
    const communities = folder.communities.map((community) => `<li><strong>${escapeHtml(community.name || String(community.id))}</strong>
<span class="muted">${community.size} of its files</span>: ${community.members.map((member) => fileLink(member)).join(', ')}</li>`);
    const files = folder.files.map((file) => `<li>${fileLink(file.path, file.uri)}${file.god ? ' <span class="badge">hub</span>' : ''}
<span class="muted">${escapeHtml(file.communityName || String(file.community))} · used by ${file.inDegree} · uses ${file.outDegree}</span></li>`);
    const edge = (user: string, userLink: string, usedLink: string, entry: GraphFolderEdge): string => {
        const verb = entry.kind === 'call' ? 'calls into' : 'imports';
        const carriers = entry.symbols.length > 0 ? ` <span class="muted">(${escapeHtml(entry.symbols.join(', '))})</span>` : '';
        const at = locationLink(entry.use, `${user}:${entry.use.range.start.line + 1}`);
        return `<li>${userLink} <span class="edge">${verb}</span> ${usedLink}${carriers} <span class="muted">at</span> ${at}</li>`;
    };
    const uses = folder.uses.map((entry) => edge(entry.from, fileLink(entry.from), fileLink(entry.path, entry.uri), entry));
    const usedBy = folder.usedBy.map((entry) => edge(entry.path, fileLink(entry.path, entry.uri), fileLink(entry.to), entry));
    const body = `<h1>${escapeHtml(folder.folder)}/</h1>
<p class="muted">A folder: ${folder.files.length} files of the graph.</p>
${section('communities', 'Communities', communities)}
${section('uses', 'Uses, outside the folder', uses)}
${section('usedBy', 'Used by, from outside', usedBy)}
${section('files', 'Files', files)}`;
    return renderPage(context, `codeloupe graph: ${folder.folder}/`, body);
}

/** A hop drawn the way its edge points: the user on the left, `uses` the thing it uses. */
function hopItem(hop: GraphHop, uriOf: (path: string) => string | undefined): string {
    const link = (path: string, location?: Location): string => {
        const uri = location?.uri ?? uriOf(path);
        return uri ? locationLink(location ?? fileStart(uri), path) : escapeHtml(path);
    };
    const carriers = hop.carriers.length > 0 ? ` <span class="muted">(${escapeHtml(hop.carriers.join(', '))})</span>` : '';
    const [user, used] = hop.direction === 'used-by' ? [hop.target, hop.source] : [hop.source, hop.target];
    if (hop.direction === 'similar' || hop.kind === 'semantic') {
        const cosine = typeof hop.cosine === 'number' ? ` <span class="muted">cosine ${hop.cosine.toFixed(2)}</span>` : '';
        return `<li>${link(hop.source)} <span class="edge">reads like</span> ${link(hop.target)}${cosine}</li>`;
    }
    const verb = hop.kind === 'call' ? 'calls into' : 'imports';
    const use = hop.use ? ` <span class="muted">at</span> ${locationLink(hop.use, `${user}:${hop.use.range.start.line + 1}`)}` : '';
    const definition = hop.definition ? ` <span class="muted">defined at</span> ${locationLink(hop.definition, `${used}:${hop.definition.range.start.line + 1}`)}` : '';
    const code = [hopCode('use', user, hop.useCode), hopCode('definition', used, hop.definitionCode)].join('');
    return `<li>${link(user)} <span class="edge">${verb}</span> ${link(used)}${carriers}${use}${definition}${code}</li>`;
}

/** A hop site's lines as the server read them from disk, numbered, under a link to where they are. The hop does
 * not say the language: the code is shown plain rather than guessed. */
function hopCode(label: string, path: string, code: Reread<HopCode> | undefined): string {
    if (code === undefined) {
        return '';
    }
    const where = locationLink(code.location, `${label}: ${path}:${code.location.range.start.line + 1}`);
    return `<div class="chunk hop-code">${where}
${renderReread(code, '', { firstLine: code.location.range.start.line + 1 })}</div>`;
}

/** The route between two files or concepts, hop by hop; a note when there is none. */
export function renderGraphPath(context: PageContext, path: GraphPathResult, uriOf: (path: string) => string | undefined): string {
    const title = `${path.from} → ${path.to}`;
    const hops = path.hops.map((hop) => hopItem(hop, uriOf));
    const route = path.found && hops.length > 0 ? `<ol class="hops">${hops.join('\n')}</ol>` : '<p class="muted">No route between them in the graph.</p>';
    const note = path.note ? `<p class="note">${escapeHtml(path.note)}</p>` : '';
    return renderPage(context, `codeloupe graph: ${title}`, `<h1>${escapeHtml(title)}</h1>\n${note}\n${route}`);
}
