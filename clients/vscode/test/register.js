'use strict';
// mocha --require hook: `require('vscode')` (from the bundled extension) resolves to the stub in ./vscode.
const Module = require('node:module');
const path = require('node:path');

const stub = path.join(__dirname, 'vscode', 'index.js');
const resolve = Module._resolveFilename;
Module._resolveFilename = function resolveVscode(request, ...rest) {
    return request === 'vscode' ? stub : resolve.call(this, request, ...rest);
};
