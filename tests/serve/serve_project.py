"""A small project the MCP and HTTP tests serve, and helpers to start `codeloupe` in a subprocess."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

FILES = {
    "app/auth.py": '''
        """Login sessions: tokens are checked against the session store."""

        from app.store import SessionStore


        class TokenChecker:
            """Checks bearer tokens: each names a Session of the store."""

            def __init__(self, store: SessionStore) -> None:
                self.store = store

            def check_token(self, token: str) -> bool:
                session = self.store.find(token)
                return session is not None and not session.expired


        def login(user: str, password: str) -> str:
            return "token-" + user
        ''',
    "app/store.py": '''
        """The session store: an in-memory map of token to session."""


        class Session:
            def __init__(self, user: str, expired: bool = False) -> None:
                self.user = user
                self.expired = expired


        class SessionStore:
            def __init__(self) -> None:
                self.sessions: dict[str, Session] = {}

            def find(self, token: str) -> Session | None:
                return self.sessions.get(token)

            def add(self, token: str, session: Session) -> None:
                self.sessions[token] = session


        if __name__ == "__main__":
            print(SessionStore().sessions)
        ''',
    "app/render.py": '''
        """Renders pages as HTML with escaping."""


        def render_page(title: str, body: str) -> str:
            return f"<h1>{escape_html(title)}</h1><main>{escape_html(body)}</main>"


        def escape_html(text: str) -> str:
            return text.replace("&", "&amp;").replace("<", "&lt;")


        if __name__ == "__main__":
            print(render_page("Home", "Welcome"))
        ''',
    "docs/guide.md": '''
        # Guide

        ## Logging in

        Call `login` with a user and a password to get a session token.

        ## Rendering

        Pages are rendered by `render_page`.
        ''',
    ".gitignore": "secret.env\n",
    "secret.env": "API_KEY=do-not-serve\n",
}


# Names the answers show escaped, as an agent copies them back: a folder whose name holds an escape sequence and a
# newline (`one_line`: `\x1b`, `\n`), a file in it whose name holds a bidi override (`\u202e`), and a file whose name
# holds a carriage return (`\x0d` where `one_line` shows it, `\r` in the graph's text). Each uses the store.
ESCAPED_FOLDER = "tools\x1b[2m\nforged"
ESCAPED_FILE = ESCAPED_FOLDER + "/grant\u202e.py"
CR_FILE = "app/carriage\rreturn.py"


def write_escaped_names(root: Path) -> None:
    (root / ESCAPED_FOLDER).mkdir()
    for path, verb in ((ESCAPED_FILE, "grant"), (CR_FILE, "revoke")):
        (root / path).write_text(f'from app.store import SessionStore\n\n\ndef {verb}_admin(user):\n    """{verb.title()} '
                                 'admin rights."""\n    return SessionStore().find(user)\n')


def write_project(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def fork_and_lone(tmp_path: Path) -> tuple[Path, Path]:
    """Two more roots to serve beside a `project`: a fork named `project` too, holding `app/fork_only.py`, and a
    `lone` folder no other root shares a name with."""
    fork = write_project(tmp_path / "fork" / "project")
    (fork / "app/fork_only.py").write_text("def fork_only_marker():\n    return 1\n", encoding="utf-8")
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "lone.py").write_text("def lone_marker():\n    return 1\n", encoding="utf-8")
    return fork, lone


def subprocess_env(**extra: str) -> dict[str, str]:
    """The test process's environment (its isolated cache) with the worktree's code first, embedding off."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "engine"), str(REPO / "server"), env.get("PYTHONPATH", "")])
    env["CODELOUPE_EMBED_PROVIDER"] = "none"
    env.update(extra)
    return env
