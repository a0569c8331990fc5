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
    ['ignore', 'ignore'],
    ['chunkBudget', 'chunkBudget'],
];

type EngineOptions = Record<string, unknown>;

/**
 * The options the user set explicitly (user, workspace or folder scope). Settings left at their default are not
 * sent, so the workspace's `.codeloupe.toml`, `[tool.codeloupe]` and `CODELOUPE_*` variables keep applying.
 */
export function engineOptions(config: vscode.WorkspaceConfiguration = vscode.workspace.getConfiguration(SECTION)): EngineOptions {
    const options: EngineOptions = {};
    for (const [key, option] of ENGINE_OPTIONS) {
        const inspected = config.inspect(key);
        const explicit = inspected?.workspaceFolderValue ?? inspected?.workspaceValue ?? inspected?.globalValue;
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
