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


# How often a call waiting for a first index tells its client how far the index got (`told`).
TELL_EVERY_S = 1.0

# What a waiting call tells its client: (files indexed so far, files to index or None while they are listed, what
# the answer waits for).
Teller = Callable[[int, "int | None", str], Awaitable[None]]


async def when_indexed(warms: list[WarmWorkspace], call: Callable[[], T], *,
                       gone: Callable[[], Awaitable[None]] | None = None, told: Teller | None = None) -> T:
    """`call()` on a worker thread once the first index of each of `warms` ended (each waited for as `fresh`
    waits, up to `FIRST_INDEX_WAIT_S`, but on the event loop). Cancelled meanwhile, the call leaves at once,
    waiting or running (a running `call` is left to finish on its thread). `gone`: returns when the client went;
    returning before the wait ended, the call is refused with `ClientGone`. `told`: while the call waits, told how
    far the first indexes got as soon as it waits and whenever more files are indexed (`TELL_EVERY_S`), so a
    client that asked for progress sees why its call takes long rather than a call that seems hung."""
    waits = _first_indexes(warms)
    telling = asyncio.ensure_future(_tell(warms, told)) if told is not None else None
    try:
        if gone is None:
            await waits
        else:
            await _unless_gone(waits, gone())
    finally:
        if telling is not None:
            telling.cancel()
    return await anyio.to_thread.run_sync(answer_waited, call, abandon_on_cancel=True)


async def _tell(warms: list[WarmWorkspace], told: Teller) -> None:
    told_done = -1  # a client's progress must grow with each notification: told again only when more are indexed
    while waiting := [warm for warm in warms if not warm.ready]:
        counts = [warm.first_index_counts() for warm in waiting]
        done = sum(count[0] for count in counts if count)
        total = sum(count[1] for count in counts if count) if all(counts) else None
        if done > told_done:
            try:
                await told(done, total, "; ".join(warm.building_note() for warm in waiting))
            except Exception:  # the client went, or takes no progress: the call goes on waiting all the same
                return
            told_done = done
        await asyncio.sleep(TELL_EVERY_S)


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
