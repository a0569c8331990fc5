"""CPU-bound work over many items in worker processes, in order, falling back to this process."""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

log = logging.getLogger("codeloupe.parallel")

T = TypeVar("T")

# Starting worker processes costs about half a second; below this many items one process is faster.
POOL_MIN_ITEMS = 200
POOL_MAX_WORKERS = 4
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL_S = 1.0  # where there is no PR_SET_PDEATHSIG: how soon an orphaned worker notices
IN_FLIGHT_PER_WORKER = 32


def map_in_workers(fn: Callable[..., T], rows: Iterable[tuple], count: int, *, what: str) -> Iterator[T]:
    """`fn(*row)` for each of the `count` rows, in order; in a pool of worker processes when there are
    enough rows to pay for starting it. Rows are drawn lazily, a bounded number in flight, so a large input
    (file texts) is never all in memory. `fn` must be a module-level function (it is pickled by name)."""
    rows = iter(rows)
    workers = min(os.cpu_count() or 1, POOL_MAX_WORKERS)
    pending: deque[tuple[tuple, Future]] = deque()
    if count >= POOL_MIN_ITEMS and workers >= 2:
        try:
            with ProcessPoolExecutor(workers, mp_context=pool_context(), initializer=exit_with_parent,
                                     initargs=(os.getpid(),)) as pool:
                for row in rows:
                    pending.append((row, pool.submit(fn, *row)))
                    if len(pending) >= IN_FLIGHT_PER_WORKER * workers:
                        yield pending[0][1].result()
                        pending.popleft()
                while pending:
                    yield pending[0][1].result()
                    pending.popleft()
            return
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            # A worker could not start (a script without a __main__ guard under spawn, no /dev/shm, ...):
            # finish in this process rather than fail.
            log.warning("%s in worker processes failed (%s); continuing in this process", what, exc)
    for row, _ in pending:
        yield fn(*row)
    for row in rows:
        yield fn(*row)


def exit_with_parent(parent_pid: int) -> None:
    """Worker initialiser: end this worker when the process that started it dies, even by `kill -9`.

    Nothing else would: an orphaned worker waits on its task queue forever (~70 MB each). Linux kills it
    through PR_SET_PDEATHSIG; elsewhere a daemon thread watches the parent pid."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
            if os.getppid() != parent_pid:  # the parent died before the signal was armed
                os._exit(1)
            return
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="codeloupe-parent-watch",
                     daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def pool_context() -> multiprocessing.context.BaseContext:
    # fork is cheap and needs no importable __main__, but forking a process that runs other threads (the
    # language server) can deadlock the child on a lock some thread held: those use spawn.
    return multiprocessing.get_context("fork" if threading.active_count() == 1 else "spawn")
