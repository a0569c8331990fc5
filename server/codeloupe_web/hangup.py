"""Asks that stop when their client hangs up.

An ask's events are taken one at a time on the threadpool sync handlers share (40 threads), and a thread
waiting for the model holds its place for as long as the model takes. An ask whose client had gone went on
regardless: a few dozen hang-ups held every thread and the whole server stopped answering. Here a disconnect
cancels the ask (`AskRun.cancel`): its model call is cut off, and the thread returns at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from fastapi import Request
from starlette.concurrency import run_in_threadpool

if TYPE_CHECKING:  # at run time it would import the model client when the server starts
    from codeloupe.api import AskEvent, AskRun


async def events_until_hangup(request: Request, run: AskRun) -> AsyncIterator[AskEvent]:
    """The run's events, each taken on a worker thread, while a watcher cancels the run if the client goes.
    Stopping early (a closed stream, an answer returned) cancels it too: nothing waits on a model for no one."""
    watcher = asyncio.create_task(_cancel_on_hangup(request, run))
    try:
        while (event := await run_in_threadpool(next, run, None)) is not None:
            yield event
    finally:
        watcher.cancel()
        run.cancel()


async def _cancel_on_hangup(request: Request, run: AskRun) -> None:
    # The body is read by now: the next message the server passes on is the disconnect, whenever it comes.
    while (await request.receive())["type"] != "http.disconnect":
        pass
    run.cancel()
