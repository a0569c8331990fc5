"""The search page in headless Chromium against a real index: it renders a real query's bundle."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx2 as httpx
import pytest
from browser import CHROMIUM, Browser
from serve_project import fork_and_lone

from line_break_files import DEFINITIONS, FILES, editor_lines, write_files


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=10000",
         *args], capture_output=True, text=True, timeout=120, check=True)


def test_the_page_renders_the_bundle_of_a_real_query(project: Path, serve, tmp_path: Path) -> None:
    # scripts/test.sh installs Debian's chromium; without it this fails rather than passing unchecked.
    assert CHROMIUM, "needs Debian chromium (apt-get install -y chromium; scripts/test.sh does this as root)"
    base = serve([project])
    url = f"{base}/?q=how+are+bearer+tokens+checked+against+the+session+store"
    dom = chromium(tmp_path / "profile", "--dump-dom", url).stdout
    core = dom[dom.index('id="core"'):dom.index('id="related"')]
    assert 'id="core" hidden' not in dom  # the CORE section is shown
    assert "1. app/" in core and "TokenChecker" in core
    assert '<span class="kw">def</span>' in core  # code is highlighted
    assert '<span class="ln">12</span>' in core  # with its real line numbers
    assert "lanes: " in dom and 'href="/graph"' in dom

    shot = tmp_path / "page.png"
    chromium(tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1100,900", url)
    image = shot.read_bytes()
    assert image.startswith(b"\x89PNG") and len(image) > 20_000  # a blank page compresses to a few KB


def test_the_page_sends_the_token_from_its_url_fragment(project: Path, serve, tmp_path: Path) -> None:
    from codeloupe_web.guard import GuardConfig

    assert CHROMIUM, "needs Debian chromium (apt-get install -y chromium; scripts/test.sh does this as root)"
    token = "t0ken-" + "x" * 40
    base = serve([project], guard=GuardConfig(token=token))
    dom = chromium(tmp_path / "profile", "--dump-dom", f"{base}/?q=escape+html#token={token}").stdout
    assert "1. app/render.py" in dom and "escape_html" in dom
    refused = chromium(tmp_path / "profile2", "--dump-dom", f"{base}/?q=escape+html").stdout
    assert "1. app/render.py" not in refused and "bearer token is required" in refused


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    tab = Browser(tmp_path / "browser")
    yield tab
    tab.close()


HOSTILE_NAME = "app/<img src=x onerror=alert(1)>.py"
HOSTILE_CODE = 'def hostile_markup():\n    return "<script>window.pwned = 1</script><img src=x onerror=window.pwned=2>"\n'

OPEN_FILE_VIEW = """document.getElementById("file").hidden === false && document.querySelector("#file-body .line")
    && {path: document.getElementById("file-path").textContent, meta: document.getElementById("meta").textContent,
        lines: [...document.querySelectorAll("#file-body .line")].map((l) => l.textContent),
        cited: [...document.querySelectorAll("#file-body .cited .ln")].map((n) => Number(n.textContent)),
        markup: document.querySelectorAll("#file img, #file script").length, pwned: window.pwned || 0,
        seen: (() => { const cited = document.querySelector(".cited"), r = cited && cited.getBoundingClientRect();
                       return cited ? r.top >= 0 && r.bottom <= innerHeight : null; })()}"""


def lines_of(text: str) -> list[str]:
    """A file's lines as the server numbers them, without their breaks, each shown as the CLI shows it (a control
    or bidi character escaped)."""
    from codeloupe.types import visible

    return [visible(line.rstrip("\r\n")) for line in editor_lines(text)]


def numbered(text: str) -> list[str]:
    """A file's lines as the file view shows them: each after its number."""
    return [f"{n}{line}" for n, line in enumerate(lines_of(text), 1)]


def test_a_result_opens_its_file_read_from_disk_at_the_cited_lines(project: Path, serve, browser: Browser) -> None:
    from codeloupe_web.guard import GuardConfig

    (project / HOSTILE_NAME).write_text(HOSTILE_CODE, encoding="utf-8")
    token = "t0ken-" + "y" * 40
    base = serve([project], guard=GuardConfig(token=token))
    browser.open(f"{base}/?q=how+are+bearer+tokens+checked+against+the+session+store#token={token}")
    links = browser.wait_for('[...document.querySelectorAll("#core-body a, #related-body a")].map((a) => a.href)')
    assert links and all("/?file=" in link for link in links)  # every result: its file, its chunks
    # The count is the answer's candidates (CORE and RELATED), not the workspace's files: said so.
    meta = browser.evaluate('document.getElementById("meta").textContent')
    assert re.match(r"\d+ candidate files · lanes: ", meta), meta
    assert "dense (off)" in meta and "not ready" not in meta, meta  # turned off by the user, not on its way
    chunk = browser.evaluate("""(() => { const a = [...document.querySelectorAll("#core-body a.loc")]
        .find((a) => a.textContent.startsWith("app/auth.py:")); a.click(); return a.textContent; })()""")
    start, end = (int(n) for n in chunk.split()[0].split(":")[1].split("-"))
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["path"] == "app/auth.py" and "file=app%2Fauth.py" in browser.evaluate("location.search")
    assert view["lines"] == numbered((project / "app/auth.py").read_text())  # the whole file, from disk
    assert view["cited"] == list(range(start, end + 1)) and end > start and view["seen"]

    # A file's name and code are text on the page, never markup; the token came along from the first page.
    browser.open(f"{base}/?q=hostile+markup")
    browser.wait_for('!!document.querySelector("#core-body h3 a")')
    browser.evaluate('document.querySelector("#core-body h3 a").click()')
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["path"] == HOSTILE_NAME and view["lines"] == numbered(HOSTILE_CODE)
    assert view["markup"] == 0 and view["pwned"] == 0

    # Only indexed files inside the workspace: the server's refusal is shown, and nothing else.
    (project.parent / "outside.txt").write_text("not served\n")
    for path in ("../outside.txt", "secret.env", "/etc/passwd"):
        browser.open(f"{base}/?file={quote(path)}&line=1")
        error = browser.wait_for('document.querySelector("#meta .error")?.textContent')
        assert path.lstrip("/") in error or "outside" in error, error
        assert browser.evaluate('document.querySelectorAll("#file-body .line").length') == 0


# The lines of the first result whose name holds `{name}`: [number, text] each.
SHOWN_LINES = """(() => { const file = [...document.querySelectorAll("#core-body .file")]
    .find((f) => f.querySelector("h3 a").textContent.includes("{name}"));
    return file && [...file.querySelectorAll(".line")].map((l) => [Number(l.firstChild.textContent),
        l.textContent.slice(l.firstChild.textContent.length)]); })()"""


def test_code_is_numbered_as_the_server_counts_lines(project: Path, serve, browser: Browser) -> None:
    """A line ends at \\n, \\r\\n or a lone \\r only (docs/protocol.md): search results and the file view number
    a file with CRLF and lone CR lines (and a form feed and U+2028, which end no line) as the server does."""
    write_files(project / "breaks")
    expected = lines_of(FILES["mod.py"])
    base = serve([project])
    browser.open(f"{base}/?q=after_lone_cr")
    shown = browser.wait_for(SHOWN_LINES.replace("{name}", "breaks/mod.py"))
    assert any(number == DEFINITIONS["after_lone_cr"][1] for number, _ in shown), shown
    assert [text for _, text in shown] == [expected[number - 1] for number, _ in shown]

    line = DEFINITIONS["after_lone_cr"][1]
    browser.open(f"{base}/?file=breaks%2Fmod.py&line={line}")
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["lines"] == numbered(FILES["mod.py"])
    assert view["cited"] == [line] and view["meta"].startswith(f"breaks/mod.py · {len(expected)} lines")


# Bidirectional controls that make a line read otherwise than it runs ("Trojan Source"): in code, as reported, and in
# a file's name, where an isolate and an override would show its end first.
BIDI_CODE = 'def rtl_override():\n    s = "\u202eevil\u202c"  # bidi\n    return s\n'
BIDI_NAME = "xss/\u2067name\u202egnp.\u2069\u200f.py"
BIDI_NAME_CODE = "def bidi_named():\n    return '\u061c\x1b[31m'\n"
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\x1b"
PAGE_TEXT = "document.body.innerText + [...document.querySelectorAll('[title], title')].map((n) => n.textContent).join()"


def test_code_and_names_show_bidi_controls_escaped_as_the_cli_does(project: Path, serve, browser: Browser) -> None:
    """A U+202E in a string reversed what the page showed (`s = "live"`) where the CLI shows `\\u202e`: search results,
    the file view, names and the graph map show every character the CLI escapes as its escape, on its own line."""
    from codeloupe.types import visible

    (project / "xss").mkdir()
    (project / "xss/bidi.py").write_text(BIDI_CODE, encoding="utf-8")
    (project / BIDI_NAME).write_text(BIDI_NAME_CODE, encoding="utf-8")
    base = serve([project])
    browser.open(f"{base}/?q=rtl_override")
    shown = browser.wait_for(SHOWN_LINES.replace("{name}", "xss/bidi.py"))
    assert [2, '    s = "\\u202eevil\\u202c"  # bidi'] in shown, shown
    assert [text for _, text in shown] == [lines_of(BIDI_CODE)[number - 1] for number, _ in shown]
    assert not set(BIDI) & set(browser.evaluate(PAGE_TEXT))

    browser.open(f"{base}/?q=bidi_named")
    browser.wait_for('!!document.querySelector("#core-body h3 a")')
    assert visible(BIDI_NAME) in browser.evaluate('document.querySelector("#core-body h3 a").textContent')
    assert not set(BIDI) & set(browser.evaluate(PAGE_TEXT))
    browser.evaluate('document.querySelector("#core-body h3 a").click()')
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["path"] == visible(BIDI_NAME) and view["meta"].startswith(visible(BIDI_NAME) + " · 2 lines")
    assert view["lines"] == numbered(BIDI_NAME_CODE) == ["1def bidi_named():", "2    return '\\u061c\\x1b[31m'"]

    browser.open(f"{base}/?file=xss%2Fbidi.py&line=2")
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["lines"] == numbered(BIDI_CODE) and view["cited"] == [2]

    browser.open(f"{base}/graph")
    browser.wait_for('document.getElementById("summary").textContent')
    names = browser.evaluate('[...document.querySelectorAll("#unconnected a")].map((a) => a.textContent)')
    assert visible(BIDI_NAME) in names and not set(BIDI) & set(browser.evaluate(PAGE_TEXT))

    # The page escapes the very set the CLI does: every character of the Basic Multilingual Plane, one by one.
    every = [chr(code) for code in range(0x10000) if not 0xD800 <= code < 0xE000]
    assert browser.evaluate(f"{json.dumps(every)}.map(visible)") == [visible(c) for c in every]


# A file whose name holds a line break, beside the file whose name has a space there: the CLI shows the first as
# `lines/two\\nparts.py`, and a page that left the break raw showed both as `lines/two parts.py`.
BROKEN_NAME = "lines/two\nparts.py"
LINK_TEXTS = '[...document.querySelectorAll("#core-body a, #related-body a")].map((a) => a.textContent)'


def test_a_file_name_holding_a_line_break_is_shown_on_one_line_as_the_cli_does(project: Path, serve,
                                                                                  browser: Browser) -> None:
    """The search results, the file view and the graph map showed a line break in a file's name raw, which a page
    renders as a space: `lines/two\\nparts.py` read as the file `lines/two parts.py`, its neighbour. They show it
    as the CLI does (`one_line`), a `\\n`."""
    from codeloupe.types import one_line

    (project / "lines").mkdir()
    (project / BROKEN_NAME).write_text("def broken_name_marker():\n    return 1\n", encoding="utf-8")
    (project / "lines/two parts.py").write_text("def spaced_name_marker():\n    return 2\n", encoding="utf-8")
    shown = one_line(BROKEN_NAME)
    assert shown == "lines/two\\nparts.py"
    base = serve([project])
    browser.open(f"{base}/?q=broken_name_marker")
    browser.wait_for('!!document.querySelector("#core-body h3 a")')
    assert browser.evaluate('document.querySelector("#core-body h3 a").textContent') == f"1. {shown}"
    texts = browser.evaluate(LINK_TEXTS)
    assert any(text.startswith(f"{shown}:1-2  {shown} > ") for text in texts), texts
    assert not any("\n" in text for text in texts), texts

    browser.evaluate('document.querySelector("#core-body h3 a").click()')
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["path"] == shown and view["meta"].startswith(f"{shown} · 2 lines"), view

    browser.open(f"{base}/graph")
    browser.wait_for('document.getElementById("summary").textContent')
    names = browser.evaluate('[...document.querySelectorAll("#unconnected a")].map((a) => a.textContent)')
    assert shown in names and "lines/two parts.py" in names, names
    titles = browser.evaluate('[...document.querySelectorAll("title")].map((t) => t.textContent)')
    assert not any("\n" in title for title in titles), titles
    # The very form the CLI writes, for every character of the Basic Multilingual Plane and a CRLF.
    names = [chr(code) for code in range(0x10000) if not 0xD800 <= code < 0xE000] + ["a\r\nb", "a\rb"]
    assert browser.evaluate(f"{json.dumps(names)}.map(oneLine)") == [one_line(name) for name in names]


def test_workspaces_of_one_folder_name_are_told_apart_in_the_picker(project: Path, serve, browser: Browser,
                                                                    tmp_path: Path) -> None:
    """`codeloupe serve ~/work/app ~/forks/app` listed both as `app` in the page's workspace picker: a search
    went to whichever the user guessed. Names shared by several roots show the whole root; others their name."""
    fork, lone = fork_and_lone(tmp_path)
    base = serve([project, fork, lone])
    browser.open(base + "/")
    browser.wait_for('document.querySelectorAll("#root option").length === 3')
    options = browser.evaluate('[...document.querySelectorAll("#root option")].map((o) => [o.textContent, o.value])')
    assert options == [[str(project), str(project)], [str(fork), str(fork)], ["lone", str(lone)]], options
    # The one picked is the one searched.
    browser.evaluate(f'document.getElementById("root").value = {json.dumps(str(fork))}')
    browser.evaluate(SUBMIT.format(text='"fork_only_marker"', button="search", action="requestSubmit"))
    assert browser.wait_for('document.querySelector("#core-body h3 a")?.textContent') == "1. app/fork_only.py"


SUBMIT = 'document.getElementById("q").value = {text}; document.getElementById("{button}").{action}()'
SHOWN_RESULTS = """[...document.querySelectorAll("#core-body .file, #related-body li, #file-body .line")].length
    + ["core", "related", "file"].filter((id) => !document.getElementById(id).hidden).length"""


def test_a_refused_query_is_said_in_words_and_clears_the_last_results(project: Path, serve, browser: Browser) -> None:
    """A query over 20,000 characters showed the 422's JSON (`[{"type":"string_too_long",...}]`) above the last
    query's results; the page now says what is wrong (the server's sentence) and shows no results, for a search
    and for an ask."""
    base = serve([project])
    browser.open(f"{base}/?q=how+are+bearer+tokens+checked+against+the+session+store")
    assert browser.wait_for(SHOWN_RESULTS)
    too_long = json.dumps("connection " * 3000)
    # A pasted page too: 330 KB in a request line was cut off by the server ("Bad Request").
    for text in (too_long, json.dumps("connection " * 30_000)):
        browser.evaluate(SUBMIT.format(text=text, button="search", action="requestSubmit"))
        error = browser.wait_for('document.querySelector("#meta .error")?.textContent')
        assert error.startswith("`query` must be at most 20,000 characters, got "), error
        assert browser.evaluate(SHOWN_RESULTS) == 0
        browser.evaluate('document.getElementById("meta").replaceChildren()')

    browser.open(f"{base}/?q=how+are+bearer+tokens+checked+against+the+session+store")
    assert browser.wait_for(SHOWN_RESULTS)
    browser.evaluate(SUBMIT.format(text=too_long, button="ask", action="click"))
    error = browser.wait_for('document.querySelector("#answer-body .error")?.textContent')
    assert error.startswith("`question` must be at most 20,000 characters, got "), error
    assert browser.evaluate(SHOWN_RESULTS) == 0 and browser.evaluate('document.getElementById("meta").textContent') == ""


def test_an_answer_shows_the_models_words_as_written_as_it_streams(project: Path, serve, browser: Browser,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The walkthrough showed each streamed delta's markdown as text, whose escapes are for a renderer: a model's `\\*`
    read `\\\\*`, its `[x]` read `\\[x\\]` and the reference where it cited code a code span. It shows the deltas' plain
    text, and the code under its location as before."""
    from chat_server import ChatServer, Reply

    words = "A literal \\* star, a path C:\\app\\auth and [not a link] stay as written"
    with ChatServer() as chat:
        chat.add(Reply(text=f"{words}: the checker [[1]] asks the store.\nThat is all."))
        monkeypatch.setenv("CODELOUPE_CHAT_BASE_URL", chat.base_url)
        monkeypatch.setenv("CODELOUPE_CHAT_MODEL", "scripted")
        base = serve([project])
        browser.open(f"{base}/")
        browser.wait_for('typeof onAskEvent === "function"')
        browser.evaluate(SUBMIT.format(text=json.dumps("how are bearer tokens checked"), button="ask", action="click"))
        shown = browser.wait_for('document.getElementById("meta").textContent.endsWith("answer done")'
                                 ' && document.getElementById("answer-body").innerText')
    cited = re.match(rf"{re.escape(words)}: the checker \(([\w/]+\.py):(\d+)-(\d+)\) asks the store\.\n", shown)
    assert cited, shown
    path, first, last = cited[1], int(cited[2]), int(cited[3])
    assert f"\n{path}:{first}-{last}\n" in shown and shown.rstrip().endswith("That is all."), shown
    assert (project / path).read_text().splitlines()[first - 1].strip() in shown


def test_the_address_keeps_a_query_only_while_the_server_can_read_it_back(project: Path, serve,
                                                                          browser: Browser) -> None:
    """A search puts its query in the address, so that it can be bookmarked and reloaded; a pasted page of 330 KB
    was put there too, and reloading the page (or going back to it, or opening the bookmark) was cut off by the
    server as "Bad Request" before the page loaded. Such a query is left out of the address; a short one stays."""
    base = serve([project])
    browser.open(f"{base}/")
    # The form is in the page before its script: submitted earlier, the browser sends it itself, as a GET of the
    # whole query (what a busy machine's first CI run met). page.js runs whole, its listeners at its end.
    browser.wait_for('typeof search === "function" && !!document.getElementById("q")')
    browser.evaluate(SUBMIT.format(text=json.dumps("connection " * 30_000), button="search", action="requestSubmit"))
    assert browser.wait_for('document.querySelector("#meta .error")?.textContent')
    address = browser.evaluate("location.href")
    assert "connection" not in address and httpx.get(address).status_code == 200
    browser.evaluate(SUBMIT.format(text=json.dumps("escape html"), button="search", action="requestSubmit"))
    assert browser.wait_for(SHOWN_RESULTS)
    assert browser.evaluate("new URLSearchParams(location.search).get('q')") == "escape html"


OPEN_COMMUNITY = """(() => { document.querySelector("g.community").dispatchEvent(new MouseEvent("click"));
    return [...document.querySelectorAll("#detail a")].map((a) => a.textContent); })()"""
CLICKS = {
    "the list of a bubble": 'document.querySelector("#detail a").click()',
    "a dot in a bubble": 'document.querySelector("circle.file").dispatchEvent(new MouseEvent("click"))',
}


@pytest.mark.parametrize("click", CLICKS, ids=list(CLICKS))
def test_a_file_in_the_graph_map_opens_in_the_file_view(project: Path, serve, browser: Browser, click: str) -> None:
    base = serve([project])
    browser.open(f"{base}/graph")
    assert browser.wait_for('document.querySelectorAll("g.community").length') == 1  # app/auth.py + app/store.py
    assert browser.evaluate(OPEN_COMMUNITY) == ["app/auth.py", "app/store.py"]
    browser.evaluate(CLICKS[click])
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["path"] == "app/auth.py" and view["lines"] == numbered((project / "app/auth.py").read_text())
    assert view["cited"] == [] and view["markup"] == 0


def tokened_page(project: Path, serve, browser: Browser, token: str) -> str:
    """The page of a server that requires `token`, opened as its printed address does (`#token=`); its base URL."""
    from codeloupe_web.guard import GuardConfig

    base = serve([project], guard=GuardConfig(token=token))
    browser.open(f"{base}/#token={token}")
    browser.wait_for('!!document.querySelector("#root option")')
    return base


def test_with_a_token_the_graph_map_opens_from_the_page(project: Path, serve, browser: Browser) -> None:
    base = tokened_page(project, serve, browser, "t0ken-" + "z" * 40)
    browser.evaluate('document.getElementById("graph").click()')  # the page's "Graph map"
    assert browser.wait_for('location.pathname === "/graph" && document.getElementById("summary").textContent') == \
        "3 files, 1 community, 1 unconnected file, 0 hubs"
    assert browser.evaluate(OPEN_COMMUNITY) == ["app/auth.py", "app/store.py"]
    browser.evaluate('[...document.querySelectorAll("#unconnected a")].find((a) => a.textContent === "app/render.py")'
                     '.click()')
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["path"] == "app/render.py" and view["lines"] == numbered((project / "app/render.py").read_text())
    policy = httpx.get(f"{base}/graph").headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy  # the search page's policy, as strict
    # Without the token the map's data is refused, and the shell says why.
    browser.evaluate('sessionStorage.clear()')
    browser.open(f"{base}/graph")
    assert "bearer token is required" in browser.wait_for('document.getElementById("summary").textContent')


NEW_TAB_LINKS = {"a result": "#core-body h3 a", "a cited chunk": "#core-body a.loc"}


@pytest.mark.parametrize("link", NEW_TAB_LINKS.values(), ids=list(NEW_TAB_LINKS))
def test_with_a_token_a_result_opened_in_a_new_tab_shows_its_file(project: Path, serve, browser: Browser,
                                                                   link: str) -> None:
    from codeloupe_web.guard import GuardConfig

    token = "t0ken-" + "w" * 40
    base = serve([project], guard=GuardConfig(token=token))
    browser.record_requests()
    browser.open(f"{base}/?q=how+are+bearer+tokens+checked+against+the+session+store#token={token}")
    browser.wait_for(f'!!document.querySelector("{link}")')
    path = browser.evaluate(f'document.querySelector("{link}").textContent').split(":")[0].split(" ").pop()
    browser.middle_click(link)  # a new tab, with no copy of this one's sessionStorage
    browser.follow_new_tab()
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["path"] == path and view["lines"] == numbered((project / path).read_text())
    # The token went as a bearer header only: in no request's address (its fragment is never sent), nor a Referer.
    sent = [[request["url"], *(f"{k}: {v}" for k, v in request["headers"].items() if k != "Authorization")]
            for request in browser.requests]
    assert len(sent) > 4 and not [text for request in sent for text in request if token in text]
    assert any(request["headers"].get("Authorization") == f"Bearer {token}" for request in browser.requests)


def test_with_a_token_the_graph_map_and_its_files_open_in_new_tabs(project: Path, serve, browser: Browser) -> None:
    tokened_page(project, serve, browser, "t0ken-" + "v" * 40)
    browser.middle_click("#graph")  # the page's "Graph map"
    browser.follow_new_tab()
    assert browser.wait_for('document.getElementById("summary").textContent').startswith("3 files")
    assert browser.evaluate(OPEN_COMMUNITY) == ["app/auth.py", "app/store.py"]
    browser.middle_click("#detail a")
    browser.follow_new_tab()
    view = browser.wait_for(OPEN_FILE_VIEW)
    assert view["path"] == "app/auth.py" and view["lines"] == numbered((project / "app/auth.py").read_text())


# Every bubble opened in turn; the links its list shows, as the page wrote them.
EVERY_COMMUNITY_HREF = """(() => [...document.querySelectorAll("g.community")].flatMap((bubble) => {
    bubble.dispatchEvent(new MouseEvent("click"));
    return [...document.querySelectorAll("#detail a")].map((a) => [a.textContent, a.getAttribute("href")]); }))()"""


def test_a_written_map_links_a_file_named_like_a_script_url_as_a_relative_path(project: Path, browser: Browser,
                                                                               tmp_path: Path) -> None:
    """`codeloupe graph --html` without a root (as an editor's webview gets it) linked a file by its bare path, so a
    top-level file named `javascript:alert(1).py` became a script URL under the page's inline policy."""
    from codeloupe.api import Workspace, render_html

    (project / "javascript:alert(1).py").write_text("from app.store import SessionStore\n\nSTORE = SessionStore()\n")
    ws = Workspace(project, overrides={"embed_provider": "none", "cache_dir": str(tmp_path / "cache")})
    try:
        ws.index()
        page = tmp_path / "map.html"
        page.write_text(render_html(ws.graph_map()), encoding="utf-8")
    finally:
        ws.close()
    browser.open(page.as_uri())
    browser.wait_for('document.querySelectorAll("g.community").length > 0')
    links = dict(browser.evaluate(EVERY_COMMUNITY_HREF))
    assert links["javascript:alert(1).py"] == "./javascript%3Aalert(1).py", links
    assert not [href for href in links.values() if not href.startswith("./")], links

