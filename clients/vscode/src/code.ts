// Code blocks for the webviews: highlighted by the bundled highlight.js (no network), one element per line so
// the page can number the lines and mark the matching one. The text content of a block is the code verbatim, but
// for its control and bidi formatting characters, shown as escapes (visible.ts): each is one escape on the line it
// was on, and the line breaks are the code's own, so every line keeps its number.
import hljs from 'highlight.js/lib/common';
import cmake from 'highlight.js/lib/languages/cmake';
import dockerfile from 'highlight.js/lib/languages/dockerfile';
import elixir from 'highlight.js/lib/languages/elixir';
import haskell from 'highlight.js/lib/languages/haskell';
import nix from 'highlight.js/lib/languages/nix';
import protobuf from 'highlight.js/lib/languages/protobuf';
import scala from 'highlight.js/lib/languages/scala';
import { finalBreak, LINE_BREAK } from './lines';
import { visible } from './visible';

for (const [name, language] of Object.entries({ cmake, dockerfile, elixir, haskell, nix, protobuf, scala })) {
    hljs.registerLanguage(name, language);
}

/** Engine language names (engine/codeloupe/chunk/languages.py) and VS Code language ids that highlight.js
 * spells differently. */
const HIGHLIGHT_NAMES: Readonly<Record<string, string>> = {
    typescriptreact: 'typescript', javascriptreact: 'javascript', shellscript: 'bash', jsonc: 'json',
    tsx: 'typescript', objc: 'objectivec', html: 'xml', vue: 'xml', svelte: 'xml', astro: 'xml', toml: 'ini',
    make: 'makefile', gnumakefile: 'makefile', containerfile: 'dockerfile', proto: 'protobuf', fish: 'bash',
    starlark: 'python', cuda: 'cpp', arduino: 'cpp', groovy: 'java', gomod: 'go', jsonnet: 'json',
};

/** `text` as an HTML attribute's value: HTML's special characters escaped, nothing else changed. */
export function escapeAttribute(text: string): string {
    return text.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch] ?? ch);
}

/** Repository text (a path, a name, an error quoting either) as a page shows it: visible(), then HTML-escaped. */
export function escapeHtml(text: string): string {
    return escapeAttribute(visible(text));
}

/** Highlighted HTML for `text` (visible), or the escaped text when the language is unknown (no guessing). */
function highlighted(text: string, language: string): string {
    const name = HIGHLIGHT_NAMES[language] ?? language;
    if (name === '' || hljs.getLanguage(name) === undefined) {
        return escapeHtml(text);
    }
    // Highlighted as written; the escapes replace the characters in the HTML, whose tags hold none of them.
    return visible(hljs.highlight(text, { language: name, ignoreIllegals: true }).value);
}

const HTML_PARTS = new RegExp(`(<span [^>]*>|<\\/span>|${LINE_BREAK.source})`);

/** Splits highlighted HTML into lines (`LINE_BREAK`), closing the spans still open at each line break and reopening
 * them on the next line (a string or comment may span lines); `breaks[i]` is the break after `lines[i]`.
 * highlight.js emits only `<span class="…">` and `</span>`. */
function splitLines(html: string): { lines: string[]; breaks: string[] } {
    const lines: string[] = [];
    const breaks: string[] = [];
    const open: string[] = [];
    let current = '';
    for (const part of html.split(HTML_PARTS)) {
        if (LINE_BREAK.test(part)) {
            lines.push(current + '</span>'.repeat(open.length));
            breaks.push(part);
            current = open.join('');
        } else if (part.startsWith('<span ')) {
            open.push(part);
            current += part;
        } else if (part === '</span>') {
            open.pop();
            current += part;
        } else {
            current += part;
        }
    }
    lines.push(current);
    return { lines, breaks };
}

export interface CodeBlockOptions {
    /** 1-based number of the first line; no numbers when absent. */
    firstLine?: number;
    /** 1-based line to mark as the match. */
    anchorLine?: number;
}

/**
 * A `<pre><code>` block: each line a `span.line` (numbered through `data-line`, drawn by CSS so the numbers are
 * not part of the text), joined by the original line breaks.
 */
export function renderCodeBlock(text: string, language: string, { firstLine, anchorLine }: CodeBlockOptions = {}): string {
    const trailing = finalBreak(text);
    const { lines, breaks } = splitLines(highlighted(text.slice(0, text.length - trailing.length), language));
    const spans = lines.map((line, index) => {
        const number = firstLine === undefined ? undefined : firstLine + index;
        const classes = number !== undefined && number === anchorLine ? 'line anchor' : 'line';
        return `<span class="${classes}"${number === undefined ? '' : ` data-line="${number}"`}>${line}</span>${breaks[index] ?? trailing}`;
    });
    const numbered = firstLine === undefined ? '' : ' numbered';
    return `<pre class="code${numbered}"><code class="hljs">${spans.join('')}</code></pre>`;
}

/** Token colours from the editor theme (webviews get the theme as CSS variables). */
export const CODE_STYLE = `
pre.code { background: var(--vscode-textCodeBlock-background); padding: .5em 0; overflow-x: auto; }
pre.code code { display: block; }
pre.code .line { display: inline-block; min-width: 100%; padding: 0 .8em; box-sizing: border-box; }
pre.code.numbered .line::before { content: attr(data-line); display: inline-block; width: 3.5em; margin-right: 1em;
  text-align: right; color: var(--vscode-editorLineNumber-foreground); user-select: none; }
pre.code .line.anchor { background: var(--vscode-editor-lineHighlightBackground, var(--vscode-editor-selectionHighlightBackground)); }
pre.code.numbered .line.anchor::before { color: var(--vscode-editorLineNumber-activeForeground); }
.hljs-keyword, .hljs-built_in, .hljs-literal, .hljs-meta .hljs-keyword { color: var(--vscode-symbolIcon-keywordForeground, var(--vscode-editor-foreground)); }
.hljs-string, .hljs-regexp, .hljs-template-tag { color: var(--vscode-debugTokenExpression-string); }
.hljs-number { color: var(--vscode-debugTokenExpression-number); }
.hljs-comment, .hljs-quote { color: var(--vscode-descriptionForeground); font-style: italic; }
.hljs-title, .hljs-title.function_ { color: var(--vscode-symbolIcon-functionForeground); }
.hljs-title.class_, .hljs-type { color: var(--vscode-symbolIcon-classForeground); }
.hljs-params, .hljs-variable, .hljs-attr, .hljs-property { color: var(--vscode-symbolIcon-variableForeground); }
.hljs-meta, .hljs-doctag, .hljs-tag, .hljs-name, .hljs-selector-tag { color: var(--vscode-debugTokenExpression-name); }
.hljs-deletion { color: var(--vscode-gitDecoration-deletedResourceForeground); }
.hljs-addition { color: var(--vscode-gitDecoration-addedResourceForeground); }
`;
