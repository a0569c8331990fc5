// Human words for the events an ask streams as `$/progress` (engine/codeloupe/ask/events.py lists the kinds).
// Pure functions (no vscode import). Anything a model wrote (agent questions, tool arguments) stays plain text:
// the notification shows text and the view sets `textContent`.
import { renderCodeBlock } from './code';
import { type AskEvent, CHANGED_ON_DISK } from './protocol';
import { oneLine, visible } from './visible';

/** A code part of the draft: spliced from disk, shown as a code block under its location, apart from the text. */
export interface DraftCode {
    caption: string;
    /** Said under the caption: the file changed on disk since indexing. */
    note?: string;
    /** The block as the answer shows it (renderCodeBlock): highlighted, numbered from the span's first line. */
    html: string;
}

/** What one event shows: `status` replaces the current line; `step` is added to the view's list of steps;
 * `delta` is answer text to append to the draft, `code` a code block. */
export interface AskProgressLine {
    status: string;
    step?: string;
    delta?: string;
    code?: DraftCode;
}

// Questions and reasons are shown as the pages show them (visible); a file or symbol name on one line (oneLine), as the
// answer names it: a line break in it read as a space in the list of steps.
const text = (value: unknown): string => (typeof value === 'string' ? visible(value.trim()) : '');
const name = (value: unknown): string => (typeof value === 'string' ? oneLine(value.trim()) : '');
const count = (value: unknown): number => (Array.isArray(value) ? value.length : 0);
const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;
const quoted = (value: string, limit = 80): string => {
    const line = value.replace(/\s+/g, ' ').trim();
    return `"${line.length > limit ? `${line.slice(0, limit - 1)}…` : line}"`;
};

function retrieval(event: AskEvent): string {
    const core = count(event.core);
    const related = count(event.related);
    return core + related === 0 ? 'Retrieval found no matching code' : `Retrieved ${plural(core, 'core file')} and ${related} related`;
}

function rerank(event: AskEvent): string {
    if (event.applied === true) {
        return `Re-ordered the candidates (${plural(Number(event.votes) || 0, 'model vote')})`;
    }
    const reason = text(event.reason);
    return `Kept the retrieval order${reason ? `: ${reason}` : ''}`;
}

function plan(event: AskEvent): string {
    const agents = count(event.agents);
    if (agents < 2) {
        return 'One narrator writes the answer';
    }
    return `Split the question into ${agents} parts, explored in parallel`;
}

function toolCall(event: AskEvent): string {
    const args = (typeof event.arguments === 'object' && event.arguments !== null ? event.arguments : {}) as Record<string, unknown>;
    switch (event.tool) {
        case 'search_more':
            return `searching for ${quoted(text(args.query))}`;
        case 'get_file': {
            const lines = typeof args.start_line === 'number' ? `:${args.start_line}${typeof args.end_line === 'number' ? `-${args.end_line}` : ''}` : '';
            return `reading ${name(args.path)}${lines}`;
        }
        case 'get_symbol':
            return `reading the definition of ${name(args.name)}`;
        default:
            return `using ${text(event.tool) || 'a tool'}`;
    }
}

function agent(event: AskEvent): string {
    const who = `Part ${typeof event.agent === 'number' ? event.agent : '?'}`;
    switch (event.phase) {
        case 'start':
            return `${who}: ${quoted(text(event.question))}`;
        case 'tool':
            return `${who} is ${toolCall(event)}`;
        case 'done':
            return `${who} answered (${plural(Number(event.tool_calls) || 0, 'look-up')})`;
        case 'failed':
            return `${who} gave up${text(event.error) ? `: ${text(event.error)}` : ''}`;
        default:
            return `${who} is exploring`;
    }
}

function citation(event: AskEvent): string {
    const lines = typeof event.start_line === 'number' ? `:${event.start_line}-${event.end_line}` : '';
    return `Citing ${name(event.path) || 'code'}${lines}`;
}

/** A part of the answer as the draft shows it: its plain form (`plain`), prose as the model wrote it (its markdown,
 * `text`, is escaped for a renderer: a `\*` the model wrote read `\\*`), a code part as a block of its own under its
 * location (and, when its file changed since indexing, a note saying so): in the text, a caption and lines the model
 * wrote under it read as code from disk. A server older than `plain` sends the markdown only. */
function draft(event: AskEvent): Pick<AskProgressLine, 'delta' | 'code'> {
    if (typeof event.plain !== 'string') {
        return { delta: typeof event.text === 'string' ? visible(event.text) : undefined };
    }
    if (event.kind !== 'code') {
        return { delta: visible(event.plain) };
    }
    const caption = `${oneLine(typeof event.path === 'string' ? event.path : '')}:${event.start_line}-${event.end_line}`;
    const html = renderCodeBlock(event.plain, typeof event.language === 'string' ? event.language : '',
        { firstLine: typeof event.start_line === 'number' ? event.start_line : undefined });
    return { code: { caption, ...(event.changed === true ? { note: CHANGED_ON_DISK } : {}), html } };
}

/** The line shown for one event; `undefined` fields say nothing new. */
export function describeAskEvent(event: AskEvent): AskProgressLine {
    switch (event.type) {
        case 'delta':
            return { status: 'Writing the answer…', ...draft(event) };
        case 'retrieval':
            return step(retrieval(event));
        case 'rerank':
            return step(rerank(event));
        case 'plan':
            return step(plan(event));
        case 'agent':
            return step(agent(event));
        case 'citation':
            return step(citation(event));
        case 'flow':
            return step(event.action === 'served'
                ? `Serving the cached answer to ${quoted(text(event.question))} (no model call)`
                : `Giving the model the cached answer to ${quoted(text(event.question))} as background`);
        case 'fallback':
            return step(`No narration${text(event.reason) ? ` (${text(event.reason)})` : ''}: showing the ranked files`);
        case 'done':
            return { status: 'Done' };
        default:
            return { status: 'Working…' };
    }
}

/** The first report, before any event: the server's begin message is the question itself. */
export const ASK_STARTED: AskProgressLine = { status: 'Retrieving code for the question…' };

function step(line: string): AskProgressLine {
    return { status: line, step: line };
}
