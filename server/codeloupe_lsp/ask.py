"""`codeloupe/ask`: stream the engine's ask events as progress, answer with the spliced result.

The engine's ask fails open to plain retrieval itself; when it cannot even start (not importable, a fault),
the server answers the same fallback shape with the search bundle. Never an error for a valid query.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from codeloupe.api import MAX_QUERY_CHARS
from codeloupe.types import Revisions
from codeloupe_lsp.convert import JSON, UriAt, ask_event, ask_result, fallback_answer, search_result
from codeloupe_lsp.params import Params
from codeloupe_lsp.server import CodeloupeServer
from codeloupe_lsp.shared import one_target

if TYPE_CHECKING:  # at run time it would import the model client when the server starts
    from codeloupe.api import AskResult, AskRun

log = logging.getLogger("codeloupe_lsp.ask")
METHOD = "codeloupe/ask"
MODES = ("code", "docs", "both")


def register(server: CodeloupeServer) -> None:
    @server.feature(METHOD)
    async def on_ask(ls: CodeloupeServer, raw: Any) -> JSON:
        params = Params(raw, METHOD)
        query = params.text("query", required=True, non_empty=True, max_chars=MAX_QUERY_CHARS)
        mode = params.choice("docs", MODES, "code")
        agents = params.flag("agents", None)
        best = bool(params.flag("best", False))
        token = params.token("workDoneToken")
        target = await one_target(ls, params.text("folderUri"))

        progress = _Progress(ls, token, lambda path, revision: target.uris(Revisions(revision))(path))
        progress.begin(query)
        loop = asyncio.get_running_loop()
        run: AskRun | None = None
        try:
            try:
                # Made on a worker thread (the ask's first call imports the model client), and only then started:
                # a request cancelled before it starts never runs (`AskRun.result`).
                run = await loop.run_in_executor(
                    ls.thread_pool, lambda: target.ws.ask(query, mode=mode, agents=agents, best=best))
                result = await loop.run_in_executor(ls.thread_pool, run.result, progress.threadsafe_report)
                if result is not None:
                    return ask_result(result, target.uris(_revisions(result)))
                reason = "the ask stream ended without a result"
            except asyncio.CancelledError:
                if run is not None:
                    run.cancel()  # the model call in flight is cut off; the response is the cancellation
                raise
            except Exception as exc:
                log.exception("ask failed; answering with the plain bundle")
                reason = f"ask failed: {type(exc).__name__}: {exc}"
            bundle = await ls.engine(target.ws.search, query, mode=mode)
            return fallback_answer(search_result(bundle, target.uris(bundle.revisions())), reason)
        finally:
            progress.end()


def _revisions(result: AskResult) -> Revisions:
    """The revision each file of the answer was read at: its citations' spans, its bundle's files."""
    files = [*((hit.path, hit.revision) for hit in result.bundle.files),
             *((cited.path, cited.revision) for cited in result.citations)]
    return Revisions.of_files(result.bundle.revision, files)


class _Progress:
    """`$/progress` on the client's workDoneToken, one JSON event per report (nothing without a token); `uri_at`
    names the documents of the spans the events cite."""

    def __init__(self, ls: CodeloupeServer, token: str | int | None, uri_at: UriAt) -> None:
        self.ls = ls
        self.token = token
        self.uri_at = uri_at
        self.loop = asyncio.get_running_loop()

    def begin(self, query: str) -> None:
        if self.token is not None:
            self.ls.work_done_progress.begin(self.token, lsp.WorkDoneProgressBegin(
                title="codeloupe: ask", message=query, cancellable=False))

    def threadsafe_report(self, event: Any) -> None:
        if self.token is not None:
            message = json.dumps(ask_event(event, self.uri_at), default=str)
            self.loop.call_soon_threadsafe(self._report, message)

    def _report(self, message: str) -> None:
        assert self.token is not None
        self.ls.work_done_progress.report(self.token, lsp.WorkDoneProgressReport(message=message))

    def end(self) -> None:
        if self.token is not None:
            self.ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd())
