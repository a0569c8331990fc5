"""A workspace strategy's code runs here only: in a small worker process of its own, memory-capped, killed when late.

A workspace strategy is code that arrived with the repository or that a model wrote. In the process that chunks,
nothing can bound it well: an interval timer interrupts Python between bytecodes but not a long call into C
(`math.factorial(10**7)`), and only on a main thread; on any other thread (the language server's writer, a served
workspace's refreshes) an abandoned call keeps looping with the interpreter lock; and an allocation without bound
exhausts the whole process, on any thread. So every workspace strategy, its module's top level included, runs
in one worker process per process (started on first use, reused for every file after), compiled there from the
same trusted source, with its address space capped; when an answer is late the worker is killed, and the next
call starts another. A worker that could not start is not tried again until `retry_worker_start` (each index run
of the whole workspace): every file a strategy claims would wait for it as long again.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from codeloupe.parallel import cap_address_space, may_start, pool_context

# How much address space a strategy may add to its worker's own (the worker's imports) before an allocation
# fails: a strategy works on one file's text, so this is far above any honest need.
STRATEGY_MEMORY_BYTES = 512 * 1024 * 1024
# How many strategy modules one worker keeps compiled (a workspace's strategies, forge's candidates, each version
# trusted anew, every workspace a server opens), all under the one cap: one more starts a fresh worker, whose
# cap is whole again. Ending the worker is what surely gives their memory back (a module's top level may keep a
# large table, and Python seldom returns what it freed to the system).
KEPT_MODULES = 8
# How much of a strategy's failure the worker sends back: its message becomes each failing file's stored
# `fallback_reason` and a line of the index's log, and a strategy's exception may carry megabytes.
MAX_FAILURE_CHARS = 300
_REAP_S = 5.0  # how long a killed worker may take to be reaped
_PARENT_POLL_S = 1.0  # how soon an idle worker notices that its parent died
# How long a new worker may take to be ready (a spawned one imports Python and codeloupe first): not part of any
# strategy's time bound, and far above a loaded machine's start-up.
_START_S = 60.0
# The largest answer read back from the worker: a strategy's ranges are refused in the worker past one per line of
# the file, so an honest answer is most often far smaller (64 MiB holds 2M ranges of short names), but not
# always (a 1 MB file of one-line records, each named with 120 characters, is ~70 MB): the worker answers one
# over it with why (`_send`).
MAX_ANSWER_BYTES = 64 * 1024 * 1024

# (source, sha256, origin, text, timeout_s); text None asks for the module's EXTENSIONS
Request = tuple[str, str, str, str | None, float]
Ranges = list[list[int | str]]  # each [start, end, name], as JSON brings it back: checked by the caller
Loaded = tuple[tuple[str, ...], Callable[[str, list[str]], Any]]  # a compiled module's (EXTENSIONS, chunk)


class StrategyProcessError(Exception):
    """The strategy failed in the worker, ran late (the worker was then killed), or no worker could run it."""

    at_load = False  # True where its module did not load (its top level failed): it fails every file alike


class StrategyProcessUnstarted(StrategyProcessError):
    """No worker could run the strategy: it fails every file alike, as a module that did not load does."""

    at_load = True


class StrategyProcessLate(StrategyProcessError):
    """The strategy gave no answer within its time bound; its worker was killed."""


class _Worker:
    """The worker process and this process's end of the pipe to it."""

    def __init__(self) -> None:
        context = pool_context()  # spawn where this process runs other threads; fork where it runs only one
        if not may_start(context, "chunk strategies"):
            raise StrategyProcessUnstarted("not run: a workspace strategy runs in a worker process, and this "
                                       "program's main script (no __main__ guard) cannot start one")
        self.connection, child_end = context.Pipe()
        self.process: BaseProcess = context.Process(  # type: ignore[attr-defined]
            target=serve_strategies, args=(child_end, STRATEGY_MEMORY_BYTES, os.getpid()),
            name="codeloupe-strategy-worker", daemon=True)
        self.loaded: set[str] = set()  # the sha256 of each module that loaded here
        self.stopped = False  # killed and its pipe closed: it answers nothing more, reaped or not
        try:
            self.process.start()
        except OSError as exc:
            raise StrategyProcessUnstarted(f"not run: its worker process could not start ({exc})") from exc
        finally:
            child_end.close()
        why = f"did not start within {_START_S:g}s"
        try:  # ready: its imports done, so a strategy's time bound counts the strategy only
            ready = self.connection.poll(_START_S) and _answer(self.connection) == ["ready", None]
        except (EOFError, OSError, ValueError):  # it ended before it was ready (or answered nonsense)
            ready = False
            why = "ended while starting"
        except BaseException:
            self.stop()
            raise
        if not ready:
            self.stop()
            if self.process.exitcode is not None and self.process.exitcode >= 0:  # not the kill of `stop`
                why += f" (exit code {self.process.exitcode})"
            raise StrategyProcessUnstarted(f"not run: its worker process {why}")

    def call(self, request: Request, timeout_s: float) -> Ranges | list[str] | None:
        """The answer, or None when the worker gave no answer within `timeout_s`."""
        try:
            self.connection.send(request)
            if not self.connection.poll(timeout_s):
                return None
            status, value = _answer(self.connection)
        except (EOFError, OSError) as exc:  # killed by the system, or crashed (or an answer over the bound)
            self.stop()
            raise StrategyProcessError(f"its worker process ended (exit code {self.process.exitcode})") from exc
        except ValueError as exc:  # not an answer this module's worker writes: the worker is not trusted again
            self.stop()
            raise StrategyProcessError(f"its worker process answered something else than ranges ({exc})") from exc
        if status == "error" and isinstance(value, str):
            raise StrategyProcessError(value)
        if status != "ok" or not isinstance(value, list):
            self.stop()
            raise StrategyProcessError("its worker process answered something else than ranges")
        return value

    def stop(self) -> None:
        self.stopped = True
        self.process.kill()
        self.process.join(_REAP_S)
        self.connection.close()


_worker: _Worker | None = None
_worker_lock = threading.Lock()  # the one worker chunks one file at a time
# Why the last worker failed to start, while it is not to be tried again: every strategy call fails at once
# with it (a worker that cannot start now would most likely not start for the next file either).
_unstarted: StrategyProcessUnstarted | None = None


def stop_worker() -> None:
    """End this process's strategy worker, if one runs (it is otherwise kept for the files after, and ends with
    this process), and forget a worker that failed to start: for a program done with chunking, and for tests,
    whose process outlives each test."""
    global _worker, _unstarted
    with _worker_lock:
        if _worker is not None:
            _worker.stop()
            _worker = None
        _unstarted = None


def retry_worker_start() -> None:
    """Let the next strategy call try to start a worker again, where the last one failed to: at the start of an
    index run of the whole workspace (the files saved between runs fall back at once)."""
    global _unstarted
    with _worker_lock:
        _unstarted = None


def run_in_worker(source: str, sha256: str, origin: str, text: str, timeout_s: float) -> Ranges:
    """A workspace strategy's ranges for `text` (each `(start, end, name)`, not yet checked to be a partition),
    computed in the worker process within `timeout_s`; `StrategyProcessError` saying why not. The module is
    loaded first, in a call of its own (once per worker), so a top level that fails is told apart (`at_load`)
    from a `chunk` that fails on this file, and each gets the whole time bound."""
    with _worker_lock:
        worker = _worker_for(sha256)
        if sha256 not in worker.loaded:
            _load(worker, source, sha256, origin, timeout_s)
        return _ask(worker, (source, sha256, origin, text, timeout_s))  # type: ignore[return-value]


def load_in_worker(source: str, sha256: str, origin: str, timeout_s: float) -> tuple[str, ...]:
    """A workspace strategy module's EXTENSIONS, as its top level leaves them when run in the worker process
    within `timeout_s` (the module stays compiled there for the files after); `StrategyProcessError` saying why
    not."""
    with _worker_lock:
        return _load(_worker_for(sha256), source, sha256, origin, timeout_s)


def _worker_for(sha256: str) -> _Worker:
    """The worker to run module `sha256` in: the running one, unless it would have to compile a module over
    KEPT_MODULES; then (or when none runs) a new one."""
    global _worker, _unstarted
    if _worker is not None and sha256 not in _worker.loaded and len(_worker.loaded) >= KEPT_MODULES:
        _worker.stop()
        _worker = None
    if _worker is None:
        if _unstarted is not None:
            raise StrategyProcessUnstarted(str(_unstarted))
        try:
            _worker = _Worker()
        except StrategyProcessUnstarted as exc:
            _unstarted = exc
            raise
    return _worker


def _load(worker: _Worker, source: str, sha256: str, origin: str, timeout_s: float) -> tuple[str, ...]:
    try:
        extensions = tuple(_ask(worker, (source, sha256, origin, None, timeout_s)))  # type: ignore[arg-type]
    except StrategyProcessError as exc:
        exc.at_load = True
        raise
    worker.loaded.add(sha256)
    return extensions


def _ask(worker: _Worker, request: Request) -> Ranges | list[str]:
    """The worker's answer to `request`; a worker that died or ran late is stopped (the next call starts
    another). Called with `_worker_lock` held."""
    global _worker
    timeout_s = request[-1]
    try:
        answer = worker.call(request, timeout_s)
    except StrategyProcessError:
        if not worker.stopped and not worker.process.is_alive():  # it ended after answering
            worker.stop()
        # Stopped by `call` (it ended, or answered nonsense) or just above: one killed but not reaped within
        # `_REAP_S` is still alive to `is_alive`, yet its pipe is closed and it answers no later file.
        if worker.stopped:
            _worker = None
        raise
    except BaseException:  # Ctrl-C while waiting: the answer still on its way belongs to no later request
        worker.stop()
        _worker = None
        raise
    if answer is None:
        worker.stop()
        _worker = None
        raise StrategyProcessLate(f"ran past its time bound of {timeout_s:g}s (its worker process was stopped)")
    return answer


def serve_strategies(connection: Connection, memory_bytes: int, parent_pid: int) -> None:
    """The worker's loop: compile each strategy once (by its sha256), answer one request at a time.

    Should the parent die, the worker ends too: waiting for a request, it looks every `_PARENT_POLL_S` whether
    it has been handed to another parent (its pipe alone would not tell: a forked worker holds a copy of the
    parent's end, as does any process the parent forked after it); on one, an alarm (left to its default action, which ends the process even inside a call into C) goes off a little
    after the parent would have killed it. (`parallel.exit_with_parent`'s PR_SET_PDEATHSIG would not do: it
    fires when the *thread* that started the worker ends, and a served workspace's refresh threads come and go.)
    Ctrl-C in a terminal is the parent's to handle: the worker ignores it and ends with its parent. SIGTERM, which
    multiprocessing sends this daemon worker as its parent exits, ends it as the default action does: a forked
    worker has the CLI's handler, which raised there, and every command that ran a strategy ended in its traceback."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Imported here, in the worker: strategies imports this module. Before the cap, which is on top of them.
    from codeloupe.chunk.strategies import StrategyError, partition_ranges
    from codeloupe.types import split_lines

    cap_address_space(memory_bytes)
    try:
        _send(connection, ("ready", None))
    except OSError:  # the parent died while this worker started
        return
    compiled: dict[str, Loaded | str] = {}  # sha256 -> the module, or why it did not load
    while True:
        try:
            while not connection.poll(_PARENT_POLL_S):
                if os.getppid() != parent_pid:
                    return
            source, sha256, origin, text, timeout_s = connection.recv()
        except EOFError:  # the parent closed its end, or died
            return
        signal.setitimer(signal.ITIMER_REAL, timeout_s + _REAP_S)
        try:
            if sha256 not in compiled:  # a top level that fails fails once, not again for every file
                compiled[sha256] = _compiled(source, origin, memory_bytes)
            loaded = compiled[sha256]
            if isinstance(loaded, str):
                raise StrategyError(loaded)
            extensions, function = loaded
            if text is None:
                answer = ("ok", list(extensions))
            else:
                lines = split_lines(text)
                answer = ("ok", partition_ranges(function(text, lines), len(lines)))
        except MemoryError:
            answer = ("error", _out_of_memory(memory_bytes))
        except StrategyError as exc:
            answer = ("error", _bounded(str(exc)))
        except (Exception, RecursionError) as exc:
            answer = ("error", _bounded(f"{type(exc).__name__}: {exc}"))
        _send(connection, answer)
        signal.setitimer(signal.ITIMER_REAL, 0)


def _send(connection: Connection, answer: tuple[str, object]) -> None:
    """An answer to the parent as JSON: the parent never unpickles what this process sends, since a strategy
    that got hold of the pipe could otherwise make it run code of its choosing (pickle calls what it names).
    Ranges over what the parent reads back (`MAX_ANSWER_BYTES`) are answered with why instead: the parent would
    read their length alone and stop this worker, as if it had crashed."""
    data = json.dumps(answer, separators=(",", ":")).encode()
    if len(data) > MAX_ANSWER_BYTES:
        status, value = answer
        count = f"{len(value)} ranges" if isinstance(value, list) else status
        data = json.dumps(("error", f"its answer ({count}) is {len(data) // 2**20} MiB as JSON, over the"
                                    f" {MAX_ANSWER_BYTES // 2**20} MiB the process that chunks reads back")).encode()
    connection.send_bytes(data)


def _answer(connection: Connection) -> list:
    """The worker's `(status, value)` as sent by `_send`, read within `MAX_ANSWER_BYTES` (OSError past it);
    ValueError for anything else than that pair."""
    data = connection.recv_bytes(MAX_ANSWER_BYTES)
    try:
        answer = json.loads(data)
    except RecursionError:  # nested deeper than this interpreter reads: nothing `_send` writes
        raise ValueError("an answer nested too deep to read") from None
    if not (isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], str)):
        raise ValueError(f"{type(answer).__name__} instead of a status and a value")
    return answer


def _compiled(source: str, origin: str, memory_bytes: int) -> Loaded | str:
    """The module's (EXTENSIONS, chunk), or why it did not load."""
    from codeloupe.chunk.strategies import StrategyError, compile_strategy

    try:
        return compile_strategy(source, origin)
    except MemoryError:
        return _out_of_memory(memory_bytes)
    except StrategyError as exc:
        return _bounded(str(exc))
    except (Exception, RecursionError) as exc:
        return _bounded(f"{type(exc).__name__}: {exc}")


def _bounded(failure: str) -> str:
    """A failure's message cut to MAX_FAILURE_CHARS, saying so."""
    if len(failure) <= MAX_FAILURE_CHARS:
        return failure
    return f"{failure[:MAX_FAILURE_CHARS]}... ({len(failure) - MAX_FAILURE_CHARS} more characters)"


def _out_of_memory(memory_bytes: int) -> str:
    return f"ran out of memory (a strategy may use {memory_bytes // 2**20} MiB)"
