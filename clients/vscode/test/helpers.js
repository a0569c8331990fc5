'use strict';
// Shared by the suites: the fixture workspace, the real server command, waiting helpers.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

/** The real codeloupe-lsp: $CODELOUPE_LSP_COMMAND (set by tests/test_vscode_client.py), else the repo's venv. */
function serverCommand() {
    const command = process.env.CODELOUPE_LSP_COMMAND || path.join(REPO_ROOT, '.venv', 'bin', 'codeloupe-lsp');
    if (!fs.existsSync(command)) {
        throw new Error(`codeloupe-lsp not found at ${command}: set CODELOUPE_LSP_COMMAND to the server executable`);
    }
    return command;
}

/** The interpreter the server runs on (its console script's #! line), for the `python -m codeloupe_lsp` fallback. */
function serverPython() {
    const command = serverCommand();
    const shebang = /^#!(\S+)\s*$/.exec(fs.readFileSync(command, 'utf8').split('\n', 1)[0]);
    return shebang ? shebang[1] : path.join(path.dirname(command), 'python');
}

const FIXTURE_FILES = {
    'app/__init__.py': '',
    'app/auth.py': `"""Password login and sessions."""

import hashlib

from app.tokens import issue_token


def hash_password(password: str, salt: str) -> str:
    """Salted SHA-256 of a password."""
    return hashlib.sha256((salt + password).encode()).hexdigest()


def login(username: str, password: str, users: dict) -> str:
    """Check a user's password and return a session token."""
    record = users.get(username)
    if record is None or hash_password(password, record["salt"]) != record["hash"]:
        raise PermissionError("invalid username or password")
    return issue_token(username)


class SessionStore:
    """Keeps the tokens of logged-in users."""

    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}

    def remember(self, username: str, token: str) -> None:
        self.sessions[token] = username
`,
    'app/tokens.py': `"""Session tokens."""

import secrets


def issue_token(username: str) -> str:
    """A random session token for a user who just logged in."""
    return f"{username}:{secrets.token_hex(16)}"
`,
    'app/cli.py': `"""Command line entry point."""

import sys

from app.auth import login


def main() -> int:
    user, password = sys.argv[1], sys.argv[2]
    print(login(user, password, {}))
    return 0
`,
    'app/billing.py': `"""Invoices: totals, taxes and discounts."""


def subtotal(lines: list[dict]) -> float:
    """Sum of quantity times unit price."""
    return sum(line["quantity"] * line["price"] for line in lines)


def tax(amount: float, rate: float) -> float:
    """Tax on an amount at a rate."""
    return round(amount * rate, 2)


def discount(amount: float, percent: float) -> float:
    """An amount after a percentage discount."""
    return amount * (1 - percent / 100)


def total(lines: list[dict], rate: float, percent: float = 0.0) -> float:
    """What the customer pays."""
    net = discount(subtotal(lines), percent)
    return net + tax(net, rate)


def refund_wombat_surcharge(invoice: dict) -> float:
    """Give back the wombat surcharge levied on late invoices."""
    surcharge = invoice.get("wombat_surcharge", 0.0)
    invoice["wombat_surcharge"] = 0.0
    return surcharge
`,
    'web/hash.js': `'use strict';
const crypto = require('crypto');

function hashPassword(password, salt) {
  return crypto.createHash('sha256').update(salt + password).digest('hex');
}

module.exports = { hashPassword };
`,
    'web/server.js': `'use strict';
const { hashPassword } = require('./hash');

function handleLogin(request, users) {
  const record = users[request.username];
  if (!record || hashPassword(request.password, record.salt) !== record.hash) {
    return { status: 401 };
  }
  return { status: 200 };
}

module.exports = { handleLogin };
`,
    'generated/quokka_tables.py': `"""Generated lookup tables (the settings test ignores this folder)."""

QUOKKA_ZEBRACORN_TABLE = {"zebracorn": 1, "quokka": 2}


def quokka_zebracorn_lookup(name: str) -> int:
    return QUOKKA_ZEBRACORN_TABLE[name]
`,
    'README.md': '# Fixture\n\nA tiny app: password login (app/auth.py) and a web handler (web/server.js).\n',
};

/** A fresh copy of the fixture workspace in a temp dir, plus a private index cache dir. */
function makeWorkspace() {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'codeloupe-vscode-'));
    const root = path.join(base, 'workspace');
    for (const [relative, text] of Object.entries(FIXTURE_FILES)) {
        const file = path.join(root, relative);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, text);
    }
    const cacheDir = path.join(base, 'cache');
    fs.mkdirSync(cacheDir);
    return { base, root, cacheDir, remove: () => fs.rmSync(base, { recursive: true, force: true }) };
}

/** 0-based line of the first line of `file` (relative to the workspace) containing `needle`. */
function lineOf(root, file, needle) {
    const index = fs.readFileSync(path.join(root, file), 'utf8').split('\n').findIndex((line) => line.includes(needle));
    if (index < 0) {
        throw new Error(`${needle} not in ${file}`);
    }
    return index;
}

/** Polls `probe` until it returns a truthy value; fails with `what` after `timeoutMs`. */
async function waitFor(what, probe, timeoutMs = 30000, intervalMs = 50) {
    const deadline = Date.now() + timeoutMs;
    let last;
    for (;;) {
        try {
            const value = await probe();
            if (value) {
                return value;
            }
        } catch (error) {
            last = error;
        }
        if (Date.now() > deadline) {
            throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
        }
        await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
}

module.exports = { REPO_ROOT, serverCommand, serverPython, makeWorkspace, lineOf, waitFor, FIXTURE_FILES };
