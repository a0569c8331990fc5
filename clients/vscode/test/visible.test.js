'use strict';
// src/visible.ts (built on its own by esbuild) against the engine's codeloupe.types.visible (the CLI's), run by the repo's
// Python: the extension escapes the characters the CLI escapes, in the same form, over every BMP character.
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const esbuild = require('esbuild');
const { serverPython } = require('./helpers');

function loadVisible() {
    const [bundle] = esbuild.buildSync({ entryPoints: [path.join(__dirname, '..', 'src', 'visible.ts')], bundle: true, write: false,
        format: 'cjs', platform: 'node' }).outputFiles;
    const module = { exports: {} };
    new Function('module', 'exports', bundle.text)(module, module.exports);
    return module.exports;
}

const CLI_ESCAPES = `
import json
from codeloupe.types import CONTROL_CHARACTERS, visible
bmp = [chr(code) for code in range(0x10000) if not 0xD800 <= code < 0xE000]
print(json.dumps({"set": [ord(c) for c in bmp if CONTROL_CHARACTERS.fullmatch(c)], "shown": {ord(c): visible(c) for c in bmp if visible(c) != c}}))
`;

describe('visible: the characters the extension shows as escapes', function () {
    it('are the CLI\'s, escaped as the CLI escapes them; a line break stays, a CRLF as one', function () {
        const { CONTROL_CHARACTERS, visible } = loadVisible();
        const cli = JSON.parse(execFileSync(serverPython(), ['-c', CLI_ESCAPES], { encoding: 'utf8' }));
        const bmp = [];
        for (let code = 0; code < 0x10000; code += 1) {
            if (code < 0xd800 || code >= 0xe000) {
                bmp.push(String.fromCharCode(code));
            }
        }
        assert.deepEqual(bmp.filter((ch) => CONTROL_CHARACTERS.test(ch)).map((ch) => ch.charCodeAt(0)), cli.set);
        // The CLI prints "\r" (a lone CR) as \x0d; the extension keeps it, a line break by the LSP rule (lines.ts).
        const { 13: lone, ...cliShown } = cli.shown;
        assert.equal(lone, '\\x0d');
        const shown = Object.fromEntries(bmp.filter((ch) => visible(ch) !== ch).map((ch) => [String(ch.charCodeAt(0)), visible(ch)]));
        assert.deepEqual(shown, cliShown);
        assert.equal(visible('a\r\nb\rc\n\u202ed\x1b\te'), 'a\r\nb\rc\n\\u202ed\\x1b\te');
    });
});

describe('oneLine: a name on one line', function () {
    it('is written as the engine\'s one_line writes it: line breaks (CRLF, a lone CR) and control characters escaped', function () {
        const { oneLine } = loadVisible();
        const names = ['app/nl\n### forged.py', 'a\r\nb\rc\n\u202ed\x1b\te', 'plain/name.py', 'x\u2066y\u2069\r\n'];
        const engine = JSON.parse(execFileSync(serverPython(), ['-c',
            'import json, sys\nfrom codeloupe.types import one_line\nprint(json.dumps([one_line(n) for n in json.loads(sys.argv[1])]))',
            JSON.stringify(names)], { encoding: 'utf8' }));
        assert.deepEqual(names.map(oneLine), engine);
        assert.equal(oneLine('app/nl\n### forged.py'), 'app/nl\\n### forged.py');
    });
});

describe('visibleLabel: text for a label that renders theme icons', function () {
    it('shows every `$(name)` as written, a backslash already before one too, and escapes as visible does', function () {
        const { visibleLabel } = loadVisible();
        // VS Code drops one backslash before an icon and shows the icon's text; what is not an icon is left alone.
        assert.equal(visibleLabel('$(zap) cd $(pwd) $(sync~spin) \\$(x) $(no space) $() \u202e'),
            '\\$(zap) cd \\$(pwd) \\$(sync~spin) \\\\$(x) $(no space) $() \\u202e');
    });
});

describe('visibleMessage: text for a notification', function () {
    it('breaks every link a notification would render, and escapes as visible does', function () {
        const { visibleMessage } = loadVisible();
        assert.equal(visibleMessage('see [docs](https://x.example) or [run](command:a.b?%5B%5D) \u202e [a] (b)'),
            'see [docs] (https://x.example) or [run] (command:a.b?%5B%5D) \\u202e [a] (b)');
    });
});
