"""Write docs/http.md from the OpenAPI schema of `codeloupe serve` (run after changing an endpoint).

Usage:  .venv/bin/python scripts/http_docs.py [--check]
`--check` exits 1 when docs/http.md differs from what the schema gives (the test suite runs this).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[1] / "docs" / "http.md"

INTRO = """# HTTP API (`codeloupe serve`)

Generated from the OpenAPI schema by `scripts/http_docs.py`; do not edit by hand. The live schema is served
at `/openapi.json`.

`codeloupe serve [PATH ...] [--host 127.0.0.1] [--port 7341] [--token T] [--cors-origin O] [--rate N]` holds
one warm index per PATH. Each request refreshes a stale index first (changed files only, at most once a
second) and answers from the index it has if that fails; an index written by the language server, the CLI or
another process is picked up by the next request. MCP (streamable HTTP) is served at `/mcp` (the second PATH
at `/mcp/1`, ...); the search page at `/` (its file view, `/?file=PATH&line=N&end=M`, reads the file through
`/v1/expand`), the graph map at `/graph` (its file links open the file view).

**Security.** Bound to loopback (the default) the server answers only requests whose `Host` names a loopback
address (a web page elsewhere cannot reach it by DNS rebinding). Bound beyond loopback it requires
`Authorization: Bearer <token>` on everything but `/healthz` and the static shells of the search page and
the graph map, `/`, `/graph` and `/static/...`, which hold no workspace data (`--token` or
`CODELOUPE_SERVE_TOKEN`; one is generated and printed when not given; open the page as `/#token=<token>`:
the page and the graph map send it on every API call, and their links carry it in their fragment, which no request
includes, so a link opened in a new tab works too). Request bodies are limited to 1 MB (413), each client to 100 requests
a second with bursts of 400 (429); a request not received whole (head and body) within 15 s of its first byte
has its connection closed. CORS is off unless `--cors-origin` names origins (a browser's preflight, which
never carries a token, is then answered without one). Files are read only when
they are in the index and inside the workspace (no `..`, absolute paths, or links leading out). No endpoint
changes settings: they come from the user's configuration and environment as for every other command.

**Freshness.** Before a request is answered, files changed on disk are indexed and searched (at most once a
second; after a branch switch of hundreds of files the request waits for the search snapshot's rebuild). A
request that arrives while a workspace's first index runs waits for it, up to two minutes, holding no worker
thread: one whose client hangs up meanwhile ends at once, so clients giving up on a long first index never keep
other requests waiting (MCP tool calls and resource reads at `/mcp` wait the same way, and end when their
client cancels them); an answer read from
the index after that (`/v1/search`, `/v1/docsearch`, `/v1/locate`, `/v1/expand`, `/v1/related`, `/v1/graph`,
`/v1/tour`, `/v1/flows`, and the bundle of an ask's `done`) says in its `notes` that the index is still being built and how
far it got (a refusal, such as a file not indexed yet, says it in its `error`), and `/v1/status` gives each workspace's `ready` and `building`
(what an answer lacks meanwhile). `/healthz` and `/readyz` answer at once
whatever the other requests are doing.

**Secrets.** The answers go to agents (and the search page), whose context may be a cloud model's: a file that
looks like a secret (`.env*`, `*.pem`, `*.key`, `id_rsa*`, `credentials*`, `.netrc`, `.aws/`, `.ssh/`, ...: the list
`ask` refuses to its model) is listed but its content is never sent, though the index holds it when git does not
ignore it (the CLI and the editors show it). A search (`/v1/search`, `/v1/search/all`, an ask's bundle) keeps it
as a candidate in its place with `withheld: true`, no `chunks` and no `symbols`, its `why` ending "content
withheld: the file looks like a secret", and a note counting such files; `/v1/docsearch` leaves it out (a hit is
its text). `/v1/expand` of one, and `/v1/related` from one, answer 400 saying it is withheld. `/v1/locate` does
not look in such files at all (`secrets_skipped: true` on every answer: a count of their lines holding the text
would tell, a request at a time, what they hold), nor do `/v1/related`'s chunks come from them. `/v1/graph` names
them as nodes and neighbours, with no `chunks` of theirs and no `useCode` or `definitionCode` on their side of a
hop; `/v1/tour` says the same words for the `detail` of an entry point in one (its shebang or its `main`'s
signature is a line of it).

**Names.** `/v1/expand`'s `path`, `/v1/search`'s `scope` and `/v1/graph`'s `node`, `source` and `target` also take a
file's or folder's name as MCP's text answers and the CLI show it, its control, bidi and line-break characters
escaped (`\\n`, `\\x1b`, `\\u202e`; the graph's text writes a carriage return `\\r`): a name the index does not hold,
holding a backslash, names the one indexed file or folder shown so.

**Spans.** `/v1/expand` reads a range (`start_line`, `end_line`), a `symbol`, or the definition at an `anchor_line`
(a `symbol` with an `anchor_line` picks among same-named definitions); a range with either of the others is refused
(400), where it was dropped and the whole definition answered.

**Parameter names.** A parameter is named as the MCP tool's argument it matches (`query`, `start_line`,
`end_line`, `anchor_line`, `scope`, `mode`, `limit`, `node`, `source`, `target`, `text`, `identifier`, `repo`,
`repos`), so a client that learnt one surface calls the other right. `repos` is a list, as MCP's: a repeated
parameter (`?repos=a&repos=b`) or a JSON list in a body; given to `/v1/search`, it answers one ranking across
them as `/v1/search/all` does (with `repo` or a `scope`, refused: 422). The names HTTP used first still answer
the same, marked deprecated in the schema: `q` for `query` (`/v1/search`, `/v1/search/all`, `/v1/docsearch`),
`start` and `end` for `start_line` and `end_line` (`/v1/expand`, `/v1/related`), `line` for `anchor_line`, `root`
for `repo` (every endpoint and body taking it), and `/v1/search/all`'s one comma-separated `repos` value
(`?repos=a,b`, still read as that list); both names of one parameter at once are refused (422). A refused
unknown parameter is answered with the current names.

**Asks.** `/v1/ask` and `/v1/ask/stream` call the chat model the user configured; a client that hangs up
(closes its connection) cancels its ask: the model call in flight is cut off and nothing more is asked of the
model, so a client that gives up costs the server nothing further.

**Errors.** A refused request (a path outside the workspace, an unknown symbol, a root that is not served, a
folder name several served roots share, such as `app` under `codeloupe serve ~/work/app ~/forks/app`: the error
names them, and their paths choose one) answers 400 with `{"error": message}`, as does a body that is not
JSON; an unknown path 404 and a method a path does not take 405, in the same shape; a malformed request 422, in
the same shape, its `error` a sentence naming each parameter or body field with the rule it breaks, as MCP words
a refused tool argument (``"`limit` must be a whole number; `mode` must be one of 'code', 'docs' or 'both'"``; no
value sent is echoed): a query parameter the endpoint does not take and a field its JSON body does not take,
each named with those it takes (a typo, `?limt=5`, was ignored; an unknown parameter answered 400 where an
unknown body field answered 422: both are 422 now; the pages `/` and `/graph` take any, their scripts read them,
and the health probes `/healthz` and `/readyz` ignore any, which a load balancer or a monitor may add, a cache
buster), a value of the wrong
type or out of bounds, a `text` to `/v1/locate` of several lines too, and a query or question holding nothing to
search for, only whitespace, NUL and other control or format characters, as the command line and the language
server refuse it, and a `scope` to `/v1/search` sent blank, `?scope=` or spaces, which searched the whole workspace
as if left out. 422 and not 400: the request is to be corrected, where a 400 is the engine refusing what a
well-formed request asks for. An
index
that cannot be read at the moment answers 503 in the same shape, the error saying why: under `serve --store`,
the shared index's database down or unreachable (each request tries again, so answers resume once it is
back; `/healthz` does not ask the database, and `/readyz` answers 503 with the reason while it cannot be read, from
a check made at most once a second, which a probe waits up to a second for). `serve --store` lists the shared
index's repositories again as requests come, at most every 5 seconds, on a worker thread (the request that finds
it due waits for it): a repository indexed since is served (with `--repo`, only those it names), and one dropped
(`codeloupe admin drop`) no longer is, a `repo` naming it then refused as not served; one dropped and indexed again
under its name is served as it is now. Between two listings a request reading a dropped repository answers 503
saying so, except a search across repositories (`/v1/search/all`, MCP's `search` with `repos`): it has them
listed at once and answers from the others.
"""


def schema() -> dict[str, Any]:
    """The app's OpenAPI schema, built over an empty workspace (the schema does not depend on content)."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CODELOUPE_CACHE_DIR"] = str(Path(tmp) / "cache")
        os.environ["CODELOUPE_EMBED_PROVIDER"] = "none"
        (Path(tmp) / "ws").mkdir()
        from codeloupe_serving.warm import WarmWorkspaces
        from codeloupe_web.app import create_app

        pool = WarmWorkspaces([Path(tmp) / "ws"])
        try:
            return create_app(pool).openapi()
        finally:
            pool.close()


def type_of(node: dict[str, Any], spec: dict[str, Any]) -> str:
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in node:
        return " or ".join(type_of(n, spec) for n in node["anyOf"])
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    if node.get("type") == "array":
        return f"list of {type_of(node.get('items', {}), spec)}"
    return node.get("type", "object")


def limits(node: dict[str, Any]) -> str:
    parts = []
    for key, label in (("minLength", "min length"), ("maxLength", "max length"), ("minimum", "≥"), ("maximum", "≤")):
        for option in [node, *node.get("anyOf", [])]:
            if key in option:
                parts.append(f"{label} {option[key]}")
    return ", ".join(parts)


def fields_table(rows: list[tuple[str, dict[str, Any], bool, str]], spec: dict[str, Any]) -> list[str]:
    out = ["| name | type | required | default | limits | meaning |", "|---|---|---|---|---|---|"]
    for name, node, required, description in rows:
        default = node.get("default")
        shown = f"`{json.dumps(default)}`" if "default" in node else ""
        out.append(f"| `{name}` | {type_of(node, spec)} | {'yes' if required else ''} | "
                   f"{'' if required else shown} | {limits(node)} | {description or node.get('description', '')} |")
    return out


def render(spec: dict[str, Any]) -> str:
    lines = [INTRO.rstrip(), ""]
    components = spec.get("components", {}).get("schemas", {})
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            lines += [f"## `{method.upper()} {path}`", "", op.get("summary", ""), ""]
            params = [p for p in op.get("parameters", []) if p["in"] == "query"]
            if params:
                lines += ["Query parameters:", ""]
                lines += fields_table([(p["name"], p["schema"], p.get("required", False), p.get("description", ""))
                                       for p in params], spec)
                lines.append("")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                model = components[body["$ref"].rsplit("/", 1)[-1]]
                lines += ["JSON body:", ""]
                lines += fields_table([(name, node, name in model.get("required", []), "")
                                       for name, node in model["properties"].items()], spec)
                lines.append("")
            answers = []
            for code, response in op.get("responses", {}).items():
                content = response.get("content", {})
                media = next(iter(content), "")
                shape = content.get(media, {}).get("schema", {}) if media else {}
                what = type_of(shape, spec) if shape else ""
                answers.append(f"`{code}` {response.get('description', '')}"
                               + (f" ({media}: {what})" if what and what != "object" else f" ({media})" if media else ""))
            lines += ["Answers: " + "; ".join(answers) + ".", ""]
    lines += ["## Shapes", ""]
    for name, model in sorted(components.items()):
        lines += [f"### {name}", ""]
        lines += fields_table([(field, node, field in model.get("required", []), "")
                               for field, node in model.get("properties", {}).items()], spec)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/http.md is out of date")
    args = parser.parse_args()
    text = render(schema())
    if args.check:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is out of date: run scripts/http_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
