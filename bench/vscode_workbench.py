#!/usr/bin/env python3
"""The VS Code extension in the real VS Code workbench (code-server) under headless Chromium, as a user drives it.

The mocha suite runs the extension against a hand-written `vscode` stub; this script checks what only the real
workbench shows. It makes a small git workspace (an auth module, a render module, an entry point that uses
both), installs the .vsix into a fresh extensions dir, starts code-server with `--auth none` and the repository's
.venv/bin first on PATH (`codeloupe-lsp` on PATH: the default server setup; also on the login shell's PATH, which
is the one the extension host gets, see start_code_server), and with Playwright:

* restricted mode: a second workspace is opened and left untrusted (the trust prompt answered "No" where
  one appears; code-server opens it in Restricted Mode without asking); the README promises that the status
  bar says codeloupe is off (a shield on the warning background, the reason in its tooltip) and that no
  notification does, on screen or in the notification center; a click on the status item opens the trust editor;
  the palette lists "Codeloupe: Search the Codebase" and "Codeloupe: Ask the Codebase" there, and Search run from
  it warns in a modal dialog with a Manage Workspace Trust button that opens the trust editor (no server process
  starts); Ask run from it, its answer closed without the button, then trusting the folder there (opened from
  the palette, "Workspaces: Manage Workspace Trust") starts the server
  (the status item reaches "codeloupe N files", on the normal background) and leaves no codeloupe notification,
  on screen or in the notification center;
* the main workspace, trusted as a user would (the startup prompt's "Yes, I trust the authors", or the
  Restricted Mode banner's Manage, then Trust):
  - the status bar item reaches "codeloupe N files";
  - "Codeloupe: Search the Codebase" from the command palette: the query finds app/auth.py in the real
    QuickPick, with its CORE separator, highlighted; Enter straight after typing opens an auth.py tab, with the
    cursor on the row's line;
  - the activity bar's "Last Bundle" view lists the file;
  - hover on line 1 of auth.py (graph neighbours) and the code lenses (file lens, "used in N files");
  - "Open the full bundle" (one row up from the top file): the bundle webview shows the file, and clicking
    a file link in it opens an editor (the page's script and its message to the extension work under the
    real CSP);
  - clicking the status bar item opens the index status webview;
  - "Codeloupe: Show Graph" opens the graph webview, where clicking the bubble lists its files and clicking one
    opens it; "Codeloupe: Tour" lists the entry point;
  - "Codeloupe: Search for Symbol under Cursor" with the cursor on a call of hash_password in main.py (moved
    there with Quick Open's ":line:col"): the picker starts with "hash_password" and its first file row is the
    definition in app/auth.py;
  - "Codeloupe: Related Code" with the cursor in hash_password: the picker titled "Related to app/auth.py:6…"
    lists code of the other files (not the selection itself), and picking a row opens it at its line;
  - "Codeloupe: Show Graph Path…" (both input boxes filled as a user types): main.py → auth.py shows the hop
    "app/main.py calls into app/auth.py"; render.py → the empty __init__.py says there is no route;
  - "Codeloupe: Reindex": the "reindexed N files" notification, the status item back at "codeloupe N files";
  - "Codeloupe: Ask the Codebase" with no chat model configured (the scratch HOME has none): the answer tab shows
    the ranked bundle (its CORE and RELATED sections exactly once, app/auth.py in it), no error notification;
  - "Codeloupe: Restart the Language Server": a new codeloupe-lsp process (seen in /proc), the status item
    says the server is starting (not the old count) and comes back to "codeloupe N files", and a search answers;
    run twice in a row, one server is left running (one process), and nothing failed;
  - no error notification showed during the run;
* a multi-root workspace (a .code-workspace of the main folder and a copy of it, trusted like the main one; the
  window is reloaded once if the Explorer does not list both folders, as code-server once opened it empty): the
  status item counts the files of both, and one search lists app/auth.py of each folder ("shop:app/auth.py",
  "depot:app/auth.py");
* a narrated answer (ASK_FILES, --ask-only), from the tests' scripted model on 127.0.0.1 (the scratch HOME's
  config.toml), its stream held midway: the draft shows the model's markdown escapes as written, each spliced
  span as a code block under its caption, numbered and highlighted as the answer's (the model's own caption and
  "code" stay text), a re-located span (its file
  changed on disk as the model answered) with its note, a file name's line break, bidi override and $(bell) as the
  engine's one_line writes them; the answer tab hidden behind another file of its group (its webview let go) while
  more words stream, then shown again: the draft whole, each part and step once, with the words streamed meanwhile;
  then the same in the final view, which comes back as it was after its tab is hidden and shown again; then two
  more questions (ASK_FIRST, ASK_SECOND), the second asked while the first streams, each held at its own gate: each
  answer in its own tab, neither's words in the other's draft or answer, and the first's long draft and answer, their
  tab hidden and shown again, back at the place read (the mouse wheel scrolled them); then a fourth (ASK_HELD), held
  at its gate, a search's full bundle (ASK_BUNDLE_QUERY) and the index status opened in their tabs, its first
  answer's cited file edited, and "Developer: Reload Window": every answer tab is back, the
  first answer as it was (its cited code read from disk again: the edited file's lines at the cited numbers, under
  "changed since this answer") at the place read, and the held one as its draft marked interrupted (its code part
  read from disk again, the file's lines now at its caption's numbers), whose "Ask again"
  button asks it anew and answers it in its tab; the bundle tab is back, its first CORE chunk's code the file's lines
  now, and the status tab shows the index status again; app/auth.py's graph tab (Show in Graph) and the graph map tab,
  open before the reload, are back, the first chunk of the file's page the file's lines now, and the Last Bundle view
  lists the last bundle again; these checks read the pages
  through the workbench's DOM (WebviewPage), as Playwright at times lost track of a re-created webview frame;
* a workspace whose names and text would render as more than text (HOSTILE_FILES: a folder and a file named
  `$(bell)`, a doc line with a command link, bold, an image, U+202E and HTML entities, a settings file's unknown
  key `[Fix](command:...)`), trusted: the server's warning in the notification center, a search row, the hover on
  the documented function and the file lens show them as written, with no icon, link, image or formatting drawn
  and no raw bidi control.
* the settings (SETTINGS_FILES, trusted), set as a user does: the repository's own .vscode/settings.json names its
  endpoints, a key, a model, a shared index and a server command of its own (a script that leaves a mark), and none
  applies (the index embeds locally, Ask shows the ranked bundle, neither endpoint is sent anything, the script never
  runs); Ask about Selection from the editor's context menu (an answer tab titled by the selected line) and Show in
  Graph from the Explorer's (app/auth.py's page, then the app folder's); then the User settings, edited in
  "Preferences: Open User Settings (JSON)" and saved, each applied live: `ignore` drops legacy/ from the status
  count and the search; `chunkBudget` 100 re-chunks (more chunks on the status page); a negative chunkBudget and
  timeout, an unknown provider and a non-URL chat.baseUrl give one warning naming each value and its VS Code
  setting (`codeloupe.chunkBudget`, not the engine's `chunk_budget`), no error, the folder still ready; a store.url where nothing listens, with a repository, says so; "Set Chat API Key" (a password box) keeps
  the key out of settings.json and sends it to the user's chat.baseUrl, and the narrated answer shows; chat.timeoutS
  2 against a model that hangs gives the ranked files; the key removed (an empty answer) is sent no more; embed.*
  (openai at the user's endpoint, a model and a key) re-embeds there with that key and model; server.command (a
  `machine` setting, from the Remote settings in code-server's remote window) naming no program gives an error
  naming the setting, and cleared the server starts again; `enable: false` stops the server, the status item and
  its tooltip say so; on again it starts.
Each check prints one PASS/FAIL line; the exit status is 1 if any failed. Screenshots go to --out.

Install (once, ~4 min of native builds; idempotent) into `.workbench/` (ignored), and build the .vsix:

    bash ../shared/tools/real-vscode.sh .workbench/code-server
    python3 -m venv .workbench/venv && .workbench/venv/bin/pip install playwright==1.65.2
    npm run package --prefix clients/vscode

Playwright drives the system Chromium (`apt-get install -y chromium`); its own browsers are not needed. Run:

    .workbench/venv/bin/python bench/vscode_workbench.py [--vsix PATH] [--code-server DIR] [--out DIR]
        [--restricted-only | --hostile-only | --ask-only | --settings-only]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page, sync_playwright

REPO = Path(__file__).resolve().parents[1]
EXTENSION_ID = "codeloupe.codeloupe"
QUERY = "hash a password with a salt"
# The row the query must find, and where the index is expected to be ready (first index of four small files).
EXPECTED_FILE = "app/auth.py"
READY_TIMEOUT_S = 180

WORKSPACE_FILES = {
    "app/__init__.py": "",
    "app/auth.py": '''"""Password hashing and login checks for the web app."""
import hashlib
import hmac


def hash_password(password: str, salt: str) -> str:
    """PBKDF2 digest of a password with its salt."""
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), 100_000).hex()


def verify_password(password: str, salt: str, digest: str) -> bool:
    return hmac.compare_digest(hash_password(password, salt), digest)
''',
    "app/render.py": '''"""HTML rendering of invoices and order tables."""
from html import escape


def render_invoice(customer: str, lines: list[tuple[str, float]]) -> str:
    rows = "".join(f"<tr><td>{escape(item)}</td><td>{price:.2f}</td></tr>" for item, price in lines)
    total = sum(price for _, price in lines)
    return f"<h1>Invoice for {escape(customer)}</h1><table>{rows}</table><p>Total {total:.2f}</p>"
''',
    "app/main.py": '''"""Command line entry point: log in, then print an invoice."""
import sys

from app.auth import hash_password, verify_password
from app.render import render_invoice


def main() -> int:
    digest = hash_password("secret", "pepper")
    if not verify_password(sys.argv[1], "pepper", digest):
        return 1
    print(render_invoice("ada", [("tea", 3.5)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
''',
}

# A workspace whose names and text try to be more than text where the extension shows them: `$(name)` is a theme icon
# in a QuickPick row and a code lens title, a doc line is markdown in a hover, `[label](command:...)` is a link in a
# notification (the server warns of this settings file's unknown key), and U+202E reorders what follows it.
RLO = "\u202e"
HOSTILE_DOC = f"Ring [x](command:workbench.action.terminal.sendSequence) **bold** <img src=x> {RLO}evil{RLO} &#x202e;&rlm; done."
HOSTILE_FILES = {
    "app/__init__.py": "",
    "app/chime.py": f'''"""Chime sounds for the shop."""


def ring_bell(times: int) -> str:
    """{HOSTILE_DOC}"""
    return "ding" * times
''',
    "$(bell)/$(bell).py": f'''# Door $(bell) ringer {RLO}evil{RLO}: rings the chime when a customer walks in.
from app.chime import ring_bell


def door_opened() -> str:
    return ring_bell(2)
''',
    ".codeloupe.toml": '"[Fix](command:workbench.action.files.save)" = 1\n',
}
# What no surface may show: a raw bidi control, and (RENDERED) a theme icon, an image, a command link, formatting.
RAW_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
RENDERED = """(element) => ({
    text: element.innerText,
    icons: [...element.querySelectorAll('.codicon-bell')].length,
    images: [...element.querySelectorAll('img')].length,
    links: [...element.querySelectorAll('a[href], a[data-href]')].map((link) => link.getAttribute('href') || link.getAttribute('data-href')),
    formatting: [...element.querySelectorAll('strong, em, b, i, h1, h2, h3')].map((tag) => tag.tagName),
})"""

# A narrated answer, streamed by the tests' scripted model (tests/chat_server.py) on 127.0.0.1: its words hold markdown
# escapes, a `[1]` of its own and a line that mimics a code caption; it cites app/auth.py, which the model changes on
# disk as it answers (the spliced lines are found again lower down), and a file whose name holds a line break, a bidi
# override and `$(bell)`. The stream holds at the first ASK_GATE until the draft has been read, then sends ASK_HIDDEN
# while the answer tab is hidden and holds at the second until the tab is shown again.
ASK_HOSTILE_NAME = f"$(bell)/door\napp/auth.py:1-3 {RLO}yp.py"
ASK_FILES = {
    "app/__init__.py": "",
    "app/auth.py": WORKSPACE_FILES["app/auth.py"],
    ASK_HOSTILE_NAME: '''"""Door bell: rings when a customer's password is accepted."""
from app.auth import verify_password


def door_opened(password: str, digest: str) -> str:
    return "ding" if verify_password(password, "pepper", digest) else ""
''',
}
ASK_QUESTION = "which function hashes the password for the door bell"
ASK_GATE = "<<gate>>"
# Streamed between the two gates, while the answer tab is hidden behind another file of its group.
ASK_HIDDEN = "Meanwhile the bell waits for the hashed password.\n"
# The model's own caption and code under it, as the view shows spliced code: prose all the same.
ASK_FORGED = "app/auth.py:6-7\ndef hash_password(password: str, salt: str) -> str:\nreturn password  # forged"
ASK_WORDS = "The digest is made by \\*one\\* function [1], `hash_password`"
# Two more questions, the second asked while the first streams, each answer held at its own gate: each keeps its own
# tab, and the words of one never show in the other's. The first answer is long: its tab, hidden and shown again, must
# come back at the place read, in the draft and in the answer.
ASK_FIRST = "how long is a salted digest kept"
# What an answer tab says over a cited span whose file changed since the answer (render.ts).
CHANGED_SINCE = "(changed since this answer: the lines as the file holds them now)"
ASK_FIRST_LINES = "".join(f"Line {n} of the first answer, read in order.\n" for n in range(1, 81))
ASK_SECOND = "where is a digest compared in constant time"
# Asked last and held at its gate while the window reloads: its tab comes back as the draft, marked interrupted.
ASK_HELD = "what rings once a password is accepted"
# Searched before the reload, its full bundle open in a tab beside the index status: both tabs come back.
ASK_BUNDLE_QUERY = "verify_password"


class Checks:
    """Prints one PASS/FAIL line per check and remembers the failures for the exit status."""

    def __init__(self, page: Page, out: Path) -> None:
        self.page = page
        self.out = out
        self.failed: list[str] = []

    def record(self, name: str, ok: bool, detail: str = "") -> bool:
        print(f"{'PASS' if ok else 'FAIL'}  {name}{f'  ({detail})' if detail else ''}", flush=True)
        if not ok:
            self.failed.append(name)
        return ok

    def shot(self, name: str) -> Path:
        path = self.out / f"{name}.png"
        self.page.screenshot(path=str(path))
        return path

    def run(self, name: str, check: Callable[[], str]) -> bool:
        """Runs one check; `check` returns a detail or raises. A screenshot named after the check is kept either way,
        so a FAIL line always has the picture of what the user saw."""
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        try:
            detail = check()
            ok = True
        except (AssertionError, PlaywrightError) as error:
            detail, ok = str(error).splitlines()[0] if str(error) else type(error).__name__, False
        try:
            detail += f"; screenshot {self.shot(slug)}"
        except PlaywrightError:
            pass
        return self.record(name, ok, detail)


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.5) -> object:
    """Polls `predicate` until it returns something truthy; AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)


def make_workspace(root: Path, files: dict[str, str] = WORKSPACE_FILES) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    # The engine reads .gitignore and names files relative to the repository, as in a user's checkout.
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def install_extension(code_server: Path, vsix: Path, user_data: Path, extensions: Path) -> str:
    common = ["--user-data-dir", str(user_data), "--extensions-dir", str(extensions)]
    subprocess.run([str(code_server), *common, "--install-extension", str(vsix)], check=True,
                   capture_output=True, text=True, timeout=300)
    listed = subprocess.run([str(code_server), *common, "--list-extensions", "--show-versions"], check=True,
                            capture_output=True, text=True, timeout=120).stdout
    return next((line for line in listed.splitlines() if line.lower().startswith(EXTENSION_ID)), "")


def start_code_server(code_server: Path, port: int, user_data: Path, extensions: Path, venv_bin: Path,
                      log: Path) -> subprocess.Popen:
    # VS Code's server builds the extension host's environment from a login shell (`bash -ilc env`), and that
    # PATH wins over the one code-server was started with: /etc/profile resets it, so a venv on this process's
    # PATH alone never reaches the extension ("codeloupe-lsp is not on PATH"). A user's codeloupe-lsp is on their
    # login shell's PATH; a scratch HOME whose .profile adds the venv gives the same, and a fresh index cache.
    home = user_data.parent / "home"
    home.mkdir(exist_ok=True)
    # PYTHONPATH: the server runs this checkout's engine and server, whichever checkout the venv was installed from.
    (home / ".profile").write_text(f'export PATH="{venv_bin}:$PATH"\n'
                                   f'export PYTHONPATH="{REPO / "engine"}:{REPO / "server"}"\n')
    env = dict(os.environ, HOME=str(home), PATH=f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    # Its own process group: code-server forks the extension host and the language server, all stopped together.
    return subprocess.Popen(
        [str(code_server), "--auth", "none", "--bind-addr", f"127.0.0.1:{port}", "--user-data-dir", str(user_data),
         "--extensions-dir", str(extensions), "--disable-telemetry", "--disable-update-check"],
        env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_http(url: str, timeout_s: float) -> None:
    def answers() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    wait_for(answers, timeout_s, f"code-server at {url}")


# ------------------------------------------------------------------------------------------ workbench helpers

def open_workbench(page: Page, port: int, folder: Path) -> None:
    page.goto(f"http://127.0.0.1:{port}/?folder={urllib.parse.quote(str(folder))}")
    page.locator(".monaco-workbench .part.statusbar").wait_for(timeout=90_000)


def answer_trust_prompt(page: Page, trust: bool) -> str:
    """Answers the startup "Do you trust the authors" dialog if VS Code shows one. code-server may not ask: the
    folder then opens in Restricted Mode under a banner, and a user trusting it clicks the banner's "Manage", then
    "Trust" in the Workspace Trust editor. Says which way it went."""
    label = "Yes, I trust the authors" if trust else "No, I don't trust the authors"
    button = page.get_by_role("button", name=label)
    try:
        button.wait_for(timeout=15_000)
    except PlaywrightError:
        if not trust:
            return "no trust prompt: the folder opened in Restricted Mode"
        page.locator(".monaco-workbench .banner").get_by_text("Manage", exact=True).click()
        page.get_by_role("button", name="Trust", exact=True).click()
        page.locator(".part.statusbar .statusbar-item", has_text="Restricted Mode").wait_for(state="detached")
        # The Workspace Trust editor opens as a modal over the workbench: close it, as a user does, to go on.
        page.locator(".modal-editor-header .codicon-close").click()
        return "no trust prompt: trusted through the Restricted Mode banner's Manage, then Trust"
    button.click()
    return f"trust prompt answered {label!r}"


def status_texts(page: Page) -> list[str]:
    return [text.strip() for text in page.locator(".part.statusbar .statusbar-item").all_inner_texts()]


def codeloupe_status(page: Page) -> str:
    return next((text for text in status_texts(page) if "codeloupe" in text), "")


def wait_for_status(page: Page, expected: str, what: str) -> str:
    """Waits for the codeloupe status item to read `expected`; a failure says what it shows instead."""
    try:
        wait_for(lambda: codeloupe_status(page) == expected, READY_TIMEOUT_S, f"{expected!r} {what}")
    except AssertionError as error:
        raise AssertionError(f"{error}; it shows {codeloupe_status(page)!r}") from None
    return expected


def run_command(page: Page, title: str, exact: bool = True) -> None:
    """Runs a command from the palette by its full title (or, not `exact`, the first whose title starts with it:
    "Preferences: Open Remote Settings (JSON) (host)"), as a user types it."""
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Shift+P")
    box = page.locator(".quick-input-widget .quick-input-box input")
    box.wait_for(timeout=10_000)
    box.fill(f">{title}")
    # The palette's top row is not always the exact title ("Show File in Graph" outranks "Show Graph"): pick the
    # row that is, as a user reading the list does.
    rows = page.locator(".quick-input-widget .monaco-list-row")
    rows.first.wait_for(timeout=10_000)
    titled = [row for row in rows.all() if (label := row.locator(".label-name").first.inner_text().strip()) == title
              or not exact and label.startswith(title)]
    assert titled, f"no command titled {title!r} in the palette: {quick_pick_rows(page)}"
    titled[0].click()


def palette_titles(page: Page, text: str) -> list[str]:
    """The titles of the commands the palette lists for `text`, as a user types it."""
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Shift+P")
    box = page.locator(".quick-input-widget .quick-input-box input")
    box.wait_for(timeout=10_000)
    box.fill(f">{text}")
    page.wait_for_timeout(1000)  # the palette filters as it is typed into; no row is also an answer
    titles = [label.inner_text().strip() for label in page.locator(".quick-input-widget .monaco-list-row .label-name").all()]
    page.keyboard.press("Escape")
    return titles


def quick_pick_rows(page: Page) -> list[str]:
    """Each row as the screen reader hears it: "icon label, description, detail, separator"."""
    return [row.get_attribute("aria-label") or "" for row in page.locator(".quick-input-widget .monaco-list-row").all()]


def editor_tabs(page: Page) -> list[str]:
    return [text.strip() for text in page.locator(".tabs-container .tab").all_inner_texts()]


def webview_frame_with(page: Page, needle: str):
    """The webview frame whose text has `needle`: webviews are iframes (the extension's page is an iframe inside
    VS Code's, both served from .../webview/...); other frames are skipped: the workbench's views (Last Bundle)
    show the same names, and the web worker extension host's frame holds script text."""
    for frame in page.frames:
        if "/webview/" not in frame.url:
            continue
        try:
            if needle in frame.evaluate("document.body ? document.body.innerText : ''"):
                return frame
        except PlaywrightError:
            continue  # a frame navigating or detached while read
    return None


# The extension's page of each webview on screen (null for one still loading): VS Code's webview iframe holds it in
# its own iframe (#active-frame), both of the workbench's origin under code-server, so the workbench's DOM reaches them.
WEBVIEW_PAGES = """[...document.querySelectorAll('iframe.webview')].map((outer) => {
    const inner = outer.contentDocument && outer.contentDocument.querySelector('iframe#active-frame');
    return inner && inner.contentDocument && inner.contentDocument.body ? inner : null;
})"""


class WebviewPage:
    """The extension's page in a webview, read through the workbench's DOM. Playwright lost track of a webview's frame
    re-created as its tab was shown again (in some runs page.frames held no webview frame for 20-30 s while the page
    showed, whole); the DOM held it every time. For reading only: a click goes through the mouse."""

    def __init__(self, page: Page, index: int) -> None:
        self.page = page
        self.index = index

    def evaluate(self, expression: str):
        """`expression` evaluated with the page's own `document` and `window`."""
        return self.page.evaluate(f"""((inner) => {{
            if (!inner) {{ throw new Error('the webview page is gone'); }}
            const document = inner.contentDocument, window = inner.contentWindow;
            return ({expression});
        }})(({WEBVIEW_PAGES})[{self.index}])""")

    def bounding_box(self) -> dict[str, float]:
        """Where the page shows on the screen."""
        return self.page.evaluate(f"""(() => {{
            const inner = ({WEBVIEW_PAGES})[{self.index}], outer = inner.ownerDocument.defaultView.frameElement;
            const a = outer.getBoundingClientRect(), b = inner.getBoundingClientRect();
            return {{ x: a.x + b.x, y: a.y + b.y, width: b.width, height: b.height }};
        }})()""")


def webview_texts(page: Page) -> list[str]:
    """The text of each webview's page on screen ('' for one still loading)."""
    return page.evaluate(f"({WEBVIEW_PAGES}).map((inner) => inner ? inner.contentDocument.body.innerText : '')")



def first_chunk_read_from_disk(view: WebviewPage, what: str) -> tuple[Path, int, int]:
    """The file, first and last line of `view`'s first code part, which must be the file's lines now (a restored
    page reads its code from disk again)."""
    uri, span, code = view.evaluate(
        "(() => { const a = document.querySelector('.chunk > a.loc'); const pre = document.querySelector('.chunk pre');"
        " return [a && a.getAttribute('data-uri'), a && JSON.parse(a.getAttribute('data-range')), pre && pre.textContent]; })()")
    assert uri and code is not None, f"{what} after the reload:\n{view.evaluate('document.body.innerText')}"
    first, end = span["start"]["line"] + 1, span["end"]["line"]
    last = end if span["end"]["character"] == 0 and end >= first else end + 1
    path = Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))
    now = "\n".join(path.read_text().split("\n")[first - 1:last])
    assert code.rstrip("\n") == now, f"{what}'s first code part after the reload:\n{code}\nthe file's {first}-{last}:\n{now}"
    return path, first, last

def webview_page_with(page: Page, needle: str) -> WebviewPage | None:
    """The webview page on screen whose text has `needle`."""
    index = next((i for i, text in enumerate(webview_texts(page)) if needle in text), None)
    return None if index is None else WebviewPage(page, index)


def notifications(page: Page, where: str = ".notification-toast") -> list[tuple[str, str]]:
    """(severity, text) of the toasts showing now, or of the rows of the notification center (`where`)."""
    found = []
    for toast in page.locator(where).all():
        severity = next((kind for kind in ("error", "warning", "info")
                         if toast.locator(f".codicon-{kind}, .codicon-notifications-{kind}").count() > 0), "?")
        found.append((severity, toast.inner_text().replace("\n", " ")))
    return found


def quick_open(page: Page, text: str, expect: str) -> None:
    """Types `text` into Quick Open (a file name, or ":line:col" to move the cursor) and accepts the row that says
    `expect`, as a user does."""
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Shift+P")
    box = page.locator(".quick-input-widget .quick-input-box input")
    box.wait_for(timeout=10_000)
    box.fill(text)
    wait_for(lambda: any(expect in row for row in quick_pick_rows(page)), 10, f"a Quick Open row with {expect!r}")
    page.locator(".quick-input-widget .monaco-list-row", has_text=expect).first.click()


def open_file_at(page: Page, rel: str, line: int, column: int) -> str:
    """Opens `rel` from Quick Open and puts the cursor at line:column (1-based); returns the status bar's position."""
    name = rel.rsplit("/", 1)[-1]
    quick_open(page, rel, name)
    wait_for(lambda: page.locator(".tabs-container .tab.active", has_text=name).count(), 10, f"an active {name} tab")
    quick_open(page, f":{line}:{column}", f"line {line}")
    position = f"Ln {line}, Col {column}"
    wait_for(lambda: position in status_texts(page), 10, f"the cursor at {position}")
    # The extension host learns of the active editor and its cursor after the workbench shows them; a command run
    # in the same instant can still see the editor that was active before (the graph page: no editor at all).
    page.wait_for_timeout(1000)
    return position


def start_search(page: Page, query: str) -> None:
    """Runs "Codeloupe: Search the Codebase" and types `query` once its picker shows (typed earlier, the keys would
    go to the editor)."""
    run_command(page, "Codeloupe: Search the Codebase")
    page.locator(".quick-input-widget .quick-input-title", has_text="Codeloupe: Search the Codebase").wait_for()
    box = page.locator(".quick-input-widget .quick-input-box input")
    box.press_sequentially(query, delay=20)
    assert box.input_value() == query, f"the search box holds {box.input_value()!r}, not {query!r}"


# Records each text of the codeloupe status item into window.codeloupeStatusShown, as the status bar changes.
STATUS_RECORDER = """() => {
    const bar = document.querySelector('.part.statusbar');
    const current = () => [...bar.querySelectorAll('.statusbar-item')].map((item) => item.innerText.trim())
        .find((text) => text.includes('codeloupe')) || '';
    window.codeloupeStatusShown = [current()];
    new MutationObserver(() => {
        const shown = window.codeloupeStatusShown, text = current();
        if (shown[shown.length - 1] !== text) shown.push(text);
    }).observe(bar, { subtree: true, childList: true, characterData: true, attributes: true });
}"""


def quick_pick_title(page: Page) -> str:
    title = page.locator(".quick-input-widget .quick-input-title")
    return title.inner_text().strip() if title.count() and title.is_visible() else ""


def ask(page: Page, question: str) -> None:
    """Asks `question` from the palette's "Ask the Codebase", as a user types it; returns once its answer tab opens."""
    run_command(page, "Codeloupe: Ask the Codebase")
    wait_for(lambda: "Codeloupe: Ask the Codebase" in quick_pick_title(page), 10, "the Ask prompt")
    box = page.locator(".quick-input-widget .quick-input-box input")
    box.fill(question)
    wait_for(lambda: any(question in row for row in quick_pick_rows(page)), 10, "the typed question as a row")
    box.press("Enter")
    wait_for(lambda: any(f"Codeloupe: {question}" in text for text in editor_tabs(page)), 20, "the answer tab")


def error_toasts(page: Page) -> list[str]:
    return [text for kind, text in notifications(page) if kind == "error"]


def server_pids(home: Path) -> set[int]:
    """The codeloupe-lsp processes this run's code-server started (their HOME is the scratch one), from /proc:
    the user sees no process ids, but a restart that does not restart is otherwise invisible while the status
    item keeps its text."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"codeloupe-lsp" in cmdline or b"codeloupe_lsp" in cmdline:
            if f"HOME={home}".encode() in environ:
                pids.add(int(entry.name))
    return pids


# ------------------------------------------------------------------------------------------ the checks

def codeloupe_notices(page: Page, where: str = ".notification-toast") -> list[str]:
    """The codeloupe notifications on screen, or listed in the notification center (`where`)."""
    return [text for _, text in notifications(page, where) if "codeloupe" in text]


def notification_center(page: Page) -> list[str]:
    """The codeloupe notifications the notification center lists (opened, read, closed again)."""
    run_command(page, "Notifications: Show Notifications")
    page.locator(".notifications-center").wait_for(timeout=10_000)
    listed = codeloupe_notices(page, ".notifications-center .notification-list-item")
    page.keyboard.press("Escape")
    return listed


def codeloupe_item(page: Page) -> Locator:
    return page.locator(".part.statusbar .statusbar-item", has_text="codeloupe")


def trust_editor_opens(page: Page) -> None:
    """Waits for the Workspace Trust editor (a modal over the workbench), then closes it as a user does."""
    page.get_by_role("button", name="Trust", exact=True).wait_for(timeout=10_000)
    page.locator(".modal-editor-header .codicon-close").click()
    page.get_by_role("button", name="Trust", exact=True).wait_for(state="detached", timeout=10_000)


def restricted_answer(page: Page, title: str) -> Locator:
    """Runs a codeloupe command in Restricted Mode and returns its answer saying why nothing ran: a modal dialog or
    a notification toast."""
    run_command(page, title)
    answer = page.locator(".monaco-dialog-box, .notification-toast", has_text="Restricted Mode").first
    answer.wait_for(timeout=10_000)
    return answer


def check_restricted(checks: Checks, port: int, folder: Path, home: Path) -> None:
    page = checks.page
    open_workbench(page, port, folder)
    print(f"note  restricted workspace: {answer_trust_prompt(page, trust=False)}", flush=True)

    def says_so() -> str:
        # The README: the status bar says so (a shield on the warning background, the reason in its tooltip), and no
        # notification does: one shown at start-up stayed in the notification center after the folder was trusted.
        item = codeloupe_item(page)
        try:
            item.locator(".codicon-shield").wait_for(timeout=30_000)
        except PlaywrightError:
            raise AssertionError(f"no codeloupe shield in the status bar: {status_texts(page)}") from None
        assert "warning-kind" in (item.get_attribute("class") or ""), f"no warning background: {item.get_attribute('class')}"
        item.hover()
        hover = page.locator(".monaco-hover", has_text="Restricted Mode")
        hover.wait_for(timeout=10_000)
        tooltip = hover.inner_text().replace("\n", " ")
        assert "Click to manage workspace trust" in tooltip, f"tooltip: {tooltip!r}"
        page.mouse.move(0, 0)
        time.sleep(2)  # the activation is over (the item is drawn): a notification would be showing by now
        assert not codeloupe_notices(page), f"a notification: {codeloupe_notices(page)}"
        assert not notification_center(page), f"the notification center lists: {notification_center(page)}"
        return f"status item {codeloupe_status(page)!r} (shield, warning background), tooltip {tooltip[:60]!r}…, no notification"

    if not checks.run("restricted mode says so in the status bar, in no notification", says_so):
        return

    def item_opens_trust() -> str:
        codeloupe_item(page).click()
        trust_editor_opens(page)
        return "a click on the status item opens the Workspace Trust editor"

    checks.run("restricted mode: the status item opens the trust editor", item_opens_trust)

    def palette_explains() -> str:
        # A user who types "codeloupe" in the palette of an untrusted folder found no command at all (each one was
        # disabled there, and the palette hides a disabled command), so nothing explained why.
        listed = palette_titles(page, "Codeloupe")
        for title in ("Codeloupe: Search the Codebase", "Codeloupe: Ask the Codebase"):
            assert title in listed, f"the palette lists no {title!r} in Restricted Mode: {listed}"
        # A modal dialog, as VS Code's own trust requests are: a notification left unanswered stayed in the
        # notification center after the folder was trusted.
        dialog = restricted_answer(page, "Codeloupe: Search the Codebase")
        assert "monaco-dialog-box" in (dialog.get_attribute("class") or ""), f"not a dialog: {notifications(page)}"
        assert not codeloupe_notices(page), f"a notification too: {codeloupe_notices(page)}"
        dialog.get_by_role("button", name="Manage Workspace Trust").click()
        trust_editor_opens(page)
        assert not server_pids(home), f"a server started: {server_pids(home)}"
        item = codeloupe_item(page)
        item.locator(".codicon-shield").wait_for(timeout=5_000)
        return (f"the palette lists {len(listed)} codeloupe commands; Search warns with Manage Workspace Trust, which "
                "opens the trust editor; no server started, the shield stays")

    checks.run("restricted mode: the palette lists search and ask, and search warns with the trust button",
               palette_explains)

    def trust_leaves_nothing_stale() -> str:
        # Ask run from the palette, its answer left unheeded (the trust button not pressed; a modal dialog, which
        # holds the workbench, closed with Escape), then the folder trusted from the palette.
        if "monaco-dialog-box" in (restricted_answer(page, "Codeloupe: Ask the Codebase").get_attribute("class") or ""):
            page.keyboard.press("Escape")
            page.locator(".monaco-dialog-box").wait_for(state="detached", timeout=10_000)
        run_command(page, "Workspaces: Manage Workspace Trust")
        page.get_by_role("button", name="Trust", exact=True).click()
        page.locator(".part.statusbar .statusbar-item", has_text="Restricted Mode").wait_for(state="detached")
        page.locator(".modal-editor-header .codicon-close").click()
        wait_for_status(page, f"codeloupe {len(WORKSPACE_FILES)} files", "once trusted")
        item = codeloupe_item(page)
        assert "warning-kind" not in (item.get_attribute("class") or ""), f"warning background kept: {item.get_attribute('class')}"
        assert not codeloupe_notices(page), f"on screen: {codeloupe_notices(page)}"
        listed = notification_center(page)
        assert not listed, f"the notification center lists: {listed}"
        return f"status item {codeloupe_status(page)!r}, normal background; no codeloupe notification on screen or in the center"

    checks.run("trusting turns it on and leaves nothing stale", trust_leaves_nothing_stale)


def check_trusted(checks: Checks, port: int, folder: Path, home: Path) -> None:
    page = checks.page
    open_workbench(page, port, folder)
    print(f"note  main workspace: {answer_trust_prompt(page, trust=True)}", flush=True)

    def status_ready() -> str:
        started = time.monotonic()
        try:
            # Ready means indexed and every vector computed: no "· vectors N%" tail, and not the 0 files shown
            # before the first index lands. Searching earlier gets words-only results, flagged as such.
            text = wait_for(lambda: re.fullmatch(r"codeloupe [1-9]\d* files", codeloupe_status(page)) and codeloupe_status(page),
                            READY_TIMEOUT_S, "the status bar item 'codeloupe N files' with every vector")
        except AssertionError as error:
            raise AssertionError(f"{error}; it shows {codeloupe_status(page)!r}") from None
        return f"{text!r} after {time.monotonic() - started:.0f} s"

    if not checks.run("status bar item ready", status_ready):
        return  # without a server every later check fails for the same reason

    anchor: dict[str, str] = {}

    def search_finds_file() -> str:
        run_command(page, "Codeloupe: Search the Codebase")
        page.locator(".quick-input-widget .quick-input-title", has_text="Codeloupe: Search the Codebase").wait_for()
        page.locator(".quick-input-widget .quick-input-box input").press_sequentially(QUERY, delay=20)
        wait_for(lambda: any(EXPECTED_FILE in row for row in quick_pick_rows(page)), 30,
                 f"a row for {EXPECTED_FILE}")
        rows = quick_pick_rows(page)
        files = [row for row in rows if ".py" in row and "Open the full bundle" not in row]
        assert files and EXPECTED_FILE in files[0], f"{EXPECTED_FILE} is not the first file row: {rows}"
        # Separators are how the picker tells CORE from RELATED; the default label sort used to hide them.
        separators = page.locator(".quick-input-widget .quick-input-list-separator").all_inner_texts()
        assert any("CORE" in text for text in separators), f"no CORE separator; rows {rows}"
        line = re.search(r"· L(\d+)\b", files[0])
        anchor["line"] = line.group(1) if line else ""
        return f"first file row {files[0]!r}; {len(rows)} rows"

    def enter_opens_file() -> str:
        # The first row is "Open the full bundle", but the top file is the highlighted one: Enter straight after
        # typing opens it, as in any picker of files.
        box = page.locator(".quick-input-widget .quick-input-box input")
        focused = page.locator(".quick-input-widget .monaco-list-row.focused").inner_text()
        assert EXPECTED_FILE in focused, f"the highlighted row is {focused!r}, not the top file"
        box.press("Enter")
        wait_for(lambda: page.locator(".quick-input-widget").is_hidden(), 10, "the picker to close")
        wait_for(lambda: page.locator(".tabs-container .tab.active", has_text="auth.py").count(), 10,
                 "an active auth.py tab")
        preview = page.locator(".tabs-container .tab.active.preview").count() > 0
        assert not preview, "auth.py opened as a preview tab (italic): Enter should open it for good"
        position = next((text for text in status_texts(page) if text.startswith("Ln ")), "")
        if anchor.get("line"):
            assert position.startswith(f"Ln {anchor['line']},"), \
                f"cursor at {position!r}, the row said L{anchor['line']}"
        return f"tabs {editor_tabs(page)}, cursor {position!r}"

    if checks.run("search finds the file", search_finds_file):
        checks.run("enter opens the file", enter_opens_file)
    page.keyboard.press("Escape")

    def last_bundle_view() -> str:
        page.locator(".activitybar a.action-label[aria-label^='codeloupe']").first.click()
        tree = page.locator(".pane", has_text="Last Bundle")
        wait_for(lambda: EXPECTED_FILE in tree.inner_text(), 10, f"{EXPECTED_FILE} in the Last Bundle view")
        return " | ".join(tree.inner_text().splitlines()[:8])

    checks.run("last bundle view", last_bundle_view)

    def hover_line_one() -> str:
        tab = page.locator(".tabs-container .tab", has_text="auth.py").first
        tab.click()
        line = page.locator(".monaco-editor .view-line", has_text="Password hashing").first
        line.locator("span span").first.hover()
        hover = page.locator(".monaco-hover:visible")
        wait_for(lambda: hover.count() and "community" in hover.first.inner_text(), 15,
                 "a hover naming the file's community")
        return hover.first.inner_text().replace("\n", " ")[:160]

    checks.run("hover on line 1", hover_line_one)
    page.mouse.move(0, 0)

    def code_lenses() -> str:
        lenses = page.locator(".monaco-editor .codelens-decoration")
        wait_for(lambda: any("imports" in text for text in lenses.all_inner_texts())
                 and any("used in" in text for text in lenses.all_inner_texts()), 20,
                 "the file lens and a 'used in N files' lens")
        return " | ".join(lenses.all_inner_texts())

    checks.run("code lenses", code_lenses)

    def bundle_webview() -> str:
        run_command(page, "Codeloupe: Search the Codebase")
        page.locator(".quick-input-widget .quick-input-box input").press_sequentially(QUERY, delay=20)
        wait_for(lambda: any(EXPECTED_FILE in row for row in quick_pick_rows(page)), 30, f"a row for {EXPECTED_FILE}")
        # The top file is highlighted; the bundle row is the one above it.
        wait_for(lambda: EXPECTED_FILE in page.locator(".quick-input-widget .monaco-list-row.focused").inner_text(),
                 10, "the top file highlighted")
        page.keyboard.press("ArrowUp")
        focused = page.locator(".quick-input-widget .monaco-list-row.focused").inner_text()
        assert "Open the full bundle" in focused, f"the row above the top file is {focused!r}"
        page.keyboard.press("Enter")
        wait_for(lambda: any(f"Codeloupe: {QUERY}" in tab for tab in editor_tabs(page)), 15, "the bundle tab")
        frame = wait_for(lambda: webview_frame_with(page, "CORE"), 20, "the bundle page's CORE section")
        text = frame.evaluate("document.body.innerText")
        assert EXPECTED_FILE in text, f"{EXPECTED_FILE} not on the bundle page"
        return " | ".join(line for line in text.splitlines()[:4] if line.strip())

    bundle_ok = checks.run("bundle webview", bundle_webview)

    def bundle_link_opens() -> str:
        frame = webview_frame_with(page, "CORE")
        assert frame is not None, "the bundle page is gone"
        link = frame.locator("a[data-uri*='render.py']").first
        assert link.count(), "no link to app/render.py on the bundle page"
        link.click()
        wait_for(lambda: page.locator(".tabs-container .tab.active", has_text="render.py").count(), 10,
                 "an active render.py tab after clicking its link")
        return f"tabs {editor_tabs(page)}"

    if bundle_ok:
        checks.run("bundle link opens the file", bundle_link_opens)

    def status_webview() -> str:
        page.locator(".part.statusbar .statusbar-item", has_text="codeloupe").first.click()
        wait_for(lambda: any("Codeloupe: Status" in tab for tab in editor_tabs(page)), 15, "the status tab")
        frame = wait_for(lambda: webview_frame_with(page, "Index status"), 15, "the status page")
        return " | ".join(frame.evaluate("document.body.innerText").splitlines()[:4])

    checks.run("status webview", status_webview)

    def graph_webview() -> str:
        run_command(page, "Codeloupe: Show Graph")
        wait_for(lambda: any("Codeloupe: Graph" in tab for tab in editor_tabs(page)), 20, "the graph tab")
        frame = wait_for(lambda: webview_frame_with(page, "codeloupe graph"), 20, "the graph page")
        # The README: "Clicking a bubble lists its files; clicking a file opens it" (the page's own script, run
        # under the extension's CSP with its nonce, posting to the extension).
        # A real mouse click at the bubble's centre, where a user clicks (its label text sits on top of it).
        box = frame.locator("svg circle.bubble").first.bounding_box()
        assert box, "no community bubble on the graph page"
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        wait_for(lambda: "app/auth.py" in frame.evaluate("document.body.innerText"), 10,
                 "the clicked bubble to list app/auth.py")
        listed = " | ".join(line for line in frame.evaluate("document.body.innerText").splitlines() if line.strip())
        frame.get_by_role("link", name="app/auth.py", exact=True).first.click()
        # The file opens in the graph's editor group, over the page (whose frame is then gone: no retained context).
        wait_for(lambda: page.locator(".tabs-container .tab.active", has_text="auth.py").count(), 10,
                 "an active auth.py tab after clicking it on the graph")
        return f"page: {listed[:200]}"

    checks.run("graph webview", graph_webview)

    def tour_lists_entry_point() -> str:
        run_command(page, "Codeloupe: Tour")
        page.locator(".quick-input-widget .quick-input-title", has_text="Codeloupe: Tour").wait_for(timeout=20_000)
        wait_for(lambda: any("app/main.py" in row for row in quick_pick_rows(page)), 15, "app/main.py in the tour")
        rows = quick_pick_rows(page)
        page.keyboard.press("Escape")
        return " | ".join(rows[:4])

    checks.run("tour lists the entry point", tour_lists_entry_point)

    ready_files = int(re.search(r"(\d+) files", codeloupe_status(page)).group(1))

    def ready_status(what: str) -> str:
        """Waits for "codeloupe N files" with this workspace's N again."""
        return wait_for_status(page, f"codeloupe {ready_files} files", what)

    def symbol_under_cursor() -> str:
        # The cursor on a call of hash_password in main.py: the picker starts with that name and finds its definition.
        position = open_file_at(page, "app/main.py", 9, 16)
        run_command(page, "Codeloupe: Search for Symbol under Cursor")
        page.locator(".quick-input-widget .quick-input-title", has_text="Codeloupe: Search the Codebase").wait_for()
        box = page.locator(".quick-input-widget .quick-input-box input")
        try:
            value = wait_for(lambda: box.input_value(), 10, "the picker's query")
        except AssertionError:
            value = ""
        assert value == "hash_password", f"the picker starts with {value!r}, not the name under the cursor"
        wait_for(lambda: any(EXPECTED_FILE in row for row in quick_pick_rows(page)), 30, f"a row for {EXPECTED_FILE}")
        rows = quick_pick_rows(page)
        files = [row for row in rows if ".py" in row and "Open the full bundle" not in row]
        assert files and EXPECTED_FILE in files[0] and "hash_password" in files[0], \
            f"the first file row is not hash_password's definition in {EXPECTED_FILE}: {rows}"
        page.keyboard.press("Escape")
        return f"cursor {position!r}, query {value!r}, rows {files}"

    checks.run("search for symbol under cursor", symbol_under_cursor)

    def related_code() -> str:
        open_file_at(page, EXPECTED_FILE, 6, 5)
        run_command(page, "Codeloupe: Related Code")
        wait_for(lambda: "Related to app/auth.py:6" in quick_pick_title(page), 30,
                 "the picker titled 'Codeloupe: Related to app/auth.py:6…'")
        title = quick_pick_title(page)
        wait_for(lambda: quick_pick_rows(page), 10, "its rows")
        rows = quick_pick_rows(page)
        places = [row for row in rows if re.search(r"\.py:\d+", row)]
        assert places, f"no related code (title {title!r}): {rows}"
        # The selection itself (hash_password, lines 6-8 of auth.py) is left out.
        assert not any("app/auth.py:6 " in row for row in places), f"the selection itself is listed: {places}"
        target = re.search(r"(app/\w+\.py):(\d+)", places[0])
        page.locator(".quick-input-widget .monaco-list-row", has_text=target.group(0)).first.click()
        name = target.group(1).rsplit("/", 1)[-1]
        wait_for(lambda: page.locator(".tabs-container .tab.active", has_text=name).count()
                 and f"Ln {target.group(2)}," in " ".join(status_texts(page)), 10,
                 f"{target.group(0)} open with the cursor on its line")
        return f"title {title!r}; rows {rows[:4]}; opened {target.group(0)}"

    checks.run("related code", related_code)

    def graph_path(source: str, target: str) -> str:
        run_command(page, "Codeloupe: Show Graph Path…")
        box = page.locator(".quick-input-widget .quick-input-box input")
        wait_for(lambda: "Graph Path (1/2)" in quick_pick_title(page), 10, "the 'From' input")
        box.fill(source)
        box.press("Enter")
        wait_for(lambda: "Graph Path (2/2)" in quick_pick_title(page), 10, "the 'To' input")
        box.fill(target)
        box.press("Enter")
        tab = f"Codeloupe Graph: {source} → {target}"
        wait_for(lambda: any(tab in text for text in editor_tabs(page)), 30, f"the tab {tab!r}")
        frame = wait_for(lambda: webview_frame_with(page, f"{source} → {target}"), 20, "the path page")
        return frame.evaluate("document.body.innerText")

    def graph_path_route() -> str:
        text = graph_path("app/main.py", EXPECTED_FILE)
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        hops = [line for line in lines if "calls into" in line or "imports" in line]
        assert hops and "No route" not in text, f"no hop from app/main.py to {EXPECTED_FILE}: {lines}"
        assert any(line.startswith("app/main.py") and EXPECTED_FILE in line for line in hops), \
            f"no hop says app/main.py uses {EXPECTED_FILE}: {hops}"
        return " | ".join(lines[:6])

    checks.run("graph path shows the route", graph_path_route)

    def graph_path_none() -> str:
        # The empty app/__init__.py uses nothing and nothing calls into it: no route from render.py, said as much.
        text = graph_path("app/render.py", "app/__init__.py")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        hops = [line for line in lines if "calls into" in line or "imports" in line or "reads like" in line]
        said = [line for line in lines if re.search(r"no route|not in the graph|no path|not connected", line, re.I)]
        assert said or hops, f"the page neither shows a route nor says there is none: {lines}"
        return " | ".join(lines[:6])

    checks.run("graph path without a route says so", graph_path_none)

    def reindex() -> str:
        run_command(page, "Codeloupe: Reindex")
        toast = wait_for(lambda: next((text for _, text in notifications(page) if "reindexed" in text), ""), 90,
                         "the 'codeloupe: reindexed N files' notification")
        assert re.search(rf"reindexed {ready_files} files", str(toast)), f"{toast!r}: expected {ready_files} files"
        status = ready_status("after the reindex")
        errors = error_toasts(page)
        assert not errors, f"error notifications: {errors}"
        return f"{str(toast)[:90]!r}; status {status!r}"

    checks.run("reindex", reindex)

    def ask_without_model() -> str:
        question = "where is the password hashed with its salt"
        ask(page, question)
        # The waiting page first, then the ranked bundle: wait for the bundle's RELATED section, the page's end.
        def answered():
            frame = webview_frame_with(page, question)
            return frame if frame is not None and "RELATED (" in frame.evaluate("document.body.innerText") else None

        wait_for(answered, 90, "the answer page with the ranked bundle")
        time.sleep(2)  # a second render (the bundle twice) would land now
        # Read the page afresh: the workbench may reload a webview's frame (same page) as the editor layout settles.
        frame = wait_for(answered, 10, "the answer page with the ranked bundle, read again")
        text = frame.evaluate("document.body.innerText")
        tabs = [tab for tab in editor_tabs(page) if question in tab]
        assert len(tabs) == 1, f"{len(tabs)} answer tabs: {editor_tabs(page)}"
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        assert EXPECTED_FILE in text, f"{EXPECTED_FILE} not on the answer page: {lines[:12]}"
        assert text.count("CORE (") == 1 and text.count("RELATED (") == 1, \
            f"the ranked bundle is not shown exactly once (CORE {text.count('CORE (')}x, " \
            f"RELATED {text.count('RELATED (')}x): {lines[:20]}"
        assert not any("error" in line.lower() or "failed" in line.lower() for line in lines[:6]), \
            f"the page reports an error: {lines[:6]}"
        errors = error_toasts(page)
        assert not errors, f"error notifications: {errors}"
        return " | ".join(lines[:5])

    checks.run("ask without a chat model shows the bundle", ask_without_model)

    def restart() -> str:
        before = server_pids(home)
        assert before, "no codeloupe-lsp process of this workbench before the restart"
        ready = f"codeloupe {ready_files} files"
        # Every text the status item shows from now on, caught as the DOM changes (a poll can miss a short state).
        page.evaluate(STATUS_RECORDER)
        run_command(page, "Codeloupe: Restart the Language Server")

        def restarted() -> bool:
            after = server_pids(home)
            return bool(after) and not (after & before) and codeloupe_status(page) == ready

        def shown() -> list[str]:
            return page.evaluate("window.codeloupeStatusShown")

        try:
            wait_for(restarted, READY_TIMEOUT_S, f"a new server and the status {ready!r}", interval_s=0.2)
        except AssertionError as error:
            raise AssertionError(f"{error}; pids before {before}, now {server_pids(home)}; status went {shown()}") \
                from None
        # While the old server stops and the new one starts, the item says so, not the old server's count.
        went = shown()
        assert any(text != ready for text in went[:-1]), f"the status item never left {ready!r} during the restart: {went}"
        # The new server answers: a search finds the file again.
        start_search(page, QUERY)
        wait_for(lambda: any(EXPECTED_FILE in row for row in quick_pick_rows(page)), 30,
                 f"a row for {EXPECTED_FILE} from the restarted server")
        page.keyboard.press("Escape")
        errors = error_toasts(page)
        assert not errors, f"error notifications: {errors}"
        return f"server pids {sorted(before)} -> {sorted(server_pids(home))}; status went {went}"

    checks.run("restart the language server", restart)

    def restart_twice() -> str:
        """Restart run twice in a row: the two run one after the other and leave one server. Two at once each stopped
        the server it found and started one, the second finding none yet, and the later start failed with "command
        'codeloupe.reindex' already exists"; from the palette the second comes a moment later, which the old client
        already ran in turn (this passed on it too): the mocha suite runs two at once."""
        before = server_pids(home)
        ready = f"codeloupe {ready_files} files"
        run_command(page, "Codeloupe: Restart the Language Server")
        run_command(page, "Codeloupe: Restart the Language Server")
        started: set[int] = set()

        def settled() -> set[int]:
            """The one server left once each restart started its own (one after the other, or both at once)."""
            after = server_pids(home)
            started.update(after - before)
            done = len(started) >= 2 and len(after) == 1 and not (after & before) and codeloupe_status(page) == ready
            return after if done else set()

        try:
            after = wait_for(settled, READY_TIMEOUT_S, f"one new server and the status {ready!r}", interval_s=0.2)
        except AssertionError as error:
            raise AssertionError(f"{error}; pids before {before}, now {server_pids(home)}; errors {error_toasts(page)}") \
                from None
        start_search(page, QUERY)
        wait_for(lambda: any(EXPECTED_FILE in row for row in quick_pick_rows(page)), 30,
                 f"a row for {EXPECTED_FILE} from the restarted server")
        page.keyboard.press("Escape")
        assert server_pids(home) == after, f"server pids {sorted(after)}, then {sorted(server_pids(home))}"
        errors = error_toasts(page)
        assert not errors, f"error notifications: {errors}"
        return f"server pids {sorted(before)} -> {sorted(after)}"

    checks.run("restart twice in a row leaves one server", restart_twice)

    def no_error_notification() -> str:
        # Toasts hide after a while; the notification center keeps every one not dismissed.
        run_command(page, "Notifications: Show Notifications")
        center = ".notifications-center .notification-list-item"
        page.locator(".notifications-center").wait_for(timeout=10_000)
        shown = notifications(page, center)
        errors = [text for kind, text in shown if kind == "error"]
        assert not errors, f"error notifications: {errors}"
        return f"{len(shown)} notifications, none an error: {[text[:60] for _, text in shown]}"

    checks.run("no error notification", no_error_notification)


def check_multi_root(checks: Checks, port: int, workspace_file: Path, folders: list[Path]) -> None:
    """A workspace of two folders (the same files in each): the status counts both, and one search ranks both,
    each file labelled with its folder."""
    page = checks.page
    page.goto(f"http://127.0.0.1:{port}/?workspace={workspace_file}")
    page.locator(".monaco-workbench .part.statusbar").wait_for(timeout=90_000)
    print(f"note  multi-root workspace: {answer_trust_prompt(page, trust=True)}", flush=True)
    per_folder = sum(1 for _ in WORKSPACE_FILES)

    def explorer_lists_both() -> bool:
        tree = page.locator(".explorer-folders-view")
        text = tree.inner_text() if tree.count() else ""
        return all(folder.name in text.split() for folder in folders)

    # code-server once opened the workspace with no folder at all ("No Folder Opened" in the Explorer, the
    # workbench's doing, not the extension's); a user reloads the window then.
    run_command(page, "View: Show Explorer")
    try:
        wait_for(explorer_lists_both, 20, "the Explorer to list both folders")
    except AssertionError:
        print("note  multi-root workspace opened without its folders; reloading the window", flush=True)
        page.reload()
        page.locator(".monaco-workbench .part.statusbar").wait_for(timeout=90_000)
        run_command(page, "View: Show Explorer")
        wait_for(explorer_lists_both, 30, "the Explorer to list both folders after a reload")

    def status_both() -> str:
        return wait_for_status(page, f"codeloupe {per_folder * len(folders)} files", "in the status item")

    if not checks.run("multi-root status counts both folders", status_both):
        return

    def search_both() -> str:
        start_search(page, QUERY)
        wanted = [f"{folder.name}:{EXPECTED_FILE}" for folder in folders]
        try:
            wait_for(lambda: all(any(name in row for row in quick_pick_rows(page)) for name in wanted), 30,
                     f"rows for {wanted}")
        except AssertionError as error:
            raise AssertionError(f"{error}; rows {quick_pick_rows(page)}") from None
        rows = quick_pick_rows(page)
        page.keyboard.press("Escape")
        return " | ".join(row for row in rows if EXPECTED_FILE in row)

    checks.run("multi-root search covers both folders", search_both)


def rendered(locator: Locator) -> dict:
    """What an element shows: its text, and the bell icons, images, links and markdown formatting drawn in it."""
    return locator.evaluate(RENDERED)


def shows_as_text(what: str, shown: dict, *expected: str) -> None:
    """`shown` (from `rendered`) has each of `expected` in its text, nothing drawn as an icon, image, link or
    formatting, and no raw bidi control."""
    text = shown["text"]
    missing = [part for part in expected if part not in text]
    assert not missing, f"{what} does not show {missing} as written: {text!r}"
    drawn = {kind: shown[kind] for kind in ("icons", "images", "links", "formatting") if shown[kind]}
    assert not drawn, f"{what} draws {drawn}: {text!r}"
    assert not RAW_BIDI.search(text), f"{what} shows a raw bidi control: {text!r}"


def check_hostile(checks: Checks, port: int, folder: Path) -> None:
    """HOSTILE_FILES' names and text, where the extension shows them, as written."""
    page = checks.page
    open_workbench(page, port, folder)
    print(f"note  hostile workspace: {answer_trust_prompt(page, trust=True)}", flush=True)
    if not checks.run("hostile workspace: status ready",
                      lambda: wait_for_status(page, f"codeloupe {len(HOSTILE_FILES)} files", "in the status item")):
        return

    def notification() -> str:
        # The notification center keeps the server's warning after its toast hides.
        run_command(page, "Notifications: Show Notifications")
        items = page.locator(".notifications-center .notification-list-item", has_text="unknown setting")
        items.first.wait_for(timeout=10_000)
        shown = rendered(items.first.locator(".notification-list-item-message"))
        page.keyboard.press("Escape")
        shows_as_text("the unknown setting warning", shown, "[Fix] (command:workbench.action.files.save)")
        return repr(shown["text"])

    checks.run("hostile workspace: the warning's link is text", notification)

    def search_rows() -> str:
        start_search(page, "door bell ringer")
        row = page.locator(".quick-input-widget .monaco-list-row", has_text="ringer")
        row.first.wait_for(timeout=30_000)
        shown = rendered(row.first)
        page.keyboard.press("Escape")
        shows_as_text("the search row", shown, "$(bell)/$(bell).py", "# Door $(bell) ringer \\u202eevil\\u202e")
        return repr(shown["text"])

    checks.run("hostile workspace: a search row shows $(bell) and U+202E as written", search_rows)

    open_file_at(page, "app/chime.py", 4, 5)

    def hover() -> str:
        page.locator(".monaco-editor .view-line", has_text="def ring_bell").first \
            .locator("span span", has_text="ring_bell").first.hover()
        box = page.locator(".monaco-hover:visible", has_text="used in 1 file")
        box.first.wait_for(timeout=15_000)
        shown = rendered(box.first)
        page.mouse.move(0, 0)
        # Its one link is meant: the list of users links to the file that calls ring_bell.
        shown["links"] = [link for link in shown["links"] if not link.endswith("/%24%28bell%29.py#L6")]
        shows_as_text("the hover", shown, "[x](command:workbench.action.terminal.sendSequence) **bold** <img src=x> "
                      "\\u202eevil\\u202e &#x202e;&rlm; done.", "$(bell)/$(bell).py")
        return repr(shown["text"])

    checks.run("hostile workspace: the hover shows the doc line as written", hover)

    def lenses() -> str:
        lens = page.locator(".monaco-editor .codelens-decoration", has_text="importers")
        lens.first.wait_for(timeout=20_000)
        shown = rendered(lens.first)
        shows_as_text("the file lens", shown, "$(bell)")
        return repr(shown["text"])

    checks.run("hostile workspace: the file lens shows $(bell) as written", lenses)


# ------------------------------------------------------------------------------------------ settings

# The settings workspace: the main one, plus a second copy of the password code in legacy/ (what
# `codeloupe.ignore` drops), and what a cloned repository's own .vscode/settings.json would like to choose: its
# endpoints, a key of its own and a server command (a script that leaves a mark where it ran). SETTINGS_REPO_URL
# stands for the repository's endpoint, filled in once its listener is up.
SETTINGS_REPO_URL = "{repo_url}"
SETTINGS_MARK = "server-command-ran"
SETTINGS_FILES = {
    **WORKSPACE_FILES,
    "legacy/pwhash.py": '''"""The old password hashing, kept for accounts not yet migrated."""
import hashlib


def legacy_hash_password(password: str, salt: str) -> str:
    return hashlib.sha1((salt + password).encode()).hexdigest()
''',
    "tools/serve.sh": f'#!/bin/sh\ntouch "$(dirname "$0")/../{SETTINGS_MARK}"\nexit 1\n',
    ".vscode/settings.json": json.dumps({
        "codeloupe.server.command": "tools/serve.sh",
        "codeloupe.chat.baseUrl": SETTINGS_REPO_URL,
        "codeloupe.chat.model": "repository-model",
        "codeloupe.embed.provider": "openai",
        "codeloupe.embed.baseUrl": SETTINGS_REPO_URL,
        "codeloupe.embed.model": "repository-embeddings",
        "codeloupe.embed.apiKey": "sk-repository-key",
        "codeloupe.store.url": "postgresql://codeloupe@127.0.0.1:1/repository",
        "codeloupe.store.repositories": ["their-repo"],
    }, indent=2),
}
SETTINGS_IGNORED = "legacy/pwhash.py"
CHAT_KEY = "sk-user-chat-key"
EMBED_KEY = "sk-user-embed-key"


def write_user_settings(page: Page, user_data: Path, settings: dict, remote: bool = False) -> None:
    """Sets the user's settings as a user does: "Preferences: Open User Settings (JSON)" (`remote`: the Remote
    settings, where a `machine` setting is set in a remote window such as code-server's), the text replaced, saved.
    Written straight to disk, code-server never applied them (it does not watch the file)."""
    run_command(page, f"Preferences: Open {'Remote' if remote else 'User'} Settings (JSON)", exact=not remote)
    # It opens as a modal editor over the workbench, the cursor in it.
    header = page.locator(".modal-editor-header", has_text="settings.json")
    header.wait_for(timeout=10_000)
    page.wait_for_timeout(500)
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(json.dumps(settings))  # one line: typed text would be auto-indented and auto-closed
    page.keyboard.press("Control+S")
    path = user_data / ("Machine" if remote else "User") / "settings.json"
    wait_for(lambda: path.exists() and json.loads(path.read_text() or "{}") == settings, 10,
             f"settings.json saved as {settings}")
    page.locator(".modal-editor-header .codicon-close").click()
    header.wait_for(state="detached", timeout=10_000)


def servers_in(folder: Path) -> set[int]:
    """The codeloupe-lsp processes working in `folder` (the extension starts its server there)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"codeloupe" in (entry / "cmdline").read_bytes() \
                    and Path(os.readlink(entry / "cwd")) == folder:
                pids.add(int(entry.name))
        except OSError:
            continue
    return pids


def clear_notifications(page: Page) -> None:
    run_command(page, "Notifications: Clear All Notifications")
    page.keyboard.press("Escape")


def toast_with(page: Page, needle: str, timeout_s: float = 60) -> tuple[str, str]:
    """The (severity, text) of the first toast whose text has `needle`, once one shows."""
    found = wait_for(lambda: next(((kind, text) for kind, text in notifications(page) if needle in text), None),
                     timeout_s, f"a notification saying {needle!r}")
    return found  # type: ignore[return-value]


def status_page_cells(page: Page) -> dict[str, str]:
    """The index status page's first folder row, by column, as it is now (the command asks the server again; the
    page of before is read until the new one, of a later second, replaces it)."""
    def as_of() -> str:
        view = webview_page_with(page, "Index status")
        return view.evaluate("document.querySelector('.as-of').innerText") if view else ""

    before = as_of()
    time.sleep(1.1)  # the page says the time to the second
    run_command(page, "Codeloupe: Show Index Status")
    wait_for(lambda: as_of() not in ("", before), 15, "the status page of now")
    # A tab opened now takes the focus as its page loads: a palette or input box opened meanwhile was closed by it.
    page.wait_for_timeout(1000)
    view = webview_page_with(page, "Index status")
    return view.evaluate("""(() => {
        const table = document.querySelector('table');
        const heads = [...table.rows[0].cells].map((cell) => cell.innerText.trim());
        const cells = [...table.rows[1].cells].map((cell) => cell.innerText.trim());
        return Object.fromEntries(heads.map((head, i) => [head, cells[i]]));
    })()""")


def context_menu_item(page: Page, target: Locator, label: str) -> None:
    """Right-clicks `target` and picks `label` in the context menu, as a user does."""
    target.click(button="right")
    item = page.locator(".context-view .monaco-menu .action-menu-item", has_text=label).first
    item.wait_for(timeout=10_000)
    page.wait_for_timeout(500)  # the menu ignores a click while it opens
    item.click()
    item.wait_for(state="hidden", timeout=10_000)


def check_settings(checks: Checks, port: int, folder: Path, user_data: Path) -> None:
    """The extension's settings, set as a user does (the user's settings.json; the repository's own
    .vscode/settings.json), and the commands run from menus rather than the palette: Ask about Selection (editor
    context menu), Show in Graph (explorer context menu), Set Chat API Key."""
    sys.path.insert(0, str(REPO / "tests"))
    from chat_server import ChatServer, Reply, excerpt_numbers

    page = checks.page
    with ChatServer() as theirs, ChatServer() as mine:
        settings_file = folder / ".vscode" / "settings.json"
        settings_file.write_text(settings_file.read_text().replace(SETTINGS_REPO_URL, theirs.base_url))
        (folder / "tools" / "serve.sh").chmod(0o755)
        mine.add(Reply(times=1000, when="slowly", hang_s=30, text="too late"),
                 Reply(times=1000, when="password",
                       render=lambda body: f"The password is hashed here [[{excerpt_numbers(body)[0][0]}]].\n"))
        open_workbench(page, port, folder)
        print(f"note  settings workspace: {answer_trust_prompt(page, trust=True)}", flush=True)

        def ready(count: int) -> str:
            return wait_for_status(page, f"codeloupe {count} files", "in the status item")

        def first_ready() -> str:
            text = wait_for(lambda: re.fullmatch(r"codeloupe [1-9]\d* files", codeloupe_status(page)) and codeloupe_status(page),
                            READY_TIMEOUT_S, "the status item 'codeloupe N files'")
            counted.append(int(text.split()[1]))
            return text

        counted: list[int] = []
        if not checks.run("settings workspace: status ready", first_ready):
            return
        files = counted[0]

        def repository_settings_ignored() -> str:
            """rule 6: a cloned repository's .vscode/settings.json chooses no endpoint, key or server command."""
            assert not (folder / SETTINGS_MARK).exists(), "the repository's codeloupe.server.command ran"
            question = "where is the password hashed"
            ask(page, question)
            wait_for(lambda: (view := webview_page_with(page, question)) and "RELATED (" in view.evaluate(
                "document.body.innerText"), 90, "the ranked bundle (no chat model of the user's)")
            cells = status_page_cells(page)
            assert cells.get("Embeddings", "").startswith("local"), f"the index embeds with {cells.get('Embeddings')!r}"
            assert not theirs.received, f"the repository's endpoint was sent: {theirs.everything()[:300]}"
            assert not mine.received, "the user's endpoint was sent something, unset"
            return f"embeddings {cells.get('Embeddings')!r}; no request reached the repository's endpoint"

        checks.run("a repository's .vscode/settings.json sets no endpoint, key, model, store or server command",
                   repository_settings_ignored)

        def ask_about_selection() -> str:
            open_file_at(page, "app/auth.py", 6, 1)
            page.keyboard.press("Shift+End")
            selected = "def hash_password(password: str, salt: str) -> str:"
            line = page.locator(".monaco-editor .view-line", has_text="def hash_password").first
            context_menu_item(page, line, "Ask about Selection")
            wait_for(lambda: any(selected in tab for tab in editor_tabs(page)), 20, "an answer tab titled by the selection")
            view = wait_for(lambda: (view := webview_page_with(page, selected)) and "RELATED (" in view.evaluate(
                "document.body.innerText") and view, 90, "the answer to the selection")
            text = view.evaluate("document.body.innerText")
            assert EXPECTED_FILE in text, f"{EXPECTED_FILE} not in the answer: {text[:300]}"
            open_file_at(page, "app/auth.py", 1, 1)  # the selection let go: a search would start from it
            return f"tabs {[tab for tab in editor_tabs(page) if 'hash_password' in tab]}"

        checks.run("Ask about Selection from the editor's context menu", ask_about_selection)

        def show_in_graph_explorer() -> str:
            run_command(page, "View: Show Explorer")
            tree = page.locator(".explorer-folders-view")
            tree.locator(".monaco-list-row", has_text="app").first.wait_for(timeout=10_000)
            row = tree.locator(".monaco-list-row[aria-label='auth.py'], .monaco-list-row", has_text="auth.py").first
            if not row.is_visible():
                tree.locator(".monaco-list-row", has_text="app").first.click()
                row.wait_for(timeout=10_000)
            context_menu_item(page, row, "Show in Graph")
            wait_for(lambda: any("Codeloupe Graph: app/auth.py" in tab for tab in editor_tabs(page)), 30, "app/auth.py's graph tab")
            view = wait_for(lambda: webview_page_with(page, "app/main.py"), 30, "app/auth.py's graph page naming main.py")
            shown = view.evaluate("document.body.innerText")
            folder_row = tree.locator(".monaco-list-row", has_text="app").first
            context_menu_item(page, folder_row, "Show in Graph")
            wait_for(lambda: "Codeloupe Graph: app" in editor_tabs(page), 30, "the app folder's graph tab")
            folder_page = wait_for(lambda: webview_page_with(page, "app/render.py"), 30, "the app folder's graph page")
            return (f"file page: {' | '.join(shown.splitlines()[:2])!r}; "
                    f"folder page: {' | '.join(folder_page.evaluate('document.body.innerText').splitlines()[:2])!r}")

        checks.run("Show in Graph from the explorer's context menu (a file, then a folder)", show_in_graph_explorer)

        def ignore_drops_folder() -> str:
            start_search(page, "legacy hash password salt sha1")
            wait_for(lambda: any(SETTINGS_IGNORED in row for row in quick_pick_rows(page)), 30,
                     f"a row for {SETTINGS_IGNORED} before it is ignored")
            page.keyboard.press("Escape")
            write_user_settings(page, user_data, {"codeloupe.ignore": ["legacy/"]})
            ready(files - 1)
            start_search(page, "legacy hash password salt sha1")
            wait_for(lambda: any(EXPECTED_FILE in row for row in quick_pick_rows(page)), 30, "the search's rows")
            rows = quick_pick_rows(page)
            page.keyboard.press("Escape")
            assert not any(SETTINGS_IGNORED in row for row in rows), f"{SETTINGS_IGNORED} still found: {rows}"
            return f"{files} -> {files - 1} files; rows {len(rows)}"

        checks.run("codeloupe.ignore drops a folder from the index and the search, live", ignore_drops_folder)

        def chunk_budget_rechunks() -> str:
            before = int(status_page_cells(page)["Chunks"])
            write_user_settings(page, user_data, {"codeloupe.ignore": ["legacy/"], "codeloupe.chunkBudget": 100})
            after = int(wait_for(lambda: (n := int(status_page_cells(page)["Chunks"])) > before and n, 90,
                                 "more chunks at a budget of 100", interval_s=3))
            return f"chunks {before} -> {after}"

        checks.run("codeloupe.chunkBudget re-chunks the workspace, live", chunk_budget_rechunks)

        def bad_values_warn() -> str:
            clear_notifications(page)
            write_user_settings(page, user_data, {"codeloupe.chunkBudget": -5, "codeloupe.embed.provider": "bogus",
                                            "codeloupe.chat.baseUrl": "not a url", "codeloupe.chat.timeoutS": -1})
            kind, text = toast_with(page, "ignored")
            time.sleep(3)  # a second notice of the same change would show now
            notices = codeloupe_notices(page)
            for named in ("-5", "bogus", "not a url", "-1"):
                assert named in text, f"the warning does not name {named!r}: {text}"
            # Each by the setting the user typed, not the engine's name (`chunk_budget`), which no VS Code user typed.
            for setting in ("codeloupe.chunkBudget", "codeloupe.embed.provider", "codeloupe.chat.baseUrl",
                            "codeloupe.chat.timeoutS"):
                assert f"'{setting}'" in text, f"the warning does not name {setting}: {text}"
            assert "chunk_budget" not in text, f"the warning names the engine's setting: {text}"
            assert kind == "warning" and len(notices) == 1, f"{kind}; notices {notices}"
            assert "Traceback" not in text and not error_toasts(page), f"errors: {error_toasts(page)}"
            ready(files)
            return f"{kind}: {text}"

        checks.run("bad values (a negative chunkBudget, an unknown provider, a non-URL baseUrl, a negative "
                   "timeout) give one clear warning, the rest keeps working", bad_values_warn)

        def store_unreachable() -> str:
            clear_notifications(page)
            write_user_settings(page, user_data, {"codeloupe.store.url": "postgresql://codeloupe@127.0.0.1:1/none",
                                            "codeloupe.store.repositories": ["billing"]})
            kind, text = toast_with(page, "shared index", 90)
            assert "Traceback" not in text and "127.0.0.1" in text, text
            ready(files)
            return f"{kind}: {text}"

        checks.run("codeloupe.store.url pointing at nothing says so, the folder still answers", store_unreachable)

        def chat_key_and_endpoint() -> str:
            clear_notifications(page)
            write_user_settings(page, user_data, {"codeloupe.chat.baseUrl": mine.base_url, "codeloupe.chat.model": "scripted"})
            run_command(page, "Codeloupe: Set Chat API Key")
            wait_for(lambda: "Chat API Key" in quick_pick_title(page), 10, "the key's input box")
            box = page.locator(".quick-input-widget .quick-input-box input")
            assert box.get_attribute("type") == "password", "the key is typed into a visible input box"
            box.fill(CHAT_KEY)
            box.press("Enter")
            toast_with(page, "chat API key stored")
            question = "how is the password hashed"
            ask(page, question)
            wait_for(lambda: (view := webview_page_with(page, question)) and "hashed here" in view.evaluate(
                "document.body.innerText"), 90, "the narrated answer")
            chats = [seen for seen in mine.received if seen.path.endswith("/chat/completions")]
            assert chats and all(seen.authorization == f"Bearer {CHAT_KEY}" for seen in chats), \
                f"the chat requests' keys: {[seen.authorization for seen in chats]}"
            stored = (user_data / "User" / "settings.json").read_text()
            assert CHAT_KEY not in stored, "the key was written to settings.json"
            assert not theirs.received, f"the repository's endpoint was sent: {theirs.everything()[:300]}"
            return f"{len(chats)} chat request(s) with the stored key"

        checks.run("Set Chat API Key: kept out of settings.json, sent to the user's chat endpoint only",
                   chat_key_and_endpoint)

        def chat_timeout() -> str:
            write_user_settings(page, user_data, {"codeloupe.chat.baseUrl": mine.base_url, "codeloupe.chat.model": "scripted",
                                            "codeloupe.chat.timeoutS": 2})
            time.sleep(2)  # the settings reach the server before the question
            question = "how is the password hashed slowly"
            started = time.monotonic()
            ask(page, question)
            view = wait_for(lambda: (view := webview_page_with(page, question)) and "RELATED (" in view.evaluate(
                "document.body.innerText") and view, 25, "the ranked files once the model timed out")
            took = time.monotonic() - started
            text = view.evaluate("document.body.innerText")
            assert "too late" not in text and "no chat model configured" not in text, text[:300]
            return f"ranked files after {took:.0f} s: {' | '.join(text.splitlines()[:3])}"

        checks.run("codeloupe.chat.timeoutS: a slow model gives way to the ranked files", chat_timeout)

        def key_removed() -> str:
            clear_notifications(page)
            run_command(page, "Codeloupe: Set Chat API Key")
            wait_for(lambda: "Chat API Key" in quick_pick_title(page), 10, "the key's input box")
            page.locator(".quick-input-widget .quick-input-box input").press("Enter")
            toast_with(page, "chat API key removed")
            before = len(mine.received)
            question = "how is the password hashed again"
            ask(page, question)
            wait_for(lambda: (view := webview_page_with(page, question)) and "hashed here" in view.evaluate(
                "document.body.innerText"), 90, "the narrated answer")
            sent = [seen.authorization for seen in mine.received[before:] if seen.path.endswith("/chat/completions")]
            assert sent and not any(CHAT_KEY in key for key in sent), f"after removal the chat requests carried {sent}"
            return f"chat requests' authorization after removal: {sent}"

        checks.run("Set Chat API Key with an empty answer removes the key", key_removed)

        def embeddings_endpoint() -> str:
            before = len(mine.received)
            write_user_settings(page, user_data, {"codeloupe.embed.provider": "openai", "codeloupe.embed.baseUrl": mine.base_url,
                                            "codeloupe.embed.model": "user-embeddings", "codeloupe.embed.apiKey": EMBED_KEY})
            ready(files)
            embeds = wait_for(lambda: [seen for seen in mine.received[before:] if seen.path.endswith("/embeddings")], 60,
                              "embedding requests at the user's endpoint")
            assert all(seen.authorization == f"Bearer {EMBED_KEY}" for seen in embeds), \
                f"keys sent: {sorted({seen.authorization for seen in embeds})}"
            assert all('"user-embeddings"' in seen.body for seen in embeds), "the embedding model is not the user's"
            cells = status_page_cells(page)
            assert cells.get("Embeddings", "").startswith("openai"), cells
            assert not theirs.received, f"the repository's endpoint was sent: {theirs.everything()[:300]}"
            return f"{len(embeds)} embedding requests with the user's key and model; status {cells.get('Embeddings')!r}"

        checks.run("codeloupe.embed.provider/baseUrl/model/apiKey: the index embeds at the user's endpoint",
                   embeddings_endpoint)

        def bad_server_command() -> str:
            clear_notifications(page)
            # A machine setting: code-server's window is remote, where VS Code applies only the Remote settings' one.
            write_user_settings(page, user_data, {"codeloupe.server.command": "/nonexistent/codeloupe-lsp"}, remote=True)
            kind, text = toast_with(page, "codeloupe.server.command")
            assert kind == "error" and "/nonexistent/codeloupe-lsp" in text, f"{kind}: {text}"
            wait_for(lambda: not servers_in(folder), 30, "the old server to stop")
            write_user_settings(page, user_data, {}, remote=True)
            ready(files)
            return f"{kind}: {text[:160]}"

        checks.run("codeloupe.server.command that does not exist says so; cleared, the server starts",
                   bad_server_command)

        def enable_off_and_on() -> str:
            clear_notifications(page)
            write_user_settings(page, user_data, {"codeloupe.enable": False})
            wait_for(lambda: codeloupe_status(page) == "codeloupe" and not servers_in(folder), 30,
                     "the status item off and no server")
            codeloupe_item(page).first.hover()
            tooltip = wait_for(lambda: next((text for text in page.locator(".monaco-hover, .workbench-hover").all_inner_texts()
                                             if "codeloupe.enable" in text), None), 10, "the status item's tooltip")
            listed = [title for title in palette_titles(page, "Codeloupe") if title.startswith("Codeloupe:")]
            page.mouse.move(0, 0)
            # Disabled (their enablement is the setting), the palette leaves them out; Restart still turns it on.
            assert "Codeloupe: Search the Codebase" not in listed, f"the palette lists {listed}"
            write_user_settings(page, user_data, {})
            ready(files)
            return f"tooltip {tooltip!r}; palette lists {listed}"

        checks.run("codeloupe.enable off: no server, the status item says why; on again: it starts", enable_off_and_on)
        write_user_settings(page, user_data, {})



def check_ask(checks: Checks, port: int, folder: Path, home: Path) -> None:
    """A narrated answer in the real answer view (ASK_FILES): the draft while the model's stream is held midway, then
    the final view."""
    sys.path.insert(0, str(REPO / "tests"))
    from chat_server import ChatServer, Reply, excerpt_numbers

    auth = folder / "app" / "auth.py"
    opened, hidden_sent, back = threading.Event(), threading.Event(), threading.Event()

    def answer(body: dict) -> str:
        found = {path: k for k, path, _, _ in excerpt_numbers(body)}
        door = next((k for path, k in found.items() if "door" in path), None)
        assert "app/auth.py" in found and door is not None, f"the model was shown only {sorted(found)}"
        if not auth.read_text().startswith("# moved"):  # once: the handler renders the reply twice
            auth.write_text("# moved down two lines\n#\n" + auth.read_text())
        return (f"{ASK_WORDS} [[{found['app/auth.py']}:6-8]].\nThe door bell [[{door}]] calls it.\n{ASK_FORGED}\n"
                f"{ASK_GATE}{ASK_HIDDEN}{ASK_GATE}Nothing else hashes a password \\[2\\].\n")

    class GatedReply(Reply):
        """Streams the answer up to its first ASK_GATE and holds until the first of `gates` is set, then the next part
        (`sent` is set once it is out), and so on."""

        def __init__(self, gates: tuple[threading.Event, ...], sent: threading.Event, **reply) -> None:
            super().__init__(**reply)
            self.gates, self.sent = gates, sent

        def stream_pieces(self, body: dict):  # a generator: the handler sends each piece as it comes
            first, *rest = self.content(body).split(ASK_GATE)
            yield first
            for index, (gate, part) in enumerate(zip(self.gates, rest, strict=True)):
                gate.wait(120)
                yield part
                if index == 0:
                    self.sent.set()

    def first_excerpt(body: dict) -> int:
        """The number of the first excerpt the model was shown (a reply that raised would hold the stream open)."""
        return excerpt_numbers(body)[0][0]

    first_go, first_sent, second_go, second_sent, held_go, held_sent = (threading.Event() for _ in range(6))

    page = checks.page
    with ChatServer() as chat:
        chat.add(
            GatedReply((first_go,), first_sent, when=ASK_FIRST, times=1000,
                       render=lambda body: f"{ASK_FIRST_LINES}First answer, its code [[{first_excerpt(body)}]].\n"
                                           f"{ASK_GATE}First answer ends.\n"),
            GatedReply((second_go,), second_sent, when=ASK_SECOND, times=1000,
                       render=lambda body: f"Second answer begins [[{first_excerpt(body)}]].\n{ASK_GATE}Second answer ends.\n"),
            GatedReply((held_go,), held_sent, when=ASK_HELD, times=1000,
                       render=lambda body: f"Held answer begins [[{first_excerpt(body)}]].\n{ASK_GATE}Held answer ends.\n"),
            GatedReply((opened, back), hidden_sent, render=answer),
        )
        # The user's own config.toml, read by the server this window starts: VS Code's user settings.json written
        # while code-server runs did not reach a later window's server (it answered "no chat model configured").
        config = home / ".config" / "codeloupe" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'chat_base_url = "{chat.base_url}"\nchat_model = "scripted"\n')
        open_workbench(page, port, folder)
        print(f"note  ask workspace: {answer_trust_prompt(page, trust=True)}", flush=True)
        if not checks.run("ask workspace: status ready",
                          lambda: wait_for_status(page, f"codeloupe {len(ASK_FILES)} files", "in the status item")):
            return

        def page_text(element: str, question: str = ASK_QUESTION) -> str:
            """The text of `element` on the page of `question` ('' while there is none: a page is let go as its next
            one loads, the answer's after the draft's, between finding it and reading it)."""
            view = webview_page_with(page, question)
            try:
                return view.evaluate(f"(document.querySelector({element!r}) || {{}}).innerText || ''") if view else ""
            except PlaywrightError:
                return ""

        def code_blocks(where: str) -> list[str]:
            view = webview_page_with(page, ASK_QUESTION)
            return view.evaluate(f"[...document.querySelectorAll({where!r})].map((pre) => pre.textContent)")

        def captions() -> list[str]:
            return webview_page_with(page, ASK_QUESTION).evaluate(
                "[...document.querySelectorAll('#answer .chunk > a')].map((a) => a.innerText)")

        def draft() -> str:
            ask(page, ASK_QUESTION)
            # The held line's code parts come after its words: the draft is whole once the door's code shows.
            try:
                shown = wait_for(lambda: "ding" in (text := page_text("#progress-draft")) and "# forged" in text and text,
                                 90, "the draft up to the held point")
            except AssertionError:
                print(f"note  the draft then:\n{page_text('#progress-draft')}\n---\nnote  the page:\n"
                      f"{page_text('body')}\n---", flush=True)
                raise
            steps = page_text("#progress-steps")
            print(f"note  the steps:\n{steps}\nnote  the draft, held mid-answer:\n{shown}\n---", flush=True)
            assert "Citing $(bell)/door\\napp" in steps, "a step names the file otherwise than on one line"
            assert ASK_WORDS in shown, "the model's words are not shown as written"
            assert "(changed on disk since indexing: lines re-located)" in shown, "no re-located note"
            assert "\nNothing else" not in shown, "the stream was not held"
            assert not RAW_BIDI.search(shown), "a raw bidi control"
            blocks = code_blocks("#progress-draft pre, pre#progress-draft")
            assert not any("# forged" in block for block in blocks), f"the model's words shown as code: {blocks}"
            assert any("PBKDF2" in block for block in blocks), f"the spliced code not shown as code: {blocks}"
            numbers = webview_page_with(page, ASK_QUESTION).evaluate(
                "[...document.querySelectorAll('#progress-draft pre')].map((pre) => [pre.querySelector('.line')"
                "?.getAttribute('data-line'), pre.querySelectorAll('.hljs-keyword').length])")
            assert all(first and keywords for first, keywords in numbers), \
                f"a block not numbered and highlighted as the answer's: (first line, keywords) {numbers}"
            return f"{len(blocks)} code blocks, numbered and highlighted: (first line, keywords) {numbers}"

        checks.run("ask: the draft while the answer streams", draft)

        def tab(question: str) -> Locator:
            return page.locator(".tabs-container .tab", has_text=f"Codeloupe: {question}")

        answer_tab = tab(ASK_QUESTION)

        def hide_answer(question: str = ASK_QUESTION) -> None:
            """Opens app/__init__.py from the Explorer into the answer's own group (the active one once its tab is
            clicked), as a user does, hiding the answer tab behind it: its webview is gone (VS Code releases a hidden
            webview's page unless told to retain it)."""
            tab(question).click()
            rows = page.locator(".explorer-folders-view .monaco-list-row")
            if rows.filter(has_text="__init__.py").count() == 0:
                rows.filter(has_text=re.compile(r"^\s*app\s*$")).click()  # the folder, collapsed
            rows.filter(has_text="__init__.py").click()
            wait_for(lambda: webview_page_with(page, question) is None, 20, "the hidden answer's page to go")

        def show_answer(question: str = ASK_QUESTION) -> None:
            """Clicks the answer's tab and waits for its page; what webview pages there were, if it does not come."""
            tab(question).click()
            try:
                wait_for(lambda: webview_page_with(page, question), 30, "the answer's page back")
            except AssertionError:
                print(f"note  the webview pages: {[text[:60] for text in webview_texts(page)]}", flush=True)
                raise

        def draft_once(text: str, blocks: list[str], steps: str) -> None:
            """The draft and the steps as before the answer was hidden, each part once."""
            assert text.count("calls it.") == 1, f"a part of the draft shown {text.count('calls it.')} times"
            assert code_blocks("#progress-draft pre") == blocks, f"code blocks {code_blocks('#progress-draft pre')}"
            assert page_text("#progress-steps") == steps, f"the steps now:\n{page_text('#progress-steps')}"

        def hidden_mid_stream() -> str:
            blocks, steps = code_blocks("#progress-draft pre"), page_text("#progress-steps")
            hide_answer()
            opened.set()  # the next words stream while the answer is hidden
            assert hidden_sent.wait(60), "the model never sent the words between the gates"
            show_answer()
            try:
                shown = wait_for(lambda: ASK_HIDDEN.strip() in (text := page_text("#progress-draft")) and text, 30,
                                 "the draft, with the words streamed while the answer was hidden")
            finally:
                print(f"note  the draft, its tab shown again:\n{page_text('#progress-draft')}\n---", flush=True)
            draft_once(shown, blocks, steps)
            return f"{len(blocks)} code blocks and {len(steps.splitlines())} steps, once each, and the words sent while hidden"

        if not checks.run("ask: the draft survives its tab hidden mid-stream", hidden_mid_stream):
            answer_tab.click()
        opened.set()
        back.set()

        def final() -> str:
            shown = wait_for(lambda: "Nothing else" in (text := page_text("#answer")) and text, 60, "the final view")
            view = webview_page_with(page, ASK_QUESTION)
            text = view.evaluate("document.body.innerText")
            print(f"note  the final view (innerText):\n{text}\n---", flush=True)
            assert "(changed on disk since indexing: lines re-located)" in shown, "no re-located note"
            assert not RAW_BIDI.search(text), "a raw bidi control"
            blocks = code_blocks("#answer pre")
            assert not any("# forged" in block for block in blocks), f"the model's words shown as code: {blocks}"
            shown_captions = captions()
            assert any("door\\napp" in caption for caption in shown_captions), \
                f"a caption shows a file name's line break otherwise than as \\n: {shown_captions}"
            return f"{len(blocks)} code blocks, captions {shown_captions}"

        checks.run("ask: the final answer view", final)

        def hidden_after_end() -> str:
            before = page_text("#answer")
            hide_answer()
            show_answer()
            shown = wait_for(lambda: page_text("#answer"), 30, "the answer after its tab was shown again")
            assert shown == before, f"the answer changed:\n{shown}"
            return f"{len(shown)} characters, as before"

        checks.run("ask: the final answer survives its tab hidden", hidden_after_end)

        def scrolled(question: str, delta: int) -> int:
            """Turns the mouse wheel over the page of `question` as a user reads on; where the page stopped."""
            view = webview_page_with(page, question)
            box = view.bounding_box()
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.wheel(0, delta)
            seen = [-1]

            def stopped() -> int:  # where it is, once two looks in a row agree (0: not yet)
                now = view.evaluate("window.scrollY")
                before, seen[0] = seen[0], now
                return now if now > 0 and now == before else 0

            return wait_for(stopped, 10, "the page to scroll and stop")

        def back_at(question: str, read: int) -> int:
            """Hides the answer of `question` behind a file and shows it again; where its page is once back (`read`
            waited for)."""
            hide_answer(question)
            show_answer(question)
            view = webview_page_with(page, question)
            try:
                wait_for(lambda: view.evaluate("window.scrollY") == read, 10, f"the page at {read} px")
            except AssertionError:
                pass
            return view.evaluate("window.scrollY")

        def draft_at_place_read() -> str:
            ask(page, ASK_FIRST)
            wait_for(lambda: "Line 80 of" in page_text("#progress-draft", ASK_FIRST), 90, "the first draft")
            read = scrolled(ASK_FIRST, 400)
            at = back_at(ASK_FIRST, read)
            assert "Line 80 of" in page_text("#progress-draft", ASK_FIRST), "the draft not whole"
            assert at == read, f"the draft back at {at} px, read at {read}"
            return f"back at {at} px"

        checks.run("ask: a long draft, its tab hidden and shown, is back at the place read", draft_at_place_read)

        def second_asked_while_first_streams() -> str:
            ask(page, ASK_SECOND)
            wait_for(lambda: "Second answer begins" in page_text("#progress-draft", ASK_SECOND), 90, "the second draft")
            first_go.set()  # the first answer ends while the second is shown, held
            assert first_sent.wait(60), "the model never sent the first answer's end"
            tab(ASK_FIRST).click()
            shown = wait_for(lambda: "First answer ends" in (text := page_text("#answer", ASK_FIRST)) and text, 60,
                             "the first answer in its own tab")
            assert "Second answer" not in shown, f"the first answer shows the second's words:\n{shown}"
            tabs = [shown for shown in editor_tabs(page) if shown.startswith("Codeloupe")]
            assert tab(ASK_SECOND).count() == 1, f"the second question's tab is gone: {tabs}"
            return f"tabs {tabs}"

        checks.run("ask: a second question asked while the first streams opens its own tab; the first ends in its own",
                   second_asked_while_first_streams)

        def answer_at_place_read() -> str:
            tab(ASK_FIRST).click()
            wait_for(lambda: "First answer ends" in page_text("#answer", ASK_FIRST), 30, "the first answer")
            read = scrolled(ASK_FIRST, 500)
            at = back_at(ASK_FIRST, read)
            assert at == read, f"the answer back at {at} px, read at {read}"
            return f"back at {at} px"

        checks.run("ask: a long answer, its tab hidden and shown, is back at the place read", answer_at_place_read)

        def second_its_own() -> str:
            tab(ASK_SECOND).click()
            draft = wait_for(lambda: page_text("#progress-draft", ASK_SECOND), 30, "the second draft back")
            second_go.set()
            shown = wait_for(lambda: "Second answer ends" in (text := page_text("#answer", ASK_SECOND)) and text, 60,
                             "the second answer")
            for text in (draft, shown):
                assert "First answer" not in text and "Line 1 of" not in text, f"the second shows the first's words:\n{text}"
            tab(ASK_FIRST).click()
            first = wait_for(lambda: page_text("#answer", ASK_FIRST), 30, "the first answer")
            assert "First answer ends" in first and "Second answer" not in first, f"the first answer now:\n{first}"
            return "each answer's words in its own tab only"

        checks.run("ask: the second question's draft and answer are its own, the first answer still in its tab",
                   second_its_own)
        first_go.set()
        second_go.set()

        def answer_tabs() -> list[str]:
            """The titles of the answer tabs, sorted ([] while the workbench is loading)."""
            try:
                return sorted(shown for shown in editor_tabs(page) if shown.startswith("Codeloupe"))
            except PlaywrightError:  # the workbench navigating (the reload)
                return []

        def open_bundle_and_status() -> None:
            """A search's full bundle and the index status, each in its tab, for the reload to bring back."""
            start_search(page, ASK_BUNDLE_QUERY)
            focused = page.locator(".quick-input-widget .monaco-list-row.focused")
            wait_for(lambda: "auth.py" in focused.inner_text(), 30, "the top file highlighted")
            page.keyboard.press("ArrowUp")
            assert "Open the full bundle" in focused.inner_text(), f"the row above the top file is {focused.inner_text()!r}"
            page.keyboard.press("Enter")
            wait_for(lambda: tab(ASK_BUNDLE_QUERY).count(), 60, "the bundle tab")
            page.locator(".part.statusbar .statusbar-item", has_text="codeloupe").first.click()
            wait_for(lambda: tab("Status").count(), 15, "the status tab")
            # And app/auth.py in the graph (Show in Graph, its code on the page) and the graph map, each in its tab.
            open_file_at(page, "app/auth.py", 1, 1)
            run_command(page, "Codeloupe: Show in Graph")
            wait_for(lambda: graph_tab.count(), 30, "the graph tab of app/auth.py")
            run_command(page, "Codeloupe: Show Graph")
            wait_for(lambda: tab("Graph").count(), 30, "the graph map tab")

        graph_tab = page.locator(".tabs-container .tab", has_text="Codeloupe Graph: app/auth.py")

        def reloaded() -> str:
            """Developer: Reload Window with the answers open, one still streaming, and the file the first one cites
            edited: every answer tab is back, the first one's cited span as the file holds it now, marked as changed
            since the answer (it showed the new lines at the old numbers with no word)."""
            tab(ASK_FIRST).click()
            before = wait_for(lambda: page_text("#answer", ASK_FIRST), 30, "the first answer")
            read = scrolled(ASK_FIRST, 300)
            # The caption names the file on one line (the one cited here has a line break in its name): its link's URI.
            uri, caption = webview_page_with(page, ASK_FIRST).evaluate(
                "(() => { const a = document.querySelector('#answer .chunk > a'); return [a.getAttribute('data-uri'), a.innerText]; })()")
            lines = caption.rsplit(":", 1)[1]
            cited_file = Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))
            assert cited_file.is_file(), f"the first answer cites {uri!r}, not a file on disk"
            ask(page, ASK_HELD)
            wait_for(lambda: "Held answer begins" in page_text("#progress-draft", ASK_HELD), 90, "the held draft")
            open_bundle_and_status()
            cited_file.write_text("# edited before the reload\n" + cited_file.read_text())
            titles = answer_tabs()
            with page.expect_navigation(timeout=30000):  # the workbench loads afresh: tabs read before it count for nothing
                run_command(page, "Developer: Reload Window")
            page.wait_for_selector(".monaco-workbench", timeout=60000)
            try:
                wait_for(lambda: answer_tabs() == titles, 90, "the answer tabs back")
            except AssertionError:
                raise AssertionError(f"the answer tabs after the reload: {answer_tabs()}, before: {titles}") from None
            tab(ASK_FIRST).click()
            shown = wait_for(lambda: page_text("#answer", ASK_FIRST), 60, "the first answer's page back")
            assert shown.count(CHANGED_SINCE) == 1, f"the first answer after the reload, its cited file edited:\n{shown}"

            def words(text: str) -> list[str]:
                return [line for line in text.splitlines() if "first answer" in line.lower()]

            assert words(shown) == words(before), f"the first answer's words after the reload:\n{shown}"
            view = webview_page_with(page, ASK_FIRST)
            first, last = (int(n) for n in lines.split("-"))
            code = view.evaluate("document.querySelector('#answer pre').textContent").rstrip("\n")
            now = "\n".join(cited_file.read_text().split("\n")[first - 1:last])
            assert code == now, f"the cited lines shown after the reload:\n{code}\nthe file's {first}-{last} now:\n{now}"
            try:
                wait_for(lambda: view.evaluate("window.scrollY") == read, 10, f"the page at {read} px")
            except AssertionError:
                pass
            at = view.evaluate("window.scrollY")
            assert at == read, f"the first answer back at {at} px, read at {read}"
            return f"tabs {titles}; the first answer whole, its code read again and marked changed, at {at} px"

        if not checks.run("ask: a reloaded window shows each answer tab again, as it was (a cited span edited since: "
                          "today's lines, marked), at the place read", reloaded):
            held_go.set()
            return

        def interrupted() -> str:
            tab(ASK_HELD).click()
            shown = wait_for(lambda: "Interrupted" in (text := page_text("body", ASK_HELD)) and text, 30, "the held tab back")
            assert "Held answer begins" in shown, f"the draft not shown:\n{shown}"
            # Its code part as an answer's: the cited lines read from disk again (not kept), under a link to them.
            uri, caption, code = webview_page_with(page, ASK_HELD).evaluate(
                "(() => { const a = document.querySelector('#progress-draft .chunk > a');"
                " const pre = document.querySelector('#progress-draft pre');"
                " return [a && a.getAttribute('data-uri'), a && a.innerText, pre && pre.textContent]; })()")
            assert uri and code is not None, f"the draft's code part after the reload: {caption!r}, code {code!r}\n{shown}"
            first, last = (int(n) for n in caption.rsplit(":", 1)[1].split("-"))
            cited = Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))
            now = "\n".join(cited.read_text().split("\n")[first - 1:last])
            assert code.rstrip("\n") == now, f"the draft's code after the reload:\n{code}\nthe file's {first}-{last} now:\n{now}"

            def button() -> tuple[float, float] | None:
                """Where the page's Ask again button is on the screen."""
                view = webview_page_with(page, ASK_HELD)
                if view is None:
                    return None
                try:
                    box, at = view.bounding_box(), view.evaluate(
                        "(() => { const r = document.querySelector('button').getBoundingClientRect();"
                        " return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; })()")
                except PlaywrightError:  # the page let go as it was read
                    return None
                return box["x"] + at["x"], box["y"] + at["y"]

            x, y = wait_for(button, 30, "the Ask again button")
            held_go.set()
            page.mouse.click(x, y)
            answered = wait_for(lambda: "Held answer ends" in (text := page_text("#answer", ASK_HELD)) and text, 90,
                                "the question asked again, answered")
            assert tab(ASK_HELD).count() == 1, f"tabs {editor_tabs(page)}"
            return f"interrupted, then asked again: {answered.strip().splitlines()[-1]}"

        checks.run("ask: an answer streaming at the reload is back as its draft (its code read from disk again), marked "
                   "interrupted; Ask again answers it", interrupted)

        def bundle_and_status_back() -> str:
            """The bundle tab back with its CORE code read from disk again; the status tab asks the server again."""
            tab(ASK_BUNDLE_QUERY).click()
            view = wait_for(lambda: webview_page_with(page, "RELATED ("), 30, "the bundle page back")
            cited, first, last = first_chunk_read_from_disk(view, "the bundle page")
            tab("Status").click()
            status = wait_for(lambda: webview_page_with(page, "Index status"), 60, "the status page back")
            return f"the bundle's first chunk {cited.name}:{first}-{last} read again; {status.evaluate('document.body.innerText').splitlines()[0]}"

        checks.run("a reloaded window shows the bundle tab again (its code read from disk again) and the status tab",
                   bundle_and_status_back)

        def graph_and_last_bundle_back() -> str:
            """The graph tab of app/auth.py back with its code read from disk again, the map tab with the map, and the
            Last Bundle view with the last bundle (the reload left them gone, and the view empty)."""
            graph_tab.click()
            view = wait_for(lambda: webview_page_with(page, "Community:"), 30, "the graph page of app/auth.py back")
            shown, first, last = first_chunk_read_from_disk(view, "the graph page")
            tab("Graph").click()
            wait_for(lambda: webview_page_with(page, "codeloupe graph"), 60, "the graph map back")
            page.locator(".activitybar a.action-label[aria-label^='codeloupe']").first.click()
            tree = page.locator(".pane", has_text="Last Bundle")
            wait_for(lambda: "auth.py" in tree.inner_text(), 20, "auth.py in the Last Bundle view")
            return (f"the graph page's first chunk {shown.name}:{first}-{last} read again; the map back; "
                    f"Last Bundle: {' | '.join(tree.inner_text().splitlines()[:4])}")

        checks.run("a reloaded window shows the graph tabs again (a file's code read from disk again) and the Last "
                   "Bundle view's bundle", graph_and_last_bundle_back)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--code-server", type=Path, default=REPO / ".workbench" / "code-server",
                        help="the directory real-vscode.sh installed into")
    parser.add_argument("--vsix", type=Path, default=REPO / "clients" / "vscode" / "codeloupe-0.1.0.vsix")
    parser.add_argument("--out", type=Path, default=REPO / ".workbench" / "shots", help="screenshots")
    parser.add_argument("--restricted-only", action="store_true",
                        help="only the Restricted Mode checks (the untrusted folder, then trusting it)")
    parser.add_argument("--hostile-only", action="store_true",
                        help="only the checks of a workspace whose names and text would render as icons, links, markdown")
    parser.add_argument("--ask-only", action="store_true",
                        help="only the checks of a narrated answer streamed by the scripted model (tests/chat_server.py)")
    parser.add_argument("--settings-only", action="store_true",
                        help="only the checks of the settings (user and repository settings.json) and the menu commands")
    parser.add_argument("--venv-bin", type=Path, default=REPO / ".venv" / "bin",
                        help="put first on code-server's PATH (where codeloupe-lsp is)")
    args = parser.parse_args()
    only = {"restricted": args.restricted_only, "hostile": args.hostile_only, "ask": args.ask_only,
            "settings": args.settings_only}

    def runs(section: str) -> bool:
        return not any(only.values()) or only.get(section, False)

    code_server = args.code_server / "bin" / "code-server"
    chromium = shutil.which("chromium")
    for needed, what in ((code_server, "code-server (run real-vscode.sh)"), (args.vsix, "the .vsix"),
                         (args.venv_bin / "codeloupe-lsp", "codeloupe-lsp")):
        if not needed.exists():
            sys.exit(f"missing {what}: {needed}")
    if chromium is None:
        sys.exit("missing chromium: apt-get install -y chromium")
    args.out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="codeloupe-workbench-") as tmp_name:
        tmp = Path(tmp_name)
        user_data, extensions = tmp / "user-data", tmp / "extensions"
        installed = install_extension(code_server, args.vsix.resolve(), user_data, extensions)
        print(f"{'PASS' if installed else 'FAIL'}  vsix installs  ({installed or 'not listed'})", flush=True)
        if not installed:
            return 1
        main_ws = make_workspace(tmp / "shop")
        restricted_ws = make_workspace(tmp / "untrusted")
        second_ws = make_workspace(tmp / "depot")
        hostile_ws = make_workspace(tmp / "hostile-$(bell)", HOSTILE_FILES)
        ask_ws = make_workspace(tmp / "asked", ASK_FILES)
        settings_ws = make_workspace(tmp / "configured", SETTINGS_FILES)
        multi_ws = tmp / "shop-and-depot.code-workspace"
        multi_ws.write_text(json.dumps({"folders": [{"path": str(main_ws)}, {"path": str(second_ws)}]}))
        port = free_port()
        log = args.out / "code-server.log"
        server = start_code_server(code_server, port, user_data, extensions, args.venv_bin, log)
        started = time.monotonic()
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", 60)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                checks = Checks(page, args.out)
                if runs("restricted"):
                    check_restricted(checks, port, restricted_ws, tmp / "home")
                if runs("trusted"):
                    check_trusted(checks, port, main_ws, tmp / "home")
                    check_multi_root(checks, port, multi_ws, [main_ws, second_ws])
                if runs("hostile"):
                    check_hostile(checks, port, hostile_ws)
                if runs("settings"):  # before ask, whose chat model every later window has
                    check_settings(checks, port, settings_ws, user_data)
                if runs("ask"):  # last: it gives every later window a chat model (the scratch HOME's config.toml)
                    check_ask(checks, port, ask_ws, tmp / "home")
                browser.close()
        finally:
            stop(server)
        print(f"note  workbench checks took {time.monotonic() - started:.0f} s; code-server log {log}; "
              f"screenshots in {args.out}")
        failed = checks.failed
        print(f"{'FAIL' if failed else 'PASS'}  {len(failed)} failed{': ' + ', '.join(failed) if failed else ''}")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
