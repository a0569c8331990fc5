"""A workspace strategy run off a process's main thread: in a small worker process of its own, killed when late.

On a main thread an interval timer cuts a late strategy off (`strategies.run_bounded`). On any other thread (the
language server's writer, a served workspace's refreshes) nothing can stop a running call: an abandoned thread
keeps looping with the interpreter lock, and a long call into C (`math.factorial(10**7)`) or an allocation
without bound holds up or exhausts the whole process. So there a workspace strategy runs in one worker process
per process (started on first use, reused for every file after), compiled there from the same trusted source,
with its address space capped; when a file's answer is late the worker is killed, and the next file starts
another.
"""

from __future__ import annotations

import os
import signal
import threading
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from codeloupe.parallel import may_start, pool_context

# How much address space a strategy may add to its worker's own (the worker's imports) before an allocation
# fails: a strategy works on one file's text, so this is far above any honest need.
STRATEGY_MEMORY_BYTES = 512 * 1024 * 1024
_REAP_S = 5.0  # how long a killed worker may take to be reaped

Request = tuple[str, str, str, str, float]  # (source, sha256, origin, text, timeout_s)
Ranges = list[tuple[int, int, str]]


class StrategyProcessError(Exception):
    """The strategy failed in the worker, ran late (the worker was then killed), or no worker could run it."""


class StrategyProcessLate(StrategyProcessError):
    """The strategy gave no answer within its time bound; its worker was killed."""


class _Worker:
    """The worker process and this process's end of the pipe to it."""

    def __init__(self) -> None:
        context = pool_context()  # off the main thread there are other threads, so this is spawn
        if not may_start(context, "chunk strategies"):
            raise StrategyProcessError("not run: off the main thread a strategy runs in a worker process, and "
                                       "this program's main script (no __main__ guard) cannot start one")
        self.connection, child_end = context.Pipe()
        self.process: BaseProcess = context.Process(  # type: ignore[attr-defined]
            target=serve_strategies, args=(child_end, STRATEGY_MEMORY_BYTES),
            name="codeloupe-strategy-worker", daemon=True)
        try:
            self.process.start()
        except OSError as exc:
            raise StrategyProcessError(f"not run: its worker process could not start ({exc})") from exc
        finally:
            child_end.close()

    def call(self, request: Request, timeout_s: float) -> Ranges | None:
        """The ranges, or None when the worker gave no answer within `timeout_s`."""
        try:
            self.connection.send(request)
            if not self.connection.poll(timeout_s):
                return None
            status, value = self.connection.recv()
        except (EOFError, OSError) as exc:  # killed by the system, or crashed
            self.process.join(_REAP_S)
            raise StrategyProcessError(f"its worker process ended (exit code {self.process.exitcode})") from exc
        if status != "ok":
            raise StrategyProcessError(value)
        return value

    def stop(self) -> None:
        self.process.kill()
        self.process.join(_REAP_S)
        self.connection.close()


_worker: _Worker | None = None
_worker_lock = threading.Lock()  # the one worker chunks one file at a time


def run_in_worker(source: str, sha256: str, origin: str, text: str, timeout_s: float) -> Ranges:
    """A workspace strategy's ranges for `text` (each `(start, end, name)`, not yet checked to be a partition),
    computed in the worker process within `timeout_s`; `StrategyProcessError` saying why not."""
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = _Worker()
        worker = _worker
        try:
            ranges = worker.call((source, sha256, origin, text, timeout_s), timeout_s)
        except StrategyProcessError:
            if not worker.process.is_alive():
                worker.stop()
                _worker = None
            raise
        if ranges is None:
            worker.stop()
            _worker = None
            raise StrategyProcessLate(f"ran past its time bound of {timeout_s:g}s (its worker process was "
                                       "stopped)")
        return ranges


def serve_strategies(connection: Connection, memory_bytes: int) -> None:
    """The worker's loop: compile each strategy once (by its sha256), answer one file at a time.

    Should the parent die, the worker ends too: waiting for a file, its pipe reads end-of-file; on one, an alarm
    (left to its default action, which ends the process even inside a call into C) goes off a little after the
    parent would have killed it. (`parallel.exit_with_parent`'s PR_SET_PDEATHSIG would not do: it fires when
    the *thread* that started the worker ends, and a served workspace's refresh threads come and go.)"""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    # Imported here, in the worker: strategies imports this module. Before the cap, which is on top of them.
    from codeloupe.chunk.lines import split_lines
    from codeloupe.chunk.strategies import StrategyError, compile_strategy, ranges_of

    _cap_address_space(memory_bytes)
    compiled = {}
    while True:
        try:
            source, sha256, origin, text, timeout_s = connection.recv()
        except EOFError:  # the parent closed its end, or died
            return
        signal.setitimer(signal.ITIMER_REAL, timeout_s + _REAP_S)
        try:
            if sha256 not in compiled:
                compiled[sha256] = compile_strategy(source, origin)[1]
            answer = ("ok", ranges_of(compiled[sha256](text, split_lines(text))))
        except MemoryError:
            answer = ("error", f"ran out of memory (a strategy may use {memory_bytes // 2**20} MiB)")
        except StrategyError as exc:
            answer = ("error", str(exc))
        except (Exception, RecursionError) as exc:
            answer = ("error", f"{type(exc).__name__}: {exc}")
        connection.send(answer)
        signal.setitimer(signal.ITIMER_REAL, 0)


def _cap_address_space(extra_bytes: int) -> None:
    """Let this process's address space grow by `extra_bytes` at most (Linux; elsewhere it is left alone)."""
    try:
        import resource

        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = used + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
