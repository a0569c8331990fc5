// Maps the `codeloupe.*` settings onto the engine's option names (docs/protocol.md, camelCase).
import * as vscode from 'vscode';

export const SECTION = 'codeloupe';

/** VS Code setting key (under `codeloupe.`) -> engine option name. */
const ENGINE_OPTIONS: ReadonlyArray<readonly [string, string]> = [
    ['embed.provider', 'embedProvider'],
    ['embed.baseUrl', 'embedBaseUrl'],
    ['embed.model', 'embedModel'],
    ['embed.apiKey', 'embedApiKey'],
    ['chat.baseUrl', 'chatBaseUrl'],
    ['chat.model', 'chatModel'],
    ['chat.timeoutS', 'chatTimeoutS'],
    ['ignore', 'ignore'],
    ['chunkBudget', 'chunkBudget'],
    ['store.url', 'storeUrl'],
    ['store.repositories', 'repositories'],
];

/** Engine option name -> the VS Code setting the user typed, sent as `settingNames`. */
const SETTING_NAMES: Readonly<Record<string, string>> = Object.fromEntries(
    ENGINE_OPTIONS.map(([key, option]) => [option, `${SECTION}.${key}`]));

/**
 * Settings that choose where code and keys are sent (or which model runs): honoured from the user's own settings
 * only. A repository's `.vscode/settings.json` is its own input, like its `.codeloupe.toml`; the manifest scopes
 * these `application` so VS Code does not apply a workspace value either (docs/security.md), and applies the User
 * value in a remote window too (it ignores a `machine` setting's User value there). The shared index's URL and
 * repositories too: a repository must not choose where its code is indexed or whose code the editor opens.
 */
const USER_ONLY = new Set(['embed.provider', 'embed.baseUrl', 'embed.model', 'embed.apiKey', 'chat.baseUrl', 'chat.model',
    'store.url', 'store.repositories']);

type EngineOptions = Record<string, unknown>;

/** Where the chat API key lives: VS Code's SecretStorage (the OS keychain), never settings.json. */
export const CHAT_API_KEY_SECRET = 'codeloupe.chat.apiKey';

/** Options that never come from settings files. */
export interface SecretOptions {
    chatApiKey?: string;
}

/**
 * The options the user set explicitly (user, workspace or folder scope; endpoints and models from the user's own
 * settings only), plus the stored secrets. Settings left at
 * their default are not sent, so the workspace's `.codeloupe.toml`, `[tool.codeloupe]` and `CODELOUPE_*` variables
 * keep applying.
 */
export function engineOptions(secrets: SecretOptions, config: vscode.WorkspaceConfiguration = vscode.workspace.getConfiguration(SECTION)): EngineOptions {
    // The server's warning of a bad value names the setting the user typed (`codeloupe.chunkBudget`), not the
    // engine's `chunk_budget`: it is told each option's VS Code name (docs/protocol.md, `settingNames`).
    const options: EngineOptions = { settingNames: SETTING_NAMES };
    if (secrets.chatApiKey) {
        options.chatApiKey = secrets.chatApiKey;
    }
    for (const [key, option] of ENGINE_OPTIONS) {
        const inspected = config.inspect(key);
        const explicit = USER_ONLY.has(key)
            ? inspected?.globalValue
            : inspected?.workspaceFolderValue ?? inspected?.workspaceValue ?? inspected?.globalValue;
        if (explicit !== undefined) {
            options[option] = explicit;
        }
    }
    return options;
}

/** True when a configuration change touches an option the server reads. */
export function affectsEngine(event: vscode.ConfigurationChangeEvent): boolean {
    return ENGINE_OPTIONS.some(([key]) => event.affectsConfiguration(`${SECTION}.${key}`));
}

export function affectsServerCommand(event: vscode.ConfigurationChangeEvent): boolean {
    return event.affectsConfiguration(`${SECTION}.server.command`);
}

/** `codeloupe.enable`: off, the extension starts no server and its commands are disabled. */
export function isEnabled(): boolean {
    return vscode.workspace.getConfiguration(SECTION).get<boolean>('enable', true);
}

export function affectsEnable(event: vscode.ConfigurationChangeEvent): boolean {
    return event.affectsConfiguration(`${SECTION}.enable`);
}
