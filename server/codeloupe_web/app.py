"""The ASGI app of `codeloupe serve`: the JSON API (`/v1/...`), MCP over streamable HTTP (`/mcp`), health
probes, the OpenAPI schema and the search page. Handlers convert and call `codeloupe.api`; nothing here
ranks, reads files or changes settings."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from codeloupe.api import (
    MAP_ASSETS,
    MAX_LOCATE,
    MAX_QUERY_CHARS,
    MAX_TOUR_ENTRY_POINTS,
    MAX_TOUR_NAMES,
    TOUR_ENTRY_POINTS,
    TOUR_NAMES,
    GraphRequest,
    GraphRequestError,
    InvalidArgument,
    StoreError,
    Workspace,
    WorkspaceError,
    check_locate_text,
    check_query,
    check_scope,
    map_asset,
    render_html_shell,
)
from codeloupe.types import Bundle, Expansion, Flow, Located, package_version
from codeloupe_mcp.server import build_server
from codeloupe_serving.refusals import argument_problems, not_taken
from codeloupe_serving.warm import WarmWorkspace, WarmWorkspaces, noted_event

from .guard import Guard, GuardConfig
from .hangup import events_until_hangup, result_until_hangup, when_indexed

if TYPE_CHECKING:  # at run time they would import the model client when the server starts (~0.7 s)
    from codeloupe.api import AskEvent, AskRun

T = TypeVar("T")

MAX_LIMIT = 50
# How long /readyz waits for the readiness check it started (the database answers a SELECT 1 in milliseconds, or
# refuses a connection at once), polled on the event loop.
READY_WAIT_S = 1.0
READY_POLL_S = 0.02
# The pages load nothing from elsewhere and run no inline code: a file's contents or name shown on them can never
# become a script.
_PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:"
# The files the pages load: the page's own, and the graph map's code and style from the engine.
_STATIC = {"api.js": "text/javascript", "page.js": "text/javascript", "graph.js": "text/javascript",
           "page.css": "text/css", "map.js": "text/javascript", "map.css": "text/css",
           "visible.js": "text/javascript"}

QueryText = Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY_CHARS, description=(
    "the question or bug report (required: here, or as `q`)"))]
# HTTP's first names for what MCP's tools call otherwise (an agent that learnt one surface got the other wrong):
# still taken, as a /v1 client written for them keeps working, but marked deprecated, and a refusal lists only
# the names MCP shares (`_known_parameters`). Sending both names of one parameter is refused (`_one_name`).
OlderQuery = Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY_CHARS, deprecated=True,
                                         description="deprecated: HTTP's earlier name of `query`")]
StartLine = Annotated[int | None, Query(ge=1, description="first line (1-based)")]
EndLine = Annotated[int | None, Query(ge=1, description="last line, inclusive (clipped to the file)")]
OlderStart = Annotated[int | None, Query(ge=1, deprecated=True, description="deprecated: HTTP's earlier name of `start_line`")]
OlderEnd = Annotated[int | None, Query(ge=1, deprecated=True, description="deprecated: HTTP's earlier name of `end_line`")]
RepoParam = Annotated[str | None, Query(max_length=4096, description=(
    "a served workspace: its path, or its folder's name where no other served root has that name (a name two "
    "share is refused, naming them), or a hit's `repository` of a search across them; default: the first"))]
OlderRoot = Annotated[str | None, Query(max_length=4096, deprecated=True,
                                        description="deprecated: HTTP's earlier name of `repo`")]
ModeParam = Annotated[Literal["code", "docs", "both"], Query(description="code, docs, or both")]
LimitParam = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="candidate files")]
# MCP's `repos`, a list: a parameter repeated (`?repos=a&repos=b`), or a JSON list in a body.
ReposDescription = ("served workspaces to search as one ranking, each a name or a path as `repo` takes them (a "
                    "hit's `repository` is one); `*`: every one")
ReposParam = Annotated[list[Annotated[str, Field(max_length=4096)]] | None, Query(max_length=1000, description=(
    f"{ReposDescription}; given, one ranking across them, as `/v1/search/all` answers"))]
# `/v1/search/all` took one comma-separated string: a value holding commas is still read so (deprecated).
AllReposParam = Annotated[list[Annotated[str, Field(max_length=65536)]] | None, Query(max_length=1000, description=(
    f"{ReposDescription}, as nothing is; one value holding commas is read as a comma-separated list (deprecated: "
    "HTTP's earlier form)"))]
ScopeParam = Annotated[str, Query(max_length=4096, description="confine retrieval to this sub-path of the workspace")]


# A body field under HTTP's earlier name, marked deprecated in the schema only: pydantic's own `deprecated` warns on
# every read of it, which the handler does to take it.
OLDER_FIELD: dict[str, Any] = {"deprecated": True}


class SearchBody(BaseModel):
    # Nothing else rides along (a request never carries settings); and each field's own JSON type only: lax
    # validation read `"limit": true` as 1.
    model_config = ConfigDict(extra="forbid", strict=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    repo: str | None = Field(default=None, max_length=4096)
    scope: str = Field(default="", max_length=4096)
    mode: Literal["code", "docs", "both"] = "code"
    limit: int = Field(default=12, ge=1, le=MAX_LIMIT)
    repos: list[Annotated[str, Field(max_length=4096)]] | None = Field(default=None, max_length=1000,
                                                                       description=ReposDescription)
    root: str | None = Field(default=None, max_length=4096, json_schema_extra=OLDER_FIELD,
                             description="deprecated: HTTP's earlier name of `repo`")


class AskBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # `"agents": "yes"` was read as true

    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    repo: str | None = Field(default=None, max_length=4096)
    mode: Literal["code", "docs"] = "code"
    agents: bool | None = None
    best: bool = False
    root: str | None = Field(default=None, max_length=4096, json_schema_extra=OLDER_FIELD,
                             description="deprecated: HTTP's earlier name of `repo`")


# Every answer read from the index carries these: an answer given while a first index runs lacks files.
Notes = Annotated[list[str], Field(description="how far to trust this answer (e.g. the index is still being "
                                               "built: files not yet indexed are missing from it)")]


class DocHit(BaseModel):
    path: str
    title: str
    start_line: int
    end_line: int
    anchor_line: int
    text: str
    score: float


class DocSearch(BaseModel):
    hits: list[DocHit]
    notes: Notes


class CachedFlows(BaseModel):
    flows: list[Flow]
    notes: Notes


@dataclasses.dataclass
class NotedExpansion(Expansion):
    notes: Notes = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class NotedLocated(Located):
    notes: Notes = dataclasses.field(default_factory=list)


class Error(BaseModel):
    error: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": Error, "description": "refused by the engine"},
    422: {"model": Error, "description": "a malformed request: the error names each parameter or body field and "
                                        "the rule it breaks"},
    503: {"model": Error, "description": "the index cannot be read now (see Errors)"}}


# The health probes: they ignore a query parameter (`_known_parameters`).
PROBES = ("/healthz", "/readyz")


def mcp_path(index: int) -> str:
    """Where the MCP server of the `index`-th served workspace (from 0, in the order given) answers."""
    return "/mcp" if index == 0 else f"/mcp/{index}"


def create_app(pool: WarmWorkspaces, guard: GuardConfig | None = None) -> FastAPI:
    """The app serving `pool` under `guard`'s rules (loopback, no token, no CORS when not given)."""
    guard = guard or GuardConfig()
    mcp_servers = [build_server(warm, pool) for warm in pool.all]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for server in mcp_servers:
                await stack.enter_async_context(server.session_manager.run())
            yield

    app = FastAPI(title="codeloupe", version=package_version(), lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Code retrieval over a warm index: ranked, complete bundles with no model call.",
                  dependencies=[Depends(_known_parameters)])

    @app.exception_handler(WorkspaceError)
    @app.exception_handler(ValueError)
    @app.exception_handler(OSError)
    async def refused(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # A body that does not parse as JSON is refused as the docs say (400, `error`), as one that is not UTF-8
        # is: FastAPI answered it as a malformed parameter (422, `json_invalid` at `["body", 0]`).
        unparsed = next((e for e in exc.errors() if e["type"] == "json_invalid"), None)
        if unparsed is not None:
            where = unparsed["loc"][-1]
            return JSONResponse({"error": f"the body is not JSON: {unparsed['ctx']['error']} at character {where}"},
                                status_code=400)
        return JSONResponse({"error": _malformed(request, exc.errors())}, status_code=422)

    @app.exception_handler(InvalidArgument)
    async def malformed(_: Request, exc: InvalidArgument) -> JSONResponse:
        # A value its parameter's type takes but the engine refuses (a `text` to locate of several lines) is a
        # malformed request like one the type refuses: 422, naming the parameter.
        return JSONResponse({"error": str(exc)}, status_code=422)

    @app.exception_handler(StoreError)
    async def unavailable(_: Request, exc: StoreError) -> JSONResponse:
        # The database of `serve --store` went away (or the file of a workspace's index cannot be read): the
        # request may succeed later, and the message says what failed, where a bare 500 said nothing.
        return JSONResponse({"error": str(exc)}, status_code=503)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Every refusal in the one documented shape: FastAPI's own (a body that is not JSON, an unknown path, a
        # method a route does not take) answered {"detail": ...}.
        said = str(exc.detail)
        allowed = (exc.headers or {}).get("Allow")
        if exc.status_code == 405 and allowed:  # `GET /v1/ask` said only "Method Not Allowed", not to POST it
            said = f"{request.method} is not a method of {request.url.path}, which takes {allowed}"
        return JSONResponse({"error": said}, status_code=exc.status_code, headers=exc.headers)

    async def served(repo: str | None) -> WarmWorkspace:
        """The workspace `repo` names (`WarmWorkspaces.get`), from the shared index's repositories as listed now
        (`relisted`)."""
        await pool.relisted()
        return pool.get(repo)

    async def across(request: Request, repos: list[str], query: str, mode: str, limit: int) -> Any:
        """One ranking across the workspaces `repos` names (`WarmWorkspaces.search_across`), as listed now."""
        await pool.relisted()
        return await when_indexed(request, pool.select(repos), lambda: dataclasses.asdict(
            pool.search_across(repos, query, mode=mode, limit=limit)))

    # Every call that reads an index is a coroutine that waits for its workspace's first index on the event loop
    # (`when_indexed`), then answers on a worker thread: one waiting in a thread held it for up to two minutes,
    # after its client had gone too, and 40 of them kept every other call waiting.
    @app.get("/v1/search", response_model=Bundle, responses=_ERRORS, tags=["search"],
             summary="The bundle for a query (the JSON of `codeloupe search --json`)")
    async def search_get(request: Request, query: QueryText = None, repo: RepoParam = None, scope: ScopeParam = "",
                         mode: ModeParam = "code", limit: LimitParam = 12, repos: ReposParam = None,
                         q: OlderQuery = None, root: OlderRoot = None) -> Any:
        text = _query_text(query, q)  # blank: refused before the wait for the first index (no index would answer it)
        chosen = _one_name("repo", repo, "root", root)
        if repos:
            _one_ranking(chosen, scope)
            return await across(request, repos, text, mode, limit)
        if "scope" in request.query_params:  # `?scope=`: a folder meant and none named (left out: the whole)
            check_scope(scope)
        warm = await served(chosen)
        return await when_indexed(request, [warm], lambda: _search(warm, text, scope, mode, limit))

    @app.post("/v1/search", response_model=Bundle, responses=_ERRORS, tags=["search"],
              summary="The bundle for a query sent as JSON (a long bug report)")
    async def search_post(request: Request, body: SearchBody) -> Any:
        check_query(body.query)
        chosen = _one_name("repo", body.repo, "root", body.root)
        if body.repos:
            _one_ranking(chosen, body.scope)
            return await across(request, body.repos, body.query, body.mode, body.limit)
        if "scope" in body.model_fields_set:  # sent blank, as `?scope=`; left out: the whole workspace
            check_scope(body.scope)
        warm = await served(chosen)
        return await when_indexed(request, [warm], lambda: _search(warm, body.query, body.scope, body.mode,
                                                                   body.limit))

    @app.get("/v1/search/all", response_model=Bundle, responses=_ERRORS, tags=["search"],
             summary="One ranking across the served workspaces (the repositories of a shared index): each "
                     "file names its `repository` and the `revision` it is pinned to")
    async def search_all(request: Request, query: QueryText = None, repos: AllReposParam = None,
                         mode: ModeParam = "code", limit: LimitParam = 12, q: OlderQuery = None) -> Any:
        text = _query_text(query, q)
        return await across(request, [name for value in repos or () for name in value.split(",")], text, mode, limit)

    async def noted(request: Request, repo: str | None, call: Callable[[Workspace], dict[str, Any]]) -> dict[str, Any]:
        """`call`'s JSON answer from the workspace `repo` names, with its `notes` (`WarmWorkspace.noted_json`)."""
        warm = await served(repo)
        return await when_indexed(request, [warm], lambda: warm.noted_json(call))

    @app.get("/v1/docsearch", response_model=DocSearch, responses=_ERRORS, tags=["search"],
             summary="A documentation site's search box: docs only, the best section per page (`hits`)")
    async def docsearch(request: Request, query: QueryText = None, repo: RepoParam = None, limit: LimitParam = 10,
                        q: OlderQuery = None, root: OlderRoot = None) -> Any:
        text = _query_text(query, q)
        warm = await served(_one_name("repo", repo, "root", root))
        bundle = await when_indexed(request, [warm], lambda: warm.search(text, mode="docs", limit=limit))
        return DocSearch(hits=[_doc_hit(hit) for hit in bundle.files if hit.chunks], notes=bundle.notes)

    @app.get("/v1/expand", response_model=NotedExpansion, responses=_ERRORS, tags=["read"],
             summary="Lines of an indexed file verbatim from disk: a range, a symbol, or the definition at a line")
    async def expand(request: Request, path: Annotated[str, Query(min_length=1, max_length=4096,
                                          description="an indexed file, relative to the workspace root")],
               repo: RepoParam = None, start_line: StartLine = None, end_line: EndLine = None,
               symbol: Annotated[str, Query(max_length=512, description="a definition: `name` or `Class.method`")] = "",
               anchor_line: Annotated[int | None, Query(ge=1, description="a line: the definition around it")] = None,
               start: OlderStart = None, end: OlderEnd = None,
               line: Annotated[int | None, Query(ge=1, deprecated=True,
                                                 description="deprecated: HTTP's earlier name of `anchor_line`")] = None,
               root: OlderRoot = None) -> Any:
        first, last = _one_name("start_line", start_line, "start", start), _one_name("end_line", end_line, "end", end)
        anchor = _one_name("anchor_line", anchor_line, "line", line)
        return await noted(request, _one_name("repo", repo, "root", root), lambda ws: dataclasses.asdict(ws.expand(path, first, last, symbol=symbol,
                                                                                  line=anchor)))

    @app.get("/v1/locate", response_model=NotedLocated, responses=_ERRORS, tags=["read"],
             summary="Every indexed line holding a string exactly (or a whole identifier)")
    async def locate(request: Request, text: Annotated[str, Query(min_length=1, max_length=1000, description="one line, case-sensitive")],
               repo: RepoParam = None,
               identifier: Annotated[bool, Query(description="match whole identifiers only")] = False,
               limit: Annotated[int, Query(ge=1, le=MAX_LOCATE, description="locations returned")] = 100,
               root: OlderRoot = None) -> Any:
        check_locate_text(text)  # before the wait for the first index: no index would answer it
        return await noted(request, _one_name("repo", repo, "root", root), lambda ws: dataclasses.asdict(ws.locate(text, identifier=identifier, limit=limit)))

    @app.get("/v1/related", responses=_ERRORS, tags=["read"],
             summary="The chunks nearest to a span (or a whole file) in its language, its own chunks left out")
    async def related(request: Request, path: Annotated[str, Query(min_length=1, max_length=4096,
                                           description="an indexed file, relative to the workspace root")],
                repo: RepoParam = None, start_line: StartLine = None, end_line: EndLine = None,
                limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="chunks returned")] = 10,
                start: OlderStart = None, end: OlderEnd = None, root: OlderRoot = None) -> Any:
        first, last = _one_name("start_line", start_line, "start", start), _one_name("end_line", end_line, "end", end)
        return await noted(request, _one_name("repo", repo, "root", root), lambda ws: dataclasses.asdict(ws.find_related(path, first, last,
                                                                                        limit=limit)))

    @app.get("/v1/graph", responses=_ERRORS, tags=["graph"],
             summary="The map; one node (`node`); or a route (`source`, `target`) as in `codeloupe graph --json`")
    async def graph(request: Request, repo: RepoParam = None,
              node: Annotated[str | None, Query(max_length=1000, description="a file, a file name, a concept, or a folder "
                                                                 "(its files and their edges across it). Each edge's "
                                                                 "`use` (`{path, startLine, endLine}`) is where the "
                                                                 "file that uses the other does: its `path` names "
                                                                 "that file (the node's own in `imports`, the "
                                                                 "neighbour's in `importers`; `from` in a folder's "
                                                                 "`uses`, `path` in its `usedBy`); `line` is its "
                                                                 "line")] = None,
              source: Annotated[str | None, Query(max_length=1000, description="a route's start")] = None,
              target: Annotated[str | None, Query(max_length=1000, description="a route's end")] = None,
              root: OlderRoot = None) -> dict[str, Any]:
        # A parameter given empty (`?node=`) is a blank part, as the command line's `--node ""` is: it used to count
        # as left out, and the answer was the whole map.
        for part, value in (("node", node), ("source", source), ("target", target)):
            if value == "":
                raise GraphRequestError.blank(part)
        asked = GraphRequest(node or "", source or "", target or "")  # refused before waiting for the first index
        return await noted(request, _one_name("repo", repo, "root", root), lambda ws: ws.graph(asked).to_dict())

    @app.get("/v1/tour", responses=_ERRORS, tags=["graph"],
             summary="Where to start reading: entry points, then the names most files mention (`codeloupe tour`)")
    async def tour(request: Request, repo: RepoParam = None,
             limit: Annotated[int, Query(ge=1, le=MAX_TOUR_NAMES, description=(
                 "names listed (as MCP's `codeloupe://tour?limit=N`)"))] = TOUR_NAMES,
             entry_points: Annotated[int, Query(ge=1, le=MAX_TOUR_ENTRY_POINTS, description=(
                 "entry points listed, strongest signal first; `entry_points_not_shown` counts the rest "
                 "(as MCP's `codeloupe://tour?entry_points=N`)"))] = TOUR_ENTRY_POINTS,
             root: OlderRoot = None) -> dict[str, Any]:
        warm = await served(_one_name("repo", repo, "root", root))
        return await when_indexed(request, [warm], lambda: warm.tour(limit=limit, entry_points=entry_points))

    @app.get("/v1/flows", response_model=CachedFlows, responses=_ERRORS, tags=["ask"],
             summary="The cached walkthroughs (flows), newest first, stale ones marked (`codeloupe flows --json` "
                     "as `flows`)")
    async def flows(request: Request, repo: RepoParam = None, root: OlderRoot = None) -> Any:
        return await noted(request, _one_name("repo", repo, "root", root), lambda ws: {"flows": [dataclasses.asdict(f) for f in ws.flows()]})

    async def start_ask(request: Request, body: AskBody) -> tuple[AskRun, list[str]]:
        """The ask and the notes its bundle gets (`WarmWorkspace.start_ask`), once the workspace's first index
        ended; refused with 499 when the client hangs up first."""
        check_query(body.question, "question")
        warm = await served(_one_name("repo", body.repo, "root", body.root))
        return await when_indexed(request, [warm], lambda: warm.start_ask(body.question, mode=body.mode,
                                                                          agents=body.agents, best=body.best))

    # Both asks are coroutines that take the events on worker threads: a client hanging up cancels its ask.
    @app.post("/v1/ask", responses=_ERRORS, tags=["ask"],
              summary="A walkthrough (the `done` event of `codeloupe ask --json`); the bundle with the reason "
                      "when no chat model is configured or it fails")
    async def ask(body: AskBody, request: Request) -> dict[str, Any]:
        run, notes = await start_ask(request, body)
        from codeloupe.api import AskEvent  # imported with the ask's model client by now (on a worker thread)

        if (result := await result_until_hangup(request, run)) is None:
            raise WorkspaceError("the ask ended without a result")
        return noted_event(AskEvent("done", result=result), notes).to_dict()

    @app.post("/v1/ask/stream", responses=_ERRORS, tags=["ask"], response_class=StreamingResponse,
              summary="The events of `codeloupe ask --json` as server-sent events, the last one `done`")
    async def ask_stream(body: AskBody, request: Request) -> StreamingResponse:
        run, notes = await start_ask(request, body)
        return _ClosingStream(_sse(events_until_hangup(request, run), notes), media_type="text/event-stream",
                              headers={"cache-control": "no-store", "x-accel-buffering": "no"})

    @app.get("/v1/status", tags=["health"], summary="Index health of every served workspace")
    def status() -> dict[str, Any]:
        pool.relist()  # on a worker thread (a sync handler): when due, the shared index's repositories as they are
        with pool.held(pool.all) as warms:
            return {"ready": pool.ready, "workspaces": [
                {**dataclasses.asdict(w.ws.status()), "ready": w.ready, "last_error": w.last_error,
                 "building": w.building_note()} for w in warms]}

    @app.get("/v1/languages", tags=["health"], response_model=list[str],
             summary="The languages this build parses")
    def languages() -> list[str]:
        from codeloupe.api import available_languages

        return available_languages()

    # The probes are coroutines: a sync handler waits for one of the threadpool's 40 threads, which slow calls
    # (asks waiting on the model, slow searches of a big index) can all hold, and a liveness probe
    # timing out then gets a working server restarted (in the middle of its first index, over and over).
    @app.get("/healthz", tags=["health"], summary="Liveness: the process answers")
    async def healthz() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/readyz", tags=["health"],
             summary="Readiness: 200 once every workspace's lexical lanes answer and its index can be read",
             responses={503: {"model": Error}})
    async def readyz() -> JSONResponse:
        # A check is started when one is due and its answer waited for a moment, on this loop and not a thread of
        # the pool (a full pool must not hold a probe): a probe answered with the check before it was one probe
        # behind the database (200 just after it went away, 503 seconds after it came back).
        pool.unreadable()
        waited = 0.0
        while pool.checking_readable and waited < READY_WAIT_S:
            await asyncio.sleep(READY_POLL_S)
            waited += READY_POLL_S
        if unreadable := pool.last_unreadable:
            return JSONResponse({"error": unreadable}, status_code=503)
        if pool.ready:
            return JSONResponse({"ready": True})
        return JSONResponse({"error": "indexing"}, status_code=503)

    @app.get("/", include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(_asset("index.html"), headers={"content-security-policy": _PAGE_CSP})

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name not in _STATIC:  # a fixed list: nothing else on disk is reachable here
            return JSONResponse({"error": "not found"}, status_code=404)
        text = map_asset(name) if name in MAP_ASSETS else _asset(name)
        return Response(text, media_type=_STATIC[name], headers={"content-security-policy": _PAGE_CSP})

    @app.get("/graph", include_in_schema=False)
    def graph_page() -> HTMLResponse:
        # The map's shell: its script fetches `/v1/graph` (for the workspace `?root=` names) with the page's token.
        shell = render_html_shell("/static/map.css", ["/static/api.js", "/static/visible.js", "/static/graph.js"])
        return HTMLResponse(shell, headers={"content-security-policy": _PAGE_CSP})

    for index, server in enumerate(mcp_servers):
        # The SDK's Host check is off: the guard applies one rule to every route, MCP included.
        from mcp.server.transport_security import TransportSecuritySettings

        sub = server.streamable_http_app(
            streamable_http_path=mcp_path(index),
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        app.router.routes.extend(sub.routes)

    @app.middleware("http")
    async def headers(request: Request, call_next):
        response = await call_next(request)
        response.headers.setdefault("x-content-type-options", "nosniff")
        response.headers.setdefault("referrer-policy", "no-referrer")
        return response

    if guard.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=guard.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["authorization", "content-type"])
    app.add_middleware(Guard, config=guard)
    return app


async def _known_parameters(request: Request) -> None:
    """Refuse a query parameter the endpoint does not take, naming it and those it takes (MCP's words for an
    argument, `not_taken`): one was ignored, so a typo (`?limt=5`) answered as if the parameter were absent.
    The pages (`/`, `/graph`) and their files are left alone: their scripts read the page's own address. So are
    the health probes, which take no parameter: a load balancer or a monitor adds its own (a cache buster), and a
    probe refused for it read as a server down.
    A coroutine: a plain function would run on the worker threads, which slow calls can all hold, and every
    request (a probe's too) waited for one."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not route.include_in_schema or route.path in PROBES:
        return
    params = route.dependant.query_params
    unknown = list(dict.fromkeys(name for name in request.query_params if name not in {p.alias for p in params}))
    if unknown:
        taken = [param.alias for param in params if not param.field_info.deprecated]  # MCP's names, not HTTP's older
        body = " (its JSON body carries its arguments)" if route.dependant.body_params else ""
        raise StarletteHTTPException(422, not_taken(f"{request.method} {route.path}", unknown, taken, "parameter") + body)


def _one_name(name: str, value: T | None, older: str, older_value: T | None) -> T | None:
    """The value of a parameter sent under its name or under HTTP's earlier one; both sent: refused, where one
    would be dropped without a word."""
    if value is not None and older_value is not None:
        raise InvalidArgument(older, f"is HTTP's earlier name of `{name}`: send `{name}` alone")
    return older_value if value is None else value


def _one_ranking(repo: str | None, scope: str) -> None:
    """Refuse what names one repository beside `repos` (MCP refuses `scope` so): neither can apply to a ranking
    across several."""
    if scope:
        raise InvalidArgument("scope", "is a path inside one repository: not with `repos`")
    if repo:
        raise InvalidArgument("repo", "names one repository to search: not with `repos`")


def _query_text(query: str | None, q: str | None) -> str:
    """The query sent as `query` (MCP's name) or as `q`, refused blank (`check_query`) or missing, naming the
    parameter sent, before any wait for a first index: no index would answer it."""
    text = _one_name("query", query, "q", q)
    if text is None:
        raise InvalidArgument("query", "is required")
    check_query(text, "query" if query is not None else "q")
    return text


def _malformed(request: Request, errors: Sequence[dict[str, Any]]) -> str:
    """A malformed request in one line, as MCP words a tool call's refused arguments (`argument_problems`): each
    parameter or body field named with the rule it breaks, no value echoed; the fields a JSON body does not take,
    named with those it does, as the query parameters an endpoint does not take are (`not_taken`). FastAPI
    answered `{"detail": [...]}`, pydantic's report, where every other refusal is `{"error": ...}`."""
    unknown = [str(error["loc"][-1]) for error in errors if error["type"] == "extra_forbidden"]
    said = [argument_problems([{**error, "loc": error["loc"][1:]}  # less FastAPI's `query` or `body`
                               for error in errors if error["type"] != "extra_forbidden"], "the JSON body")]
    route = request.scope.get("route")
    if unknown and isinstance(route, APIRoute) and route.body_field is not None:
        fields = [name for name, field in route.body_field.field_info.annotation.model_fields.items()
                  if field.json_schema_extra is not OLDER_FIELD]  # MCP's names, not HTTP's older
        said.append(not_taken(f"the JSON body of {request.method} {route.path}", unknown, fields, "field"))
    return "; ".join(part for part in said if part)


def _search(warm: WarmWorkspace, query: str, scope: str, mode: str, limit: int) -> dict[str, Any]:
    return dataclasses.asdict(warm.search(query, scope=scope, mode=mode, limit=limit))


def _doc_hit(hit) -> DocHit:
    best = hit.chunks[0]
    snippet = best.snippet
    return DocHit(path=hit.path, title=best.breadcrumb.split(" > ")[-1], start_line=best.start_line,
                  end_line=best.end_line, anchor_line=snippet.anchor_line if snippet else best.start_line,
                  text=snippet.text if snippet else best.text, score=hit.score)


class _ClosingStream(StreamingResponse):
    """A stream whose events are closed as soon as it ends, however it ends: Starlette leaves a stream its client
    hung up on suspended, for the collector to close some time later (here: an ask's run, and what it holds)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]


async def _sse(events: AsyncIterator[AskEvent], notes: list[str]) -> AsyncIterator[str]:
    """Each event as one SSE message whose data is the line `codeloupe ask --json` prints (the `done` bundle with
    the serving notes too)."""
    async with aclosing(events):
        async for event in events:
            yield f"data: {json.dumps(noted_event(event, notes).to_dict(), default=str)}\n\n"


def _asset(name: str) -> str:
    return resources.files("codeloupe_web").joinpath(f"static/{name}").read_text(encoding="utf-8")

