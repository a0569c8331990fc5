// Repository text as the extension shows it (code, a path, a symbol, a breadcrumb): its control characters, and
// the bidirectional formatting ones, as escapes (`\x1b`, `\u202e`), the set and the form the CLI uses
// (codeloupe.types.visible) and the web page's visible.js. A bidi override shown raw reorders what a reader
// sees, so a line of code reads otherwise than it runs ("Trojan Source") and a name shows its end first.
// Line breaks stay as they are (a CRLF and a lone CR too, breaks by the LSP rule of lines.ts), and tab stays: one
// character becomes a few, never a line break, so text split into lines keeps its line numbers.
import { LINE_BREAK } from './lines';

/** The characters shown as escapes: C0 and C1 controls but tab and the line breaks, U+061C, U+200E/200F,
 * U+202A-202E, U+2066-2069. */
export const CONTROL_CHARACTERS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

const SHOWN = new RegExp(`${LINE_BREAK.source}|${CONTROL_CHARACTERS.source}`, 'g');

/** `text` with every character of CONTROL_CHARACTERS but a line break's shown as its escape. */
export function visible(text: string): string {
    return text.replace(SHOWN, (found) => {
        if (LINE_BREAK.test(found)) {
            return found;
        }
        const code = found.charCodeAt(0);
        return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
    });
}

/** `visible(text)` on one line, as codeloupe.types.one_line writes a name: a line break as `\n` (a lone CR as `\x0d`),
 * so the name cannot start a line of its own. */
export function oneLine(text: string): string {
    return visible(text.replace(/\r\n/g, '\n')).replace(/\r/g, '\\x0d').replace(/\n/g, '\\n');
}

// A label VS Code renders theme icons in (a QuickPick item's label, description and detail, a code lens title, the
// status bar text) shows every `$(name)` of its text as an icon: a file named `$(zap).py`, a shell line `cd $(pwd)`
// (an unknown name renders as nothing), a symbol, a question. VS Code's own pattern of an icon (iconLabels.ts:
// ThemeIcon.iconNameExpression, then an optional modifier); a backslash before one shows it as written, and a
// backslash already there stays shown, the one added being the one the renderer drops.
const ICON = /\$\([A-Za-z0-9-]+(?:~[A-Za-z]+)?\)/g;

/** `visible(text)` for a label that renders `$(name)` as an icon: each shown as written instead. */
export function visibleLabel(text: string): string {
    return visible(text).replace(ICON, (icon) => `\\${icon}`);
}

// A notification's message is plain text but for links: VS Code renders `[label](https://...)`, `[label](file:...)`
// and `[label](command:id?args)` in it as a link, the last running the command with its arguments on a click. The
// server's warnings and errors quote the workspace (a settings file's unknown key, a path), so a repository could
// put a "Fix it" link to any command in front of the user. A link needs its `](` together: a space breaks it.

/** `visible(text)` for a notification: no part of it renders as a link. */
export function visibleMessage(text: string): string {
    return visible(text).replace(/\]\(/g, '] (');
}
