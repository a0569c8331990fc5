// Lines as the server counts them (docs/protocol.md), as VS Code and the LSP do: a line ends at "\n", "\r\n" or a
// lone "\r" and nowhere else. Every line number the server sends counts this way, so text it sends (a chunk, a
// snippet, a citation) is split here before its lines are numbered or shown.

/** One line break; as a `split` separator inside a capture group, the breaks are kept. */
export const LINE_BREAK = /\r\n|\r|\n/;

/** The pieces of `text` between line breaks (a final break leaves an empty last piece, as `split` does). */
export function linesOf(text: string): string[] {
    return text.split(LINE_BREAK);
}

/** The line break `text` ends with, or ''. */
export function finalBreak(text: string): string {
    return /(?:\r\n|\r|\n)$/.exec(text)?.[0] ?? '';
}
