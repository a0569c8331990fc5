"""Calls that stop when their client hangs up.

Sync handlers and an ask's steps share one threadpool (40 threads), and a thread waiting (on the model, or on
a workspace's first index) holds its place for as long as the wait takes. A call whose client had gone went on
regardless: a few dozen hang-ups held every thread and the whole server stopped answering. Here a disconnect
cancels an ask (`AskRun.cancel`: its model call is cut off, and the thread returns at once), and a call waiting
for a first index does so on the event loop, holding no thread, and ends there when its client goes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import anyio
from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from codeloupe_serving import first_index
from codeloupe_serving.warm import WarmWorkspace

if TYPE_CHECKING:  # at run time it would import the model client when the server starts
    from codeloupe.api import AskEvent, AskResult, AskRun

T = TypeVar("T")
# nginx's code for "the client closed the request": the answer goes to no one, and says why it was cut short.
CLIENT_CLOSED = 499


async def events_until_hangup(request: Request, run: AskRun) -> AsyncIterator[AskEvent]:
    """The run's events, each taken on a worker thread, while a watcher cancels the run if the client goes.
    Stopping early (a closed stream, an answer returned) cancels it too: nothing waits on a model for no one."""
    async with _cancelled_on_hangup(request, run):
        try:
            while (event := await run_in_threadpool(next, run, None)) is not None:
                yield event
        finally:  # no `next` is in flight here (a cancelled wait for one ends with its thread): the run is closed
            run.close()  # now, not whenever the collector gets to it (as `result_until_hangup` does)


async def result_until_hangup(request: Request, run: AskRun) -> AskResult | None:
    """The run's result (`AskRun.result`, on a worker thread), the run cancelled if the client goes first."""
    async with _cancelled_on_hangup(request, run):
        return await anyio.to_thread.run_sync(run.result, abandon_on_cancel=True)


@asynccontextmanager
async def _cancelled_on_hangup(request: Request, run: AskRun) -> AsyncIterator[None]:
    watcher = asyncio.create_task(_hangup(request))
    watcher.add_done_callback(lambda _: run.cancel())
    try:
        yield
    finally:
        watcher.cancel()
        run.cancel()


async def when_indexed(request: Request, warms: list[WarmWorkspace], answer: Callable[[], T]) -> T:
    """`answer()` once the first indexes of `warms` ended (`codeloupe_serving.first_index.when_indexed`);
    refused with 499 when the client hangs up first."""
    try:
        return await first_index.when_indexed(warms, answer, gone=lambda: _hangup(request))
    except first_index.ClientGone as exc:
        raise HTTPException(CLIENT_CLOSED, "the client hung up while the first index was being built") from exc


async def _hangup(request: Request) -> None:
    # The body is read by now: the next message the server passes on is the disconnect, whenever it comes.
    while (await request.receive())["type"] != "http.disconnect":
        pass
