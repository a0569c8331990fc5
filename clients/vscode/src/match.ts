// Where a search result matched: the span to reveal, the line to put the cursor on, the symbol to name.
// Pure functions of the server's answer (no vscode import).
import type { Location } from 'vscode-languageclient/node';
import { linesOf } from './lines';
import type { ChunkResult, FileResult } from './protocol';

export interface Match {
    /** The matching chunk's span (revealed, never selected). */
    location: Location;
    /** 0-based line the cursor goes to: the snippet's anchor, else the span's first line. */
    anchorLine: number;
    /** The chunk symbol whose definition encloses the anchor line; a chunk without symbols: its own name. */
    symbol: string;
    /** The anchor line's text, trimmed (one line). */
    line: string;
}

const PUNCTUATION_ONLY = /^[\s{}()[\];,]*$/;
const indentOf = (line: string): number => line.length - line.trimStart().length;
export const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The chunk whose span the file's best location names (the server puts it first, but say so). */
function bestChunk(file: FileResult): ChunkResult | undefined {
    const start = file.location.range.start.line;
    return file.chunks.find((chunk) => chunk.location.range.start.line === start) ?? file.chunks[0];
}

/**
 * The text we have around the anchor (the full chunk for CORE files, the snippet otherwise) with the 0-based line
 * of its first line.
 */
function knownText(chunk: ChunkResult): { text: string; firstLine: number } {
    if (chunk.text !== '') {
        return { text: chunk.text, firstLine: chunk.location.range.start.line };
    }
    return { text: chunk.snippet?.text ?? '', firstLine: chunk.snippet?.startLine ?? chunk.location.range.start.line };
}

/**
 * The innermost of the chunk's symbols whose header encloses the anchor line, found by the offside rule: walking up
 * from the anchor, a header is a line indented less than every line below it so far (or the anchor line itself)
 * that names the symbol. A chunk often holds several definitions (small ones are merged), so its own name can be
 * the first of them rather than the one that matched. Works for any language laid out with indented bodies.
 */
function enclosingSymbol(chunk: ChunkResult, lines: string[], anchor: number): string | undefined {
    const named = chunk.symbols.map((symbol) => {
        const name = `(^|[^\\w$])${escapeRegExp(symbol.split(/[.:#]/).at(-1) ?? symbol)}`;
        // A header above the match names the symbol anywhere on its line; the match's own line must look like the
        // definition (the name followed by a parameter list, a colon, an assignment, a type or a body), not mention it.
        return { symbol, header: new RegExp(`${name}(?![\\w$])`), definition: new RegExp(`${name}\\s*([(:=<{]|$)`) };
    });
    let offside = Number.POSITIVE_INFINITY;
    for (let index = Math.min(anchor, lines.length - 1); index >= 0; index -= 1) {
        const line = lines[index];
        const indent = indentOf(line);
        // Blank lines and lone brackets (a brace on its own line) open nothing: look past them.
        if (PUNCTUATION_ONLY.test(line) || (index !== anchor && indent >= offside)) {
            continue;
        }
        const found = named.find(({ header, definition }) => (index === anchor ? definition : header).test(line));
        if (found !== undefined) {
            return found.symbol;
        }
        offside = indent;
        if (offside === 0) {
            break;  // nothing above a line at the margin encloses it
        }
    }
    return undefined;
}

export function matchOf(file: FileResult): Match {
    const chunk = bestChunk(file);
    if (chunk === undefined) {
        return { location: file.location, anchorLine: file.location.range.start.line, symbol: file.symbols[0] ?? '', line: '' };
    }
    const anchorLine = chunk.snippet?.anchorLine ?? chunk.location.range.start.line;
    const { text, firstLine } = knownText(chunk);
    const lines = linesOf(text);
    const anchor = anchorLine - firstLine;
    const anchorText = lines[anchor]?.trim() || lines.find((line) => line.trim() !== '')?.trim() || '';
    // The server names the definition holding the anchor (`anchorSymbol`). Without it (an older server): a chunk
    // without symbols (a docs section, a run of statements) is named as a whole, and a match outside every
    // definition of a chunk that has some is named by none of them.
    const symbol = chunk.snippet?.anchorSymbol
        ?? (chunk.symbols.length === 0 ? chunk.name : (anchor >= 0 ? enclosingSymbol(chunk, lines, anchor) : undefined) ?? '');
    return { location: chunk.location, anchorLine, symbol, line: anchorText };
}
