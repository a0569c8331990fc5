'use strict';
// A hand-written stand-in for the `vscode` module, enough to run the real extension and the real
// vscode-languageclient under Node. It records what the extension does to the UI (messages, shown documents,
// webviews, quick picks, executed commands) in `__test` and lets tests drive the UI (settings, input, trust).
const path = require('node:path');
const { fileURLToPath, pathToFileURL } = require('node:url');
const fs = require('node:fs');

// ---------------------------------------------------------------- basics

class Disposable {
    constructor(onDispose) {
        this._onDispose = onDispose;
    }
    static from(...items) {
        return new Disposable(() => items.forEach((item) => item?.dispose?.()));
    }
    dispose() {
        const run = this._onDispose;
        this._onDispose = undefined;
        run?.();
    }
}

class EventEmitter {
    constructor() {
        this._listeners = new Set();
        this.event = (listener, thisArg, disposables) => {
            const bound = thisArg ? listener.bind(thisArg) : listener;
            this._listeners.add(bound);
            const disposable = new Disposable(() => this._listeners.delete(bound));
            disposables?.push(disposable);
            return disposable;
        };
    }
    fire(value) {
        return [...this._listeners].map((listener) => listener(value));
    }
    dispose() {
        this._listeners.clear();
    }
}

class CancellationError extends Error {
    constructor() {
        super('Canceled');
        this.name = 'Canceled';
    }
}

class CancellationTokenSource {
    constructor() {
        const emitter = new EventEmitter();
        this._emitter = emitter;
        this.token = { isCancellationRequested: false, onCancellationRequested: emitter.event };
    }
    cancel() {
        if (!this.token.isCancellationRequested) {
            this.token.isCancellationRequested = true;
            this._emitter.fire(undefined);
        }
    }
    dispose() {
        this._emitter.dispose();
    }
}

class Uri {
    constructor(scheme, authority, uriPath, query, fragment) {
        this.scheme = scheme;
        this.authority = authority ?? '';
        this.path = uriPath ?? '';
        this.query = query ?? '';
        this.fragment = fragment ?? '';
    }
    static parse(value) {
        const url = new URL(value);
        return new Uri(url.protocol.slice(0, -1), url.host, decodeURIComponent(url.pathname), url.search.slice(1), url.hash.slice(1));
    }
    static file(fsPath) {
        return new Uri('file', '', path.resolve(fsPath));
    }
    static joinPath(base, ...segments) {
        return base.with({ path: path.posix.join(base.path, ...segments) });
    }
    static from({ scheme, authority, path: uriPath, query, fragment }) {
        return new Uri(scheme, authority, uriPath, query, fragment);
    }
    get fsPath() {
        return this.scheme === 'file' ? fileURLToPath(pathToFileURL(this.path)) : this.path;
    }
    with(change) {
        return new Uri(change.scheme ?? this.scheme, change.authority ?? this.authority, change.path ?? this.path,
            change.query ?? this.query, change.fragment ?? this.fragment);
    }
    toString() {
        if (this.scheme === 'file') {
            return pathToFileURL(this.path).href + (this.fragment ? `#${this.fragment}` : '');
        }
        return `${this.scheme}://${this.authority}${this.path}${this.query ? `?${this.query}` : ''}${this.fragment ? `#${this.fragment}` : ''}`;
    }
    toJSON() {
        return { scheme: this.scheme, authority: this.authority, path: this.path, query: this.query, fragment: this.fragment };
    }
}

class Position {
    constructor(line, character) {
        this.line = line;
        this.character = character;
    }
    isBefore(other) {
        return this.line < other.line || (this.line === other.line && this.character < other.character);
    }
    isAfter(other) {
        return other.isBefore(this);
    }
    isEqual(other) {
        return this.line === other.line && this.character === other.character;
    }
    compareTo(other) {
        return this.isBefore(other) ? -1 : this.isEqual(other) ? 0 : 1;
    }
    translate(lineDelta = 0, characterDelta = 0) {
        return new Position(this.line + lineDelta, this.character + characterDelta);
    }
    with(line = this.line, character = this.character) {
        return new Position(line, character);
    }
}

class Range {
    constructor(a, b, c, d) {
        if (typeof a === 'number') {
            this.start = new Position(a, b);
            this.end = new Position(c, d);
        } else {
            this.start = a;
            this.end = b;
        }
    }
    get isEmpty() {
        return this.start.isEqual(this.end);
    }
    get isSingleLine() {
        return this.start.line === this.end.line;
    }
    contains(value) {
        const range = value instanceof Range ? value : new Range(value, value);
        return !range.start.isBefore(this.start) && !this.end.isBefore(range.end);
    }
    with(start = this.start, end = this.end) {
        return new Range(start, end);
    }
}

class Selection extends Range {
    constructor(anchor, active) {
        super(anchor, active);
        this.anchor = anchor;
        this.active = active;
    }
}

class TreeItem {
    constructor(labelOrUri, collapsibleState = 0) {
        if (labelOrUri instanceof Uri) {
            this.resourceUri = labelOrUri;
        } else {
            this.label = labelOrUri;
        }
        this.collapsibleState = collapsibleState;
    }
}

class Location {
    constructor(uri, rangeOrPosition) {
        this.uri = uri;
        this.range = rangeOrPosition instanceof Position ? new Range(rangeOrPosition, rangeOrPosition) : rangeOrPosition;
    }
}

class MarkdownString {
    constructor(value = '', supportThemeIcons = false) {
        this.value = value;
        this.supportThemeIcons = supportThemeIcons;
    }
    appendText(text) {
        this.value += text;
        return this;
    }
    appendMarkdown(text) {
        this.value += text;
        return this;
    }
    appendCodeblock(code, language = '') {
        this.value += `\n\`\`\`${language}\n${code}\n\`\`\`\n`;
        return this;
    }
}

class Hover {
    constructor(contents, range) {
        this.contents = Array.isArray(contents) ? contents : [contents];
        this.range = range;
    }
}

class CodeLens {
    constructor(range, command) {
        this.range = range;
        this.command = command;
    }
    get isResolved() {
        return this.command !== undefined;
    }
}

class SymbolInformation {
    constructor(name, kind, rangeOrContainer, locationOrUri, containerName) {
        this.name = name;
        this.kind = kind;
        if (rangeOrContainer instanceof Range) {
            this.location = new Location(locationOrUri, rangeOrContainer);
            this.containerName = containerName;
        } else {
            this.containerName = rangeOrContainer;
            this.location = locationOrUri;
        }
    }
}

/** Classes the client only extends or builds for features this server does not offer. */
function plainClass(name) {
    return { [name]: class {
        constructor(...args) {
            this.args = args;
        }
    } }[name];
}

class CodeActionKind {
    constructor(value) {
        this.value = value;
    }
    append(part) {
        return new CodeActionKind(this.value ? `${this.value}.${part}` : part);
    }
    contains(other) {
        return this.value === other.value || other.value.startsWith(`${this.value}.`);
    }
    intersects(other) {
        return this.contains(other) || other.contains(this);
    }
}
for (const [name, value] of Object.entries({ Empty: '', QuickFix: 'quickfix', Refactor: 'refactor', RefactorExtract: 'refactor.extract',
    RefactorInline: 'refactor.inline', RefactorMove: 'refactor.move', RefactorRewrite: 'refactor.rewrite', Source: 'source',
    SourceOrganizeImports: 'source.organizeImports', SourceFixAll: 'source.fixAll', Notebook: 'notebook' })) {
    CodeActionKind[name] = new CodeActionKind(value);
}

function numberedEnum(names, first = 0) {
    return Object.fromEntries(names.map((name, index) => [name, index + first]));
}

const SymbolKind = numberedEnum(['File', 'Module', 'Namespace', 'Package', 'Class', 'Method', 'Property', 'Field', 'Constructor', 'Enum',
    'Interface', 'Function', 'Variable', 'Constant', 'String', 'Number', 'Boolean', 'Array', 'Object', 'Key', 'Null', 'EnumMember',
    'Struct', 'Event', 'Operator', 'TypeParameter']);

// ---------------------------------------------------------------- test state

const packageJson = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
const contributedDefaults = Object.fromEntries(Object.entries(packageJson.contributes.configuration.properties)
    .map(([key, schema]) => [key, schema.default]));
const builtinDefaults = { 'python.defaultInterpreterPath': 'python' };

const state = {};
const events = {
    configuration: new EventEmitter(),
    grantTrust: new EventEmitter(),
    openDocument: new EventEmitter(),
    saveDocument: new EventEmitter(),
    /** A file changed on disk, as every file system watcher sees it (each watcher matches every file here). */
    fileChange: new EventEmitter(),
};

/** Test-facing controls and records. */
const __test = {
    reset({ trusted = true, folders = [], settings = {}, extensions = {} } = {}) {
        state.trusted = trusted;
        state.folders = folders.map((folder, index) => ({ uri: Uri.file(folder), name: path.basename(folder), index }));
        state.settings = { ...settings };
        state.extensions = extensions;
        state.commands = new Map();
        state.inputAnswers = [];
        state.serializers = new Map();
        state.messageAnswers = [];
        this.messages = [];
        this.shown = [];
        this.executed = [];
        this.panels = [];
        this.quickPicks = [];
        this.statusItems = [];
        this.providers = {};
        this.log = [];
        this.progress = [];
        this.treeViews = {};
        this.secrets = new Map();
        window.activeTextEditor = undefined;
        workspace.textDocuments.length = 0;
    },
    /** Changes settings as the Settings UI would, then fires onDidChangeConfiguration; resolves after listeners. */
    async changeSettings(changes) {
        Object.assign(state.settings, changes);
        const keys = Object.keys(changes);
        const affects = (section) => keys.some((key) => key === section || key.startsWith(`${section}.`) || section.startsWith(`${key}.`));
        await Promise.all(events.configuration.fire({ affectsConfiguration: affects }));
    },
    async grantTrust() {
        state.trusted = true;
        await Promise.all(events.grantTrust.fire(undefined));
    },
    answerInputBox(answer) {
        state.inputAnswers.push(answer);
    },
    /** The button the next message is answered with. */
    answerMessage(choice) {
        state.messageAnswers.push(choice);
    },
    /** Opens a document as the editor would: listeners (the language client's didOpen) run. */
    async openDocument(fsPath) {
        const document = await workspace.openTextDocument(Uri.file(fsPath));
        if (!workspace.textDocuments.includes(document)) {
            workspace.textDocuments.push(document);
            events.openDocument.fire(document);
        }
        return document;
    },
    /** Writes `text` to `fsPath` as saving an edited editor would: the document is open, then saved (didSave). */
    async saveDocument(fsPath, text) {
        await fs.promises.writeFile(fsPath, text);
        const document = await __test.openDocument(fsPath);
        document._setText(text);
        await Promise.all(events.saveDocument.fire(document));
        return document;
    },
    /** Writes `text` to `fsPath` as another program would (a checkout, a formatter): no editor saves it, the file
     * system watchers see it change; resolves after their listeners. */
    async changeOnDisk(fsPath, text) {
        await fs.promises.writeFile(fsPath, text);
        await Promise.all(events.fileChange.fire(Uri.file(fsPath)));
    },
    /** An ExtensionContext.workspaceState: kept across a window reload when a test hands the same one to the next
     * activation, as VS Code keeps a workspace's. */
    memento() {
        const values = new Map();
        return {
            keys: () => [...values.keys()],
            get: (key, fallback) => (values.has(key) ? structuredClone(values.get(key)) : fallback),
            async update(key, value) {
                if (value === undefined) {
                    values.delete(key);
                } else {
                    values.set(key, structuredClone(value));
                }
            },
        };
    },
    /** A reloaded window restores a tab of `viewType` titled `title` whose page last set `pageState`: a new panel is
     * handed to the serializer the extension registered; resolves with the panel once the serializer is done. */
    async restorePanel(viewType, title, pageState) {
        const serializer = state.serializers.get(viewType);
        if (serializer === undefined) {
            throw new Error(`no webview panel serializer for ${viewType}: VS Code would not restore the tab`);
        }
        const panel = createWebviewPanel(viewType, title, { viewColumn: 1 }, undefined);
        panel.restoredState = pageState;
        await serializer.deserializeWebviewPanel(panel, pageState);
        return panel;
    },
    commandIds() {
        return [...state.commands.keys()];
    },
    messages: [],
    shown: [],
    executed: [],
    panels: [],
    quickPicks: [],
    statusItems: [],
    providers: {},
    log: [],
    progress: [],
    treeViews: {},
    secrets: new Map(),
    /** The settings as written (what settings.json would hold). */
    settingsSnapshot() {
        return { ...state.settings };
    },
    /** An ExtensionContext.secrets backed by `secrets` (a Map), firing onDidChange like VS Code's. */
    secretStorage() {
        const changed = new EventEmitter();
        return {
            get: async (key) => __test.secrets.get(key),
            store: async (key, value) => {
                __test.secrets.set(key, value);
                changed.fire({ key });
            },
            delete: async (key) => {
                __test.secrets.delete(key);
                changed.fire({ key });
            },
            onDidChange: changed.event,
        };
    },
    /** Makes `fsPath` the active editor with `selection` (a Range) selected. */
    async setActiveEditor(fsPath, selection) {
        const document = await __test.openDocument(fsPath);
        window.activeTextEditor = { document, selection: new Selection(selection.start, selection.end) };
        return window.activeTextEditor;
    },
};

// ---------------------------------------------------------------- workspace

function configurationValue(key) {
    if (Object.prototype.hasOwnProperty.call(state.settings, key)) {
        return state.settings[key];
    }
    return contributedDefaults[key] ?? builtinDefaults[key];
}

function getConfiguration(section) {
    const full = (key) => (section ? `${section}.${key}` : key);
    return {
        get(key, fallback) {
            const value = configurationValue(full(key));
            return value === undefined ? fallback : value;
        },
        has(key) {
            return configurationValue(full(key)) !== undefined;
        },
        inspect(key) {
            const name = full(key);
            return {
                key: name,
                defaultValue: contributedDefaults[name] ?? builtinDefaults[name],
                globalValue: Object.prototype.hasOwnProperty.call(state.settings, name) ? state.settings[name] : undefined,
            };
        },
        async update(key, value) {
            await __test.changeSettings({ [full(key)]: value });
        },
    };
}

class TextDocument {
    constructor(uri, text, languageId) {
        this.uri = uri;
        this.fileName = uri.fsPath;
        this.languageId = languageId;
        this.version = 1;
        this.isDirty = false;
        this.isClosed = false;
        this.isUntitled = false;
        this.eol = 1;
        this._text = text;
        this._lines = text.split('\n');
        this.lineCount = this._lines.length;
    }
    /** The buffer now holds `text` (an edit, or a file written before the document was read again). */
    _setText(text) {
        if (text !== this._text) {
            this.version += 1;
            this._text = text;
            this._lines = text.split('\n');
            this.lineCount = this._lines.length;
        }
    }
    getText(range) {
        if (range === undefined) {
            return this._text;
        }
        const lines = this._lines.slice(range.start.line, range.end.line + 1);
        lines[lines.length - 1] = lines[lines.length - 1].slice(0, range.isSingleLine ? range.end.character : range.end.character);
        lines[0] = lines[0].slice(range.start.character);
        return lines.join('\n');
    }
    getWordRangeAtPosition(position) {
        const text = this._lines[position.line] ?? '';
        for (const match of text.matchAll(/[A-Za-z_$][\w$]*/g)) {
            if (match.index <= position.character && position.character <= match.index + match[0].length) {
                return new Range(position.line, match.index, position.line, match.index + match[0].length);
            }
        }
        return undefined;
    }
    lineAt(line) {
        const index = typeof line === 'number' ? line : line.line;
        const text = this._lines[index];
        return { lineNumber: index, text, range: new Range(index, 0, index, text.length), isEmptyOrWhitespace: text.trim() === '',
            firstNonWhitespaceCharacterIndex: text.length - text.trimStart().length };
    }
}

const LANGUAGES = { '.py': 'python', '.js': 'javascript', '.ts': 'typescript', '.md': 'markdown', '.go': 'go', '.rb': 'ruby' };
const documents = new Map();
/** Scheme -> TextDocumentContentProvider (registerTextDocumentContentProvider). */
const contentProviders = new Map();

const noEvent = new EventEmitter().event;

const FileType = { Unknown: 0, File: 1, Directory: 2, SymbolicLink: 64 };

const workspace = {
    get isTrusted() {
        return state.trusted;
    },
    get workspaceFolders() {
        return state.folders.length > 0 ? state.folders : undefined;
    },
    get name() {
        return state.folders[0]?.name;
    },
    getWorkspaceFolder(uri) {
        return state.folders.find((folder) => uri.fsPath.startsWith(folder.uri.fsPath + path.sep));
    },
    textDocuments: [],
    notebookDocuments: [],
    asRelativePath(target) {
        const fsPath = typeof target === 'string' ? target : target.fsPath;
        const folder = state.folders.find((candidate) => fsPath.startsWith(candidate.uri.fsPath + path.sep));
        return folder ? path.relative(folder.uri.fsPath, fsPath).split(path.sep).join('/') : fsPath;
    },
    getConfiguration,
    onDidChangeConfiguration: events.configuration.event,
    onDidGrantWorkspaceTrust: events.grantTrust.event,
    onDidOpenTextDocument: events.openDocument.event,
    onDidCloseTextDocument: noEvent,
    onDidChangeTextDocument: noEvent,
    onDidSaveTextDocument: events.saveDocument.event,
    onWillSaveTextDocument: noEvent,
    onDidChangeWorkspaceFolders: noEvent,
    onDidOpenNotebookDocument: noEvent,
    onDidChangeNotebookDocument: noEvent,
    onDidSaveNotebookDocument: noEvent,
    onDidCloseNotebookDocument: noEvent,
    onDidCreateFiles: noEvent,
    onDidRenameFiles: noEvent,
    onDidDeleteFiles: noEvent,
    onWillCreateFiles: noEvent,
    onWillRenameFiles: noEvent,
    onWillDeleteFiles: noEvent,
    async openTextDocument(uri) {
        const key = uri.toString();
        if (!documents.has(key)) {
            // As VS Code: a scheme with a content provider is read through it (a read-only document), files from disk.
            const provider = uri.scheme === 'file' ? undefined : contentProviders.get(uri.scheme);
            if (uri.scheme !== 'file' && provider === undefined) {
                throw new Error(`no content provider for ${uri.toString()}`);
            }
            const text = provider ? await provider.provideTextDocumentContent(uri, new CancellationTokenSource().token)
                : await fs.promises.readFile(uri.fsPath, 'utf8');
            documents.set(key, new TextDocument(uri, text, LANGUAGES[path.extname(uri.path)] ?? 'plaintext'));
        }
        return documents.get(key);
    },
    createFileSystemWatcher() {
        const subscriptions = [];
        const onDidChange = (listener, thisArg) => {
            const subscription = events.fileChange.event(listener, thisArg);
            subscriptions.push(subscription);
            return subscription;
        };
        return { onDidCreate: noEvent, onDidChange, onDidDelete: noEvent, dispose: () => subscriptions.forEach((subscription) => subscription.dispose()) };
    },
    registerTextDocumentContentProvider(scheme, provider) {
        contentProviders.set(scheme, provider);
        return new Disposable(() => contentProviders.delete(scheme));
    },
    async applyEdit() {
        return false;
    },
    fs: {
        async readFile(uri) {
            return new Uint8Array(await fs.promises.readFile(uri.fsPath));
        },
        // As VS Code's disk provider: the type of what a link leads to, SymbolicLink added; a device or FIFO is Unknown.
        async stat(uri) {
            const [target, link] = [await fs.promises.stat(uri.fsPath), await fs.promises.lstat(uri.fsPath)];
            const type = target.isFile() ? FileType.File : target.isDirectory() ? FileType.Directory : FileType.Unknown;
            return { type: type | (link.isSymbolicLink() ? FileType.SymbolicLink : 0), size: target.size, ctime: target.ctimeMs, mtime: target.mtimeMs };
        },
    },
};

// ---------------------------------------------------------------- window

function message(level) {
    return (text, ...items) => {
        const choices = items.filter((item) => typeof item === 'string' || typeof item?.title === 'string');
        const options = items.find((item) => typeof item === 'object' && item !== null && typeof item.title !== 'string');
        __test.messages.push({ level, text, items: choices, modal: options?.modal === true, detail: options?.detail });
        // The next answerMessage() if it is one of this message's buttons (a click on it), else closed unanswered.
        const answer = state.messageAnswers.shift();
        return Promise.resolve(choices.includes(answer) ? answer : undefined);
    };
}

class QuickPick {
    constructor() {
        this._value = '';
        this.items = [];
        this.activeItems = [];
        this.selectedItems = [];
        this.busy = false;
        this.visible = false;
        this.buttons = [];
        this._changeValue = new EventEmitter();
        this._changeActive = new EventEmitter();
        this._accept = new EventEmitter();
        this._hide = new EventEmitter();
        this.onDidChangeValue = this._changeValue.event;
        this.onDidChangeActive = this._changeActive.event;
        this.onDidChangeSelection = noEvent;
        this.onDidAccept = this._accept.event;
        this.onDidHide = this._hide.event;
        this.onDidTriggerButton = noEvent;
        this.onDidTriggerItemButton = noEvent;
        this.disposed = false;
    }
    get value() {
        return this._value;
    }
    /** Like typing: VS Code fires onDidChangeValue for user edits and for programmatic changes. */
    set value(value) {
        this._value = value;
        this._changeValue.fire(value);
    }
    show() {
        this.visible = true;
    }
    hide() {
        if (this.visible) {
            this.visible = false;
            this._hide.fire(undefined);
        }
    }
    dispose() {
        this.disposed = true;
    }
    /** Test helper: highlight an item (arrow keys). */
    highlight(item) {
        this.activeItems = [item];
        return this._changeActive.fire(this.activeItems);
    }
    /** Test helper: press Enter with nothing moved (VS Code accepts the highlighted row). */
    pressEnter() {
        this.selectedItems = [...this.activeItems];
        return this._accept.fire(undefined);
    }
    /** Test helper: press Enter on an item. */
    accept(item) {
        this.activeItems = [item];
        this.selectedItems = [item];
        return this._accept.fire(undefined);
    }
}

function createWebviewPanel(viewType, title, showOptions, options) {
    const receive = new EventEmitter();
    const disposed = new EventEmitter();
    const viewState = new EventEmitter();
    /** Whether the panel has a page now: VS Code lets go of a hidden panel's page unless told to retain it. */
    const live = () => panel.visible || options?.retainContextWhenHidden === true;
    const panel = {
        viewType,
        title,
        options,
        /** The group it opened in (VS Code would resolve Beside to the group's number). */
        viewColumn: typeof showOptions === 'object' ? showOptions.viewColumn : showOptions,
        visible: true,
        /** What the extension posted while the panel had a page; `dropped`: while it had none (VS Code drops it). */
        posted: [],
        dropped: [],
        /** Every page the panel showed, in order (the answer's waiting page, then the answer). */
        pages: [],
        revealed: 0,
        /** The state VS Code kept for the webview of a tab it restored (its page's getState() starts from it). */
        restoredState: undefined,
        /** Test hook (a page run in Chromium, test/chromium.js): `load()` when the page is loaded afresh (new html,
         * or shown again after its page was let go), `deliver(message)` for each message the page gets, `unload()`
         * when the page is let go. */
        page: undefined,
        webview: {
            get html() {
                return panel.pages.at(-1) ?? '';
            },
            set html(page) {
                panel.pages.push(page);
                if (live()) {
                    panel.page?.load();
                }
            },
            options,
            cspSource: 'vscode-webview://stub',
            onDidReceiveMessage: receive.event,
            postMessage(message) {
                if (!live()) {
                    panel.dropped.push(message);
                    return Promise.resolve(false);
                }
                panel.posted.push(message);
                panel.page?.deliver(message);
                return Promise.resolve(true);
            },
            asWebviewUri(uri) {
                return uri;
            },
        },
        onDidDispose: disposed.event,
        onDidChangeViewState: viewState.event,
        /** Shows the panel (its tab), as VS Code does. */
        reveal() {
            panel.revealed += 1;
            panel.show();
        },
        /** Whether its tab was closed (by the user, or the extension). */
        disposed: false,
        dispose() {
            panel.visible = false;
            panel.disposed = true;
            disposed.fire(undefined);
        },
        /** Test helper: a message from the page; resolves when the extension has handled it. */
        receive(message) {
            return Promise.all(receive.fire(message));
        },
        /** Test helper: another editor of its group is shown over the panel (its page let go unless retained). */
        hide() {
            panel.visible = false;
            if (!live()) {
                panel.page?.unload();
            }
            viewState.fire({ webviewPanel: panel });
        },
        /** Test helper: its tab is clicked again; a page that was let go loads the current html afresh. */
        show() {
            const reload = !live();
            const hidden = !panel.visible;
            panel.visible = true;
            if (reload) {
                panel.page?.load();
            }
            if (hidden) {
                viewState.fire({ webviewPanel: panel });
            }
        },
    };
    __test.panels.push(panel);
    return panel;
}

function createOutputChannel(name) {
    const write = (level) => (text) => __test.log.push(`[${level}] ${text}`);
    return {
        name,
        logLevel: 2,
        onDidChangeLogLevel: noEvent,
        trace: write('trace'),
        debug: write('debug'),
        info: write('info'),
        warn: write('warn'),
        error: (error) => write('error')(error instanceof Error ? error.message : String(error)),
        append: write('raw'),
        appendLine: write('raw'),
        replace: write('raw'),
        clear() {},
        show() {},
        hide() {},
        dispose() {},
    };
}

const window = {
    activeTextEditor: undefined,
    visibleTextEditors: [],
    onDidChangeActiveTextEditor: noEvent,
    onDidChangeVisibleTextEditors: noEvent,
    onDidChangeTextEditorSelection: noEvent,
    onDidChangeWindowState: noEvent,
    tabGroups: { all: [], activeTabGroup: { tabs: [] }, onDidChangeTabs: noEvent, onDidChangeTabGroups: noEvent },
    showInformationMessage: message('info'),
    showWarningMessage: message('warning'),
    showErrorMessage: message('error'),
    async showInputBox() {
        return state.inputAnswers.shift();
    },
    createQuickPick() {
        const picker = new QuickPick();
        __test.quickPicks.push(picker);
        return picker;
    },
    /** Records `{uri, options, reveals}`; `reveals` lists the ranges the extension scrolled to, in order. */
    async showTextDocument(target, options = {}) {
        const uri = target instanceof Uri ? target : target.uri;
        const document = await workspace.openTextDocument(uri);
        const reveals = [];
        __test.shown.push({ uri, options, reveals });
        const selection = options.selection ?? new Range(0, 0, 0, 0);
        return { document, selection: new Selection(selection.start, selection.end), revealRange: (range) => reveals.push(range), options };
    },
    createWebviewPanel,
    registerWebviewPanelSerializer(viewType, serializer) {
        state.serializers.set(viewType, serializer);
        return new Disposable(() => state.serializers.delete(viewType));
    },
    createOutputChannel,
    createTreeView(id, { treeDataProvider }) {
        const view = { id, provider: treeDataProvider, message: undefined, description: undefined, dispose() {} };
        __test.treeViews[id] = view;
        return view;
    },
    createStatusBarItem(id, alignment, priority) {
        const item = { id, alignment, priority, text: '', tooltip: '', command: undefined, backgroundColor: undefined, visible: false, name: '',
            show() { item.visible = true; }, hide() { item.visible = false; }, dispose() { item.visible = false; } };
        __test.statusItems.push(item);
        return item;
    },
    async withProgress(options, task) {
        const source = new CancellationTokenSource();
        const record = { options, reports: [] };
        __test.progress.push(record);
        return task({ report: (value) => record.reports.push(value) }, source.token);
    },
};

// ---------------------------------------------------------------- commands, languages, extensions, env

const commands = {
    registerCommand(id, callback, thisArg) {
        if (state.commands.has(id)) {
            throw new Error(`command '${id}' already exists`);
        }
        state.commands.set(id, thisArg ? callback.bind(thisArg) : callback);
        return new Disposable(() => state.commands.delete(id));
    },
    async executeCommand(id, ...args) {
        const command = state.commands.get(id);
        if (command !== undefined) {
            return command(...args);
        }
        __test.executed.push({ id, args });
        return undefined;
    },
    async getCommands() {
        return [...state.commands.keys()];
    },
};

const languages = new Proxy({
    match(selector, document) {
        const selectors = Array.isArray(selector) ? selector : [selector];
        return selectors.some((entry) => typeof entry === 'string' ? entry === document.languageId
            : (entry.scheme === undefined || entry.scheme === document.uri.scheme)
              && (entry.language === undefined || entry.language === document.languageId)) ? 10 : 0;
    },
    createDiagnosticCollection(name) {
        const entries = new Map();
        return { name, set: (uri, diagnostics) => entries.set(uri.toString(), diagnostics), get: (uri) => entries.get(uri.toString()),
            delete: (uri) => entries.delete(uri.toString()), has: (uri) => entries.has(uri.toString()), clear: () => entries.clear(),
            forEach: () => undefined, dispose: () => entries.clear() };
    },
}, {
    get(target, property) {
        if (property in target) {
            return target[property];
        }
        if (typeof property === 'string' && property.startsWith('register')) {
            // registerHoverProvider(selector, provider) -> __test.providers.HoverProvider = [{selector, provider}]
            const kind = property.slice('register'.length);
            return (selector, provider) => {
                (__test.providers[kind] ??= []).push({ selector, provider });
                return new Disposable(() => {
                    __test.providers[kind] = __test.providers[kind].filter((entry) => entry.provider !== provider);
                });
            };
        }
        return undefined;
    },
});

const extensions = {
    getExtension(id) {
        return state.extensions[id];
    },
    get all() {
        return Object.values(state.extensions);
    },
    onDidChange: noEvent,
};

const env = {
    appName: 'Visual Studio Code (stub)',
    appRoot: '',
    language: 'en',
    machineId: 'stub-machine',
    sessionId: 'stub-session',
    uriScheme: 'vscode',
    async openExternal(uri) {
        __test.executed.push({ id: 'env.openExternal', args: [uri] });
        return true;
    },
};

module.exports = {
    version: '1.91.0',
    __test,
    Disposable,
    EventEmitter,
    CancellationError,
    CancellationTokenSource,
    Uri,
    Position,
    Range,
    Selection,
    Location,
    TreeItem,
    TreeItemCollapsibleState: { None: 0, Collapsed: 1, Expanded: 2 },
    MarkdownString,
    Hover,
    CodeLens,
    SymbolInformation,
    SymbolKind,
    SymbolTag: { Deprecated: 1 },
    CodeActionKind,
    CallHierarchyItem: plainClass('CallHierarchyItem'),
    TypeHierarchyItem: plainClass('TypeHierarchyItem'),
    CompletionItem: plainClass('CompletionItem'),
    CodeAction: plainClass('CodeAction'),
    Diagnostic: plainClass('Diagnostic'),
    DocumentLink: plainClass('DocumentLink'),
    InlayHint: plainClass('InlayHint'),
    TabInputText: plainClass('TabInputText'),
    TabInputTextDiff: plainClass('TabInputTextDiff'),
    TabInputCustom: plainClass('TabInputCustom'),
    TabInputNotebook: plainClass('TabInputNotebook'),
    ThemeIcon: class ThemeIcon {
        constructor(id) {
            this.id = id;
        }
    },
    ThemeColor: class ThemeColor {
        constructor(id) {
            this.id = id;
        }
    },
    ViewColumn: { Active: -1, Beside: -2, One: 1, Two: 2, Three: 3 },
    StatusBarAlignment: { Left: 1, Right: 2 },
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    QuickPickItemKind: { Separator: -1, Default: 0 },
    TextEditorRevealType: { Default: 0, InCenter: 1, InCenterIfOutsideViewport: 2, AtTop: 3 },
    ConfigurationTarget: { Global: 1, Workspace: 2, WorkspaceFolder: 3 },
    LogLevel: { Off: 0, Trace: 1, Debug: 2, Info: 3, Warning: 4, Error: 5 },
    DiagnosticSeverity: { Error: 0, Warning: 1, Information: 2, Hint: 3 },
    DiagnosticTag: { Unnecessary: 1, Deprecated: 2 },
    TextDocumentSaveReason: { Manual: 1, AfterDelay: 2, FocusOut: 3 },
    FileType,
    EndOfLine: { LF: 1, CRLF: 2 },
    workspace,
    window,
    commands,
    languages,
    extensions,
    env,
};
