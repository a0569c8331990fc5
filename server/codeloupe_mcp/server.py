"""The MCP server: a lean tool surface over one warm workspace, and its files as resources.

Every tool description costs the calling agent context on every turn, so there are few tools, each saying
when it beats grep. Every answer fits a byte budget and says so when it cuts. Engine refusals (a path
outside the workspace, an unknown symbol, a query too long) come back as tool errors, never crashes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import (
    ResourceError,
    ResourceNotFoundError,
    ToolError,
    UnexpectedResourceError,
    UnexpectedToolError,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, ErrorData, Tool
from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError

from codeloupe.api import (
    MAX_LOCATE,
    MAX_QUERY_CHARS,
    MAX_TOUR_ENTRY_POINTS,
    MAX_TOUR_NAMES,
    TOUR_ENTRY_POINTS,
    TOUR_NAMES,
    GraphFolder,
    GraphRequest,
    IndexStopped,
    StoreError,
    UnreadableFile,
    WorkspaceError,
    check_locate_text,
    check_query,
    check_scope,
    folder_sections,
    render_text,
    tour_counts,
)
from codeloupe.types import elided, one_line, package_version, visible
from codeloupe_serving import first_index
from codeloupe_serving.refusals import WORKSPACE_CLOSED, argument_problems, not_taken
from codeloupe_serving.warm import WarmWorkspace, WarmWorkspaces

from . import sized

log = logging.getLogger("codeloupe_mcp.server")

T = TypeVar("T")


TOUR_DESCRIPTION = ("where to start reading: the strongest entry points (counting the rest), then the names most "
                    "files mention")

INSTRUCTIONS = (
    "codeloupe keeps a warm search index of this workspace (BM25 + embeddings + symbols, fused by rank; no "
    "model in the search path). Use `search` first for any question about where or how something is done: it "
    "returns the files that matter ranked and complete in one call, which grep cannot. Use `locate` for an "
    "exact string or identifier, `expand` to read a span or a definition, `graph` for who imports or calls a "
    "file. Code is shown as read from disk when indexed; files changed on disk are indexed again before a call "
    "(at most once a second)."
)


def _searchable(text: str, info: ValidationInfo) -> str:
    """A query or question `check_query` takes: refused as the tool's arguments are, before any wait."""
    check_query(text, info.field_name or "query")
    return text


def _not_a_truth_value(value: Any) -> Any:
    """A number argument refuses JSON's true and false, as its schema (`integer`) does: pydantic reads them as 1
    and 0, so `start_line: true, end_line: true` answered line 1."""
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


Whole = BeforeValidator(_not_a_truth_value)  # of every number argument
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS,
                             description="a question, an identifier, or a pasted bug report / traceback"),
                  AfterValidator(_searchable)]
MaxBytes = Annotated[int, Field(ge=sized.MIN_BUDGET_BYTES, le=sized.MAX_BUDGET_BYTES,
                                description="size budget of the answer in bytes; the answer says what it cut"), Whole]
MAX_PATH_CHARS = 4096  # of a path a tool or the file resource takes
RelPath = Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS,
                               description="a file path relative to the workspace root")]
Flat = Annotated[bool, Field(description="ranked chunks as JSON")]


def _scoped(scope: str) -> str:
    """A `scope` the call sent (the default, left out, is never validated): refused blank (`check_scope`)."""
    check_scope(scope)
    return scope


Scope = Annotated[str, Field(max_length=MAX_PATH_CHARS, description="only under this sub-path"),
                  AfterValidator(_scoped)]
Mode = Annotated[Literal["code", "docs", "both"], Field(
    description="code (the default), docs (documentation pages only), or both")]
AskMode = Annotated[Literal["code", "docs"], Field(description="code (the default), or docs (documentation pages "
                                                                "only)")]
Limit = Annotated[int, Field(ge=1, le=50, description="files ranked with their code; every other candidate is "
                                                      "still listed as a one-line map"), Whole]
Repos = Annotated[list[Annotated[str, Field(max_length=4096)]] | None, Field(
    max_length=1000, description="search these served repositories as one ranking instead (['*']: every one); "
                                 "each file then names its repository. Of more than 8 repositories of a shared "
                                 "index, the 8 whose chunks rank first are searched in full: the bundle's notes "
                                 "name them")]

StartLine = Annotated[int | None, Field(ge=1, description="first line (1-based)"), Whole]
EndLine = Annotated[int | None, Field(ge=1, description="last line, inclusive"), Whole]
SymbolName = Annotated[str, Field(max_length=512, description="a definition: `name` or `Class.method`")]
AnchorLine = Annotated[int | None, Field(ge=1, description="a line: the definition around it"), Whole]
GraphNode = Annotated[str, Field(max_length=1000, description="a file, a folder or a concept (a name in file names "
                                                               "and definitions); neither this nor a route: the map")]
RouteSource = Annotated[str, Field(max_length=1000, description="a route's first file or concept, with `target`")]
RouteTarget = Annotated[str, Field(max_length=1000, description="a route's last file or concept, with `source`")]
LocateText = Annotated[str, Field(min_length=1, max_length=1000,
                                  description="the exact text to find: one line, case-sensitive")]
Identifier = Annotated[bool, Field(description="whole identifiers only (`get` does not match `getUser`)")]
LocateLimit = Annotated[int, Field(ge=1, le=MAX_LOCATE, description="locations listed; the rest are counted"), Whole]
Repo = Annotated[str, Field(max_length=4096, description="the served repository the file is in, as a search "
                                                        "across repositories names it (`NAME:path`); default: this "
                                                        "one")]

SEARCH_DESCRIPTION = (
    "Semantic + lexical code search over the whole workspace: the ranked, complete set of files that answer a "
    "question (CORE files with their matching code in full, every other candidate as a one-line map with its "
    "best lines). Use it INSTEAD of grep/find for questions (how is X done, where is Y handled) and for pasted "
    "bug reports or tracebacks: one call replaces several grep rounds. `flat` gives ranked chunks as JSON (path, "
    "lines, anchor_line = best-matching line, text, truncated), then the other candidates' best lines (`tail`).")

EXPAND_DESCRIPTION = (
    "Read code verbatim from disk: a line range of an indexed file, or (not with a range) a definition by name "
    "(`symbol`, qualified like `Class.method` when ambiguous) or the definition around an `anchor_line` (e.g. a "
    "search hit's anchor). Use it instead of cat/sed to read exactly the function you need.")


GRAPH_DESCRIPTION = (
    "The import/call graph between files. `node`: one file or concept with what it uses, what uses it (with the "
    "carrying symbols and lines) and files that read alike; a folder: its files, their edges across it and their "
    "communities. `source`+`target`: the route between two concepts, each hop naming its symbols. Neither: the "
    "map (communities, hub files). Use it to find callers and dependents across files instead of grepping for "
    "imports.")


class _Server(MCPServer):
    """Arguments a tool's schema refuses are answered in plain words, each argument named with the rule it breaks
    (`argument_problems`): the SDK answered with pydantic's report, its arguments model's name, the value sent
    (a 20,000-character query whole) and a link to pydantic's documentation. An argument a tool does not take is
    refused, naming those it takes: the SDK dropped it, so that `expand` with HTTP's `start` and `end` answered the
    whole file as if asked for it; each tool's schema says so (`additionalProperties: false`). A resource error
    names its URI cut on one line (`elided`), in its message and its data: the SDK named it whole in both, so a
    100 KB URI came back twice, a line break in it breaking the message's line. A query parameter a resource
    template does not take is refused, naming those it takes (`_unknown_parameters`): the SDK dropped it, so that
    `codeloupe://tour?entry_pionts=100` answered the default 30 entry points as if asked for them."""

    async def list_tools(self) -> list[Tool]:
        return [tool.model_copy(update={"input_schema": {**tool.input_schema, "additionalProperties": False}})
                for tool in await super().list_tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        _CALL.set(context)  # this call's task only: its wait for a first index reports progress through it
        taken = next((list(tool.input_schema.get("properties", {}))
                      for tool in await super().list_tools() if tool.name == name), None)
        unknown = sorted(set(arguments or {}) - set(taken or ()))
        if taken is not None and unknown:
            raise ToolError(f"Error executing tool {name}: {not_taken(name, unknown, taken)}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            said = argument_problems(exc.__cause__.errors(include_url=False), "`arguments`")
            raise ToolError(f"Error executing tool {name}: {said}") from exc.__cause__

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        _CALL.set(context)  # as a tool call's: the tour waits for a first index too
        try:
            await self._unknown_parameters(str(uri))
            return await super().read_resource(uri, context)
        except ResourceError as exc:
            shown = elided(str(uri))
            if isinstance(exc, UnexpectedResourceError):  # a fault of ours, logged as the SDK logs it
                log.exception("Resource %r raised an unexpected exception", shown)
            code = INVALID_PARAMS if isinstance(exc, ResourceNotFoundError) else INTERNAL_ERROR
            raise MCPError(code=code, message=str(exc).replace(str(uri), shown), data={"uri": shown}) from exc

    async def _unknown_parameters(self, uri: str) -> None:
        """Refuse (as a resource that is not there, `-32602`) the query parameters of `uri` that the template it
        matches does not take, as HTTP refuses an endpoint's (`not_taken`)."""
        before, _, query = uri.partition("#")[0].partition("?")
        if not query:
            return
        for template in await self.list_resource_templates():
            parsed = UriTemplate.parse(template.uri_template)
            taken = parsed.query_variable_names
            if not taken or parsed.match(uri) is None:
                continue
            unknown = sorted({pair.partition("=")[0] for pair in query.split("&")} - taken - {""})
            if unknown:
                raise ResourceNotFoundError(not_taken(elided(before), unknown,
                                                      [name for name in parsed.variable_names if name in taken],
                                                      noun="parameter"))
            return


# How the SDK refuses a request (other than `ping`) before `initialize` (`mcp.server.runner`, the SDK pinned in
# constraints.txt): a pydantic report's words with empty data, which told the client nothing of what it missed.
_NOT_INITIALISED = ErrorData(code=INVALID_PARAMS, message="Invalid request parameters", data="")


async def _initialised_first(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """A request refused for coming before `initialize` says so and what to send, its code kept (`-32602`, as the
    SDK answers it): the bare "Invalid request parameters" read as a mistake in the call's arguments."""
    try:
        return await call_next(ctx)
    except MCPError as exc:
        if exc.error != _NOT_INITIALISED or ctx.session.client_params is not None:
            raise
        raise MCPError(code=INVALID_PARAMS, message=(
            f"the session is not initialised: send `initialize` (then `notifications/initialized`) before "
            f"`{ctx.method}`"), data={"method": ctx.method}) from exc


def build_server(warm: WarmWorkspace, pool: WarmWorkspaces | None = None) -> MCPServer:
    """The MCP server for one warm workspace (the caller runs it over stdio or streamable HTTP); `pool`: every
    workspace the process serves, which `search`'s `repos` may name."""
    server = _Server("codeloupe", instructions=INSTRUCTIONS, version=package_version(), middleware=[_initialised_first])

    def here() -> WarmWorkspace:
        # `warm`, or under `serve --store` the repository served in its place once indexed again under its name:
        # bound to `warm` for good, every call answered 'no longer served' until a restart.
        return warm if pool is None else pool.serving(warm)

    async def served() -> WarmWorkspace:
        """`here()`, the repositories listed again first when due (`WarmWorkspaces.relisted`), as every HTTP route
        lists them: a client of MCP alone had them never listed again, its reads failing as dropped for good."""
        if pool is not None:
            await pool.relisted()
        return here()

    indexed = _after_first_index(served)

    async def status_now() -> str:
        """The status of `served()`, the repositories listed again first when due as HTTP's /v1/status lists them:
        an agent polling MCP's status alone was answered from the repository as served at the last listing some
        other call made (for one dropped and indexed again, 'no longer served'). Not after the first index: the
        status says how that goes."""
        warm_now = await served()
        return await anyio.to_thread.run_sync(_status_json, warm_now, abandon_on_cancel=True)

    def search(query: Query, flat: Flat = False, scope: Scope = "", mode: Mode = "code", limit: Limit = 12,
               max_bytes: MaxBytes = sized.DEFAULT_BUDGET_BYTES) -> str:
        with _refusals():
            bundle = here().search(query, scope=scope, mode=mode, limit=limit)
        return sized.search_answer(bundle, max_bytes, flat=flat)

    async def search_served(query: Query, flat: Flat = False, scope: Scope = "", mode: Mode = "code",
                            limit: Limit = 12, max_bytes: MaxBytes = sized.DEFAULT_BUDGET_BYTES,
                            repos: Repos = None) -> str:
        if not repos:
            return await when_indexed([await served()], lambda: search(query, flat, scope, mode, limit, max_bytes))
        if pool is not None:
            await pool.relisted()
        with _refusals():
            warms = _repositories(pool, repos, scope)
        return await when_indexed(warms, lambda: _search_across(pool, repos, query, flat, mode, limit, max_bytes))

    # `repos` only where there are several repositories to name: a parameter that can never work costs the agent
    # its description on every turn (and a failed call).
    several = pool is not None and len(pool.all) > 1
    server.add_tool(search_served if several else indexed(search), name="search", structured_output=False,
                    description=SEARCH_DESCRIPTION)

    def expand(path: RelPath, start_line: StartLine = None, end_line: EndLine = None, symbol: SymbolName = "",
               anchor_line: AnchorLine = None, max_bytes: MaxBytes = sized.DEFAULT_BUDGET_BYTES) -> str:
        return _expansion_text(here(), path, start_line, end_line, symbol, anchor_line, max_bytes)

    async def in_repo(repo: str, answer: Callable[[WarmWorkspace], str]) -> str:
        """`answer` for the served repository `repo` names (a search across repositories' `NAME` of `NAME:path`),
        or for this one when it names none."""
        if pool is None or not repo:
            return await when_indexed([await served()], lambda: answer(here()))
        await pool.relisted()
        with _refusals():
            warm_there = pool.get(repo)
        return await when_indexed([warm_there], lambda: answer(warm_there))

    async def expand_in(path: RelPath, start_line: StartLine = None, end_line: EndLine = None,
                        symbol: SymbolName = "", anchor_line: AnchorLine = None,
                        max_bytes: MaxBytes = sized.DEFAULT_BUDGET_BYTES, repo: Repo = "") -> str:
        return await in_repo(repo, lambda there: _expansion_text(there, path, start_line, end_line, symbol,
                                                                 anchor_line, max_bytes))

    # `repo` as `repos`: only where a search across repositories can name a file of another one.
    server.add_tool(expand_in if several else indexed(expand), name="expand", structured_output=False,
                    description=EXPAND_DESCRIPTION)

    @server.tool(structured_output=False, description=(
        "Exact, case-sensitive occurrences of a string across every indexed file, with path:line:column, the "
        "line and the definition holding it. Faster than grep and skips ignored, vendored and generated files. "
        "`identifier=true` for whole identifiers only. Use `search` instead when you do not know the exact "
        "text."))
    async def locate(text: LocateText, identifier: Identifier = False, limit: LocateLimit = 100,
                     max_bytes: MaxBytes = sized.DEFAULT_BUDGET_BYTES) -> str:
        with _refusals():
            check_locate_text(text)  # refused before the wait for the first index, as by HTTP

        def located() -> str:
            with _refusals():
                found, notes = here().noted(lambda ws: ws.locate(text, identifier=identifier, limit=limit))
            return sized.located_text(found, max_bytes, notes)
        return await when_indexed([await served()], located)

    async def graph_in(node: GraphNode = "", source: RouteSource = "", target: RouteTarget = "",
                       max_bytes: MaxBytes = sized.DEFAULT_BUDGET_BYTES, repo: Repo = "") -> str:
        with _refusals():
            asked = GraphRequest(node, source, target)  # refused before the wait for the first index, as by HTTP
        return await in_repo(repo, lambda there: _graph_text(there, asked, max_bytes))

    async def graph(node: GraphNode = "", source: RouteSource = "", target: RouteTarget = "",
                    max_bytes: MaxBytes = sized.DEFAULT_BUDGET_BYTES) -> str:
        return await graph_in(node, source, target, max_bytes)

    # `repo` as for `expand`: a file a search across repositories found in another one has its graph there.
    server.add_tool(graph_in if several else graph, name="graph", structured_output=False,
                    description=GRAPH_DESCRIPTION)

    @server.tool(structured_output=False, description=(
        "Index health: files, chunks, languages, which search lanes are ready (vectors computed), the files "
        "skipped for their content by reason (generated, minified, too large, binary), the files a chunk strategy "
        "or the chunker failed on, the last refresh error if any. Call it when results look incomplete."))
    async def status() -> str:
        with _refusals():
            return await status_now()

    if _chat_configured(warm):
        @server.tool(structured_output=False, description=(
            "A narrated walkthrough of how the code answers a question, by the user's configured chat model; "
            "every code span in it is spliced verbatim from disk (the model can only cite). Slower than "
            "`search` (a model call); prefer `search` unless a prose explanation across files is needed."))
        async def ask(question: Query, mode: AskMode = "code",
                      max_bytes: MaxBytes = sized.DEFAULT_BUDGET_BYTES) -> str:
            # On worker threads the call can leave: a client that cancels the call (or goes) has its model call
            # cut off, where a thread the call waited for kept waiting on the model up to the chat timeout.
            with _refusals():
                run, notes = await when_indexed([await served()], lambda: here().start_ask(question, mode=mode))
                try:
                    result = await anyio.to_thread.run_sync(run.result, abandon_on_cancel=True)
                except anyio.get_cancelled_exc_class():
                    run.cancel()  # the thread left behind returns as soon as its model call is cut off
                    raise
            if result is None:
                raise ToolError("ask: the walkthrough ended without a result")
            if result.fallback is not None:  # why, as the first of the bundle's notes (a long one cut to its start)
                said = [f"no walkthrough: {result.fallback}; the retrieved files follow", *result.bundle.notes, *notes]
                return sized.bundle_text(dataclasses.replace(result.bundle, notes=said), max_bytes)
            return sized.plain_text(result.answer, max_bytes, "answer", notes)

    @server.resource("codeloupe://status", name="status", mime_type="application/json",
                     description="index health of the served workspace (as the `status` tool)")
    async def status_resource() -> str:
        with _resource_refusals():
            return await status_now()

    @server.resource("codeloupe://tour", name="tour", mime_type="application/json", description=TOUR_DESCRIPTION)
    async def tour_resource() -> str:
        return await tour_listing()

    # The same tour listing more (or fewer) entry points or names, as `/v1/tour` takes them: a template beside
    # the listed resource, which a client that lists resources (not templates) still shows.
    @server.resource("codeloupe://tour{?entry_points,limit}", name="tour_entry_points", mime_type="application/json",
                     description=f"{TOUR_DESCRIPTION}; `entry_points`: how many entry points to list "
                                 f"(1-{MAX_TOUR_ENTRY_POINTS}, default {TOUR_ENTRY_POINTS}); `limit`: how many "
                                 f"names (1-{MAX_TOUR_NAMES}, default {TOUR_NAMES})")
    async def tour_listing(entry_points: str = "", limit: str = "") -> str:
        count = _count(entry_points, "entry_points", TOUR_ENTRY_POINTS)
        names = _count(limit, "limit", TOUR_NAMES)
        with _resource_refusals():
            names, count = tour_counts(names, count)  # out of range (not a number: `_count`): refused before the wait
            tour = await when_indexed([await served()], lambda: here().tour(limit=names, entry_points=count))
        return json.dumps(tour, indent=1)

    @server.resource("codeloupe://file/{+path}", name="file", mime_type="text/plain",
                     description=f"an indexed file of the workspace, verbatim from disk (path relative to the root); "
                                 f"one over {sized.DEFAULT_BUDGET_BYTES:,} bytes is cut at a line, a last line "
                                 f"saying how to read on with `expand`")
    @indexed
    def file_resource(path: str) -> str:
        if len(path) > MAX_PATH_CHARS:  # as `expand` refuses it: the engine's refusal would echo it whole
            raise ResourceNotFoundError(f"`path` must be at most {MAX_PATH_CHARS:,} characters, got {len(path):,}")
        # The text is the file's alone (a note in it would read as part of the file): while the first index
        # runs, only a refusal says so (`noted`); a file over a tool's default budget is cut at a line, and only
        # then does a last line say so and how to read on (`sized.file_text`).
        # Outside the workspace, not indexed, gone: no such resource (-32602); there but unreadable: -32603.
        with _resource_refusals():
            expansion, _ = here().noted(lambda ws: ws.expand(path))
        return sized.file_text(expansion)

    return server


def _count(text: str, name: str, default: int) -> int:
    """A resource's count parameter, which arrives as text: `default` when not given."""
    if not text:
        return default
    digits = text.removeprefix("-")  # a negative count is a number out of range, refused as such (`tour_counts`)
    if not (digits.isascii() and digits.isdigit()) or len(digits) > _COUNT_DIGITS:
        raise ResourceNotFoundError(f"{name} must be a whole number, got {text[:_COUNT_DIGITS + 1]!r}")
    return int(text)


_COUNT_DIGITS = 9  # longer is no count a resource takes (and `int` refuses a string of over 4,300 digits)


# The tool call or resource read running in this task (the SDK's request context), which a wait for a first
# index tells how far the index got, where the client asked for progress.
_CALL: ContextVar[Any] = ContextVar("codeloupe_mcp_call", default=None)


async def when_indexed(warms: list[WarmWorkspace], call: Callable[[], T]) -> T:
    """`first_index.when_indexed`, telling the client of the tool call waiting (`_CALL`) how far the first index
    got as it waits (`notifications/progress`, where the call carried a progress token; nothing otherwise): an
    agent whose call waited for minutes on a large repository's first index saw nothing until the answer, and
    could take the call for hung."""
    context = _CALL.get()

    async def told(done: int, total: int | None, note: str) -> None:
        await context.report_progress(done, total, note)

    return await first_index.when_indexed(warms, call, told=told if context is not None else None)


def _after_first_index(
        served: Callable[[], Awaitable[WarmWorkspace]]) -> Callable[[Callable[..., T]], Callable[..., Awaitable[T]]]:
    """A sync tool or resource as an async one (the same parameters, which the SDK passes by name) that runs it
    `when_indexed` for the workspace `served()` answers. Sync tools ran on worker threads that waited for a first
    index there, and kept waiting after their client cancelled: 40 such calls took every thread of the process
    (under `serve`, the HTTP API's too). A call the client cancels now leaves at once."""
    def wrap(body: Callable[..., T]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(body)
        async def waited(**arguments: Any) -> T:
            return await when_indexed([await served()], lambda: body(**arguments))
        return waited
    return wrap


def _expansion_text(warm: WarmWorkspace, path: str, start_line: int | None, end_line: int | None, symbol: str,
                    anchor_line: int | None, max_bytes: int) -> str:
    """The lines `expand` asked for of a file of `warm`, within `max_bytes`."""
    with _refusals():
        found, notes = warm.noted(lambda ws: ws.expand(path, start_line, end_line, symbol=symbol, line=anchor_line))
    return sized.expansion_text(found, max_bytes, notes)


def _graph_text(warm: WarmWorkspace, asked: GraphRequest, max_bytes: int) -> str:
    """The answer to a graph request as text within `max_bytes`, saying what to ask for instead when cut."""
    with _refusals():
        result, notes = warm.noted(lambda ws: ws.graph(asked))
    # Its names shown as the CLI's `graph` shows them (`visible`; a line break in one is escaped already).
    if isinstance(result, GraphFolder):
        title, sections = folder_sections(result)
        shown = [(heading, [visible(line) for line in lines]) for heading, lines in sections]
        return sized.sectioned_text(visible(title), shown, max_bytes, notes,
                                    "raise max_bytes, or ask for one of its subfolders or files with `node`")
    return sized.plain_text(visible(render_text(result)), max_bytes, "graph", notes,
                            "raise max_bytes, or ask for one file with `node`" if not asked.node and not asked.source
                            else "raise max_bytes")


@contextmanager
def _refusals() -> Iterator[None]:
    """Engine refusals become tool errors with the engine's message (the agent can correct its call), and so does
    a shared index that cannot be read (HTTP's 503; the call may succeed later). On one line (`one_line`): the
    message names the file asked for, whose name may hold a line break that would forge lines of the answer. A
    workspace closed under the call says so (the SDK answered "Error executing tool search" alone)."""
    try:
        yield
    except ToolError:
        raise
    except (WorkspaceError, ValueError, OSError, StoreError) as exc:
        raise ToolError(one_line(str(exc))) from exc
    except IndexStopped as exc:
        raise ToolError(WORKSPACE_CLOSED) from exc


@contextmanager
def _resource_refusals() -> Iterator[None]:
    """Engine refusals become resource errors with the engine's message, `-32602` as a refused tool argument is
    (the SDK answers any other exception with a generic error that names only the URI); a failed read (a file
    that is there but cannot be read: a FIFO, no permission; or a shared index that cannot be read: HTTP's 503),
    `-32603` with its message."""
    try:
        yield
    except ResourceError:
        raise
    except (UnreadableFile, OSError, StoreError) as exc:
        raise ResourceError(one_line(str(exc))) from exc
    except (WorkspaceError, ValueError) as exc:
        raise ResourceNotFoundError(one_line(str(exc))) from exc
    except IndexStopped as exc:
        raise ResourceError(WORKSPACE_CLOSED) from exc


def _search_across(pool: WarmWorkspaces, repos: list[str], query: str, flat: bool, mode: str, limit: int,
                   max_bytes: int) -> str:
    """The answer of one ranking across the workspaces `repos` names (`WarmWorkspaces.search_across`) within
    `max_bytes`."""
    with _refusals():
        bundle = pool.search_across(repos, query, mode=mode, limit=limit)
    return sized.search_answer(bundle, max_bytes, flat=flat)


def _repositories(pool: WarmWorkspaces | None, repos: list[str], scope: str) -> list[WarmWorkspace]:
    """The served workspaces `repos` names for a search across them."""
    if pool is None:
        raise WorkspaceError("`repos` needs a server of several repositories (`codeloupe serve --store URL`)")
    if scope:
        raise WorkspaceError("`scope` is a path inside one repository: not with `repos`")
    return pool.select(repos)


def _chat_configured(warm: WarmWorkspace) -> bool:
    settings = warm.ws.settings
    return bool(settings.chat_base_url and settings.chat_model)


_PROBLEMS_LISTED = 50  # files a strategy or the chunker failed on, listed by `status` (the rest counted)


def _status_json(warm: WarmWorkspace) -> str:
    with warm.held() as ws:
        status = dataclasses.asdict(ws.status())
        problems = ws.chunking_problems()
    status.update(ready=warm.ready, last_error=warm.last_error, building=warm.building_note(),
                  chunking_problems=[dataclasses.asdict(p) for p in problems[:_PROBLEMS_LISTED]],
                  chunking_problems_not_listed=max(len(problems) - _PROBLEMS_LISTED, 0))
    return json.dumps(status, indent=1)
