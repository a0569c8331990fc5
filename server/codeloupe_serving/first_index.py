"""Calls answered once their workspaces' first index ended, waiting for it on the event loop.

A call waiting for a first index on a worker thread held the thread for the whole wait (up to
`FIRST_INDEX_WAIT_S`), after its client had gone too: 40 such calls took every thread of the process (MCP's
and the HTTP API's alike under `serve`) and every other call waited behind them. Here the wait holds no thread
and ends when its client goes, as each surface notices that: an MCP call is cancelled (the client's
`notifications/cancelled`), an HTTP request passes its own watch for the client hanging up as `gone`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from .warm import WarmWorkspace, answer_waited

T = TypeVar("T")


class ClientGone(Exception):
    """The client went while its call waited for a first index (`when_indexed`'s `gone` returned first)."""


async def when_indexed(warms: list[WarmWorkspace], call: Callable[[], T], *,
                       gone: Callable[[], Awaitable[None]] | None = None) -> T:
    """`call()` on a worker thread once the first index of each of `warms` ended (each waited for as `fresh`
    waits, up to `FIRST_INDEX_WAIT_S`, but on the event loop). Cancelled meanwhile, the call leaves at once,
    waiting or running (a running `call` is left to finish on its thread). `gone`: returns when the client went;
    returning before the wait ended, the call is refused with `ClientGone`."""
    waits = _first_indexes(warms)
    if gone is None:
        await waits
    else:
        await _unless_gone(waits, gone())
    return await anyio.to_thread.run_sync(answer_waited, call, abandon_on_cancel=True)


async def _first_indexes(warms: list[WarmWorkspace]) -> None:
    for warm in warms:
        await warm.first_index()


async def _unless_gone(waits: Awaitable[None], gone: Awaitable[None]) -> None:
    waiting, watching = asyncio.ensure_future(waits), asyncio.ensure_future(gone)
    try:
        ended, _ = await asyncio.wait({waiting, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # the other one, or both when this call is cancelled: nothing is left waiting for no one
        waiting.cancel()
        watching.cancel()
    if waiting not in ended:
        raise ClientGone("the client went while the first index was being built")
    waiting.result()
