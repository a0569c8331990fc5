// Finds the command that starts codeloupe-lsp: the setting, then PATH, then the Python extension's interpreter.
import { execFile } from 'node:child_process';
import { constants as fsConstants, promises as fs } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { SECTION } from './settings';

export interface ServerCommand {
    command: string;
    args: string[];
    /** Where the command came from, for the log: "setting", "PATH" or "Python interpreter". */
    source: string;
}

/** The server cannot be started; `message` says why and how to fix it. */
export class ServerNotFoundError extends Error {}

const SERVER_EXECUTABLE = 'codeloupe-lsp';
const SERVER_MODULE = 'codeloupe_lsp';

/** The subset of ms-python.python's exported API this client uses. */
interface PythonExtensionApi {
    environments?: {
        getActiveEnvironmentPath(resource?: vscode.Uri): { id: string; path: string } | undefined;
    };
}

export async function resolveServerCommand(folder?: vscode.Uri): Promise<ServerCommand> {
    const configured = vscode.workspace.getConfiguration(SECTION, folder).get<string | string[]>('server.command');
    const parts = (typeof configured === 'string' ? [configured] : configured ?? [])
        .filter((part) => part !== '')
        .map((part) => (folder ? part.replaceAll('${workspaceFolder}', folder.fsPath) : part));
    if (parts.length > 0) {
        const [program, ...args] = parts;
        const found = await findExecutable(program, folder?.fsPath);
        if (found === undefined) {
            throw new ServerNotFoundError(
                `codeloupe: the server command "${program}" (setting codeloupe.server.command) was not found or is not executable. ` +
                'Fix: point codeloupe.server.command at the codeloupe-lsp executable (for example .venv/bin/codeloupe-lsp), or clear it to use codeloupe-lsp from PATH.',
            );
        }
        return { command: found, args, source: 'setting' };
    }
    const onPath = await findExecutable(SERVER_EXECUTABLE);
    if (onPath !== undefined) {
        return { command: onPath, args: [], source: 'PATH' };
    }
    const python = await pythonInterpreter(folder);
    if (python !== undefined && (await canImport(python, SERVER_MODULE))) {
        // `-P`: `-m` would put the working directory, the workspace, first on the server's path, and a repository
        // holding its own `codeloupe_lsp` would run in place of the server.
        return { command: python, args: ['-P', '-m', SERVER_MODULE], source: 'Python interpreter' };
    }
    const tried = python === undefined ? 'no Python interpreter is selected' : `the Python interpreter ${python} cannot import ${SERVER_MODULE}`;
    // codeloupe is installed from a checkout of its repository: no package of that name is published, so a bare
    // `pip install codeloupe` would install whatever someone published under the name.
    const pip = python === undefined ? 'pip' : `"${python}" -m pip`;
    const install = `${pip} install -c CHECKOUT/constraints.txt -e CHECKOUT (CHECKOUT: a checkout of the codeloupe repository)`;
    throw new ServerNotFoundError(
        `codeloupe: cannot find the language server: ${SERVER_EXECUTABLE} is not on PATH and ${tried}. ` +
        `Fix: run ${install}, or set codeloupe.server.command to the codeloupe-lsp executable.`,
    );
}

/** The interpreter the Python extension has selected, else the `python.defaultInterpreterPath` setting. */
async function pythonInterpreter(folder?: vscode.Uri): Promise<string | undefined> {
    const extension = vscode.extensions.getExtension<PythonExtensionApi>('ms-python.python');
    if (extension !== undefined) {
        try {
            const api = extension.isActive ? extension.exports : await extension.activate();
            const active = api?.environments?.getActiveEnvironmentPath(folder);
            if (active?.path) {
                return findExecutable(active.path, folder?.fsPath);
            }
        } catch {
            // A broken Python extension must not keep codeloupe from trying the setting below.
        }
    }
    const configured = vscode.workspace.getConfiguration('python', folder).get<string>('defaultInterpreterPath');
    return configured ? findExecutable(configured, folder?.fsPath) : undefined;
}

function canImport(python: string, module: string): Promise<boolean> {
    return new Promise((resolve) => {
        execFile(python, ['-P', '-c', `import ${module}`], { timeout: 20_000 }, (error) => resolve(error === null));
    });
}

/**
 * An absolute path to `program` if it exists and is executable: a path (relative ones resolve against `base`,
 * the workspace folder) or a bare name looked up on PATH.
 */
async function findExecutable(program: string, base?: string): Promise<string | undefined> {
    const env = process.env;
    const expanded = program.startsWith('~/') ? path.join(env.HOME ?? '', program.slice(2)) : program;
    const extensions = process.platform === 'win32' ? ['', ...(env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';')] : [''];
    const directories = expanded.includes('/') || expanded.includes(path.sep)
        ? [base ?? process.cwd()]
        : (env.PATH ?? '').split(path.delimiter).filter((dir) => dir !== '');
    for (const directory of directories) {
        for (const extension of extensions) {
            const candidate = path.resolve(directory, expanded + extension);
            if (await isExecutableFile(candidate)) {
                return candidate;
            }
        }
    }
    return undefined;
}

async function isExecutableFile(candidate: string): Promise<boolean> {
    try {
        const stat = await fs.stat(candidate);
        if (!stat.isFile()) {
            return false;
        }
        await fs.access(candidate, fsConstants.X_OK);
        return true;
    } catch {
        return false;
    }
}
