// HTML for the results webview: pure functions of the server's answers (no vscode import).
// Every page carries a strict CSP (no remote sources, scripts only with the page's nonce) and one script that
// turns clicks on `a[data-uri]` into `{type: "open", uri, range}` messages to the extension.
import MarkdownIt from 'markdown-it';
import type { Location, Range } from 'vscode-languageclient/node';
import { CODE_STYLE, type CodeBlockOptions, escapeAttribute, escapeHtml, renderCodeBlock } from './code';
import { escapeRegExp, matchOf } from './match';
import type { AnswerPart, AskResult, ChunkResult, Citation, FileResult, FlowUse, FolderStatus, GraphMapResult, IndexCounts, RepositoryStatus, SearchResult, StatusResult } from './protocol';
import { CHANGED_ON_DISK, shownPath } from './protocol';
import { viaLabel } from './via';
import { oneLine, visible } from './visible';

export interface PageContext {
    nonce: string;
    /** The webview's own resource origin (`webview.cspSource`). */
    cspSource: string;
    /** The page's own id: the place it is read at is kept for it, and a reloaded window shows it again there. */
    page: string;
    /** The kept answer a reloaded window shows in this page's tab (its ask's id); absent for pages not kept. */
    keep?: string;
}

function contentSecurityPolicy({ nonce, cspSource }: PageContext): string {
    return [
        "default-src 'none'",
        `img-src ${cspSource} data:`,
        `style-src ${cspSource} 'unsafe-inline'`,
        `font-src ${cspSource}`,
        `script-src 'nonce-${nonce}'`,
        "connect-src 'none'",
        "form-action 'none'",
        "frame-src 'none'",
        "base-uri 'none'",
    ].join('; ');
}

/** The last line a range covers, 1-based: LSP ranges end exclusively, usually at character 0 of the next line. */
function lastLine(range: Range): number {
    return range.end.character === 0 && range.end.line > range.start.line ? range.end.line : range.end.line + 1;
}

function spanLabel(range: Range): string {
    const first = range.start.line + 1;
    const last = lastLine(range);
    return first === last ? `L${first}` : `L${first}-${last}`;
}

/** A link opens `location` with the cursor on `anchorLine` (0-based; default: the range's first line). */
function linkAttributes(location: Location, anchorLine?: number): string {
    const anchor = anchorLine === undefined ? '' : ` data-anchor="${anchorLine}"`;
    return `href="#" data-uri="${escapeAttribute(location.uri)}" data-range="${escapeAttribute(JSON.stringify(location.range))}"${anchor}`;
}

export function locationLink(location: Location, text: string, className = 'loc', anchorLine?: number): string {
    return `<a class="${className}" ${linkAttributes(location, anchorLine)}>${escapeHtml(text)}</a>`;
}

const STYLE = `
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); padding: 0 1em 2em; }
a { color: var(--vscode-textLink-foreground); text-decoration: none; cursor: pointer; }
a:hover { text-decoration: underline; }
pre { background: var(--vscode-textCodeBlock-background); padding: .5em; overflow-x: auto; }
h1, h2, h3 { font-weight: 600; }
h2 { border-bottom: 1px solid var(--vscode-widget-border, var(--vscode-panel-border)); padding-bottom: .2em; }
code, pre { font-family: var(--vscode-editor-font-family); font-size: var(--vscode-editor-font-size); }
.muted { opacity: .75; }
.file { margin: 1em 0; }
.chunk { margin: .4em 0 .4em 1em; }
.note { border-left: 3px solid var(--vscode-textLink-foreground); padding: .2em .6em; }
.error { color: var(--vscode-errorForeground); }
ul.map { list-style: none; padding-left: 0; }
ul.map ul { list-style: none; padding-left: 1.2em; }
td, th { text-align: left; padding: .1em .8em .1em 0; }
.via { color: var(--vscode-descriptionForeground); font-style: italic; }
#answer .prose, #answer .muted, #progress-draft { white-space: pre-wrap; }
#progress-draft .chunk { white-space: normal; }
.badge { color: var(--vscode-errorForeground); font-weight: 600; }
.edge { color: var(--vscode-descriptionForeground); font-style: italic; }
ol.hops li { margin: .3em 0; }
${CODE_STYLE}`;

// Runs in the webview. Links never navigate: file links become messages, anything else is inert.
const CLIENT_SCRIPT = `
(function () {
  const vscode = acquireVsCodeApi();
  // VS Code loads a page afresh when its tab is shown again (it does not keep a hidden webview's page): the page keeps
  // the place it is read at in the state VS Code holds for it (setState) and goes back there when loaded again, once
  // it is whole again (a draft, once the replay below has brought its text back). The place is this page's: the same
  // page loaded again (or rendered again in a reloaded window) has the same id; a new page (the answer after its
  // draft) has a new one and starts at its top. The state also names the kept answer (keep), which VS Code hands
  // back to the extension when a reloaded window restores the tab: it is set as the page loads.
  const page = document.body.getAttribute('data-page') || '';
  const keep = document.body.getAttribute('data-keep') || undefined;
  const saved = vscode.getState();
  let restoreTo = saved && saved.page === page && typeof saved.scrollY === 'number' ? saved.scrollY : undefined;
  function remember() { vscode.setState({ page: page, scrollY: window.scrollY, keep: keep }); }
  // Not while going back: a page not yet whole stops short of the place, which must not replace it.
  window.addEventListener('scroll', function () { if (restoreTo === undefined) { remember(); } }, { passive: true });
  if (restoreTo === undefined) { remember(); }
  function restore(last) {
    if (restoreTo !== undefined) { window.scrollTo(0, restoreTo); }
    if (last) { restoreTo = undefined; }
  }
  function element(tag, className, text) {
    const made = document.createElement(tag);
    made.className = className;
    made.textContent = text;
    return made;
  }
  document.addEventListener('click', function (event) {
    // A button asks the extension for what it says: Ask again (askAgain), Refresh (refresh).
    const button = event.target instanceof Element ? event.target.closest('button[data-action]') : null;
    const action = button && ({ 'ask-again': 'askAgain', refresh: 'refresh' })[button.getAttribute('data-action')];
    if (action) {
      vscode.postMessage({ type: action });
      return;
    }
    const anchor = event.target instanceof Element ? event.target.closest('a') : null;
    if (!anchor) { return; }
    event.preventDefault();
    const uri = anchor.getAttribute('data-uri');
    if (!uri) { return; }
    const range = anchor.getAttribute('data-range');
    const line = anchor.getAttribute('data-anchor');
    vscode.postMessage({ type: 'open', uri: uri, range: range ? JSON.parse(range) : undefined, anchor: line ? Number(line) : undefined });
  });
  // The extension numbers what it posts to this page (seq) and posts it all again, in one message, when the page asks
  // (replay): VS Code lets go of a hidden webview's page, drops what is posted to it meanwhile and loads the html afresh
  // when it is shown again. Each message is applied once, in order; one that comes ahead of the next means some were
  // lost: ask again.
  let applied = 0;
  let asked = true;
  window.addEventListener('message', function (event) {
    const message = event.data;
    if (message && message.type === 'replayed' && Array.isArray(message.messages)) {
      message.messages.forEach(apply);
      restore(true);
    } else {
      apply(message);
    }
  });
  function apply(message) {
    if (!message || message.type !== 'progress' || typeof message.seq !== 'number' || message.seq < applied) { return; }
    if (message.seq > applied) {
      if (!asked) {
        asked = true;
        vscode.postMessage({ type: 'replay' });
      }
      return;
    }
    applied += 1;
    asked = false;
    const status = document.getElementById('progress-status');
    if (status && typeof message.status === 'string') { status.textContent = message.status; }
    const steps = document.getElementById('progress-steps');
    if (steps && typeof message.step === 'string') {
      const item = document.createElement('li');
      item.textContent = message.step;
      steps.appendChild(item);
    }
    const draft = document.getElementById('progress-draft');
    if (draft && typeof message.delta === 'string') { draft.appendChild(document.createTextNode(message.delta)); }
    // Code from disk is a block of its own, as in the answer (the extension renders it as the answer does): in the
    // text, lines the model wrote would read as code.
    const code = message.code;
    if (draft && code && typeof code.caption === 'string' && typeof code.html === 'string') {
      const chunk = element('div', 'chunk', '');
      chunk.appendChild(element('div', 'loc', code.caption));
      if (typeof code.note === 'string') { chunk.appendChild(element('div', 'muted changed', code.note)); }
      chunk.insertAdjacentHTML('beforeend', code.html);
      draft.appendChild(chunk);
    }
  }
  restore(false);
  vscode.postMessage({ type: 'replay' });
}());
`;

export function renderPage(context: PageContext, title: string, body: string): string {
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${escapeAttribute(contentSecurityPolicy(context))}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style nonce="${context.nonce}">${STYLE}</style>
</head>
<body data-page="${escapeAttribute(context.page)}"${context.keep === undefined ? '' : ` data-keep="${escapeAttribute(context.keep)}"`}>
${body}
<script nonce="${context.nonce}">${CLIENT_SCRIPT}</script>
</body>
</html>`;
}

/** What an answer tab that read a cited span from disk again (restored in a reloaded window, or shown again) found: the
 * file changed since the answer (it shows today's lines), the file is gone, or (a shared-index document) it cannot be
 * read now. */
export type SinceAnswer = 'changed' | 'gone' | 'unreadable';

/** A code part or chunk as a tab shows it again: `since` when its lines are not those the answer showed. */
export type Reread<T> = T & { since?: SinceAnswer };

const SINCE_ANSWER: Record<SinceAnswer, string> = {
    changed: '(changed since this answer: the lines as the file holds them now)',
    gone: '(no longer on disk)',
    unreadable: '(cannot be read now)',
};

/** The note over a re-read span, and its code block: today's lines, none where the file could not be read. */
export function renderReread(chunk: { text: string; since?: SinceAnswer }, language: string, options: CodeBlockOptions): string {
    const note = chunk.since === undefined ? '' : `<div class="muted since since-${chunk.since}">${escapeHtml(SINCE_ANSWER[chunk.since])}</div>`;
    return note + (chunk.since === 'gone' || chunk.since === 'unreadable' ? '' : renderCodeBlock(chunk.text, language, options));
}

/** The chunk's span and breadcrumb, a link that opens it at the chunk's match. */
function renderChunkHeader(chunk: ChunkResult): string {
    const label = chunk.breadcrumb || chunk.name || chunk.kind;
    return locationLink(chunk.location, `${spanLabel(chunk.location.range)} ${oneLine(label)}`, 'loc', chunk.snippet?.anchorLine);
}

function renderFileHeader(file: FileResult, tag: 'h3' | 'span'): string {
    const label = viaLabel(file.via);
    const via = label === undefined ? '' : ` <span class="via via-${escapeAttribute(file.via)}">${escapeHtml(label.text)}</span>`;
    return `<${tag}>${file.rank}. ${locationLink(file.location, oneLine(shownPath(file)), 'loc', matchOf(file).anchorLine)}${via}</${tag}>`;
}

/** The bundle's files by path, to link the paths its `why` texts mention ("imported by app/auth.py"). */
type KnownFiles = ReadonlyMap<string, Location>;

function knownFiles(files: FileResult[]): KnownFiles {
    return new Map(files.map((file) => [file.path, file.location]));
}

/** Escaped text on one line (it names files: a line break in one read as a space, naming another file) with every
 * known path in it a link. */
function linkPaths(text: string, known: KnownFiles): string {
    const paths = [...known.keys()].filter((candidate) => text.includes(candidate)).sort((a, b) => b.length - a.length);
    if (paths.length === 0) {
        return escapeHtml(oneLine(text));
    }
    const pattern = new RegExp(`(${paths.map(escapeRegExp).join('|')})`);
    return text.split(pattern).map((part, index) => {
        const location = index % 2 === 1 ? known.get(part) : undefined;
        return location === undefined ? escapeHtml(oneLine(part)) : locationLink(location, oneLine(part));
    }).join('');
}

function renderCoreFile(file: FileResult, known: KnownFiles): string {
    const chunks = file.chunks.map((chunk: Reread<ChunkResult>) => `<div class="chunk">${renderChunkHeader(chunk)}
${renderReread(chunk, file.language, {
        firstLine: chunk.location.range.start.line + 1,
        anchorLine: chunk.snippet === undefined ? undefined : chunk.snippet.anchorLine + 1,
    })}</div>`).join('\n');
    return `<div class="file">${renderFileHeader(file, 'h3')}
<div class="muted">${linkPaths(file.why, known)}</div>
${chunks}</div>`;
}

/** RELATED files and uncited candidates: a map of links, no code. */
function renderFileMap(files: FileResult[], known: KnownFiles = knownFiles(files)): string {
    if (files.length === 0) {
        return '<p class="muted">None.</p>';
    }
    const items = files.map((file) => {
        const chunks = file.chunks.map((chunk) => `<li>${renderChunkHeader(chunk)}</li>`).join('');
        return `<li>${renderFileHeader(file, 'span')} <span class="muted">${linkPaths(file.why, known)}</span>${chunks ? `<ul>${chunks}</ul>` : ''}</li>`;
    });
    return `<ul class="map">${items.join('\n')}</ul>`;
}

/** What the user should know about how far to trust a result: the server's notes, or (an older server without
 * them) the lanes that did not see the whole workspace. */
export function resultNotes(result: SearchResult): string[] {
    if (result.notes !== undefined) {
        return result.notes;
    }
    const partial = result.lanes.filter((lane) => !lane.ready || lane.coverage < 1)
        .map((lane) => `${lane.name}: ${Math.round(lane.coverage * 100)}% ${lane.note}`.trim());
    return partial.length === 0 ? [] : [`Partial index: ${partial.join('; ')}`];
}

function renderLanes(result: SearchResult): string {
    return resultNotes(result).map((note) => `<p class="note">${escapeHtml(note)}</p>`).join('\n');
}

/** The bundle once: CORE files with their code, RELATED as a map; every file and chunk a link. */
function renderBundleSections(result: SearchResult): string {
    const known = knownFiles([...result.core, ...result.related]);
    return `${renderLanes(result)}
<h2 id="core">CORE (${result.core.length})</h2>
${result.core.length > 0 ? result.core.map((file) => renderCoreFile(file, known)).join('\n') : '<p class="muted">No match.</p>'}
<h2 id="related">RELATED (${result.related.length})</h2>
${renderFileMap(result.related, known)}`;
}

export function renderBundle(context: PageContext, result: SearchResult, note?: string): string {
    const noteHtml = note ? `<p class="note">${escapeHtml(note)}</p>` : '';
    return renderPage(context, `codeloupe: ${result.query}`, `<h1>${escapeHtml(result.query)}</h1>\n${noteHtml}${renderBundleSections(result)}`);
}

function citationLocation(citation: Citation, span?: string): Location {
    if (span === undefined) {
        return citation.location;
    }
    const [first, last] = span.split('-').map(Number);
    return {
        uri: citation.location.uri,
        range: { start: { line: first - 1, character: 0 }, end: { line: last, character: 0 } },
    };
}

/** The engine closes a narrated answer with a plain list of the files it did not cite; the view lists them
 * itself, as links (`uncited`), so that footer is left out rather than shown twice. */
const UNCITED_FOOTER = '\n---\n**Also retrieved, not cited**';

const sameCode = (a: string, b: string): boolean => a.replace(/\n$/, '') === b.replace(/\n$/, '');

/** A markdown renderer for answers: no raw HTML, no images (nothing may load), `[[k]]` / `[[k:a-b]]` become
 * links to citation k, a cited span's caption (`path:a-b`) links to it, its code block is highlighted and numbered
 * from the span's first line, and `file://...#L10-L20` links carry their range. */
function answerMarkdown(citations: Citation[]): MarkdownIt {
    const md: MarkdownIt = new MarkdownIt({
        html: false,
        linkify: false,
        highlight: (code, language) => {
            const citation = citations.find((candidate) => sameCode(candidate.text, code));
            return citation === undefined ? '' : renderCodeBlock(code, language, { firstLine: citation.startLine });
        },
    });
    md.disable('image');
    md.validateLink = (url) => /^(file:|https?:|#)/i.test(url.trim());
    const byNumber = new Map(citations.map((citation) => [citation.k, citation]));
    const byCaption = new Map(citations.map((citation) => [`${citation.path}:${citation.startLine}-${citation.endLine}`, citation]));
    const defaultCodeInline = md.renderer.rules.code_inline;
    md.renderer.rules.code_inline = (tokens, index, options, env, self) => {
        const citation = byCaption.get(tokens[index].content);
        if (citation !== undefined) {
            return `<a class="loc" ${linkAttributes(citation.location)}><code>${escapeHtml(tokens[index].content)}</code></a>`;
        }
        return defaultCodeInline ? defaultCodeInline(tokens, index, options, env, self) : self.renderToken(tokens, index, options);
    };
    md.inline.ruler.before('link', 'codeloupe_citation', (state, silent) => {
        const match = /^\[\[(\d+)(?::(\d+-\d+))?\]\]/.exec(state.src.slice(state.pos));
        if (match === null) {
            return false;
        }
        const citation = byNumber.get(Number(match[1]));
        if (citation === undefined) {
            return false;
        }
        if (!silent) {
            const token = state.push('codeloupe_citation', '', 0);
            token.meta = { location: citationLocation(citation, match[2]), label: match[2] ? `${citation.k}:${match[2]}` : `${citation.k}` };
        }
        state.pos += match[0].length;
        return true;
    });
    md.renderer.rules.codeloupe_citation = (tokens, index) => {
        const { location, label } = tokens[index].meta as { location: Location; label: string };
        return `<a class="cite" ${linkAttributes(location)}>[${escapeHtml(label)}]</a>`;
    };
    const defaultLinkOpen = md.renderer.rules.link_open ?? ((tokens, index, options, _env, self) => self.renderToken(tokens, index, options));
    md.renderer.rules.link_open = (tokens, index, options, env, self) => {
        const token = tokens[index];
        const location = fileLinkLocation(token.attrGet('href') ?? '');
        if (location !== undefined) {
            token.attrSet('href', '#');
            token.attrSet('data-uri', location.uri);
            token.attrSet('data-range', JSON.stringify(location.range));
        }
        return defaultLinkOpen(tokens, index, options, env, self);
    };
    return md;
}

/** `file:///a.py#L10` or `#L10-L20` (1-based lines, as the server's hover links) -> a Location. */
function fileLinkLocation(href: string): Location | undefined {
    if (!href.startsWith('file:')) {
        return undefined;
    }
    const [uri, fragment = ''] = href.split('#', 2);
    const lines = /^L(\d+)(?:-L?(\d+))?$/.exec(fragment);
    const first = lines ? Number(lines[1]) : 1;
    const last = lines?.[2] ? Number(lines[2]) : first;
    return { uri, range: { start: { line: first - 1, character: 0 }, end: { line: lines ? last : first - 1, character: 0 } } };
}

function renderCitations(citations: Citation[]): string {
    if (citations.length === 0) {
        return '';
    }
    const items = citations.map((citation) => `<li>${locationLink(citation.location, `[${citation.k}] ${citation.path}:${citation.startLine}-${citation.endLine}`)}</li>`);
    return `<h2 id="citations">Cited</h2><ul class="map">${items.join('\n')}</ul>`;
}

/**
 * An answer: the narration with its cited code, then the files it did not cite as links. Without a narration (no
 * chat model, a model failure) or when the narrator abstained, the page is the ranked bundle itself, once.
 */
export function renderAnswer(context: PageContext, query: string, result: AskResult): string {
    let body: string;
    if (result.fallback || result.abstained) {
        const note = result.fallback
            ? `No narration (${result.fallback}): the ranked files for the question.`
            : 'The retrieved code does not answer this question: the ranked files for it.';
        body = `<p class="note">${escapeHtml(note)}</p>\n${renderBundleSections(result.bundle)}`;
    } else if (result.parts !== undefined && result.parts.length > 0) {
        // The parts end with the uncited files as linked refs: nothing to list a second time.
        body = `<div id="answer">${result.parts.map(renderPart).join('')}</div>`;
    } else {
        const narration = result.answer.split(UNCITED_FOOTER)[0];
        // markdown-it escapes HTML's specials itself; the control characters, quoted code's among them, are ours.
        body = `<div id="answer">${visible(answerMarkdown(result.citations).render(narration))}</div>
${renderCitations(result.citations)}
<h2 id="uncited">Not cited (${result.uncited.length})</h2>
${renderFileMap(result.uncited, knownFiles([...result.bundle.core, ...result.bundle.related]))}`;
    }
    return renderPage(context, `codeloupe: ${query}`, `<h1>${escapeHtml(query)}</h1>\n${renderFlowNote(result.flow)}${body}`);
}

/** What the flow cache did for this answer, as a note above it; nothing when it did nothing. */
function renderFlowNote(flow: FlowUse | null | undefined): string {
    if (flow?.action === 'served') {
        return `<p class="note flow">Served from the flow cache (no model call): the cached answer to <q>${escapeHtml(flow.question)}</q>, every cited file unchanged.</p>\n`;
    }
    if (flow?.action === 'attached') {
        return `<p class="note flow">The model saw the cached answer to <q>${escapeHtml(flow.question)}</q> as background (never cited).</p>\n`;
    }
    return '';
}

/** Prose and notes as escaped text; identifiers the engine kept in backticks become inline code. */
function plainText(text: string): string {
    return escapeHtml(text).replace(/`([^`\n]+)`/g, '<code>$1</code>');
}

/** One part of a narrated answer. Only `code` parts (spans read from disk) render as code, highlighted and
 * numbered from their first line; nothing the model wrote is parsed as markdown or HTML. */
function renderPart(part: Reread<AnswerPart>): string {
    const location = part.location;
    switch (part.kind) {
        case 'code': {
            // The file named on one line, as the draft and the answer's refs name it: a line break in a name read as a space.
            const caption = location ? locationLink(location, `${oneLine(part.path ?? '')}:${part.startLine}-${part.endLine}`) : '';
            const changed = part.changed === true ? `<div class="muted changed">${escapeHtml(CHANGED_ON_DISK)}</div>` : '';
            return `<div class="chunk">${caption}${changed}${renderReread(part, part.language ?? '', { firstLine: part.startLine })}</div>`;
        }
        case 'ref':
            return location ? `<a class="cite" ${linkAttributes(location)}>${escapeHtml(part.text)}</a>` : escapeHtml(part.text);
        case 'heading':
            return `<h3>${escapeHtml(part.text)}</h3>`;
        default:
            return `<span class="${part.kind === 'note' ? 'muted' : 'prose'}">${plainText(part.text)}</span>`;
    }
}

export function renderWaiting(context: PageContext, query: string): string {
    return renderPage(context, `codeloupe: ${query}`, `<h1>${escapeHtml(query)}</h1>
<p id="progress-status" class="muted">Asking the codebase…</p>
<ol id="progress-steps" class="muted"></ol>
<div id="progress-draft"></div>`);
}

export function renderError(context: PageContext, title: string, message: string): string {
    return renderPage(context, title, `<h1>${escapeHtml(title)}</h1><p class="error">${escapeHtml(message)}</p>`);
}

const ASK_AGAIN = '<p><button data-action="ask-again">Ask again</button></p>';

/** What a reloaded window shows for an ask that failed or was cancelled: what its tab said, and a way to ask again. */
export function renderFailed(context: PageContext, query: string, message: string): string {
    return renderPage(context, `codeloupe: ${query}`, `<h1>${escapeHtml(query)}</h1><p class="error">${escapeHtml(message)}</p>\n${ASK_AGAIN}`);
}

/** A code part of an interrupted draft whose server did not name its span's document: its caption; its code was never
 * kept, and cannot be read again. */
export interface InterruptedCode {
    caption: string;
    note?: string;
}

/**
 * The draft of an ask the window was reloaded in the middle of: marked as interrupted (it will not go on), with a way
 * to ask again, then the steps and the words written so far; a code part as the answer shows it, its lines read from
 * its document again (code is not kept), or (an older server's) its caption alone.
 */
export function renderInterrupted(context: PageContext, query: string, parts: (string | InterruptedCode | Reread<AnswerPart>)[], steps: string[]): string {
    const draft = parts.map((part) => {
        if (typeof part === 'string') {
            return escapeHtml(part);
        }
        if ('kind' in part) {
            return renderPart(part);
        }
        return `<div class="chunk"><div class="loc">${escapeHtml(part.caption)}</div>${part.note ? `<div class="muted changed">${escapeHtml(part.note)}</div>` : ''}`
            + '<div class="muted">(code shown once answered)</div></div>';
    }).join('');
    return renderPage(context, `codeloupe: ${query}`, `<h1>${escapeHtml(query)}</h1>
<p class="note interrupted">Interrupted: the window was reloaded while this answer was being written. Its draft so far is below.</p>
${ASK_AGAIN}
<ol id="progress-steps" class="muted">${steps.map((step) => `<li>${escapeHtml(step)}</li>`).join('')}</ol>
<div id="progress-draft">${draft}</div>`);
}

/** A page that only says `note` (a tab a reloaded window has nothing else for), with an Ask again button if `askAgain`. */
export function renderNote(context: PageContext, title: string, note: string, askAgain = false): string {
    return renderPage(context, title, `<h1>${escapeHtml(title)}</h1>\n<p class="note">${escapeHtml(note)}</p>${askAgain ? `\n${ASK_AGAIN}` : ''}`);
}

/** The cells a folder and a shared repository both have: counts, vectors, embeddings, languages, where the index is. */
function indexCells(index: IndexCounts): string {
    const vectors = index.vectors.total > 0 ? `${index.vectors.done}/${index.vectors.total}` : '-';
    const counted = (counts: Record<string, number>) => Object.entries(counts).map(([name, n]) => `${name} ${n}`).join(', ');
    return `<td>${index.files}</td><td>${index.chunks}</td><td>${index.symbols}</td><td>${vectors}</td>
<td>${escapeHtml(`${index.provider} ${index.model}`.trim())}</td><td>${escapeHtml(counted(index.languages))}</td>
<td>${escapeHtml(counted(index.skipped ?? {}) || '-')}</td><td>${escapeHtml(index.indexPath)}</td>`;
}

function folderRow(folder: FolderStatus): string {
    return `<tr><td>${escapeHtml(folder.root)}</td><td>${escapeHtml(folder.state)}</td><td>${folder.trusted ? 'yes' : 'no'}</td>
${indexCells(folder)}<td>${escapeHtml(folder.message)}</td></tr>`;
}

function repositoryRow(repository: RepositoryStatus): string {
    return `<tr><td>${escapeHtml(repository.repository)}</td><td>${escapeHtml(repository.commit || '(not a git checkout)')}</td>
${indexCells(repository)}</tr>`;
}

/**
 * The index status as the server gave it at `asOf`: a snapshot (a tab a reloaded window brought back shows the status
 * of when it came back, not of now), said so over the tables with a Refresh button that asks the server again.
 */
export function renderStatus(context: PageContext, status: StatusResult, asOf: Date): string {
    const counts = '<th>Files</th><th>Chunks</th><th>Symbols</th><th>Vectors</th><th>Embeddings</th><th>Languages</th>'
        + '<th title="files skipped for their content, by reason: codeloupe stats PATH --skipped lists them">Skipped</th><th>Index</th>';
    const repositories = status.repositories ?? [];
    const shared = repositories.length === 0 ? '' : `<h2>Shared repositories (read from the shared index, no checkout)</h2>
<table><tr><th>Repository</th><th>Commit</th>${counts}</tr>
${repositories.map(repositoryRow).join('\n')}</table>`;
    const time = asOf.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
    return renderPage(context, 'codeloupe status', `<h1>Index status</h1>
<p class="muted as-of">As of ${escapeHtml(time)}: the status then, not kept current. <button data-action="refresh">Refresh</button></p>
<table><tr><th>Folder</th><th>State</th><th>Trusted</th>${counts}<th>Message</th></tr>
${status.folders.map(folderRow).join('\n')}</table>${shared}`);
}

/**
 * The engine's self-contained graph page, made safe for a webview: our CSP goes first in <head> and every script
 * the page carries gets the nonce (a `src` pointing anywhere remote is still refused by the CSP).
 */
export function prepareGraphPage(context: PageContext, html: string): string {
    const csp = `<meta http-equiv="Content-Security-Policy" content="${escapeAttribute(contentSecurityPolicy(context))}">`;
    const withNonces = html.replace(/<script\b(?![^>]*\bnonce=)/gi, `<script nonce="${context.nonce}"`);
    if (/<head\b[^>]*>/i.test(withNonces)) {
        return withNonces.replace(/<head\b[^>]*>/i, (head) => `${head}\n${csp}`);
    }
    return `<!DOCTYPE html><html><head>${csp}</head><body>${withNonces}</body></html>`;
}

/** Shown when the server's graph answer has no HTML page: the communities as lists of file links. */
export function renderCommunities(context: PageContext, graph: GraphMapResult): string {
    const uriOf = new Map(graph.nodes.map((node) => [node.path, node.uri]));
    const start = { line: 0, character: 0 };
    const sections = graph.communities.map((community) => {
        const members = community.members.map((member) => {
            const uri = uriOf.get(member);
            return `<li>${uri ? locationLink({ uri, range: { start, end: start } }, member) : escapeHtml(member)}</li>`;
        });
        return `<h2>${escapeHtml(community.name)} (${community.size})</h2><ul class="map">${members.join('')}</ul>`;
    });
    return renderPage(context, 'codeloupe graph', `<h1>Communities</h1>${sections.join('\n')}`);
}
