#!/usr/bin/env python3
"""The VS Code extension in the real VS Code workbench (code-server) under headless Chromium, as a user drives it.

The mocha suite runs the extension against a hand-written `vscode` stub; this script checks what only the real
workbench shows. It makes a small git workspace (an auth module, a render module, an entry point that uses
both), installs the .vsix into a fresh extensions dir, starts code-server with `--auth none` and the repository's
.venv/bin first on PATH (`codeloupe-lsp` on PATH: the default server setup; also on the login shell's PATH, which
is the one the extension host gets, see start_code_server), and with Playwright:

* restricted mode: a second workspace is opened and left untrusted (the trust prompt answered "No" where
  one appears; code-server opens it in Restricted Mode without asking); the README promises that the status
  bar and a notification say codeloupe is off (checked: "restricted mode says so");
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
  - no error notification showed during the run.
Each check prints one PASS/FAIL line; the exit status is 1 if any failed. Screenshots go to --out.

Install (once, ~4 min of native builds; idempotent) into `.workbench/` (ignored), and build the .vsix:

    bash ../shared/tools/real-vscode.sh .workbench/code-server
    python3 -m venv .workbench/venv && .workbench/venv/bin/pip install playwright==1.65.2
    npm run package --prefix clients/vscode

Playwright drives the system Chromium (`apt-get install -y chromium`); its own browsers are not needed. Run:

    .workbench/venv/bin/python bench/vscode_workbench.py [--vsix PATH] [--code-server DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, sync_playwright

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


def make_workspace(root: Path) -> Path:
    for rel, text in WORKSPACE_FILES.items():
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
    (home / ".profile").write_text(f'export PATH="{venv_bin}:$PATH"\n')
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
    page.goto(f"http://127.0.0.1:{port}/?folder={folder}")
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


def run_command(page: Page, title: str) -> None:
    """Runs a command from the palette by its full title, as a user types it."""
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Shift+P")
    box = page.locator(".quick-input-widget .quick-input-box input")
    box.wait_for(timeout=10_000)
    box.fill(f">{title}")
    # The palette's top row is not always the exact title ("Show File in Graph" outranks "Show Graph"): pick the
    # row that is, as a user reading the list does.
    rows = page.locator(".quick-input-widget .monaco-list-row")
    rows.first.wait_for(timeout=10_000)
    exact = [row for row in rows.all() if row.locator(".label-name").first.inner_text().strip() == title]
    assert exact, f"no command titled {title!r} in the palette: {quick_pick_rows(page)}"
    exact[0].click()


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


def notifications(page: Page, where: str = ".notification-toast") -> list[tuple[str, str]]:
    """(severity, text) of the toasts showing now, or of the rows of the notification center (`where`)."""
    found = []
    for toast in page.locator(where).all():
        severity = next((kind for kind in ("error", "warning", "info")
                         if toast.locator(f".codicon-{kind}, .codicon-notifications-{kind}").count() > 0), "?")
        found.append((severity, toast.inner_text().replace("\n", " ")))
    return found


# ------------------------------------------------------------------------------------------ the checks

def check_restricted(checks: Checks, port: int, folder: Path) -> None:
    page = checks.page
    open_workbench(page, port, folder)
    print(f"note  restricted workspace: {answer_trust_prompt(page, trust=False)}", flush=True)

    def says_so() -> str:
        # The README: "The status bar and a notification say so" (the extension's refuseUntrusted()).
        def shown() -> str:
            status = codeloupe_status(page)
            toast = next((text for _, text in notifications(page) if "Restricted Mode" in text), "")
            return f"status bar {status!r}, notification {toast[:80]!r}" if status and toast else ""

        try:
            return str(wait_for(shown, 30, "a codeloupe status item and a Restricted Mode notification"))
        except AssertionError as error:
            raise AssertionError(f"{error}; status bar: {status_texts(page)}; "
                                 f"notifications: {notifications(page)}") from None

    checks.run("restricted mode says so", says_so)


def check_trusted(checks: Checks, port: int, folder: Path) -> None:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--code-server", type=Path, default=REPO / ".workbench" / "code-server",
                        help="the directory real-vscode.sh installed into")
    parser.add_argument("--vsix", type=Path, default=REPO / "clients" / "vscode" / "codeloupe-0.1.0.vsix")
    parser.add_argument("--out", type=Path, default=REPO / ".workbench" / "shots", help="screenshots")
    parser.add_argument("--venv-bin", type=Path, default=REPO / ".venv" / "bin",
                        help="put first on code-server's PATH (where codeloupe-lsp is)")
    args = parser.parse_args()
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
                check_restricted(checks, port, restricted_ws)
                check_trusted(checks, port, main_ws)
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
