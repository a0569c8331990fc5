"""`locate` reads only the chunks the lexical index says can hold the text: it must find exactly what reading
every line of every indexed file finds, for identifiers and plain text, across the tokeniser's edge cases, from a
full snapshot and from a delta view after a save."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codeloupe.api import Workspace

FILES = {
    "app/client.py": (
        "class HTTPConnection:\n"
        "    def send(self, payload):\n"
        "        self.sock.send(payload)  # self twice: one line\n"
        "        return self\n\n\n"
        "def http_connection_pool(size):\n"
        "    return [HTTPConnection() for _ in range(size)]\n"
    ),
    "app/odd.py": (
        "x = 1\x0cself = 2\n"  # a form feed: one line to an editor, two to str.splitlines
        "caf\u00e9 = 'caf\u00e9 latte'\r\n"
        "$dollar = jQuery$ + $dollar\n"
        "value3des = 3des + the_value\n"
        "blob = 'a" + "b" * 80 + "c'\n"
        "json.loads(text); myjson.loads_all(text)\n"
    ),
    "web/app.js": (
        "const $dollar = require('./x');\n"
        "function getUser(id) { return db.get(id); }\n"
        "export const get = (k) => store[k];\n"
    ),
}

QUERIES = ["self", "HTTPConnection", "http_connection_pool", "send", "caf\u00e9", "$dollar", "jQuery$", "3des",
           "value3des", "the", "the_value", "json.loads", "son.loa", "loads", "get", "getUser", "db.get(id)",
           "b" * 80, "a" + "b" * 80 + "c", "return [HTTPConnection() for", "nowhere_at_all", "x = 1"]


def reference(root: Path, text: str, identifier: bool) -> list[tuple[str, int, int]]:
    whole = re.compile(rf"(?<![\w$]){re.escape(text)}(?![\w$])")
    found = []
    for path in sorted(p for p in FILES):
        for number, line in enumerate(re.split("\r\n|\r|\n", (root / path).read_bytes().decode()), 1):
            column = (whole.search(line).start() if whole.search(line) else -1) if identifier else line.find(text)
            if column >= 0:
                found.append((path, number, column + 1))
    return found


@pytest.mark.parametrize("identifier", [True, False], ids=["identifier", "text"])
def test_locate_finds_what_reading_every_line_finds(tmp_path: Path, identifier: bool) -> None:
    root = tmp_path / "repo"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode())
    ws = Workspace(root, overrides={"embed_provider": "none"})
    try:
        ws.index()
        ws.search("connection")  # the full snapshot
        for state in ("snapshot", "view"):
            for query in QUERIES:
                got = ws.locate(query, identifier=identifier, limit=1000)
                expected = reference(root, query, identifier)
                assert [(h.path, h.line, h.column) for h in got.locations] == expected, (state, query)
                assert got.total == len(expected), (state, query)
            (root / "app/client.py").write_text(FILES["app/client.py"].replace("send", "transmit") + "self.get\n")
            ws.update_files([root / "app/client.py"])
            assert ws.searcher().snapshot().base is not None  # the next round answers from a delta view
        few = ws.locate("self", identifier=identifier, limit=2)
        assert len(few.locations) == 2 and few.total == len(reference(root, "self", identifier))
    finally:
        ws.close()
